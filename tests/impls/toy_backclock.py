"""A toy implementation whose second plan's clock goes back: every record passes the toy's
``check_record`` (its keys), but no trace may hold it (the clock of a trace never goes
back), so ``record`` must refuse it rather than write a trace ``show`` refuses."""

from __future__ import annotations

from typing import Any

from toy_model import Reference


class BackClock(Reference):
    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        if record["plan"] == 2:
            record["now"] = -5
        return record
