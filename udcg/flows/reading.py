"""The cached reader calls every flow shares: greedy answers and answer log-likelihoods through the
one resumable runner (``udcg.resumable``), keyed by content: an answer by ``qid<TAB>docid1<TAB>docid2…`` (the
question and the passages in prompt order), so a context drawn twice, by two runs or two studies, is
answered once. ``udcg answer`` and ``udcg validate`` (``udcg.experiment.steps``) both use them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from udcg import resumable
from udcg.llm.base import Chat, GenerationParams

Progress = Callable[[int, str, str], object]  # (total, description, unit) -> context manager with update(n)


def context_key(qid: str, docids: Sequence[str]) -> str:
    """The cache key of a context: the question and the passages in prompt order."""
    return resumable.key(qid, *docids)


def split_context_key(key: str) -> tuple[str, list[str]]:
    qid, *docids = resumable.split_key(key)
    return qid, docids


def answer_expect(model: str, prompt_version: str, max_new_tokens: int) -> dict:
    """The provenance of a cached answer (the fields every record of an answers cache holds)."""
    return {"model": model, "prompt_version": prompt_version, "max_new_tokens": max_new_tokens}


def loglik_expect(model: str, prompt_version: str) -> dict:
    """The provenance of a cached answer log-likelihood."""
    return {"model": model, "prompt_version": prompt_version}


def _distinct(requests: Sequence[tuple]) -> int:
    return len(dict.fromkeys(r[0] for r in requests))


def generate_cached(backend, requests: Sequence[tuple[str, Chat]], cache_path: Path, max_new_tokens: int,
                    prompt_version: str, chunk_size: int, progress: Progress, desc: str) -> tuple[dict[str, str], dict]:
    """Greedy answers for (key, chat) requests, resumable (``udcg.resumable.fill``). Returns {key: answer}
    and timing stats (``StepStats.summary``). A run grown by questions or by a study answers only its
    new prompts."""
    expect = answer_expect(backend.name, prompt_version, max_new_tokens)
    params = GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0, n=1)

    def compute(chats: list[Chat]) -> list[dict]:
        return [{"answer": a[0].strip(), **expect} for a in backend.generate(chats, params)]

    with resumable.open_cache(cache_path, expect) as cache, progress(_distinct(requests), desc, "prompt") as bar:
        stats = resumable.fill(cache, requests, compute, chunk_size, progress=bar.update, parallel=resumable.parallelism(backend),
                               fingerprint=resumable.fingerprint)
        return {key: cache.get(key)["answer"] for key, _ in requests}, stats.summary()


def loglik_cached(backend, requests: Sequence[tuple[str, Chat, str]], cache_path: Path, prompt_version: str,
                  chunk_size: int, progress: Progress) -> tuple[dict[str, float], dict]:
    """log P(continuation | chat) (sum over its tokens) per (key, chat, continuation), resumable."""
    expect = loglik_expect(backend.name, prompt_version)

    def compute(pairs: list[tuple[Chat, str]]) -> list[dict]:
        lps = backend.continuation_logprobs(pairs)
        return [{"answer": text, "loglik": float(math.fsum(lp)), **expect}
                for (_, text), lp in zip(pairs, lps, strict=True)]

    with (resumable.open_cache(cache_path, expect) as cache,
          progress(_distinct(requests), "answer log-likelihood", "passage") as bar):
        stats = resumable.fill(cache, [(key, (chat, text)) for key, chat, text in requests], compute, chunk_size,
                               progress=bar.update, parallel=resumable.parallelism(backend))
        return {key: min(0.0, cache.get(key)["loglik"]) for key, _, _ in requests}, stats.summary()
