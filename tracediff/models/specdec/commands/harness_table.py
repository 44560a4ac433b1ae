"""The ``tracediff bench --harness`` table: the harness's cost per plan, per implementation."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.models.specdec.harness_cost import HarnessResult

# The target: encode + digest + compare within 5 % of the optimized plan().
TARGET_SHARE = 0.03


def harness_renderable(result: HarnessResult, label: str) -> RenderableType:
    table = Table(title=f"harness cost per plan() call, {label}", header_style="bold")
    for column in (
        "impl",
        "plans",
        "plan() µs",
        "check µs",
        "encode µs",
        "digest µs",
        "compare µs",
        "harness µs",
        "harness / plan()",
        "with check",
        "body B/plan",
        "file B/plan",
    ):
        table.add_column(column, justify="left" if column == "impl" else "right")
    for cost in result.costs:
        us = cost.per_plan_us
        table.add_row(
            cost.impl,
            f"{cost.plans:,}",
            f"{us(cost.plan_ns):,.1f}",
            f"{us(cost.check_ns):,.1f}",
            f"{us(cost.encode_ns):,.1f}",
            f"{us(cost.digest_ns):,.1f}",
            f"{us(cost.compare_ns):,.2f}",
            f"{us(cost.harness_ns):,.1f}",
            f"{cost.share:.1%}",
            f"{cost.share_with_check:.1%}",
            f"{cost.body_bytes / max(cost.plans, 1):,.0f}",
            f"{cost.stored_bytes / max(cost.plans, 1):,.0f}",
        )
    lines = [
        Text(
            "harness = encode + digest + compare of every record, per plan() call; "
            "'with check' adds the schema check of every plan record (golden check pays it; "
            "run skips it for records identical to the first implementation's)."
        )
    ]
    optimized = next((c for c in result.costs if c.impl == "optimized"), None)
    if optimized is not None and optimized.plans:
        met = optimized.share <= TARGET_SHARE
        lines.append(
            Text(
                f"target: harness within {TARGET_SHARE:.0%} of the optimized plan(): "
                f"{optimized.share:.1%} ({'met' if met else 'NOT met'})",
                style="green" if met else "red",
            )
        )
    return Group(table, *lines)
