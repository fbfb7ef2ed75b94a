"""The tie decomposition (``udcg.metrics.ties``) and ``udcg correlate --ties``: on the published NQ
run with the 1.5B reader it gives the audit's figures (issue #34: 17% of the outcome-differing pairs
tied in nDCG, UDCG 0.734 right on them against 0.5, 0.779 against 0.776 on the others); correlate
warns below 20 usable questions."""

from __future__ import annotations

import gzip
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from udcg.cli import main
from udcg.metrics.ties import tie_decomposition

RUN = Path(__file__).resolve().parents[1] / "docs" / "results" / "nq-qwen1.5b" / "data" / "contexts.jsonl.gz"
SCORE = {"correct": 2.0, "abstained": 1.0, "wrong": 0.0}


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in gzip.open(RUN, "rt")]


def _arrays(rows):
    return (np.array([r["metrics"]["UDCG"] for r in rows]), np.array([r["metrics"]["nDCG"] for r in rows]),
            np.array([SCORE[r["outcome"]] for r in rows]), np.array([r["qid"] for r in rows]))


def test_the_published_nq_1_5b_run_gives_the_audits_figures(rows):
    t = tie_decomposition(*_arrays(rows), metric_name="UDCG", baseline_name="nDCG")
    assert (t.n_pairs, t.n_tied, t.n_questions) == (2609, 433, 106)
    assert round(t.share_tied, 2) == 0.17 and round(t.tied_metric, 3) == 0.734
    assert (round(t.untied_metric, 3), round(t.untied_baseline, 3)) == (0.779, 0.776)
    assert t.to_dict()["tied_baseline"] == 0.5


def test_it_splits_the_pooled_pairwise_accuracy_as_a_naive_loop_does(rows):
    a, b, o, g = _arrays(rows[:200])
    right = {"a": [], "b": [], "tied": []}
    for i, j in combinations(range(len(o)), 2):
        if g[i] != g[j] or o[i] == o[j]:
            continue
        for name, m in (("a", a), ("b", b)):
            right[name].append(0.5 if m[i] == m[j] else float((m[i] - m[j]) * (o[i] - o[j]) > 0))
        right["tied"].append(b[i] == b[j])
    t = tie_decomposition(a, b, o, g)
    tied = np.array(right["tied"])
    assert t.n_pairs == len(tied) and t.n_tied == tied.sum()
    assert t.tied_metric == pytest.approx(np.mean(np.array(right["a"])[tied]))
    assert t.untied_metric == pytest.approx(np.mean(np.array(right["a"])[~tied]))
    assert t.untied_baseline == pytest.approx(np.mean(np.array(right["b"])[~tied]))
    overall = t.share_tied * t.tied_metric + (1 - t.share_tied) * t.untied_metric
    assert overall == pytest.approx(np.mean(right["a"]))


def test_undefined_values_and_bad_shapes():
    t = tie_decomposition([0.3, np.nan, 0.5, 0.1], [0.2, 0.2, 0.2, 0.4], [1, 0, 0, 1], ["q", "q", "q", "r"])
    assert (t.n_pairs, t.n_tied) == (1, 1) and t.tied_metric == 0.0  # the NaN context drops out; r has one context
    with pytest.raises(Exception, match="one value per context"):
        tie_decomposition([0.1], [0.1, 0.2], [1], ["q"])


def test_correlate_prints_it_and_warns_below_20_questions(rows, tmp_path, capsys):
    path = tmp_path / "contexts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["correlate", str(path), "--metrics", "UDCG,nDCG", "--ties", "nDCG", "--n-boot", "200"]) == 0
    out, err = capsys.readouterr()
    assert "nDCG scores 433 equal (17%); on those UDCG orders 0.734 right against nDCG's 0.5" in out
    assert "on the other 2176 pairs UDCG orders 0.779 right, nDCG 0.776" in out and "warning" not in err
    assert "p vs UDCG: 100,000 seeded random sign flips" in err and "standard error at most 0.0032" in err
    few = [r for r in rows if r["qid"] in sorted({r["qid"] for r in rows})[:12]]
    path.write_text("".join(json.dumps(r) + "\n" for r in few))
    assert main(["correlate", str(path), "--metrics", "UDCG,nDCG", "--n-boot", "200"]) == 0
    err = capsys.readouterr().err
    assert "warning: only" in err and "below 20 the intervals and p-values rest on too few questions" in err
    assert main(["correlate", str(path), "--metrics", "UDCG,nDCG", "--ties", "UDCG", "--n-boot", "200"]) == 2
    assert "must differ from UDCG" in capsys.readouterr().err


def test_ties_by_question_by_hand_and_pooled_like_the_decomposition():
    from udcg.metrics.ties import ties_by_question

    # q1: outcomes 1, 0, -1; baseline ties contexts 0 and 1; metric orders every pair right
    # q2: outcomes equal: no pair; q3: outcomes 1, -1, baseline orders them wrong, metric ties them
    metric = [0.9, 0.5, 0.1, 0.3, 0.3, 0.2, 0.2]
    baseline = [0.5, 0.5, 0.1, 0.3, 0.3, 0.1, 0.8]
    outcome = [1, 0, -1, 0, 0, 1, -1]
    groups = ["q1", "q1", "q1", "q2", "q2", "q3", "q3"]
    by_q = ties_by_question(metric, baseline, outcome, groups)
    assert set(by_q) == {"q1", "q3"}
    assert by_q["q1"] == (1.0, 1.0, 1.0)  # one tied pair (right), two untied pairs (both right for both)
    t, u, v = by_q["q3"]
    assert np.isnan(t) and (u, v) == (0.5, 0.0)  # no tied pair; the metric ties (1/2), the baseline is wrong
    whole = tie_decomposition(metric, baseline, outcome, groups)
    assert (whole.n_questions, whole.n_pairs, whole.n_tied) == (2, 4, 1)
    assert (whole.tied_metric, whole.untied_metric, whole.untied_baseline) == (1.0, 2.5 / 3, 2 / 3)
    empty = tie_decomposition([0.1, 0.2], [0.1, 0.2], [1, 1], ["q", "q"])
    assert empty.n_pairs == 0 and np.isnan(empty.tied_metric)
