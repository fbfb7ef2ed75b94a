"""Set-based metrics (seed 000 §6): the seed's worked example, a brute-force oracle, properties."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg.errors import InputError
from udcg.metrics.setbased import grade_counts, rarity_weights, set_metrics

BASE = {1: 0.0, 2: 0.0, 3: 0.1, 4: 0.5, 5: 1.0}


def brute_weights(pool):
    """The definition, written out per grade."""
    n = len(pool)
    if pool.count(5) == 0:
        return {5: 1.0, 4: 1.0, 3: 0.2, 2: 0.0, 1: 0.0}
    r = {g: (BASE[g] / (pool.count(g) / n) if pool.count(g) else 0.0) for g in BASE}
    return {5: 1.0, 4: min(r[4] / r[5], 1.0), 3: min(r[3] / r[5], 0.25), 2: 0.0, 1: 0.0}


def brute_oracle(pool, w, K):
    """max over every subset of size min(K, |pool|) — exponential, only for small pools."""
    size = min(K, len(pool))
    return max(sum(w[g] for g in s) for s in itertools.combinations(pool, size))


def test_seed_worked_example():
    # seed 000 §5: global [5,4,4,3,3,3,2,1], top-4 [4,3,3,3].
    # p5=1/8, p4=2/8, p3=3/8 -> r5=8, r4=2, r3=4/15 -> w4=0.25, w3=1/30
    # G_obs = 0.25 + 3/30 = 0.35; G_oracle = 1 + 0.25 + 0.25 + 1/30 = 46/30 -> 0.35 * 30/46 = 10.5/46
    out = set_metrics([[4, 3, 3, 3]], grade_counts([5, 4, 4, 3, 3, 3, 2, 1])[None])
    assert out["RA-nWG"][0] == pytest.approx(10.5 / 46, abs=1e-15)  # 0.228260869...
    assert out["N-Recall4+"][0] == pytest.approx(1 / 3)  # one of min(4, 3) grade>=4 passages
    assert out["N-Recall5"][0] == 0.0
    assert out["Precision4+"][0] == 0.25
    assert out["Harm"][0] == 0.0


def test_fallback_and_na():
    # no grade 5: fixed weights w4 = 1, w3 = 0.2
    assert np.allclose(rarity_weights(grade_counts([4, 3, 1])[None]), [[0, 0, 0.2, 1, 1]])
    out = set_metrics([[4, 3]], grade_counts([4, 3, 1])[None])
    assert out["RA-nWG"][0] == pytest.approx(1.0)
    assert np.isnan(out["N-Recall5"][0])  # R5 = 0 -> NA, not 0
    # only junk in the corpus: the oracle gain is 0 -> NA
    junk = set_metrics([[1, 2]], grade_counts([1, 2, 2])[None])
    assert np.isnan(junk["RA-nWG"][0]) and np.isnan(junk["N-Recall4+"][0])
    assert junk["Harm"][0] == 1.0


def test_proc_and_percent_proc():
    corpus = grade_counts([5, 4, 4, 3, 3, 3, 2, 1])[None]
    pool = grade_counts([4, 4, 3, 3, 3, 2])[None]  # the retriever missed the only 5
    out = set_metrics([[4, 3, 3, 3]], corpus, pool_counts=pool)
    # G_pool(4) = 0.25 + 0.25 + 1/30 + 1/30
    g_pool, g_oracle = 0.5 + 2 / 30, 46 / 30
    assert out["PROC"][0] == pytest.approx(g_pool / g_oracle)
    assert out["%PROC"][0] == pytest.approx(out["RA-nWG"][0] / out["PROC"][0])
    with pytest.raises(InputError, match="subset"):
        set_metrics([[4]], corpus, pool_counts=grade_counts([5, 5])[None])


pools = st.lists(st.integers(1, 5), min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(pools, st.integers(1, 6), st.data())
def test_against_brute_force(pool, K, data):
    size = min(K, len(pool))
    chosen = data.draw(st.permutations(range(len(pool))))[:size]
    topk = [pool[i] for i in chosen] + [0] * (K - size)  # empty slots when the pool is small
    w = brute_weights(pool)
    oracle = brute_oracle(pool, w, K)
    out = set_metrics([topk], grade_counts(pool)[None], pool_counts=grade_counts([pool[i] for i in chosen])[None], k=K)
    expected = sum(w[g] for g in topk if g) / oracle if oracle > 0 else np.nan
    assert out["RA-nWG"][0] == pytest.approx(expected, nan_ok=True)
    if oracle > 0:
        assert 0 <= out["RA-nWG"][0] <= 1 + 1e-12
        # the pool is the chosen set itself, so the selection realises all of the pool's potential
        assert out["%PROC"][0] == pytest.approx(1.0) or np.isnan(out["%PROC"][0])
    # set-based: the order inside the top-K does not matter
    again = set_metrics([topk[::-1]], grade_counts(pool)[None], k=K)
    assert again["RA-nWG"][0] == pytest.approx(out["RA-nWG"][0], nan_ok=True)


def test_vectorised_equals_per_query():
    rng = np.random.default_rng(1)
    corpus = rng.integers(0, 6, size=(50, 5))
    topk = np.stack([rng.permutation(np.repeat(np.arange(1, 6), c))[:5] if c.sum() >= 5 else
                     np.r_[np.repeat(np.arange(1, 6), c), np.zeros(5 - c.sum(), int)] for c in corpus])
    full = set_metrics(topk, corpus)
    for i in range(50):
        one = set_metrics(topk[i:i + 1], corpus[i:i + 1])
        for name, v in one.items():
            assert v[0] == pytest.approx(full[name][i], nan_ok=True)


def test_bad_grades():
    with pytest.raises(InputError, match="1..5"):
        set_metrics([[6]], [[0, 0, 0, 0, 1]])
    with pytest.raises(InputError, match="positive"):
        set_metrics([[5]], [[0, 0, 0, 0, 1]], k=0)
    with pytest.raises(InputError, match="1..5"):
        grade_counts([0, 3])
