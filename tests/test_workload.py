"""Workloads (docs/workloads.md): the readers, detection, damaged lines, windows, and the
mapping of each model; in process and fast. The command line on the shipped samples is
tests/test_workload_cli.py."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.errors import ProfileError, UsageError, WorkloadError
from tracediff.models import BaseModel
from tracediff.models.kvbatch.model import MODEL as KV
from tracediff.models.specdec.model import MODEL as SPECDEC
from tracediff.project.profiles import load_profile
from tracediff.workload import WorkloadSpec, compose, load, open_workload, split

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {
    "mooncake": ROOT / "workloads" / "mooncake_conversation.jsonl",
    "azure": ROOT / "workloads" / "azure_code.csv",
    "burstgpt": ROOT / "workloads" / "burstgpt_synthetic.csv",
}
OWN = (
    '{"arrival_us": 0, "input_tokens": 300, "output_tokens": 20, "hash_ids": [7, 8]}\n'
    '{"arrival_us": 1500, "input_tokens": 900, "output_tokens": 64, "hash_ids": [7, 8, 9]}\n'
    "\n"
    '{"arrival_us": 1500, "input_tokens": 40, "output_tokens": 3}\n'
)


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_each_shipped_sample_is_read_by_content(fmt: str) -> None:
    w = open_workload(SAMPLES[fmt])
    assert (w.format, w.count) == (fmt, 2000)
    first = w.read(0, 2)
    assert first[0].line == (1 if fmt == "mooncake" else 2)
    assert w.read(130, 3)[0].line == first[0].line + 130  # through the index
    assert all(r.hash_ids for r in w.read(0, 50)) == (fmt == "mooncake")


def test_formats_read_their_fields_exactly(tmp_path: Path) -> None:
    cases = {
        "m.jsonl": '{"timestamp": 27482, "input_length": 6955, "output_length": 52, '
        '"hash_ids": [46, 47]}\n',
        "a.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n",
        "b.csv": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5.25,ChatGPT,472,18,490,Conversation log\n",
        "b3.csv": "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,"
        "Total tokens,Log Type\n7,abc,1.5,GPT-4,10,0,10,API log\n",
        "own.jsonl": OWN,
    }
    got = {}
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        w = open_workload(tmp_path / name)
        r = w.read(0, 1)[0]
        got[name] = (w.format, r.arrival_us, r.input_tokens, r.output_tokens, r.hash_ids)
    day = (1700092800 + 18 * 3600 + 17 * 60 + 3) * 1_000_000  # 2023-11-16 18:17:03 (no zone)
    assert got == {
        "m.jsonl": ("mooncake", 27_482_000, 6955, 52, (46, 47)),
        "a.csv": ("azure", day + 979_960, 4808, 10, ()),
        "b.csv": ("burstgpt", 5_250_000, 472, 18, ()),
        "b3.csv": ("burstgpt", 7_000_000, 10, 0, ()),
        "own.jsonl": ("tracediff", 0, 300, 20, (7, 8)),
    }
    assert open_workload(tmp_path / "own.jsonl").count == 3  # the blank line is no request


DAMAGED = [
    # file name, content, the line named, words of the message
    ("x.txt", "hello world\n", 1, "not a request trace"),
    ("x.jsonl", '{"prompt": 1}\n', 1, "without the keys of a known format"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n{"timestamp": 1,\n',
     2, "damaged mooncake request: not JSON"),
    ("m2.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n'
     '{"timestamp": 1, "input_length": -4, "output_length": 1}\n', 2, "input_length is -4"),
    ("m3.jsonl", '{"timestamp": 9, "input_length": 1, "output_length": 1}\n'
     '{"timestamp": 1, "input_length": 1, "output_length": 1}\n', 2, "arrives before"),
    ("m4.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 3}\n',
     1, "hash_ids is int"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n"
     "yesterday,1,1\n", 3, "TIMESTAMP is 'yesterday'"),
    ("a2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1\n", 2,
     "2 columns, the header names 3"),
    ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
     "1,ChatGPT,ten,1,1,API log\n", 2, "Request tokens is 'ten'"),
    ("o.jsonl", OWN + '{"arrival_us": 2000, "input_tokens": 1}\n', 5, "no 'output_tokens'"),
    ("e.jsonl", "", 1, "no request: the file is empty or blank"),
    ("b.jsonl", "\n \n", 3, "no request: the file is empty or blank"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "line", "words"), DAMAGED)
def test_a_damaged_line_is_named_by_file_and_line(
    tmp_path: Path, name: str, text: str, line: int, words: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WorkloadError) as caught:
        open_workload(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), caught.value
    assert words in str(caught.value)


def test_bytes_that_are_not_utf8_are_named(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'{"timestamp": 0, "input_length": 1, "output_length": 1}\n\xff\xfe\n')
    with pytest.raises(WorkloadError, match=rf"^{path}:2: not UTF-8"):
        open_workload(path)


@pytest.mark.parametrize(("name", "text", "line", "words"), DAMAGED[2::3])
def test_the_command_line_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, line: int, words: str
) -> None:
    _model_restored(monkeypatch)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for args in (["run"], ["--model", "kvbatch", "coverage"]):
        result = CliRunner().invoke(main, [*args, "--workload", str(path)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), result.stderr
        assert f"{path}:{line}: " in lines[0] and "Traceback" not in result.output


def _model_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``--model`` sets $TRACEDIFF_MODEL for worker processes: put it back after the test, so
    # that later tests in this process run under the default model again
    monkeypatch.setenv("TRACEDIFF_MODEL", "specdec")


def test_seeds_pick_windows_by_the_documented_rule(tmp_path: Path) -> None:
    files = tuple(str(SAMPLES[f]) for f in ("mooncake", "azure"))
    windows = load(WorkloadSpec(files, window=16, stride=100))
    assert windows.windows(windows.workloads[0]) == (2000 - 16) // 100 + 1 == 20
    picked = [(w.workload.format, w.start) for w in map(windows.window, (0, 1, 2, 5, 40))]
    assert picked == [("mooncake", 0), ("azure", 0), ("mooncake", 100), ("azure", 200),
                      ("mooncake", 0)]  # fmt: skip
    short = tmp_path / "short.jsonl"
    short.write_text(OWN, encoding="utf-8")
    only = load(WorkloadSpec((str(short),), window=16)).window(9)
    assert (only.start, len(only.requests)) == (0, 3)


@pytest.mark.parametrize("model", [SPECDEC, KV], ids=["specdec", "kvbatch"])
@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_workload_scenario_round_trips_and_records_its_origin(model: Any, fmt: str) -> None:
    m = model
    profile = load_profile(m, compose("quick", SAMPLES[fmt]))
    # the stem, readable, and a tag of the content: two files of one stem are apart
    assert re.fullmatch(rf"quick\+{SAMPLES[fmt].stem}-[0-9a-f]{{8}}", profile.name)
    scenario = m.generate(profile, 4)
    assert scenario == m.generate(load_profile(m, compose("quick", SAMPLES[fmt])), 4)
    data = json.loads(json.dumps(scenario.to_dict()))
    origin = data["workload"]
    assert origin["name"] == SAMPLES[fmt].stem and origin["format"] == fmt
    assert origin["sha256"] == open_workload(SAMPLES[fmt]).sha256
    assert (origin["start"], origin["length"]) == (64, 16)  # seed 4: window 4
    assert origin["scales"]["time_scale"] == 0.1
    assert m.scenario_from_dict(data) == scenario
    assert m.size(scenario) == 16
    header = next(iter(m.drive(scenario, _reference(m)(m.private_copy(scenario)))))
    assert header["scenario"]["workload"] == origin


def _reference(model: Any) -> Any:
    module, _, attr = model.builtin_impls["reference"].partition(":")
    return getattr(importlib.import_module(module), attr)


def test_generated_scenarios_carry_no_workload_key() -> None:
    for m in (SPECDEC, KV):
        profile = m.load_profile("quick")
        assert "workload" not in m.generate(profile, 0).to_dict()


def test_prefix_sharing_maps_to_blocks_and_copy_proposers() -> None:
    kv = KV.generate(load_profile(KV, compose("quick", SAMPLES["mooncake"])), 0)
    firsts = {r.prefix[0] for r in kv.requests if r.prefix}
    assert firsts == {0}  # Mooncake's shared first block: one cached block for all
    spec = SPECDEC.generate(SPECDEC.load_profile("workload"), 3)  # Mooncake, window 1
    assert spec.workload is not None and spec.workload.format == "mooncake"
    assert {r.proposer for r in spec.requests} <= {"copy", "mtp"}


def test_the_own_jsonl_format_runs_without_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _model_restored(monkeypatch)
    path = tmp_path / "mine.jsonl"
    path.write_text(OWN, encoding="utf-8")
    for args in (["run"], ["--model", "kvbatch", "run"]):
        result = CliRunner().invoke(
            main, [*args, "--workload", str(path), "--seeds", "0..2", "--no-regressions", "-j", "1"]
        )
        assert result.exit_code == 0, result.output
        assert "identical: 3 scenarios" in result.output


def test_a_model_without_workloads_says_so() -> None:
    class Plain(BaseModel):
        name = "plain"

    with pytest.raises(UsageError, match="the model 'plain' takes no workloads"):
        Plain().with_workload(object(), object())
    assert split("quick") == ("quick", None)
    assert split(compose("quick", "x.csv"))[0] == "quick"


def test_a_users_profile_names_its_workload_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "traffic").mkdir()
    (tmp_path / "traffic" / "mine.jsonl").write_text(OWN, encoding="utf-8")
    profile = tmp_path / "mine.toml"
    profile.write_text(
        'seeds = 4\n[workload]\nfile = "traffic/mine.jsonl"\nwindow = 2\nstride = 1\n'
        "time_scale = 2.0\n",
        encoding="utf-8",
    )
    loaded = SPECDEC.load_profile(str(profile))
    assert loaded.name == "mine" and loaded.seeds == (0, 1, 2, 3)
    scenarios = [SPECDEC.generate(loaded, s) for s in loaded.seeds]
    assert [s.workload.start for s in scenarios] == [0, 1, 0, 1]
    assert [r.arrival_us for r in scenarios[0].requests] == [0, 3000]  # 1500 µs x 2


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('file = "nope.jsonl"\n', "nope.jsonl: cannot read the workload"),
        (
            'file = "t.jsonl"\nwindow = 65\n',
            ":5 [workload] window: must be an integer from 1 to 64",
        ),
        ('file = "t.jsonl"\nspeed = 2\n', ":5 [workload] speed: unknown key"),
        ('file = "t.jsonl"\ntime_scale = 0\n', ":5 [workload] time_scale: must be a number"),
        ("window = 4\n", "give file = "),
    ],
)
def test_a_bad_workload_table_is_named(tmp_path: Path, table: str, words: str) -> None:
    (tmp_path / "t.jsonl").write_text(OWN, encoding="utf-8")
    profile = tmp_path / "p.toml"
    profile.write_text(f"seeds = 2\n\n[workload]\n{table}", encoding="utf-8")
    with pytest.raises((WorkloadError, ProfileError)) as caught:
        SPECDEC.load_profile(str(profile))
    assert words in str(caught.value), caught.value


# -- a workload's identity is its content (docs/workloads.md) ------------------------------
def _rewrite_in_place(path: Path) -> None:
    """The first request's last count changed: the same size, the same inode."""
    data = bytearray(path.read_bytes())
    at = data.index(b"\n", data.index(b"\n") + 1) - 1  # the second line's last digit
    data[at] = ord("1") if data[at] != ord("1") else ord("2")
    with path.open("r+b") as stream:
        stream.write(data)


@pytest.mark.parametrize("settled", [True, False], ids=["hashed-once", "hashed-each-read"])
def test_a_workload_rewritten_to_the_same_size_is_refused_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled: bool
) -> None:
    import tracediff.workload.source as source

    # settled: the file's first hash is kept (keyed by its stat), as for a file not changed
    # in the last seconds; a rewrite changes the key, so the file is hashed again
    monkeypatch.setattr(source, "_SETTLED_NS", -1 if settled else 1 << 62)
    monkeypatch.setattr(source, "_VERIFIED", {})
    path = tmp_path / "w.csv"
    path.write_bytes(SAMPLES["azure"].read_bytes())
    workload = open_workload(path)
    before = workload.read(0, 4)
    assert workload.read(0, 4) == before
    assert bool(source._VERIFIED) is settled
    _rewrite_in_place(path)
    assert path.stat().st_size == workload.size
    with pytest.raises(WorkloadError) as caught:
        workload.read(0, 4)
    assert str(caught.value).startswith(f"{path.resolve()}: changed since it was opened (")
    assert "sha256" in str(caught.value) and "run again" in str(caught.value)
    path.write_bytes(SAMPLES["azure"].read_bytes())  # the same content again: the same file
    assert workload.read(0, 4) == before


def _campaign(*args: str, rewrite: Path, cwd: Path) -> Any:
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRACEDIFF_TEST_REWRITE=str(rewrite), PYTHONPATH=str(ROOT))
    env.pop("TRACEDIFF_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", "--model", "kvbatch", "campaign", "--no-progress",
         "-j", "1", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_campaign_whose_workload_is_rewritten_meanwhile_exits_2_naming_it(
    tmp_path: Path,
) -> None:
    """The first scenario's implementation rewrites the file in place (the same size): the
    worker reading the next window refuses, and so does a resume."""
    path = tmp_path / "w.csv"
    path.write_bytes(SAMPLES["azure"].read_bytes())
    rewrites = "tests.impls.rewrites_workload:RewritesWorkload"
    done = _campaign("--workload", str(path), "--seeds", "0..5", "--out", "c1", "--impl",
                     rewrites, "--impl", "reference", rewrite=path, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"{path}: changed since it was opened" in lines[0], lines
    # a finished campaign resumed over the changed file
    path.write_bytes(SAMPLES["azure"].read_bytes())
    first = _campaign("--workload", str(path), "--seeds", "0..1", "--out", "c2",
                      rewrite=path, cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    _rewrite_in_place(path)
    again = _campaign("--workload", str(path), "--seeds", "0..3", "--out", "c2",
                      rewrite=path, cwd=tmp_path)  # fmt: skip
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"the content of the workload {path}" in again.stderr, again.stderr
