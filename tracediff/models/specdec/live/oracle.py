"""The correctness oracle: plain greedy decoding of the target, one token per forward.

Speculative decoding with greedy acceptance must produce exactly these bytes for every
request, whatever the scheduler planned. Exactly, with one caveat that the oracle makes
checkable instead of hoping: a batched forward and an unbatched one may round differently in
the last bits (other matrix shapes, other reduction orders), and a different bit can flip an
argmax only where the two best logits are that close. So :func:`greedy_decode` also returns
the smallest gap between the best and the second-best allowed logit along the way; the tests
run the model in float64 and require that gap to be far above float64 rounding (1e-9 against
about 1e-15), so an equality failure is a real bug and never an unlucky near-tie.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracediff.models.specdec.live import grammar as G
from tracediff.models.specdec.live import require_torch
from tracediff.models.specdec.live.model import AttentionGroup, Packed, TinyTransformer

torch = require_torch()


@dataclass(frozen=True)
class Greedy:
    tokens: bytes
    margin: float  # smallest best-minus-second logit gap over the generated positions


def greedy_decode(
    model: TinyTransformer, prompt: bytes, max_new: int, *, grammar: bool = False, stop: int = -1
) -> Greedy:
    """Decode ``prompt`` greedily for up to ``max_new`` bytes (or through ``stop``)."""
    device = model.device
    cache = model.new_cache(1, len(prompt) + max_new + 1)
    context = list(prompt)
    if len(context) > 1:
        _run(model, cache, context[:-1], 0)
    masks = torch.tensor(G.masks(model.config.vocab), dtype=torch.bool, device=device)
    margin = float("inf")
    generated: list[int] = []
    while len(generated) < max_new:
        hidden = _run(model, cache, [context[-1]], len(context) - 1)
        logits = model.logits(hidden)[0]
        if grammar:
            logits = logits.masked_fill(~masks[G.mask_row(context[-1])], float("-inf"))
        top = torch.topk(logits, 2).values.tolist()
        margin = min(margin, top[0] - top[1])
        token = int(logits.argmax())
        generated.append(token)
        context.append(token)
        if token == stop:
            break
    return Greedy(bytes(generated), margin)


def _run(model: TinyTransformer, cache: object, tokens: list[int], start: int) -> object:
    device = model.device
    count = len(tokens)
    packed = Packed(
        tokens=torch.tensor(tokens, dtype=torch.long, device=device),
        slots=torch.zeros(count, dtype=torch.long, device=device),
        positions=torch.arange(start, start + count, device=device),
        groups=(
            AttentionGroup(
                torch.arange(count, device=device).view(1, count),
                torch.zeros(1, dtype=torch.long, device=device),
            ),
        ),
        inverse=torch.arange(count, device=device),
        key_limit=start + count,
    )
    return model.forward(cache, packed, model.config.layers)  # type: ignore[arg-type]
