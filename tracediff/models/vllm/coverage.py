"""vllm coverage: what each plan exercised and which scheduling rule decided it, read from
the records alone (docs/vllm.md, "Coverage").

vLLM is not instrumented: every clause is recognised in the trace (the plan record, the
update that follows it, the scenario in the header), so the same reading serves any
implementation's trace and the observed coverage of the built-in one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracediff.model import Clause, Record

FEATURES = ("prefill", "decode", "admit", "hit", "preempt", "resume", "spec", "finish", "abort")
INFORMATIONAL: frozenset[str] = frozenset()

SPEC = "docs/vllm.md"
CLAUSES: tuple[Clause, ...] = (
    Clause("preempt", "preemption", "a running request was preempted to free blocks"),
    Clause("preempt-priority", "preemption", "under the priority policy, a preemption"),
    Clause("resume", "preemption", "a preempted request was scheduled again"),
    Clause("hit-full", "prefix cache", "a hit covered every full block before the last token"),
    Clause("hit-partial", "prefix cache", "a hit covered some of the full blocks"),
    Clause("hit-none", "prefix cache", "a prompt with a shared full block hit nothing"),
    Clause("chunk-split", "chunked prefill", "a prefill was cut short of its tokens"),
    Clause("long-prefill", "chunked prefill", "long_prefill_token_threshold cut a prefill"),
    Clause("token-budget", "budget", "the plan used the whole token budget"),
    Clause("max-seqs", "budget", "max_num_seqs were running while a request waited"),
    Clause("abort-waiting", "abort", "a waiting (or preempted) request was aborted"),
    Clause("abort-running", "abort", "a running request was aborted"),
    Clause("spec-rejected", "speculative", "a scheduled draft token was rejected"),
    Clause("spec-accepted", "speculative", "every scheduled draft token was accepted"),
    Clause("finish-length", "finish", "a request finished at max_tokens"),
    Clause("finish-stop", "finish", "a request finished on its stop token"),
)
_INDEX = {clause.name: i for i, clause in enumerate(CLAUSES)}
_FEATURE = {name: i for i, name in enumerate(FEATURES)}


def coverage(records: Iterable[Record]) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(plans, per feature the plans that exercised it, per clause the times it decided)."""
    iterator = iter(records)
    header = next(iterator, None)
    if not isinstance(header, dict) or "scenario" not in header:
        raise ValueError("the records do not start with a header")
    sc: dict[str, Any] = header["scenario"]
    bs: int = sc["block_size"]
    prompt = {row[0]: row[2] for row in sc["requests"]}
    shared = {row[0]: row[5] for row in sc["requests"]}
    outputs: dict[int, int] = {}
    running: set[int] = set()
    waiting: set[int] = set()
    features = [0] * len(FEATURES)
    clauses = [0] * len(CLAUSES)
    plans = 0
    last: Record | None = None

    def clause(name: str) -> None:
        clauses[_INDEX[name]] += 1

    for record in iterator:
        kind = record.get("t")
        if kind == "arrival":
            waiting.add(record["id"])
            outputs[record["id"]] = 0
        elif kind == "abort":
            rid = record["id"]
            clause("abort-running" if rid in running else "abort-waiting")
            features[_FEATURE["abort"]] += 1
            running.discard(rid)
            waiting.discard(rid)
        elif kind == "plan":
            plans += 1
            last = record
            seen: set[str] = set()
            hit_rows = [row[:2] for row in record["new"]]
            hit_rows += [row[:2] for row in record["cached"] if row[0] in record["resumed"]]
            for rid, computed in hit_rows:
                cap = (prompt[rid] + outputs[rid] - 1) // bs * bs
                if computed and computed == cap:
                    seen.add("hit-full")
                elif computed:
                    seen.add("hit-partial")
                elif sc["prefix_caching"] and shared[rid] >= bs:
                    seen.add("hit-none")
            computed_at = {row[0]: row[1] for row in record["new"] + record["cached"]}
            for rid, n in record["sched"]:
                remaining = prompt[rid] + outputs[rid] - computed_at.get(rid, 0)
                if n < remaining:
                    seen.add("chunk-split")
                    if sc["long_prefill"] and n == sc["long_prefill"]:
                        seen.add("long-prefill")
            if sum(n for _rid, n in record["sched"]) == sc["max_num_batched_tokens"]:
                seen.add("token-budget")
            if record["preempted"]:
                seen.add("preempt")
                if sc["policy"] == "priority":
                    seen.add("preempt-priority")
            if record["resumed"]:
                seen.add("resume")
            for rid in record["preempted"]:
                running.discard(rid)
                waiting.add(rid)
            for rid, *_rest in record["new"]:
                waiting.discard(rid)
                running.add(rid)
            for rid in record["resumed"]:
                waiting.discard(rid)
                running.add(rid)
            if len(running) >= sc["max_num_seqs"] and waiting:
                seen.add("max-seqs")
            for name in seen:
                clause(name)
            flags = {
                "prefill": any(
                    n > 1 and not any(s[0] == rid for s in record["spec"])
                    for rid, n in record["sched"]
                ),
                "decode": any(n == 1 for _rid, n in record["sched"]),
                "admit": bool(record["new"]),
                "hit": any(c for _rid, c in hit_rows),
                "preempt": bool(record["preempted"]),
                "resume": bool(record["resumed"]),
                "spec": bool(record["spec"]),
            }
            for name, flag in flags.items():
                features[_FEATURE[name]] += flag
        elif kind == "update" and last is not None:
            appended = {rid: n for rid, n in record["tokens"]}
            for rid, ids in last["spec"]:
                drafts = [t for t in ids if t >= 0]
                if not drafts or rid not in appended:
                    continue
                if appended[rid] < len(drafts) + 1 and not any(
                    f[0] == rid for f in record["finished"]
                ):
                    clause("spec-rejected")
                elif appended[rid] == len(drafts) + 1:
                    clause("spec-accepted")
            for rid, n in record["tokens"]:
                outputs[rid] += n
            if record["finished"]:
                features[_FEATURE["finish"]] += 1
            for rid, reason in record["finished"]:
                if reason == "length":
                    clause("finish-length")
                elif reason == "stop":
                    clause("finish-stop")
                running.discard(rid)
                waiting.discard(rid)
    return plans, tuple(features), tuple(clauses)
