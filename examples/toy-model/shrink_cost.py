"""What a shrink costs over a process: ``python examples/toy-model/shrink_cost.py``.

Runs ``tracediff shrink --seed SEED`` of the toy model (this directory's ``toy_model``, on
PYTHONPATH with the tests' dist-info for its entry point) in a scratch project three ways:
both implementations in process (``reference`` vs ``optimized``), both served by
``tracediff serve`` (the generic layout, a Python process each), and the reference against
the Node port's planted bug (examples/node-toy, when ``node`` is installed). The three make
the same evaluations and the same shrunk scenario (checked); the figures are the shrink's
own seconds (``seconds`` of ``--json``: from its first run to its end, the servers' starts
included) and the whole command's wall time, each the best of ``--rounds``.

Measured, not asserted: a test never times anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def shrink(project: Path, seed: int, impls: list[str]) -> tuple[float, dict[str, object]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "toymodel"), str(ROOT)])
    env.pop("TRACEDIFF_MODEL", None)
    out = project / "shrink.json"
    argv = [sys.executable, "-m", "tracediff", "shrink", "--seed", str(seed), "--no-progress"]
    for impl in impls:
        argv += ["--impl", impl]
    start = time.perf_counter()
    done = subprocess.run(
        [*argv, "--json", str(out)], cwd=project, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode != 1:
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return wall, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="a diverging seed of quick")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    serve = f"{sys.executable} -m tracediff serve"
    ways = {
        "in process": ["reference", "optimized"],
        "Python served": [f"ref=exec:{serve} reference", f"opt=exec:{serve} optimized"],
    }
    if shutil.which("node"):
        node = f"node=exec:node {ROOT / 'examples' / 'node-toy' / 'toy.js'} ties-by-arrival"
        ways["Node served"] = ["reference", node]
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        (project / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "toy"\n')
        rows = {}
        for _ in range(args.rounds):  # interleaved: a busy machine slows all alike
            for way, impls in ways.items():
                wall, result = shrink(project, args.seed, impls)
                best = rows.get(way)
                if best is None or float(result["seconds"]) < float(best[1]["seconds"]):
                    rows[way] = (min(wall, best[0]) if best else wall, result)
                elif best is not None:
                    rows[way] = (min(wall, best[0]), best[1])
    base = float(rows["in process"][1]["seconds"])
    shapes = {(r["evaluations"], json.dumps(r["after"])) for _w, r in rows.values()}
    print(f"toy quick:{args.seed}, best of {args.rounds}")
    for way, (wall, result) in rows.items():
        seconds = float(result["seconds"])
        before, after = result["before"], result["after"]
        print(
            f"  {way:14} {seconds:6.2f} s shrink ({seconds / base:4.1f}x), {wall:6.2f} s "
            f"command; {result['evaluations']} evaluations, {before['requests']} -> "
            f"{after['requests']} jobs, {before['plans']} -> {after['plans']} plans"
        )
    if len(shapes) != 1:
        sys.exit(f"the shrinks differ: {sorted(shapes)}")


if __name__ == "__main__":
    main()
