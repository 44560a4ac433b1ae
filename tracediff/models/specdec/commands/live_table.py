"""The summary of a live run as a rich table (``tracediff live``)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from tracediff.models.specdec.live.summary import DepthAcceptance, LiveSummary


def _rates(depths: list[DepthAcceptance]) -> str:
    shown = [f"{d.rate:.2f}" if d.rate is not None else "-" for d in depths]
    return " ".join(shown)


def live_table(summary: LiveSummary, *, title: str, settings: dict[str, Any], trace: str) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=None, padding=(0, 2))
    table.add_column("what", style="bold")
    table.add_column("value")
    wall_s = summary.wall_us / 1e6
    table.add_row(
        "tokens/s",
        f"{summary.tokens_per_s:,.0f}  ({summary.tokens} tokens in {wall_s:.2f} s, "
        f"{summary.rounds} rounds, {summary.plans} plans; {summary.forward_tokens} tokens "
        f"through verify forwards, {summary.drafted} drafted by the mtp head)",
    )
    for name, depths in summary.acceptance.items():
        trials = depths[0].trials
        table.add_row(
            f"acceptance {name}",
            f"depth 1..7: {_rates(depths)}  ({trials} lanes verified a draft)",
        )
    table.add_row(
        "plan()",
        f"median {summary.plan_median_us:,.0f} µs, max {summary.plan_max_us:,} µs",
    )
    table.add_row(
        "harness on the loop",
        f"{summary.harness_cpu_us / 1000:,.1f} ms CPU ({summary.harness_cpu_share:.1%} of the "
        f"loop's CPU), {summary.harness_us / 1000:,.1f} ms wall ({summary.harness_share:.1%} "
        f"of the loop); recording {summary.records} records, "
        f"{summary.record_cpu_per_record_us:,.0f} µs CPU each "
        f"({summary.record_per_record_us:,.0f} µs wall, waits for the GIL included)",
    )
    busy = "-" if summary.busy_share is None else f"{summary.busy_share:.1%}"
    table.add_row(
        "device busy",
        f"{busy} of the steady window ({summary.window_rounds} rounds, "
        f"{summary.window_us / 1000:,.1f} ms)",
    )
    graphs = settings.get("captured_graphs", 0)
    execution = (
        f"{summary.graph_rounds} rounds replayed {graphs} CUDA graphs" if graphs else "eager"
    )
    if settings.get("failed_captures"):
        execution += (
            f"; {settings['failed_captures']} shapes failed to capture and ran eagerly "
            f"({settings.get('capture_failure')})"
        )
    table.add_row(
        "device",
        f"{settings.get('device_name', settings.get('device'))} {settings.get('dtype')}, "
        f"torch {settings.get('torch')}, {execution}",
    )
    table.add_row("trace", trace)
    return table
