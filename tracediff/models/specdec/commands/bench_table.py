"""The bench table (docs/optimized.md): requests × allocation, without and with a probe."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.models.specdec.bench import BenchResult

# The performance targets (docs/optimized.md): the ratios on the 64-request device rows,
# the growth from the smallest to the largest request count without a probe.
TARGET_RATIO = 10.0
TARGET_PROBE_RATIO = 25.0
TARGET_GROWTH = 5.0
GROWTH_ALLOCATIONS = ("device", "host")


def growth_factor(
    result: BenchResult, impl: str, allocation: str, probe: bool, cpu: bool
) -> float | None:
    """Median at the largest request count over the median at the smallest (same clock as
    the table), or None when the result has fewer than two counts for that row."""
    cells = [c for c in result.cells if c.allocation == allocation and c.probe == probe]
    if len({c.requests for c in cells}) < 2:
        return None
    smallest = min(cells, key=lambda c: c.requests)
    largest = max(cells, key=lambda c: c.requests)
    return largest.median(impl, cpu) / smallest.median(impl, cpu)


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
        factor = growth_factor(result, growth.impl, growth.allocation, growth.probe, cpu)
        lines.append(
            Text(
                f"growth {growth.smallest} → {growth.largest} requests, {growth.allocation}"
                f"{', probe' if growth.probe else ''}: {growth.impl} ×{factor or growth.factor:.1f}"
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
            if growth.impl == name and growth.allocation in GROWTH_ALLOCATIONS and not growth.probe:
                factor = growth_factor(result, name, growth.allocation, False, cpu) or growth.factor
                verdict = "met" if factor <= TARGET_GROWTH else "NOT met"
                out.append(
                    f"target {name} growth {growth.smallest} → {growth.largest} on "
                    f"{growth.allocation} ≤ ×{TARGET_GROWTH:g}: ×{factor:.1f} ({verdict})"
                )
    return out
