"""Abstention estimators: p_abs(q, p), the probability that the reader starts its answer with
``NO-RESPONSE`` given the chat of one passage (the paper's Eq. 2).

- ``first-token``: the softmax probability, at the answer position, of the first token of the
  tokenised string ``NO-RESPONSE``. The authors' public code computes exactly this; it is the
  paper-parity mode. Through an API backend that only returns a top-k list, a token outside the
  list gets probability 0 (the backend returns -inf).
- ``sequence``: the product of the conditional probabilities of all tokens of ``NO-RESPONSE``
  (teacher forcing): the probability of the whole string, not of its first piece.
- ``sampling`` (black-box models): the share of sampled answers judged abstentions, with a Wilson
  interval (``udcg.annotate.sampling``).
- ``api-logprobs``: ``first-token`` read from an OpenAI-compatible API's top log-probabilities,
  with a note on the estimates where ``NO-RESPONSE`` was outside the returned list.

More estimators plug in with ``register_estimator(name, fn)``; ``fn(backend, chats, **options)``
returns, per chat in order, a float or an ``Estimate`` (or any object with ``p``/``p_abs`` and
optionally ``low``/``high``/``n``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from udcg.annotate.prompt import ABSTAIN
from udcg.errors import BackendError, InputError
from udcg.llm.base import Backend, Chat


@dataclass(frozen=True, slots=True)
class Estimate:
    p_abs: float
    ci_low: float | None = None
    ci_high: float | None = None
    n_samples: int | None = None
    note: str = ""


EstimatorFn = Callable[..., Sequence[Any]]
_ESTIMATORS: dict[str, EstimatorFn] = {}


def register_estimator(name: str, fn: EstimatorFn) -> None:
    _ESTIMATORS[name] = fn


def estimator_names() -> tuple[str, ...]:
    return tuple(_ESTIMATORS)


def probability(logprob: float, where: str) -> float:
    if math.isnan(logprob) or logprob > 1e-4:
        raise BackendError(f"{where}: the backend returned log-probability {logprob!r}, which is not a log-probability")
    return min(1.0, math.exp(logprob))  # exp(-inf) = 0: a token outside an API's top-k list


def first_token(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    rows = backend.next_token_logprobs(chats, [target])
    _check_count(backend, rows, chats)
    return [Estimate(probability(row[target], f"{backend.name}: chat {i}")) for i, row in enumerate(rows)]


def sequence(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    rows = backend.continuation_logprobs([(chat, target) for chat in chats])
    _check_count(backend, rows, chats)
    out = []
    for i, logprobs in enumerate(rows):
        if not logprobs:
            raise BackendError(f"{backend.name}: chat {i}: no log-probabilities for the continuation {target!r}")
        out.append(Estimate(probability(math.fsum(logprobs), f"{backend.name}: chat {i}")))
    return out


def api_logprobs(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    rows = backend.next_token_logprobs(chats, [target])
    _check_count(backend, rows, chats)
    out = []
    for i, row in enumerate(rows):
        lp = row[target]
        note = f"{target!r} was not among the returned top log-probabilities; p_abs set to 0" if lp == -math.inf else ""
        out.append(Estimate(probability(lp, f"{backend.name}: chat {i}"), note=note))
    return out


def sampling(backend: Backend, chats: Sequence[Chat], *, n: int = 20, temperature: float = 1.0, seed: int = 0,
             **options: Any) -> list[Any]:
    from udcg.annotate.sampling import sample_abstention

    return sample_abstention(backend, chats, n=n, temperature=temperature, seed=seed, **options)


register_estimator("first-token", first_token)
register_estimator("sequence", sequence)
register_estimator("sampling", sampling)
register_estimator("api-logprobs", api_logprobs)


def _check_count(backend: Backend, rows: Sequence[Any], chats: Sequence[Chat]) -> None:
    if len(rows) != len(chats):
        raise BackendError(f"backend {backend.name!r} returned {len(rows)} results for {len(chats)} chats")


def _as_estimate(obj: Any, where: str) -> Estimate:
    if isinstance(obj, Estimate):
        return obj
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        p, low, high, n = float(obj), None, None, None
    else:
        p = getattr(obj, "p_abs", getattr(obj, "p", None))
        low, high, n = getattr(obj, "low", None), getattr(obj, "high", None), getattr(obj, "n", None)
        if p is None:
            raise BackendError(f"{where}: the estimator returned {type(obj).__name__}, not a probability")
    if not (math.isfinite(p) and 0.0 <= p <= 1.0):
        raise BackendError(f"{where}: the estimator returned p_abs = {p!r}, not a probability in [0, 1]")
    return Estimate(float(p), low, high, n, getattr(obj, "note", ""))


def abstention_estimates(backend: Backend, chats: Sequence[Chat], estimator: str = "first-token",
                         **options: Any) -> list[Estimate]:
    """One ``Estimate`` per chat, in input order."""
    if estimator not in _ESTIMATORS:
        raise InputError(f"unknown abstention estimator {estimator!r} (choose one of: {', '.join(_ESTIMATORS)})")
    chats = list(chats)
    if not chats:
        return []
    raw = list(_ESTIMATORS[estimator](backend, chats, **options))
    _check_count(backend, raw, chats)
    return [_as_estimate(obj, f"{estimator} on {backend.name}: chat {i}") for i, obj in enumerate(raw)]


def abstention_probs(backend: Backend, chats: Sequence[Chat], estimator: str = "first-token", **options: Any) -> list[float]:
    """p_abs per chat, in input order."""
    return [e.p_abs for e in abstention_estimates(backend, chats, estimator, **options)]
