"""CSV formats: the Azure LLM inference traces and BurstGPT.

Both have a header line; a column is found by its name, so extra columns (BurstGPT_3's
``Session ID`` and ``Elapsed time``) and another column order read the same.
"""

from __future__ import annotations

import csv
import datetime
import re

from tracediff.workload.numbers import cell_count, count, decimal_us
from tracediff.workload.request import LineParser, TraceRequest

AZURE_COLUMNS = frozenset({"TIMESTAMP", "ContextTokens", "GeneratedTokens"})
BURSTGPT_COLUMNS = frozenset({"Timestamp", "Request tokens", "Response tokens"})
# Azure's invocation time: "2023-11-16 18:17:03.9799600" (seven fraction digits, no zone)
_AZURE_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_EPOCH = datetime.date(1970, 1, 1).toordinal()


def header(text: str) -> list[str]:
    return [name.strip() for name in _cells(text)]


def _cells(text: str) -> list[str]:
    try:
        return next(csv.reader([text]), [])
    except csv.Error as exc:  # a field over csv's limit (128 KiB), a stray quote
        raise ValueError(f"not a CSV line ({exc})") from None


def _row(text: str, width: int) -> list[str]:
    cells = _cells(text)
    if len(cells) < width:
        raise ValueError(f"{len(cells)} columns, the header names {width}")
    return cells


def azure_time_us(text: str) -> int:
    """Microseconds since 1970-01-01 00:00 of an Azure timestamp (its own zone, which
    cancels out: a scenario counts from its window's first request)."""
    match = _AZURE_TIME.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"TIMESTAMP is {text.strip()!r:.40}, expected YYYY-MM-DD HH:MM:SS.fff")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        days = datetime.date(year, month, day).toordinal() - _EPOCH
    except ValueError as exc:
        raise ValueError(f"TIMESTAMP {text.strip()!r:.40}: {exc}") from None
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError(f"TIMESTAMP {text.strip()!r:.40} is not a time of day")
    fraction = ((match.group(7) or "") + "000000")[:6]
    return count(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000
                 + int(fraction), "TIMESTAMP")  # fmt: skip


def azure_parser(columns: list[str]) -> LineParser:
    at = {name: columns.index(name) for name in AZURE_COLUMNS}

    def parse(text: str, line: int) -> TraceRequest:
        cells = _row(text, len(columns))
        return TraceRequest(
            line,
            azure_time_us(cells[at["TIMESTAMP"]]),
            cell_count(cells[at["ContextTokens"]], "ContextTokens"),
            cell_count(cells[at["GeneratedTokens"]], "GeneratedTokens"),
        )

    return parse


def burstgpt_parser(columns: list[str]) -> LineParser:
    at = {name: columns.index(name) for name in BURSTGPT_COLUMNS}

    def parse(text: str, line: int) -> TraceRequest:
        cells = _row(text, len(columns))
        # BurstGPT's Timestamp: seconds from the trace's first midnight
        return TraceRequest(
            line,
            decimal_us(cells[at["Timestamp"]].strip(), 1_000_000, "Timestamp"),
            cell_count(cells[at["Request tokens"]], "Request tokens"),
            cell_count(cells[at["Response tokens"]], "Response tokens"),
        )

    return parse
