"""Cohen's kappa and confusion matrices: hand toys and a cross-check against scikit-learn."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion

from udcg.grade.agreement import cohen_kappa, compare_labels, confusion_matrix


def test_hand_toy():
    # A: R R R I I I I I I I ; B: R R I R I I I I I I
    a = ["R"] * 3 + ["I"] * 7
    b = ["R", "R", "I", "R"] + ["I"] * 6
    m = confusion_matrix(a, b, ["R", "I"])
    assert m.tolist() == [[2, 1], [1, 6]]
    # p_o = 8/10; p_e = (3*3 + 7*7)/100 = 0.58; kappa = (0.8 - 0.58)/(0.42) = 0.5238...
    assert cohen_kappa(a, b, ["R", "I"]) == pytest.approx(0.22 / 0.42)


def test_perfect_opposite_and_degenerate():
    assert cohen_kappa(["a", "b"], ["a", "b"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa(["a", "a"], ["a", "a"]))  # p_e = 1: undefined, as sklearn
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError):
        cohen_kappa(["a"], ["a", "b"])


@given(st.lists(st.tuples(st.sampled_from("xyz"), st.sampled_from("xyz")), min_size=1, max_size=60))
def test_matches_sklearn(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    labels = ["x", "y", "z"]
    assert confusion_matrix(a, b, labels).tolist() == sk_confusion(a, b, labels=labels).tolist()
    ours = cohen_kappa(a, b, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns when kappa is undefined
        theirs = cohen_kappa_score(a, b, labels=labels)
    if math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_compare_pairs_by_key_and_counts_what_it_leaves_out():
    a = [{"qid": "q", "pid": str(i), "label": lab, "judge": "rules"} for i, lab in
         enumerate(["relevant", "irrelevant", "irrelevant", None, "relevant"])]
    b = [{"qid": "q", "pid": str(i), "label": lab, "judge": "llm"} for i, lab in
         [(4, "relevant"), (0, "irrelevant"), (1, "irrelevant"), (2, None), (3, "relevant"), (9, "relevant")]]
    ag = compare_labels(a, b, labels=["relevant", "irrelevant"])
    # pairs kept: pid 0 (rel, irr), 1 (irr, irr), 4 (rel, rel); pid 2 B unparseable, pid 3 A unparseable
    assert ag.matrix.tolist() == [[1, 1], [0, 1]]
    assert (ag.n, ag.unparseable_a, ag.unparseable_b, ag.unmatched) == (3, 1, 1, 1)
    assert ag.observed == pytest.approx(2 / 3)
    assert ag.kappa == pytest.approx(cohen_kappa_score(["relevant", "irrelevant", "relevant"],
                                                       ["irrelevant", "irrelevant", "relevant"]))
    text = ag.to_text()
    assert "A = rules" in text and "B = llm" in text and "Cohen's kappa = 0.400" in text
