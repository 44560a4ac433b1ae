"""The request-trace formats tracediff reads, told apart by content, never by file name.

    mooncake    JSON lines: timestamp (ms), input_length, output_length, hash_ids
    tracediff   JSON lines of our own: arrival_us, input_tokens, output_tokens[, hash_ids]
    azure       CSV: TIMESTAMP (a date and time), ContextTokens, GeneratedTokens
    burstgpt    CSV: Timestamp (s), ..., Request tokens, Response tokens, ...

A format is its detection (the first line decides) and a line parser; the parsers are in
:mod:`tracediff.workload.jsonl` and :mod:`tracediff.workload.csvs`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tracediff.errors import NESTING
from tracediff.workload import csvs, jsonl
from tracediff.workload.request import LineParser


@dataclass(frozen=True)
class Format:
    name: str
    header: bool  # the first line names the columns and holds no request
    parse: LineParser  # raises ValueError with what is wrong; the caller adds file:line


KNOWN = "mooncake or tracediff JSON lines, an Azure LLM inference CSV or a BurstGPT CSV"


def detect(first_line: str) -> Format | str:
    """The format whose first line this is, else why none is (the caller names file:1)."""
    text = first_line.lstrip("\ufeff").strip()
    if not text:
        return f"the first line is empty; expected {KNOWN}"
    if text.startswith("{"):
        try:
            keys = json.loads(text)
        except RecursionError:
            return f"not a request: {NESTING}"
        except ValueError as exc:
            return f"not a JSON object ({exc})"
        if isinstance(keys, dict):
            if jsonl.MOONCAKE_KEYS <= keys.keys():
                return Format("mooncake", False, jsonl.parse_mooncake)
            if jsonl.OWN_KEYS <= keys.keys():
                return Format("tracediff", False, jsonl.parse_own)
        return (
            f"a JSON line without the keys of a known format: mooncake needs "
            f"{sorted(jsonl.MOONCAKE_KEYS)}, tracediff JSON lines {sorted(jsonl.OWN_KEYS)}"
        )
    try:
        columns = csvs.header(text)
    except ValueError as exc:
        return f"not a request trace: the first line is {exc}; expected {KNOWN}"
    if csvs.AZURE_COLUMNS <= set(columns):
        return Format("azure", True, csvs.azure_parser(columns))
    if csvs.BURSTGPT_COLUMNS <= set(columns):
        return Format("burstgpt", True, csvs.burstgpt_parser(columns))
    return f"not a request trace: the first line {text[:60]!r} is no header of {KNOWN}"
