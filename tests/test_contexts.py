"""Context sampling (§7.2), position contexts (Fig. 1) and oracle selection (Table 2)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg.errors import InputError
from udcg.experiment import contexts as cx
from udcg.records import Passage, Question


def _question(flags, qid="q"):
    """A pool in rank order: flags[i] is the relevance of the passage at rank i (pid 'p{i}')."""
    return Question(qid, "?", ("a",), tuple(Passage(f"p{i}", f"text {i}", relevant=f) for i, f in enumerate(flags)))


def _rank(docid):
    return int(docid[1:])


def _expected_positive(n_rel, n_irr, k, n_contexts, balance):
    if n_rel == 0:
        return 0
    if n_irr < k:
        return n_contexts
    return math.floor(balance * n_contexts + 0.5)


@settings(max_examples=300, deadline=None)
@given(
    flags=st.lists(st.booleans(), min_size=1, max_size=30),
    k=st.integers(1, 8),
    n_contexts=st.integers(1, 12),
    pool_size=st.integers(1, 30),
    balance=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
    seed=st.integers(0, 10**6),
)
def test_sample_contexts_properties(flags, k, n_contexts, pool_size, balance, seed):
    q = _question(flags)
    pool = q.passages[:pool_size]
    if len(pool) < k:
        with pytest.raises(InputError, match="fewer than k"):
            cx.sample_contexts(q, k=k, n_contexts=n_contexts, pool_size=pool_size, seed=seed, balance=balance)
        return
    out = cx.sample_contexts(q, k=k, n_contexts=n_contexts, pool_size=pool_size, seed=seed, balance=balance)
    assert len(out) == n_contexts
    assert [c.cid for c in out] == [f"q:{i}" for i in range(n_contexts)]
    relevant = {p.docid for p in pool if p.relevant}
    pool_docids = {p.docid for p in pool}
    for c in out:
        assert c.qid == "q" and len(c.docids) == k and len(set(c.docids)) == k  # no duplicate passage
        assert set(c.docids) <= pool_docids  # only the top pool_size
        assert [_rank(p) for p in c.docids] == sorted(_rank(p) for p in c.docids)  # rank order
    positive = [any(p in relevant for p in c.docids) for c in out]
    n_rel = len(relevant)
    n_pos = _expected_positive(n_rel, len(pool) - n_rel, k, n_contexts, balance)
    assert positive == [True] * n_pos + [False] * (n_contexts - n_pos)
    assert cx.context_balance(q, out) == pytest.approx(n_pos / n_contexts)
    # distinct sets whenever the pool has enough of them
    n_neg_sets = math.comb(len(pool) - n_rel, k)
    n_pos_sets = math.comb(len(pool), k) - n_neg_sets
    pos_sets = [frozenset(c.docids) for c, f in zip(out, positive) if f]
    neg_sets = [frozenset(c.docids) for c, f in zip(out, positive) if not f]
    assert len(set(pos_sets)) == min(len(pos_sets), n_pos_sets)
    assert len(set(neg_sets)) == min(len(neg_sets), n_neg_sets)


def test_balanced_sampling_paper_setting():
    q = _question([i in (0, 7, 19) for i in range(25)])
    out = cx.sample_contexts(q)  # k=5, 10 contexts, top 25, balance 0.5
    assert cx.context_balance(q, out) == 0.5 and len({frozenset(c.docids) for c in out}) == 10


def test_determinism_seed_and_question_order_independence():
    qs = [_question([i % 4 == 0 for i in range(25)], qid=f"q{j}") for j in range(6)]
    a, summary_a = cx.sample_all_contexts(qs, seed=3)
    b, _ = cx.sample_all_contexts(qs[::-1], seed=3)
    assert sorted(a, key=lambda c: c.cid) == sorted(b, key=lambda c: c.cid)
    assert a == cx.sample_all_contexts(qs, seed=3)[0]
    assert a != cx.sample_all_contexts(qs, seed=4)[0]
    # same pool, different qid: different draws (the seed mixes in the qid)
    assert [c.docids for c in a if c.qid == "q0"] != [c.docids for c in a if c.qid == "q1"]
    assert summary_a["questions"] == 6 and summary_a["contexts"] == 60 and summary_a["balanced"] == 6
    assert summary_a["achieved_balance"] == 0.5


def test_positive_contexts_are_uniform_over_sets_with_a_relevant_passage():
    # pool: 2 relevant, 3 irrelevant, k=2 -> C(5,2) - C(3,2) = 7 sets hold a relevant passage
    q = _question([True, False, True, False, False])
    counts = Counter(cx.sample_contexts(q, k=2, n_contexts=1, balance=1.0, seed=s)[0].docids for s in range(7000))
    assert len(counts) == 7
    expected, sd = 1000, math.sqrt(7000 * (1 / 7) * (6 / 7))
    assert all(abs(c - expected) < 4.5 * sd for c in counts.values()), counts


def test_large_pools_draw_the_number_of_relevant_passages_hypergeometrically():
    # 2 relevant + 25 irrelevant, k=5: 27,600 sets hold a relevant passage (drawn by rejection, not
    # enumerated); P(both relevant) = C(25,3) / (C(27,5) - C(25,5)) = 2300 / 27600
    q = _question([True, True] + [False] * 25)
    draws = [cx.sample_contexts(q, k=5, n_contexts=1, pool_size=27, balance=1.0, seed=s)[0].docids for s in range(4000)]
    both = sum({"p0", "p1"} <= set(d) for d in draws)
    p = 2300 / 27600
    assert abs(both - 4000 * p) < 4.5 * math.sqrt(4000 * p * (1 - p))
    first = sum("p0" in d for d in draws) / 4000
    assert first == pytest.approx(0.5 + p / 2, abs=0.04)  # each relevant passage equally likely
    irr = Counter(docid for d in draws for docid in d if docid not in ("p0", "p1"))
    assert len(irr) == 25 and max(irr.values()) / min(irr.values()) < 1.35


def test_fallbacks_are_reported():
    no_rel = _question([False] * 25, qid="none")
    few_irr = _question([True] * 22 + [False] * 3, qid="few")
    short = _question([True, False], qid="short")
    ok = _question([i < 3 for i in range(25)], qid="ok")
    out, summary = cx.sample_all_contexts([no_rel, few_irr, short, ok])
    assert summary["no_relevant_in_pool"] == ["none"] and summary["too_few_irrelevant"] == ["few"]
    assert summary["skipped"] == ["short"] and summary["questions"] == 3 and summary["balanced"] == 1
    assert summary["achieved_balance"] == pytest.approx((0.0 + 1.0 + 0.5) / 3)
    assert cx.context_balance(no_rel, [c for c in out if c.qid == "none"]) == 0.0
    assert cx.context_balance(few_irr, [c for c in out if c.qid == "few"]) == 1.0


def test_bad_inputs():
    q = _question([True, None, False, False, False, False])
    with pytest.raises(InputError, match="passage 'p1' has no relevance label"):
        cx.sample_contexts(q, k=2)
    good = _question([True, False, False])
    for kwargs, match in (({"k": 0}, "k=0"), ({"balance": 1.5}, "balance"), ({"n_contexts": -1}, "n_contexts"),
                          ({"seed": -1}, "seed")):
        with pytest.raises(InputError, match=match):
            cx.sample_contexts(good, **{"k": 2, **kwargs})


# ---------------------------------------------------------------- position contexts


def test_position_contexts_move_the_best_relevant_passage():
    q = _question([False, False, True, False, True, False, False])
    out = cx.position_contexts(q, k=4)
    assert [c.docids for c in out] == [
        ("p2", "p0", "p1", "p3"), ("p0", "p2", "p1", "p3"), ("p0", "p1", "p2", "p3"), ("p0", "p1", "p3", "p2")]
    assert [c.cid for c in out] == ["q:pos0", "q:pos1", "q:pos2", "q:pos3"]
    assert cx.position_contexts(_question([False] * 6), k=3) == []
    assert cx.position_contexts(_question([True, True, False]), k=3) == []
    assert [c.docids for c in cx.position_contexts(_question([False, True]), k=1)] == [("p1",)]


# ---------------------------------------------------------------- oracle selection


def test_oracle_select_ties_by_rank_and_orders():
    q = _question([False] * 6)
    scores = {"p0": 0.1, "p1": 0.9, "p2": 0.5, "p3": 0.9, "p4": 0.5, "p5": 0.0}
    assert cx.oracle_select(q, scores, k=3).docids == ("p1", "p2", "p3")
    assert cx.oracle_select(q, scores, k=3, order="score").docids == ("p1", "p3", "p2")
    assert cx.oracle_select(q, [0.1, 0.9, 0.5, 0.9, 0.5, 0.0], k=4, name="utility").cid == "q:utility"
    assert cx.oracle_select(q, scores, k=3, pool_size=3).docids == ("p0", "p1", "p2")
    assert len(cx.oracle_select(q, scores, k=10).docids) == 6


def test_oracle_select_binary_relevance_picks_relevant_first():
    q = _question([False, True, False, False, True, False, True])
    binary = {p.docid: float(p.relevant) for p in q.passages}
    assert cx.oracle_select(q, binary, k=4).docids == ("p0", "p1", "p4", "p6")


@pytest.mark.parametrize("scores, match", [
    ({"p0": 1.0}, "no score for passage 'p1'"),
    ([1.0, 2.0], "2 scores for a pool of 3"),
    ([1.0, float("nan"), 0.0], "finite"),
])
def test_oracle_select_bad_scores(scores, match):
    with pytest.raises(InputError, match=match):
        cx.oracle_select(_question([True, False, False]), scores, k=2)


# ---------------------------------------------------------------- passage order inside a context


def test_order_pool_keeps_the_contexts_and_shuffled_permutes_each_seeded():
    q = _question([True, False, True, False, False, True, False, False, False, False], qid="q7")
    drawn = cx.sample_contexts(q, k=5, n_contexts=8, pool_size=10, seed=3)
    assert cx.order_passages(drawn, "pool", seed=3) == drawn  # the default: today's prompts, unchanged
    shuffled = cx.order_passages(drawn, "shuffled", seed=3)
    assert [c.cid for c in shuffled] == [c.cid for c in drawn]
    assert all(sorted(s.docids) == sorted(d.docids) for s, d in zip(shuffled, drawn))  # same passages
    assert any(s.docids != d.docids for s, d in zip(shuffled, drawn))  # in another order
    assert cx.order_passages(drawn, "shuffled", seed=3) == shuffled  # seeded
    assert cx.order_passages(drawn[::-1], "shuffled", seed=3) == shuffled[::-1]  # per context, not per list
    assert cx.order_passages(drawn, "shuffled", seed=4) != shuffled
    with pytest.raises(InputError, match="pool, shuffled"):
        cx.order_passages(drawn, "random")
