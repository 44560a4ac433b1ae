"""Measure the shrinker: every broken implementation of tests/impls, shrunk from each of its
diverging quick seeds (docs/shrinking.md holds the measured table).

    .venv/bin/python examples/shrink_table.py --jobs 2 --json table.json
    .venv/bin/python examples/shrink_table.py --markdown table.json [before.json]

For each broken implementation (the scheduler's against ``reference``; kvbatch's against
kvbatch's ``reference``) every seed of the model's ``quick`` profile is run once; each seed
on which it does not agree with the reference is shrunk with the ``shrink`` command's
defaults (the divergence explanation's signature, 2,000 evaluations). A row is the repro's
size, plans, evaluations, seconds, why it stopped and a digest of its bytes; ``--twice``
shrinks each seed a second time and records whether the bytes were the same.
``--per-size N`` takes only the first N diverging seeds of each scenario size (the quick
profile's request counts: 1, 3, 8, 16, 32, 64), a sample that still reaches the largest
scenarios; the table says how many seeds each row measured. ``--resume`` keeps the rows
already in the ``--json`` file and measures the rest: a measurement of every seed (hours on
two cores) survives a stop, and deleting some rows measures just those again. ``--rows
examples/shrink_escape_rows.json`` measures only the 21 shrinks that stop above 4 at least
once and so enter an escape: the path of every other shrink does not depend on the escape
passes, so a change to those passes is measured on these rows alone (about 40 min).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPECDEC = [
    "tests.impls.skewed:SkewedScheduler",
    "tests.impls.slot_tiebreak:SlotTieBreakScheduler",
    "tests.impls.eager_prune:EagerPruneScheduler",
    "tests.impls.tiebreak:TieBreakScheduler",
    "tests.impls.summation:ReversedSumScheduler",
    "tests.impls.ulp:OneUlpScheduler",
    "tests.impls.stale_advance:StaleAdvanceScheduler",
    "tests.impls.raises:RaisingScheduler",
    "tests.impls.mutants:SwappedTieBreakScheduler",
    "tests.impls.mutants:FirstAtBestValueScheduler",
    "tests.impls.mutants:WidthBeforeDurationScheduler",
    "tests.impls.mutants:FreshAtPeriodScheduler",
    "tests.impls.mutants:ProbeTrialsOffByOneScheduler",
    "tests.impls.mutants:PruneKeepsEqualScheduler",
    "tests.impls.mutants:TableTruncatesScheduler",
    "tests.impls.boundaries:UnfundedAtCreditScheduler",
    "tests.impls.boundaries:StrictToleranceScheduler",
    "tests.impls.grouping:PrefillBlindGroupScheduler",
]
KVBATCH = [
    "tests.impls.kvbatch_broken:EvictedStillFree",
    "tests.impls.kvbatch_broken:HitIgnoresRefcount",
    "tests.impls.kvbatch_broken:PreemptOldestFirst",
    "tests.impls.kvbatch_broken:ChunkOffByOne",
    "tests.impls.kvbatch_broken:HitRepeatLeavesFreeTwice",
    "tests.impls.kvbatch_broken:OrdersById",
]
VLLM = [  # vLLM's Scheduler subclasses: only when vLLM is importable
    "tests.impls.vllm_broken:PreemptOldest",
    "tests.impls.vllm_broken:BudgetOffByOne",
    "tests.impls.vllm_broken:HitCapWholeBlocks",
    "tests.impls.vllm_broken:ChunkBlockAligned",
    "tests.impls.vllm_broken:StaleHitMemo",
]


def _model_of(impl: str) -> str:
    for name in ("kvbatch", "vllm"):
        if f"{name}_broken" in impl:
            return name
    return "specdec"


def _in_effect(impl: str) -> None:
    """Implementation names are looked up in the model in effect (vllm adapts a Scheduler
    subclass): set it in this worker process."""
    import os

    os.environ["TRACEDIFF_MODEL"] = _model_of(impl)


def _specs(impl: str) -> tuple[Any, ...]:
    from tracediff.model import get
    from tracediff.project.impls import ImplSpec, parse_impl

    model = _model_of(impl)
    if model == "specdec":
        return (parse_impl("reference"), parse_impl(impl))
    base = {"kvbatch": "reference", "vllm": "vllm"}[model]
    builtin = get(model).builtin_impls
    return (ImplSpec(base, builtin[base]), ImplSpec(impl.split(":")[1], impl))


def _scenario(model_name: str, seed: int) -> Any:
    from tracediff.model import get

    model = get(model_name)
    return model.generate(model.load_profile("quick"), seed)


def diverging(impl: str, per_size: int | None = None) -> list[tuple[int, int]]:
    """(seed, size) of the quick seeds on which ``impl`` does not agree with the reference:
    every one, or the first ``per_size`` of each size (the scan stops once it has them)."""
    from collections import Counter

    from tracediff.model import get
    from tracediff.running.runner import IDENTICAL, run_scenario

    _in_effect(impl)
    model = get(_model_of(impl))
    specs = _specs(impl)
    profile = model.load_profile("quick")
    sizes = {model.size(_scenario(model.name, seed)) for seed in profile.seeds}
    found = []
    taken: Counter[int] = Counter()
    for seed in profile.seeds:
        scenario = _scenario(model.name, seed)
        size = model.size(scenario)
        if per_size is not None and taken[size] >= per_size:
            if all(taken[s] >= per_size for s in sizes):
                break
            continue
        if run_scenario(scenario, specs).status != IDENTICAL:
            found.append((seed, size))
            taken[size] += 1
    return found


def shrink_one(job: tuple[str, int, bool]) -> dict[str, Any]:
    from tracediff.search.shrink import compare_signature, shrink

    impl, seed, twice = job
    _in_effect(impl)
    specs = _specs(impl)
    scenario = _scenario(_model_of(impl), seed)
    started = time.perf_counter()
    result = shrink(scenario, specs, signature_fn=compare_signature)
    seconds = time.perf_counter() - started
    data = json.dumps(result.shrunk.to_dict(), sort_keys=True).encode()
    row: dict[str, Any] = {
        "impl": impl,
        "seed": seed,
        "before": result.before[0],
        "before_plans": result.before[1],
        "size": result.after[0],
        "plans": result.after[1],
        "evaluations": result.attempts,
        "seconds": round(seconds, 2),
        "stopped": result.stopped,
        "digest": hashlib.sha256(data).hexdigest()[:16],
        "escapes": len(result.escapes),
        "escape_lines": list(result.escapes),
    }
    if twice:
        again = shrink(scenario, specs, signature_fn=compare_signature)
        same = json.dumps(again.shrunk.to_dict(), sort_keys=True).encode() == data
        row["deterministic"] = same and again.attempts == result.attempts
    return row


def _save(table: dict[str, Any], path: str | None) -> None:
    """Write the table so far (atomically): a long measurement stopped midway keeps its rows."""
    if path:
        part = Path(path + ".part")
        part.write_text(json.dumps(table, indent=1) + "\n")
        part.replace(path)


def measure(
    impls: list[str],
    jobs: int,
    per_size: int | None,
    twice: bool,
    path: str | None = None,
    kept: list[dict[str, Any]] | None = None,
    only: set[tuple[str, int]] | None = None,
) -> dict[str, Any]:
    """Shrink every diverging seed of ``impls`` (those in ``only``, when given); the rows
    in ``kept`` (an earlier, stopped measurement's) are not measured again."""
    rows: list[dict[str, Any]] = list(kept or [])
    done = {(r["impl"], r["seed"]) for r in rows}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        seeds = dict(zip(impls, pool.map(diverging, impls, [per_size] * len(impls)), strict=True))
        work = [
            (impl, seed, twice)
            for impl in impls
            for seed, _size in seeds[impl]
            if (impl, seed) not in done and (only is None or (impl, seed) in only)
        ]
        print(f"{len(work)} shrinks to measure, {len(done)} kept", file=sys.stderr, flush=True)
        for row in pool.map(shrink_one, work):
            rows.append(row)
            _save({"rows": rows, "per_size": per_size, "complete": False}, path)
            print(
                f"{row['impl'].split(':')[1]} seed {row['seed']}: {row['before']} -> "
                f"{row['size']} in {row['evaluations']} evaluations, {row['seconds']} s",
                file=sys.stderr,
                flush=True,
            )
    return {"rows": rows, "per_size": per_size, "complete": True}


def _cell(rows: list[dict[str, Any]], field: str, digits: int = 0) -> str:
    if not rows:
        return "n/a"
    values = [r[field] for r in rows]
    if not digits:  # counts: a median may be a half
        return f"{statistics.median(values):g} / {max(values)}"
    return f"{statistics.median(values):.{digits}f} / {max(values):.{digits}f}"


def markdown(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    """One row per implementation: median / worst of the repro's size, the evaluations and
    the seconds, before and after over the same seeds (after alone without ``before``)."""
    columns = ("size", "evaluations", "s")
    if before is None:
        head = ["implementation", "seeds", *columns, "above 4"]
    else:
        head = ["implementation", "seeds"]
        head += [f"{c} {when}" for c in columns for when in ("before", "after")]
        head.append("above 4 after")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    impls = list(dict.fromkeys(r["impl"] for r in after["rows"]))
    for impl in impls:
        rows = [r for r in after["rows"] if r["impl"] == impl]
        seeds = {r["seed"] for r in rows}
        above = ", ".join(f"seed {r['seed']}: {r['size']}" for r in rows if r["size"] > 4)
        cells = [impl.split(":")[1], str(len(rows))]
        earlier = (before or {}).get("rows", [])
        old = [r for r in earlier if r["impl"] == impl and r["seed"] in seeds]
        for field, digits in (("size", 0), ("evaluations", 0), ("seconds", 1)):
            if before is not None:
                cells.append(_cell(old, field, digits))
            cells.append(_cell(rows, field, digits))
        cells.append(above or "none")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", summary(after, before)])


def summary(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    """The totals under the table: how many shrinks, their sizes and evaluations (median and
    worst), how many ended above 4, and how many gave the same bytes twice."""

    def line(label: str, rows: list[dict[str, Any]]) -> str:
        sizes = [r["size"] for r in rows]
        evaluations = [r["evaluations"] for r in rows]
        above = sum(size > 4 for size in sizes)
        same = [r["deterministic"] for r in rows if "deterministic" in r]
        twice = f"; the same bytes twice: {sum(same)} of {len(same)}" if same else ""
        return (
            f"{label}: {len(rows)} shrinks; size median {statistics.median(sizes):g}, worst "
            f"{max(sizes)}; evaluations median {statistics.median(evaluations):g}, worst "
            f"{max(evaluations)}; above 4: {above}{twice}"
        )

    text = [line("after", after["rows"])]
    if before is not None:
        keys = {(r["impl"], r["seed"]) for r in after["rows"]}
        text.append(line("before", [r for r in before["rows"] if (r["impl"], r["seed"]) in keys]))
    return "\n\n".join(text)


def _vllm_importable() -> bool:
    from tracediff.models.vllm import adapter

    return not adapter.problem()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", action="append", help="only these (module:Class)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--per-size", type=int, default=None, help="seeds per scenario size")
    parser.add_argument("--twice", action="store_true", help="check determinism")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument(
        "--resume", action="store_true", help="keep the rows already in --json, measure the rest"
    )
    parser.add_argument("--markdown", nargs="+", metavar="JSON", help="AFTER [BEFORE]: a table")
    parser.add_argument(
        "--rows",
        metavar="JSON",
        help="only these (impl, seed) rows, e.g. examples/shrink_escape_rows.json: the shrinks "
        "that enter an escape, all a change to the escape passes can alter",
    )
    args = parser.parse_args()
    if args.markdown:
        after = json.loads(Path(args.markdown[0]).read_text())
        before = json.loads(Path(args.markdown[1]).read_text()) if len(args.markdown) > 1 else None
        print(markdown(after, before))
        return
    impls = args.impl or SPECDEC + KVBATCH + (VLLM if _vllm_importable() else [])
    kept = None
    if args.resume and args.json and Path(args.json).exists():
        kept = json.loads(Path(args.json).read_text())["rows"]
    only = None
    if args.rows:
        listed = json.loads(Path(args.rows).read_text())["rows"]
        only = {(r["impl"], r["seed"]) for r in listed}
        impls = [i for i in impls if any(r[0] == i for r in only)]
    table = measure(impls, args.jobs, args.per_size, args.twice, args.json, kept, only)
    if args.json:
        _save(table, args.json)
    else:
        print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
