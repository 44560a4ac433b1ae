"""The target model: a tiny decoder-only transformer with a seeded, structured initialisation.

Nothing is downloaded and nothing is trained. The weights come from one ``torch.Generator``
seeded with ``ModelConfig.seed``, drawn on the CPU in float64 and only then cast and moved,
so every device and dtype starts from the same numbers.

Why structured, not plain random: a randomly initialised transformer's greedy continuation is
noise, so a draft would almost never agree with it and a copy proposal would never match. Two
choices give the live engine acceptance worth scheduling for:

- **The residual path is a bigram model.** A seeded random *successor map* sends each byte to
  a printable byte, and the unembedding is built so that the embedding of byte ``x`` scores
  ``successor(x)`` highest (its column sums the embeddings of the bytes that map to it). A
  random map's orbits fall into short cycles (a random function on n points has a tail plus
  cycle of about sqrt(pi n / 2), about 12 steps on the 95 printable bytes), so greedy text
  repeats itself and the ``copy`` proposer's n-gram lookups match.
- **The layers perturb it with context.** Attention and MLP blocks are seeded random matrices
  added to the residual stream with a gain (``layer_gain``, ``draft_gain``): the first
  ``draft_layers`` blocks are what the self-speculative draft sees, the later ones only the
  target. Where the later blocks' contribution flips the argmax the draft is rejected, so the
  ``mtp`` acceptance is real and falls with depth, and the target's text drifts off its cycle
  now and then, which breaks copy matches.

No positional encoding (the causal mask alone orders the context), RMS norms without learned
scale, GELU MLPs. The KV cache is one static tensor per layer, indexed by (slot, position),
so that every forward writes its keys and values in place and a CUDA graph can capture it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracediff.models.specdec.live import require_torch

torch = require_torch()

Tensor = Any  # torch.Tensor; torch ships no stubs this project's mypy reads


@dataclass(frozen=True)
class ModelConfig:
    """The model's shape and its seeded initialisation (recorded in the live trace header)."""

    seed: int = 0
    layers: int = 3
    draft_layers: int = 1  # the mtp draft head: these first layers, then the LM head
    d_model: int = 64
    heads: int = 4
    d_ff: int = 128
    vocab: int = 256  # bytes
    successor_low: int = 32  # the successor map lands on printable bytes, [low, high)
    successor_high: int = 127
    draft_gain: float = 1.2  # residual gain of the draft layers
    layer_gain: float = 0.1  # residual gain of the layers only the target runs
    logit_gain: float = 6.0  # sharpens the softmax that draft confidence reads

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "layers": self.layers,
            "draft_layers": self.draft_layers,
            "d_model": self.d_model,
            "heads": self.heads,
            "d_ff": self.d_ff,
            "vocab": self.vocab,
            "successor": [self.successor_low, self.successor_high],
            "draft_gain": self.draft_gain,
            "layer_gain": self.layer_gain,
            "logit_gain": self.logit_gain,
        }


@dataclass(frozen=True)
class AttentionGroup:
    """Rows of tokens that attend together: ``index`` [R, L] points into the flat token
    tensor (the value ``Q``, one past the end, marks an empty place), ``slots`` [R] is the
    cache slot each row reads."""

    index: Tensor
    slots: Tensor


@dataclass(frozen=True)
class Packed:
    """One forward's input: flat tokens with their cache (slot, position), the attention rows,
    and ``inverse`` [Q]: where each flat token's attention output lies in the groups' outputs
    concatenated (one past the end: a token no row holds, e.g. ragged padding, gets zeros)."""

    tokens: Tensor
    slots: Tensor
    positions: Tensor
    groups: tuple[AttentionGroup, ...]
    inverse: Tensor
    key_limit: int  # keys read per row: positions [0, key_limit)


class KVCache:
    """Keys and values of every layer: [layers, slots, capacity, heads, head_dim] each."""

    def __init__(self, config: ModelConfig, slots: int, capacity: int, device: Any, dtype: Any):
        head_dim = config.d_model // config.heads
        shape = (config.layers, slots, capacity, config.heads, head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.slots = slots
        self.capacity = capacity


class TinyTransformer:
    """The target model; its first ``draft_layers`` blocks plus its LM head are the draft."""

    def __init__(self, config: ModelConfig, *, device: Any, dtype: Any) -> None:
        if not 1 <= config.draft_layers < config.layers:
            raise ValueError("draft_layers must be at least 1 and fewer than layers")
        if config.d_model % config.heads:
            raise ValueError("d_model must be a multiple of heads")
        self.config = config
        self.device = device
        self.dtype = dtype
        self.head_dim = config.d_model // config.heads
        generator = torch.Generator().manual_seed(config.seed)
        d, f, v = config.d_model, config.d_ff, config.vocab

        def draw(*shape: int, fan_in: int) -> Tensor:
            values = torch.randn(*shape, generator=generator, dtype=torch.float64)
            return values / math.sqrt(fan_in)

        with torch.no_grad():
            embed = draw(v, d, fan_in=d)
            successor = torch.randint(
                config.successor_low, config.successor_high - 1, (v,), generator=generator
            )
            # Skip the byte itself: a fixed point would turn greedy text into one byte repeated.
            successor += (successor >= torch.arange(v)).long()
            unembed = torch.zeros(d, v, dtype=torch.float64)
            for byte in range(v):  # column successor(x) gathers embed(x); a loop keeps the order
                unembed[:, int(successor[byte])] += embed[byte]
            blocks = []
            for layer in range(config.layers):
                gain = config.draft_gain if layer < config.draft_layers else config.layer_gain
                blocks.append(
                    {
                        "wq": draw(d, d, fan_in=d),
                        "wk": draw(d, d, fan_in=d),
                        "wv": draw(d, d, fan_in=d),
                        "wo": draw(d, d, fan_in=d) * gain,
                        "w1": draw(d, f, fan_in=d),
                        "w2": draw(f, d, fan_in=f) * gain,
                    }
                )
        self.successor = [int(s) for s in successor]
        self.embed = self._place(embed)
        self.unembed = self._place(unembed * config.logit_gain)
        self.blocks = [{k: self._place(w) for k, w in block.items()} for block in blocks]

    def _place(self, tensor: Tensor) -> Tensor:
        return tensor.to(dtype=self.dtype).to(self.device).contiguous()

    def new_cache(self, slots: int, capacity: int) -> KVCache:
        return KVCache(self.config, slots, capacity, self.device, self.dtype)

    def logits(self, hidden: Tensor) -> Tensor:
        return _rms(hidden) @ self.unembed

    def forward(self, cache: KVCache, packed: Packed, layers: int) -> Tensor:
        """Run the first ``layers`` blocks over ``packed``; returns the hidden states [Q, d].

        Each block first writes the tokens' keys and values into the cache at their (slot,
        position), then every row attends to its slot's positions up to each query's own, so
        a row sees its earlier rounds and its own earlier tokens of this forward.
        """
        heads, head_dim = self.config.heads, self.head_dim
        count = packed.tokens.shape[0]
        scale = 1.0 / math.sqrt(head_dim)
        hidden = self.embed[packed.tokens]
        key_range = torch.arange(packed.key_limit, device=self.device)
        query_positions = torch.cat([packed.positions, packed.positions.new_zeros(1)])
        for layer in range(layers):
            block = self.blocks[layer]
            x = _rms(hidden)
            queries = (x @ block["wq"]).view(count, heads, head_dim)
            keys = (x @ block["wk"]).view(count, heads, head_dim)
            values = (x @ block["wv"]).view(count, heads, head_dim)
            cache.keys[layer].index_put_((packed.slots, packed.positions), keys)
            cache.values[layer].index_put_((packed.slots, packed.positions), values)
            padded = torch.cat([queries, queries.new_zeros(1, heads, head_dim)])
            outputs = []
            for group in packed.groups:
                q = padded[group.index]  # [R, L, H, D]
                k = cache.keys[layer][group.slots, : packed.key_limit]  # [R, T, H, D]
                v = cache.values[layer][group.slots, : packed.key_limit]
                scores = torch.einsum("rlhd,rthd->rhlt", q, k) * scale
                visible = key_range.view(1, 1, -1) <= query_positions[group.index].unsqueeze(-1)
                scores = scores.masked_fill(~visible.unsqueeze(1), float("-inf"))
                mixed = torch.einsum("rhlt,rthd->rlhd", torch.softmax(scores, dim=-1), v)
                outputs.append(mixed.reshape(-1, heads, head_dim))
            outputs.append(queries.new_zeros(1, heads, head_dim))
            attended = torch.cat(outputs)[packed.inverse].reshape(count, heads * head_dim)
            hidden = hidden + attended @ block["wo"]
            hidden = hidden + torch.nn.functional.gelu(_rms(hidden) @ block["w1"]) @ block["w2"]
        return hidden


def _rms(x: Tensor) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
