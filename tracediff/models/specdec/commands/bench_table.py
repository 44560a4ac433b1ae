"""The bench table (docs/optimized.md): requests × allocation, without and with a probe."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.models.specdec.bench import BenchResult

# The performance targets (docs/optimized.md), checked on the 64-request device rows.
TARGET_RATIO = 4.0
TARGET_PROBE_RATIO = 14.0
TARGET_GROWTH = 8.5


def bench_renderable(result: BenchResult, *, cpu: bool = False) -> RenderableType:
    base = result.baseline
    others = [name for name in result.impls if name != base]
    clock = "CPU" if cpu else "wall"
    table = Table(
        title=f"median plan() µs, one round queued ({result.repeats} repetitions, {clock} time)",
        header_style="bold",
    )
    table.add_column("req", justify="right")
    table.add_column("alloc")
    probes = sorted({cell.probe for cell in result.cells})
    for probe in probes:
        label = "probe: " if probe else ""
        for name in result.impls:
            table.add_column(f"{label}{name}", justify="right")
        for name in others:
            table.add_column(f"{label}× {name}", justify="right")
    keys = []
    for cell in result.cells:
        key = (cell.requests, cell.allocation)
        if key not in keys:
            keys.append(key)
    for requests, allocation in keys:
        row = [str(requests), allocation]
        for probe in probes:
            cell = result.cell(requests, allocation, probe)
            row += [f"{cell.median(name, cpu):,.0f}" for name in result.impls]
            row += [f"{cell.ratio(name, cpu=cpu):.1f}×" for name in others]
        table.add_row(*row)
    lines: list[RenderableType] = [table]
    for growth in result.growth:
        lines.append(
            Text(
                f"growth {growth.smallest} → {growth.largest} requests, {growth.allocation}"
                f"{', probe' if growth.probe else ''}: {growth.impl} ×{growth.factor:.1f}"
            )
        )
    lines += [Text(line) for line in target_lines(result, cpu=cpu)]
    if not all(cell.records_equal for cell in result.cells):
        lines.append(Text("warning: implementations returned different records", style="red"))
    return Group(*lines)


def target_lines(result: BenchResult, *, cpu: bool = False) -> list[str]:
    """The performance targets (docs/optimized.md), met or not, where the result has
    the cells for them."""
    out = []
    for name in result.impls[1:]:
        for probe, target in ((False, TARGET_RATIO), (True, TARGET_PROBE_RATIO)):
            try:
                ratio = result.cell(64, "device", probe).ratio(name, cpu=cpu)
            except KeyError:
                continue
            verdict = "met" if ratio >= target else "NOT met"
            what = "funded probe" if probe else "no probe"
            out.append(
                f"target {name} ≥ {target:g}× at 64 device, {what}: {ratio:.1f}× ({verdict})"
            )
        for growth in result.growth:
            if growth.impl == name and growth.allocation == "device" and not growth.probe:
                verdict = "met" if growth.factor <= TARGET_GROWTH else "NOT met"
                out.append(
                    f"target {name} growth {growth.smallest} → {growth.largest} ≤ ×"
                    f"{TARGET_GROWTH:g}: ×{growth.factor:.1f} ({verdict})"
                )
    return out
