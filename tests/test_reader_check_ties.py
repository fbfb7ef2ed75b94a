"""scripts/reader_check_ties.py (issue #51, post hoc): the published table rebuilds from the runs' data,
and the readers' contrast and its swap test are checked by hand and against exact enumeration."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import load_script

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def test_the_published_table_rebuilds(tmp_path, monkeypatch, capsys):
    published = RESULTS / "reader-check-ties"
    monkeypatch.chdir(RESULTS.parents[1])
    out = tmp_path / "reader-check-ties"
    assert load_script("reader_check_ties").main(["--out", str(out)]) == 0
    capsys.readouterr()
    readme = (out / "README.md").read_text(encoding="utf-8").replace(out.as_posix(), "docs/results/reader-check-ties")
    assert readme == (published / "README.md").read_text(encoding="utf-8")
    assert (out / "per-question.jsonl.gz").read_bytes() == (published / "per-question.jsonl.gz").read_bytes()


def _exact(a, b):
    """The swap test's two-sided p by enumerating every swap vector (no +1: the exact p)."""
    observed = np.nanmean(a) - np.nanmean(b)
    null = []
    for s in itertools.product([False, True], repeat=len(a)):
        s = np.array(s)
        x, y = np.where(s, b, a), np.where(s, a, b)
        if np.isfinite(x).any() and np.isfinite(y).any():
            null.append(np.nanmean(x) - np.nanmean(y))
    null = np.array(null)
    return min(1.0, 2 * min(np.mean(null <= observed + 1e-12), np.mean(null >= observed - 1e-12)))


def test_the_swap_test_is_the_exact_permutation_p():
    module = load_script("reader_check_ties")
    nan = float("nan")
    a = np.array([0.5, 0.2, nan, 0.4, 0.1, 0.3, nan, 0.5, 0.25, 0.0])
    b = np.array([0.0, nan, 0.1, -0.1, 0.2, 0.0, -0.2, nan, 0.05, 0.1])
    exact = _exact(a, b)
    assert 0.005 < exact < 0.2
    assert module.swap_test(a, b, 200_000, 0) == pytest.approx(exact, abs=0.004)  # 4 Monte Carlo SE
    assert module.swap_test(b, a, 20_000, 0) == module.swap_test(b, a, 20_000, 0)  # seeded
    assert module.swap_test(a, a, 1_000, 0) == 1.0  # nothing distinguishes the readers


def test_the_contrast_by_hand():
    """Reader A has tied pairs on q1-q3 (S2 0.5, 0.3, 0.1: mean 0.3), B on q2-q4 (0.1, 0.0, -0.1: mean 0)."""
    module = load_script("reader_check_ties")
    c = module.s2_contrast({"q1": 0.5, "q2": 0.3, "q3": 0.1}, {"q2": 0.1, "q3": 0.0, "q4": -0.1},
                           ["q4", "q3", "q2", "q1", "q5"], module.Settings(flips=2_000, boot=2_000))
    assert (c.questions, c.n_a, c.n_b, c.n_both) == (5, 3, 3, 2)
    assert (c.mean_a, c.mean_b, c.delta) == pytest.approx((0.3, 0.0, 0.3))
    assert c.ci[0] < 0.3 < c.ci[1] and 0 < c.p <= 1
