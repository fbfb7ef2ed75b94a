"""Contexts (the k passages shown to the reader) drawn from a question's candidate pool.

- ``sample_contexts``: the validation protocol (paper §7.2): ``n_contexts`` contexts of ``k``
  passages from the top ``pool_size``, balanced so that a share ``balance`` of them holds ≥1
  relevant passage. Passages keep pool rank order inside a context (prompt order = rank order);
  ``order_passages`` shuffles them instead (seeded per context).
- ``position_contexts``: one relevant passage moved through the k positions among k-1 fixed
  irrelevant ones (the lost-in-the-middle study, paper Fig. 1).
- ``oracle_select``: the best k of the pool by a per-passage score (paper Table 2).

Randomness: each question gets its own ``numpy`` Generator seeded from ``(seed, sha256(qid))``,
so a question's contexts do not depend on which other questions are sampled, or in what order.
Context ids are ``f"{qid}:{i}"`` (``:pos{j}`` for positions, ``:{name}`` for oracles).

**Balance fallback.** A context with ≥1 relevant passage needs ≥1 relevant passage in the pool; one
without needs ≥k irrelevant passages. When the pool cannot supply one kind, every context is of
the other kind (achieved balance 0.0 or 1.0), and ``sample_all_contexts`` lists the question
under ``no_relevant_in_pool`` or ``too_few_irrelevant``. Contexts of one question are distinct
sets whenever the pool allows; when it has fewer distinct sets than requested, sets repeat.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from udcg.errors import InputError
from udcg.records import Context, Passage, Question

log = logging.getLogger(__name__)

_MAX_TRIES = 64  # draws per context before accepting a set already drawn for the question
_ENUMERATE_MAX = 4096  # families of at most this many k-sets are enumerated, not rejection-sampled


def question_rng(seed: int, qid: str) -> np.random.Generator:
    """The question's own random generator, a function of (seed, qid) only."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"seed={seed!r} must be a non-negative integer")
    digest = int.from_bytes(hashlib.sha256(qid.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence([seed, digest]))


def _labelled_pool(question: Question, pool_size: int) -> tuple[Passage, ...]:
    pool = question.passages[:pool_size]
    unlabelled = [p.docid for p in pool if p.relevant is None]
    if unlabelled:
        raise InputError(f"question {question.qid!r}: passage {unlabelled[0]!r} has no relevance label "
                         f"({len(unlabelled)} unlabelled in the pool; label them first, e.g. with "
                         "udcg.io.sources.label_by_containment or the LLM judge)")
    return pool


def _check_sizes(k: int, n_contexts: int, pool_size: int, balance: float) -> None:
    for name, value in (("k", k), ("n_contexts", n_contexts), ("pool_size", pool_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{name}={value!r} must be a positive integer")
    if not (isinstance(balance, (int, float)) and 0.0 <= balance <= 1.0):
        raise InputError(f"balance={balance!r} must be a share in [0, 1] (0.5 = half the contexts hold a relevant passage)")


# ---------------------------------------------------------------- balanced sampling (§7.2)


def _n_positive(n_contexts: int, balance: float, n_rel: int, n_irr: int, k: int) -> int:
    """How many contexts hold ≥1 relevant passage, after the fallback."""
    if n_rel == 0:
        return 0
    if n_irr < k:
        return n_contexts
    return int(math.floor(balance * n_contexts + 0.5))


def _draw_positive(rng: np.random.Generator, rel: np.ndarray, irr: np.ndarray, k: int) -> np.ndarray:
    """Uniform over k-sets of the pool with ≥1 relevant passage: draw the number m of relevant
    passages from its (hypergeometric, conditioned on m ≥ 1) law, then the passages."""
    ms = np.arange(max(1, k - len(irr)), min(k, len(rel)) + 1)
    weights = np.array([math.comb(len(rel), m) * math.comb(len(irr), k - m) for m in ms], dtype=float)
    m = int(rng.choice(ms, p=weights / weights.sum()))
    return np.concatenate([rng.choice(rel, m, replace=False), rng.choice(irr, k - m, replace=False)])


def _positive_sets(rel: list[int], irr: list[int], k: int) -> list[tuple[int, ...]]:
    """Every k-set with ≥1 relevant passage, as sorted pool indices."""
    return [tuple(sorted(r + i)) for m in range(1, min(k, len(rel)) + 1)
            for r in itertools.combinations(rel, m) for i in itertools.combinations(irr, k - m)]


def _choose_sets(rng: np.random.Generator, n: int, total: int, enumerate_sets: Callable[[], list],
                 draw_one: Callable[[], np.ndarray]) -> list[tuple[int, ...]]:
    """``n`` k-sets, each uniform over the ``total`` admissible sets, distinct while ``total``
    allows (then every set once, plus repeats). Small families are enumerated and drawn without
    replacement; large ones are drawn by rejection of repeats (``_MAX_TRIES`` per set)."""
    if n == 0:
        return []
    if total <= _ENUMERATE_MAX:
        sets = enumerate_sets()
        picks = np.concatenate([rng.permutation(len(sets))[:n], rng.integers(len(sets), size=max(0, n - len(sets)))])
        return [sets[i] for i in picks]
    seen: set[tuple[int, ...]] = set()
    out = []
    for _ in range(n):
        for _ in range(_MAX_TRIES):
            chosen = tuple(sorted(int(i) for i in draw_one()))
            if chosen not in seen:
                break
        seen.add(chosen)
        out.append(chosen)
    return out


def sample_contexts(question: Question, k: int = 5, n_contexts: int = 10, pool_size: int = 25,
                    seed: int = 0, balance: float = 0.5) -> list[Context]:
    """``n_contexts`` contexts of ``k`` passages from the question's top ``pool_size`` passages.

    ``round(balance · n_contexts)`` contexts (half up) hold ≥1 relevant passage, each uniform over
    such k-sets; the others hold none, each uniform over the irrelevant k-sets (see the module
    docstring for the fallback); sets do not repeat within a question unless the pool has too few.
    The relevant-holding contexts come first. Passages inside a context keep pool rank order.
    Every passage of the pool must be labelled (``relevant`` not None); a pool smaller than ``k``
    raises ``InputError``.
    """
    _check_sizes(k, n_contexts, pool_size, balance)
    pool = _labelled_pool(question, pool_size)
    if len(pool) < k:
        raise InputError(f"question {question.qid!r}: its pool has {len(pool)} passages, fewer than k={k} "
                         "(use a smaller k or a larger pool)")
    flags = np.array([bool(p.relevant) for p in pool])
    rel, irr = np.flatnonzero(flags), np.flatnonzero(~flags)
    n_pos = _n_positive(n_contexts, balance, len(rel), len(irr), k)
    n_neg_sets = math.comb(len(irr), k)
    rng = question_rng(seed, question.qid)
    chosen = _choose_sets(
        rng, n_pos, math.comb(len(pool), k) - n_neg_sets,
        lambda: _positive_sets(rel.tolist(), irr.tolist(), k),
        lambda: _draw_positive(rng, rel, irr, k))
    chosen += _choose_sets(
        rng, n_contexts - n_pos, n_neg_sets,
        lambda: list(itertools.combinations(irr.tolist(), k)),
        lambda: rng.choice(irr, k, replace=False))
    return [Context(qid=question.qid, cid=f"{question.qid}:{i}", docids=tuple(pool[j].docid for j in idx))
            for i, idx in enumerate(chosen)]


def context_balance(question: Question, contexts: Sequence[Context]) -> float:
    """Share of the contexts that hold ≥1 passage labelled relevant (the achieved balance)."""
    if not contexts:
        return float("nan")
    relevant = {p.docid for p in question.passages if p.relevant}
    return float(np.mean([any(docid in relevant for docid in c.docids) for c in contexts]))


def sample_all_contexts(questions: Iterable[Question], k: int = 5, n_contexts: int = 10, pool_size: int = 25,
                        seed: int = 0, balance: float = 0.5) -> tuple[list[Context], dict]:
    """``sample_contexts`` for every question, with a summary of what was achieved:
    ``{questions, contexts, target_balance, achieved_balance (mean over questions),
    (None without questions), balanced (questions at the target), no_relevant_in_pool,
    too_few_irrelevant, skipped}``;
    the last three are lists of qids (``skipped``: pool smaller than k)."""
    contexts: list[Context] = []
    summary: dict = {"questions": 0, "contexts": 0, "target_balance": balance, "achieved_balance": None,
                     "balanced": 0, "no_relevant_in_pool": [], "too_few_irrelevant": [], "skipped": []}
    achieved = []
    target = math.floor(balance * n_contexts + 0.5) / n_contexts if n_contexts > 0 else float("nan")
    for q in questions:
        pool = _labelled_pool(q, pool_size)
        if len(pool) < k:
            summary["skipped"].append(q.qid)
            continue
        cs = sample_contexts(q, k=k, n_contexts=n_contexts, pool_size=pool_size, seed=seed, balance=balance)
        n_rel = sum(bool(p.relevant) for p in pool)
        if n_rel == 0:
            summary["no_relevant_in_pool"].append(q.qid)
        elif len(pool) - n_rel < k:
            summary["too_few_irrelevant"].append(q.qid)
        achieved.append(context_balance(q, cs))
        summary["balanced"] += achieved[-1] == target
        contexts += cs
    summary["questions"] = len(achieved)
    summary["contexts"] = len(contexts)
    if achieved:
        summary["achieved_balance"] = float(np.mean(achieved))
    return contexts, summary


ORDERS = ("pool", "shuffled")


def order_passages(contexts: Iterable[Context], order: str = "pool", seed: int = 0) -> list[Context]:
    """The passages inside each context in prompt order: ``pool`` keeps them as drawn (pool rank
    order), ``shuffled`` permutes each context's passages with a generator seeded from
    ``(seed, cid)``, so a context's order does not depend on the other contexts."""
    if order not in ORDERS:
        raise InputError(f"order={order!r} must be one of {', '.join(ORDERS)}")
    contexts = list(contexts)
    if order == "pool":
        return contexts
    out = []
    for c in contexts:
        perm = question_rng(seed, f"{c.cid}\torder").permutation(len(c.docids))
        out.append(Context(qid=c.qid, cid=c.cid, docids=tuple(c.docids[i] for i in perm)))
    return out


# ---------------------------------------------------------------- position study (Fig. 1)


def position_contexts(question: Question, k: int = 5, pool_size: int = 25) -> list[Context]:
    """k contexts: the best-ranked relevant passage of the pool at position 0, 1, …, k-1 among the
    k-1 best-ranked irrelevant passages (kept in rank order). cid ``f"{qid}:pos{j}"``.

    Returns ``[]`` when the pool has no relevant passage or fewer than k-1 irrelevant ones.
    """
    _check_sizes(k, 1, pool_size, 0.5)
    pool = _labelled_pool(question, pool_size)
    relevant = [p.docid for p in pool if p.relevant]
    irrelevant = [p.docid for p in pool if not p.relevant][: k - 1]
    if not relevant or len(irrelevant) < k - 1:
        log.debug("question %s: no position contexts (%d relevant, %d irrelevant)", question.qid,
                  len(relevant), len(irrelevant))
        return []
    return [Context(qid=question.qid, cid=f"{question.qid}:pos{j}",
                    docids=tuple(irrelevant[:j] + [relevant[0]] + irrelevant[j:])) for j in range(k)]


# ---------------------------------------------------------------- oracle selection (Table 2)


def oracle_select(question: Question, scores: Mapping[str, float] | Sequence[float], k: int = 5,
                  pool_size: int = 25, name: str = "oracle", order: str = "rank") -> Context:
    """The ``k`` passages of the top ``pool_size`` with the highest score (ties: better pool rank
    first). ``scores``: {docid: score} covering the pool, or one score per pool passage in rank
    order; e.g. binary relevance ``{p.docid: float(p.relevant)}``, eRAG, or utility. ``order``:
    ``"rank"`` (pool rank order inside the context) or ``"score"`` (best first). A pool shorter
    than k gives all of it. cid ``f"{qid}:{name}"``."""
    _check_sizes(k, 1, pool_size, 0.5)
    if order not in ("rank", "score"):
        raise InputError(f"order={order!r} must be 'rank' or 'score'")
    pool = question.passages[:pool_size]
    values = _pool_scores(question.qid, pool, scores)
    best = np.lexsort((np.arange(len(pool)), -values))[:k]  # last key is primary: score desc, then rank
    if order == "rank":
        best = np.sort(best)
    return Context(qid=question.qid, cid=f"{question.qid}:{name}", docids=tuple(pool[i].docid for i in best))


def _pool_scores(qid: str, pool: Sequence[Passage], scores: Mapping[str, float] | Sequence[float]) -> np.ndarray:
    if isinstance(scores, Mapping):
        missing = [p.docid for p in pool if p.docid not in scores]
        if missing:
            raise InputError(f"question {qid!r}: no score for passage {missing[0]!r} ({len(missing)} of the "
                             f"pool's {len(pool)} missing; give a score for every pooled passage)")
        values = np.array([scores[p.docid] for p in pool], dtype=float)
    else:
        if len(scores) != len(pool):
            raise InputError(f"question {qid!r}: {len(scores)} scores for a pool of {len(pool)} passages "
                             "(give one score per pooled passage, in rank order)")
        values = np.asarray(scores, dtype=float)
    if not np.all(np.isfinite(values)):
        raise InputError(f"question {qid!r}: scores must be finite numbers (found NaN or infinity)")
    return values
