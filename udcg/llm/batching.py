"""How the local backend (udcg.llm.hf) groups requests into forward passes: the token prefix every
request shares, tight prompt batches, and the waves of prompt batches that decode together. Pure
functions of token lengths; no model."""

from __future__ import annotations

from collections.abc import Sequence


def shared_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix common to every sequence."""
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return n


def prompt_batches(order: list[int], lengths: list[int], batch_size: int | None, cuda: bool) -> list[list[int]]:
    """Split indices (sorted longest first) into batches: by count when a batch size is set,
    otherwise up to a token budget, closing a batch before padding would exceed a share of its
    longest row (padding is computed for nothing; a CPU gains little from wide batches)."""
    if batch_size:
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    budget, cap, slack = (32768, 256, 0.25) if cuda else (2048, 32, 0.1)
    batches: list[list[int]] = []
    for i in order:
        if batches:
            head = lengths[batches[-1][0]]
            fits = len(batches[-1]) < cap and (len(batches[-1]) + 1) * head <= budget
            if fits and head - lengths[i] <= slack * head:
                batches[-1].append(i)
                continue
        batches.append([i])
    return batches


def decoding_waves(batches: list[list[int]], lengths: list[int], batch_size: int | None,
                   cuda: bool) -> list[list[list[int]]]:
    """Group consecutive prompt batches that decode together. A prompt pass costs compute per
    token, so its batches stay tight (little padding); a decoding step reads every weight once for
    the whole batch, so on a CPU one wide batch decodes many rows for about the price of one.
    With a fixed batch size every batch decodes alone (the caller asked for that width). Callers
    join only greedy decoding: padding changes float rounding by ~1e-7, which cannot move an
    argmax away from a tie but can move a seeded inverse-CDF draw across a token boundary, and a
    seeded sample should not depend on which other prompts share its call."""
    if batch_size:
        return [[b] for b in batches]
    max_rows, budget = (256, 131072) if cuda else (32, 16384)
    waves: list[list[list[int]]] = []
    for batch in batches:
        if waves:
            wave = waves[-1]
            rows = sum(map(len, wave)) + len(batch)
            if rows <= max_rows and rows * lengths[wave[0][0]] <= budget:  # the first row is the longest
                wave.append(batch)
                continue
        waves.append([batch])
    return waves
