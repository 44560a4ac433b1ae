"""Any model in another process: the generic layout of the process protocol
(tracediff.process, docs/protocol.md "The generic layout") and ``tracediff serve``.

kvbatch and the toy model have no process code of their own: their implementations served
by ``tracediff serve`` must make the same traces as in process, kept across scenarios (by
a worker's clean-up too), with an implementation's failure pinned to its call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracediff.errors import ImplementationError, UsageError
from tracediff.model import get
from tracediff.process import exec_factory
from tracediff.process.generic import ProcessImpl, plain_problem
from tracediff.process.pipes import ExternalFault

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toymodel"
SERVE = f"{sys.executable} -m tracediff serve"


def td(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(TOY), str(cwd)])
    environ.pop("TRACEDIFF_REGRESSIONS", None)
    environ.pop("TRACEDIFF_MODEL", None)
    environ["COLUMNS"] = "200"
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _digests(path: Path) -> list[list[str]]:
    results = json.loads(path.read_text())["results"]
    return [[impl["digest"] for impl in result["impls"]] for result in results]


def test_kvbatch_served_by_tracediff_serve_is_identical_to_in_process(tmp_path: Path) -> None:
    seeds = ("--seeds", "0..7", "--no-progress")
    here = td(tmp_path, "--model", "kvbatch", "run", *seeds, "--json", "a.json")
    assert here.returncode == 0, here.stdout + here.stderr
    served = f"served=exec:{SERVE} --model kvbatch optimized"
    # two workers: each keeps its process across its scenarios, which its clean-up spares
    there = td(
        tmp_path,
        "--model",
        "kvbatch",
        "run",
        *seeds,
        "-j",
        "2",
        "--impl",
        "reference",
        "--impl",
        served,
        "--json",
        "b.json",
    )
    assert there.returncode == 0, there.stdout + there.stderr
    assert "identical: 8 scenarios" in there.stdout
    assert _digests(tmp_path / "a.json") == _digests(tmp_path / "b.json")


def test_the_toy_model_served_finds_what_it_finds_in_process(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "toy"\n')
    here = td(tmp_path, "run", "--impl", "reference", "--impl", "optimized", "--json", "a.json")
    assert here.returncode == 1, here.stdout + here.stderr
    there = td(
        tmp_path,
        "run",
        "--impl",
        f"ref=exec:{SERVE} reference",
        "--impl",
        f"opt=exec:{SERVE} optimized",
        "--json",
        "b.json",
    )
    assert there.returncode == 1, there.stdout + there.stderr
    assert "FINDINGS: 6 of 20 scenarios (ref vs opt)" in there.stdout
    assert _digests(tmp_path / "a.json") == _digests(tmp_path / "b.json")


def test_a_served_state_and_hello(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TOY))
    monkeypatch.setenv("PYTHONPATH", str(TOY))  # the server's: the toy's entry point
    toy_model = __import__("toy_model")
    model = toy_model.MODEL
    factory = exec_factory(model, "fast", f"exec:{SERVE} --model toy fast")
    scenario = model.generate(model.load_profile("quick"), 3)
    impl = factory(scenario)
    records = list(model.drive(scenario, impl))
    in_process = toy_model.Fast(model.private_copy(scenario))
    assert records == list(model.drive(scenario, in_process))
    assert len(records) > 3
    hello = factory.hello
    assert hello["model"] == "toy" and hello["name"] == "fast" and hello["layout"] == "calls"
    assert hello["tracediff"] == hello["packages"]["tracediff"]
    assert impl.state() == {"waiting": []}


def test_a_served_implementation_failure_is_pinned_to_its_call(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "toy"\n')
    (tmp_path / "bad_toy.py").write_text(
        "from toy_model import Reference\n"
        "class Bad(Reference):\n"
        "    def plan(self, now):\n"
        "        if self.plans == 2:\n"
        "            raise RuntimeError('bad toy: no third plan')\n"
        "        return super().plan(now)\n"
    )
    done = td(
        tmp_path,
        "run",
        "--seeds",
        "0..3",
        "--impl",
        "reference",
        "--impl",
        f"bad=exec:{SERVE} bad_toy:Bad",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bad reported an error on the call plan()" in done.stdout
    assert "RuntimeError: bad toy: no third plan" in done.stdout
    assert "plan 3" in done.stdout


def test_a_server_of_another_model_is_refused_with_what_to_do(tmp_path: Path) -> None:
    done = td(
        tmp_path,
        "--model",
        "kvbatch",
        "run",
        "--seeds",
        "0",
        "--impl",
        "reference",
        "--impl",
        f"exec:{SERVE} --model toy reference",
    )
    assert done.returncode == 2
    assert "serves the model 'toy', not 'kvbatch'" in done.stderr
    assert "--model kvbatch" in done.stderr


def test_serve_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    done = td(tmp_path, "--model", "kvbatch", "serve", "no-such-impl")
    assert done.returncode == 2 and "unknown implementation 'no-such-impl'" in done.stderr
    done = td(tmp_path, "--model", "kvbatch", "serve", "exec:true")
    assert done.returncode == 2 and "not exec: ones" in done.stderr


class _Unused:
    name = "nowhere"
    capabilities: frozenset[str] = frozenset()

    def request(self, message: dict[str, Any], expect: str) -> dict[str, Any]:
        raise AssertionError("nothing is sent for a value that is not plain")


def test_a_value_that_is_not_plain_msgpack_is_a_clear_error() -> None:
    impl = ProcessImpl(_Unused(), "mine")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"calls arrive\(\) with a pathlib.*plain msgpack"):
        impl.call("arrive", [1, Path("/x")])
    assert plain_problem([1, 2.5, "a", b"b", None, True, {"k": [(), {1: "x"}]}]) is None
    assert "map key" in str(plain_problem({(1, 2): 3}))
    assert impl.state() == {"note": "nowhere does not report its state"}


def test_a_command_that_is_no_server_fails_before_the_run() -> None:
    model = get("kvbatch")
    factory = exec_factory(model, "cat", f"exec:{sys.executable} -c 'import sys; sys.exit(3)'")
    with pytest.raises(ImplementationError, match="exited with status 3"):
        factory.probe()
    assert issubclass(ExternalFault, Exception)


NODE_TOY = ROOT / "examples" / "node-toy" / "toy.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_nodejs_implementation_written_from_the_protocol_doc(tmp_path: Path) -> None:
    """examples/node-toy: the toy's reference in JavaScript with a hand-written msgpack
    subset, speaking the generic layout; its planted tie-break bug is found as the Python
    one is (the same divergences, the same digests)."""
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "toy"\n')
    node = f"node=exec:node {NODE_TOY}"
    same = td(tmp_path, "run", "--no-progress", "--impl", "reference", "--impl", node)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical: 20 scenarios" in same.stdout
    python = td(tmp_path, "run", "--impl", "reference", "--impl", "optimized", "--json", "a.json")
    buggy = f"{node} ties-by-arrival"
    js = td(tmp_path, "run", "--impl", "reference", "--impl", buggy, "--json", "b.json")
    assert python.returncode == js.returncode == 1, js.stdout + js.stderr
    assert "FINDINGS: 6 of 20 scenarios (reference vs node)" in js.stdout
    assert _digests(tmp_path / "a.json") == _digests(tmp_path / "b.json")


def test_the_hello_names_the_versions_that_decide_answers() -> None:
    import importlib.metadata

    from tracediff.process.server import packages

    found = packages("msgpack.fallback", "no_such_module_anywhere")
    assert found["msgpack"] == importlib.metadata.version("msgpack")
    assert {"python", "tracediff", "msgpack"} == set(found)


def _shrunk(path: Path) -> tuple[Any, ...]:
    result = json.loads(path.read_text())
    return (result["evaluations"], result["before"], result["after"], result["regression"]["jobs"])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_node_toy_through_shrink_golden_and_gate(tmp_path: Path) -> None:
    """examples/node-toy under every command that runs implementations: ``golden check``
    and ``gate`` pass for its reference as for the in-process one; its planted bug (ties by
    arrival) is caught by both, and ``shrink`` makes of it exactly what it makes of the
    Python optimized's (the same evaluations, the same shrunk scenario), in process or
    served by ``tracediff serve``."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracediff]\nmodel = "toy"\nimpls = ["reference", "fast"]\n'
    )
    node = f"node=exec:node {NODE_TOY}"
    buggy = f"{node} ties-by-arrival"
    assert td(tmp_path, "golden", "update").returncode == 0
    assert td(tmp_path, "golden", "accept").returncode == 0
    for impl in ("fast", node):
        ok = td(tmp_path, "golden", "check", "--impl", impl)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "matches all 20 digests" in ok.stdout
    for impl in ("optimized", buggy):
        bad = td(tmp_path, "golden", "check", "--impl", impl)
        assert bad.returncode == 1, bad.stdout + bad.stderr
        name = impl.partition("=")[0]
        assert f"MISMATCH: {name} differs from {tmp_path / 'golden' / 'quick.json'} on 6 " in (
            bad.stdout
        )

    shrunk = {}
    for label, second in (
        ("python", "optimized"),
        ("served", f"opt=exec:{SERVE} optimized"),
        ("node", buggy),
    ):
        done = td(
            tmp_path, "shrink", "--seed", "1", "--impl", "reference", "--impl", second,
            "--no-progress", "--json", f"{label}.json",
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert "shrunk scenario: 3 jobs" in done.stdout
        shrunk[label] = _shrunk(tmp_path / f"{label}.json")
    assert shrunk["python"] == shrunk["served"] == shrunk["node"]

    good = td(tmp_path, "gate", "--impl", "reference", "--impl", node)
    assert good.returncode == 0, good.stdout + good.stderr
    saved = td(tmp_path, "shrink", "--seed", "1", "--impl", "reference", "--impl", buggy, "--save")
    assert saved.returncode == 1 and "saved " in saved.stdout, saved.stdout + saved.stderr
    failing = td(tmp_path, "gate", "--impl", "reference", "--impl", buggy)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "regressions" in failing.stdout and "FAIL" in failing.stdout.upper()
    passing = td(tmp_path, "gate", "--impl", "reference", "--impl", node)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "1 scenario identical" in passing.stdout


def test_serve_starts_without_the_command_line(tmp_path: Path) -> None:
    """``tracediff serve`` (and ``python -m tracediff serve``) import neither click nor rich
    nor Hypothesis: a server starts per worker and implementation. What it cannot serve is
    still reported by the command line, one line and exit 2."""
    from tracediff.process.server import serve_arguments

    assert serve_arguments(["serve", "reference"]) == (None, "reference")
    assert serve_arguments(["--model", "toy", "serve", "x:Y"]) == ("toy", "x:Y")
    assert serve_arguments(["serve", "--model=toy", "serve"]) == ("toy", "serve")
    assert serve_arguments(["serve", "reference", "--model", "toy"]) == ("toy", "reference")
    for args in (
        ["serve"],
        ["serve", "-h"],
        ["--debug", "serve", "a"],
        ["run"],
        ["serve", "a", "b"],
    ):
        assert serve_arguments(args) is None, args
    (tmp_path / "seen.py").write_text(
        "import sys\n"
        "print('loaded:', sorted(m for m in ('click', 'rich', 'hypothesis') if m in sys.modules),"
        " file=sys.stderr)\n"
        "from toy_model import Reference as Impl\n"
    )
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TOY), str(tmp_path)]))
    environ.pop("TRACEDIFF_MODEL", None)
    served = subprocess.run(
        [sys.executable, "-m", "tracediff", "serve", "--model", "toy", "seen:Impl"],
        cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert served.returncode == 0 and served.stdout == "", served.stdout + served.stderr
    assert "loaded: []" in served.stderr
    refused = td(tmp_path, "serve", "--model", "toy", "no_such_module:Impl")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "cannot import module 'no_such_module'" in refused.stderr
    assert refused.stderr.count("tracediff: error:") == 1
    unknown = td(tmp_path, "--model", "nope", "serve", "reference")
    assert unknown.returncode == 2 and "unknown model 'nope'" in unknown.stderr
