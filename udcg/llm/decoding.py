"""Decoding pieces of the local backend (udcg.llm.hf) that need no model: drawing the next token,
cutting at stop strings, checking generation parameters, per-answer seeds, and joining prompt-pass
states into one decoding batch."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from udcg.errors import InputError
from udcg.llm.base import GenerationParams


def join_states(states: list[tuple], p: int, config: Any) -> tuple:
    """One decoding state from several prompt batches: each batch's key/value cache and mask are
    left-padded (after the shared prefix of length ``p``) to the widest, then stacked. Padded
    slots are masked out and every row keeps its own position ids, so each row decodes exactly
    as it would alone."""
    import torch
    from transformers import DynamicCache

    width = max(mask.shape[1] for _, _, mask, _ in states)

    def pad(t: Any, n: int, dim: int) -> Any:
        if not n:
            return t
        shape = list(t.shape)
        shape[dim] = n
        head, tail = t.narrow(dim, 0, p), t.narrow(dim, p, t.shape[dim] - p)
        return torch.cat([head, t.new_zeros(shape), tail], dim=dim)

    layers = []
    for parts in zip(*([(k, v) for k, v, *_ in cache] for _, cache, _, _ in states)):
        layers.append((torch.cat([pad(k, width - k.shape[2], 2) for k, _ in parts]),
                       torch.cat([pad(v, width - v.shape[2], 2) for _, v in parts])))
    logits = torch.cat([s[0] for s in states])
    mask = torch.cat([pad(m, width - m.shape[1], 1) for _, _, m, _ in states])
    last = torch.cat([s[3] for s in states])
    return logits, DynamicCache(layers, config=config), mask, last


def pick_tokens(logits: Any, gens: list[Any], params: GenerationParams) -> list[int]:
    """Greedy: argmax. Sampling: temperature, then inverse-CDF sampling with one uniform draw per row
    from that row's own generator; with top_p < 1 over the nucleus (probabilities sorted high to
    low, cut once they add up to top_p), otherwise over the whole vocabulary in token order."""
    import torch

    if params.temperature == 0:
        return logits.argmax(dim=-1).tolist()
    probs = torch.softmax(logits.float().cpu() / params.temperature, dim=-1)
    if not bool(torch.isfinite(probs).all()):  # a tiny temperature (1e-300) overflowed: every row NaN, the
        # last token drawn. Shifted to its maximum and in float64, the scaled logits are <= 0 and finite or -inf.
        shifted = logits.double().cpu()
        probs = torch.softmax((shifted - shifted.max(dim=-1, keepdim=True).values) / params.temperature, dim=-1)
    index = None
    if params.top_p < 1.0:
        probs, index = probs.sort(dim=-1, descending=True, stable=True)
        probs = torch.where(probs.cumsum(-1) - probs < params.top_p, probs, torch.zeros_like(probs))
    cdf = probs.cumsum(-1)
    picks = []
    for b, g in enumerate(gens):
        u = torch.rand((), generator=g, dtype=torch.float64).item() * cdf[b, -1].item()
        k = min(int(torch.searchsorted(cdf[b], torch.tensor([u], dtype=cdf.dtype), right=True)), cdf.shape[1] - 1)
        while probs[b, k] == 0:  # u fell on a flat stretch of the CDF (rounding): take the next token with mass
            k -= 1
        picks.append(k if index is None else int(index[b, k]))
    return picks


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Text up to the earliest stop string, and whether one was found."""
    cuts = [text.find(s) for s in stop if s and s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)


def check_params(params: GenerationParams) -> None:
    if not isinstance(params.max_new_tokens, int) or params.max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be a positive integer, got {params.max_new_tokens!r}")
    if not (math.isfinite(params.temperature) and params.temperature >= 0):
        raise InputError(f"temperature must be >= 0 (0 = greedy), got {params.temperature!r}")
    if not 0 < params.top_p <= 1:
        raise InputError(f"top_p must be in (0, 1], got {params.top_p!r}")
    if not isinstance(params.n, int) or params.n < 1:
        raise InputError(f"n must be a positive integer (answers per chat), got {params.n!r}")
    if not isinstance(params.seed, int):
        raise InputError(f"seed must be an integer, got {params.seed!r}")


def answer_seed(seed: int, ids: Sequence[int], j: int) -> int:
    """Seed of answer j to a prompt: independent of the batch the prompt is run in."""
    h = hashlib.sha256(f"{seed}:{j}:{','.join(map(str, ids))}".encode())
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)
