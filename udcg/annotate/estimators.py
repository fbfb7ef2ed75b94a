"""Abstention estimators: p_abs(q, p), the probability that the reader starts its answer with
``NO-RESPONSE`` given the chat of one passage (the paper's Eq. 2).

- ``first-token``: the softmax probability, at the answer position, of the first token of the
  tokenised string ``NO-RESPONSE``. The authors' public code computes exactly this; it is the
  paper-parity mode. Through an API reader it is exact where the server scores text
  (``/v1/completions`` with echo and logprobs: vLLM, SGLang, ``udcg serve``); a chat-only server
  gives a top-k list, and a token outside it is censored (``censored``), never 0.
- ``sequence``: the product of the conditional probabilities of all tokens of ``NO-RESPONSE``
  (teacher forcing): the probability of the whole string, not of its first piece.
- ``sampling`` (black-box models): the share of sampled answers judged abstentions, with a Wilson
  interval (``udcg.annotate.sampling``).
- ``api-logprobs``: ``first-token`` read from an OpenAI-compatible API's chat top log-probabilities.
  Where ``NO-RESPONSE`` is outside the returned list, p_abs is censored: below the list's last
  probability, recorded as half that bound with the bound as
  ``ci_high`` and ``censored`` set, never as 0.

Every estimate records ``estimator_used``: the estimator that actually gave it (``first-token``,
``sequence``, ``sampling``, ``api-logprobs`` for a value read from a top list, ``api-logprobs-censored``).

More estimators plug in with ``register_estimator(name, fn)``; ``fn(backend, chats, **options)``
returns, per chat in order, a float or a ``udcg.records.Estimate`` (or any object with ``p``/``p_abs`` and
optionally ``low``/``high``/``n``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from udcg.annotate.prompt import ABSTAIN
from udcg.errors import BackendError, InputError
from udcg.llm.base import Backend, Chat
from udcg.records import Estimate


CENSORED_NOTE = ("censored: NO-RESPONSE was outside the server's top log-probabilities; p_abs is below ci_high "
                 "(the list's last probability) and recorded as half of it")
CENSORED_FIX = ("use a server that scores text (/v1/completions with echo and logprobs: vLLM, SGLang, udcg serve) "
                "with the first-token or sequence estimator, or the sampling estimator")


EstimatorFn = Callable[..., Sequence[Any]]
_ESTIMATORS: dict[str, EstimatorFn] = {}


def register_estimator(name: str, fn: EstimatorFn) -> None:
    _ESTIMATORS[name] = fn


def estimator_names() -> tuple[str, ...]:
    return tuple(_ESTIMATORS)


def check_estimator(name: str | None) -> str | None:
    """``name`` if it is a registered estimator (None: the reader's default), else one ``InputError`` line."""
    if name is not None and name not in _ESTIMATORS:
        raise InputError(f"estimator = {name!r}: choose one of {', '.join(estimator_names())} (more plug in with "
                         "udcg.annotate.estimators.register_estimator)")
    return name


def probability(logprob: float, where: str) -> float:
    if math.isnan(logprob) or logprob > 1e-4:
        raise BackendError(f"{where}: the backend returned log-probability {logprob!r}, which is not a log-probability")
    return min(1.0, math.exp(logprob))  # exp(-inf) = 0: a token outside an API's top-k list


def first_token(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    if backend.capabilities.top_list:  # an API backend: exact where its server scores text, else a top list
        return _from_api(backend, chats, backend.first_token_scores(chats, [target]), target)
    rows = backend.next_token_logprobs(chats, [target])
    _check_count(backend, rows, chats)
    return [Estimate(probability(row[target], f"{backend.name}: chat {i}"), estimator_used="first-token")
            for i, row in enumerate(rows)]


def sequence(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    rows = backend.continuation_logprobs([(chat, target) for chat in chats])
    _check_count(backend, rows, chats)
    out = []
    for i, logprobs in enumerate(rows):
        if not logprobs:
            raise BackendError(f"{backend.name}: chat {i}: no log-probabilities for the continuation {target!r}")
        out.append(Estimate(probability(math.fsum(logprobs), f"{backend.name}: chat {i}"), estimator_used="sequence"))
    return out


def api_logprobs(backend: Backend, chats: Sequence[Chat], *, target: str = ABSTAIN) -> list[Estimate]:
    if backend.capabilities.top_list:  # the chat top list, even where exact scoring exists
        return _from_api(backend, chats, backend.first_token_logprobs(chats, [target]), target)
    rows = backend.next_token_logprobs(chats, [target])
    _check_count(backend, rows, chats)
    return _from_api(backend, chats, [_Listed(row) for row in rows], target)


class _Listed:
    """A backend's next_token_logprobs row seen as an API result without its top list."""

    def __init__(self, logprobs: dict[str, float]) -> None:
        self.logprobs, self.top, self.exact = logprobs, None, False


def censored_bound(top: dict[str, float] | None) -> float:
    """The most a token outside a top list can have: the list's last (smallest) probability; 1
    without a list. (The mass the list leaves is no safe bound: servers round their log-probabilities,
    and a list's probabilities can sum past 1.)"""
    probs = [math.exp(v) for v in (top or {}).values() if v > -math.inf]
    return min(probs) if probs else 1.0


def _from_api(backend: Backend, chats: Sequence[Chat], rows: Sequence[Any], target: str) -> list[Estimate]:
    _check_count(backend, rows, chats)
    out = []
    for i, row in enumerate(rows):
        lp = row.logprobs[target]
        where = f"{backend.name}: chat {i}"
        if getattr(row, "exact", False):
            out.append(Estimate(probability(lp, where), estimator_used="first-token"))
        elif lp > -math.inf:
            out.append(Estimate(probability(lp, where), estimator_used="api-logprobs"))
        else:
            bound = censored_bound(getattr(row, "top", None))
            out.append(Estimate(bound / 2, 0.0, bound, note=CENSORED_NOTE, estimator_used="api-logprobs-censored",
                                censored=True))
    return out


def sampling(backend: Backend, chats: Sequence[Chat], *, n: int = 20, temperature: float = 1.0, seed: int = 0,
             **options: Any) -> list[Any]:
    from udcg.annotate.sampling import SamplingPlan, sample_abstention, starts_with_no_response

    judge = options.pop("is_abstention", starts_with_no_response)
    return sample_abstention(backend, chats, SamplingPlan(n=n, temperature=temperature, seed=seed, **options), judge)


register_estimator("first-token", first_token)
register_estimator("sequence", sequence)
register_estimator("sampling", sampling)
register_estimator("api-logprobs", api_logprobs)


def _check_count(backend: Backend, rows: Sequence[Any], chats: Sequence[Chat]) -> None:
    if len(rows) != len(chats):
        raise BackendError(f"backend {backend.name!r} returned {len(rows)} results for {len(chats)} chats")


def _as_estimate(obj: Any, where: str, estimator: str = "") -> Estimate:
    if isinstance(obj, Estimate):
        return obj if obj.estimator_used else replace(obj, estimator_used=estimator)
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        p, low, high, n = float(obj), None, None, None
    else:
        p = getattr(obj, "p_abs", getattr(obj, "p", None))
        low, high, n = getattr(obj, "low", None), getattr(obj, "high", None), getattr(obj, "n", None)
        if p is None:
            raise BackendError(f"{where}: the estimator returned {type(obj).__name__}, not a probability")
    if not (math.isfinite(p) and 0.0 <= p <= 1.0):
        raise BackendError(f"{where}: the estimator returned p_abs = {p!r}, not a probability in [0, 1]")
    return Estimate(float(p), low, high, n, getattr(obj, "note", ""), estimator)


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
    return [_as_estimate(obj, f"{estimator} on {backend.name}: chat {i}", estimator) for i, obj in enumerate(raw)]


def abstention_probs(backend: Backend, chats: Sequence[Chat], estimator: str = "first-token", **options: Any) -> list[float]:
    """p_abs per chat, in input order."""
    return [e.p_abs for e in abstention_estimates(backend, chats, estimator, **options)]
