"""Measures as values: printing matches ir_measures, parsing is case-insensitive with aliases."""

from __future__ import annotations

import ir_measures
import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.errors import InputError
from udcg.metrics.measures import SPECS, Measure, make_measure, parse_measure, parse_measures

IR_MEASURES_SPELLINGS = ["P@5", "R@10", "nDCG@10", "nDCG", "RR", "RR@10", "AP", "AP@100", "Rprec",
                         "Success@5", "ERR@10", "P(rel=2)@5", "AP(rel=2)", "nDCG(dcg='exp-log2')@10"]


@pytest.mark.parametrize("text", IR_MEASURES_SPELLINGS)
def test_prints_exactly_as_ir_measures(text):
    ours = parse_measure(text)
    assert str(ours) == text
    assert str(ir_measures.parse_measure(text)) == text


def test_case_insensitive_and_aliases():
    got = [str(m) for m in parse_measures("p@5, NDCG@10,rr,mrr@10,map,Map@100,hit@3,HITS@1,rprec,"
                                          "err@20,f1@5,auc-pr,AUCPR@50,recall@7,dcg@3")]
    assert got == ["P@5", "nDCG@10", "RR", "RR@10", "AP", "AP@100", "Success@3", "Success@1", "Rprec",
                   "ERR@20", "F1@5", "AUC-PR", "AUC-PR@50", "R@7", "DCG@3"]


def test_values_are_hashable_equal_and_defaults_dropped():
    assert parse_measure("P(rel=1)@5") == Measure("P", 5) == parse_measure("p@5")
    assert hash(parse_measure("MRR")) == hash(Measure("RR"))
    assert parse_measure("ERR(max_grade=4)@10") == Measure("ERR", 10)
    assert str(parse_measure("ERR(max_grade=3)@10")) == "ERR(max_grade=3)@10"
    assert parse_measure("nDCG(dcg=exp-log2)@5").param("dcg") == "exp-log2"
    assert Measure("AP").param("rel") == 1
    assert len({parse_measure("map"), parse_measure("AP"), parse_measure("ap")}) == 1
    assert parse_measures("P@5,p@5,P(rel=2)@5") == [Measure("P", 5), Measure("P", 5, (("rel", 2),))]


@pytest.mark.parametrize("text, fragment", [
    ("bleu@4", "unknown measure 'bleu'"),
    ("P", "needs a cutoff"),
    ("Rprec@5", "takes no cutoff"),
    ("P@0", "positive integer"),
    ("P@x", "positive integer"),
    ("P(depth=3)@5", "no parameter 'depth'"),
    ("nDCG(dcg='exp')@5", "not known"),
    ("P(rel=0)@5", "positive number"),
    ("P(rel)@5", "key=value"),
    ("", "no measures"),
    (" , ", "no measures"),
    ("P@5 nDCG@10", "cannot read"),
])
def test_bad_measures_raise_input_error(text, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_measures(text)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(InputError) as e:
        parse_measure("foo@5", where="--metrics")
    message = str(e.value)
    assert message.startswith("--metrics:")
    for name in SPECS:
        assert name in message


@given(st.sampled_from(sorted(SPECS)), st.integers(1, 1000), st.sampled_from([1, 2, 3]))
def test_str_round_trips(name, k, rel):
    cutoff_rule, defaults = SPECS[name]
    cutoff = None if cutoff_rule == "none" else k
    params = {"rel": rel} if "rel" in defaults else {}
    m = make_measure(name, cutoff, **params)
    assert parse_measure(str(m)) == m
    assert parse_measure(str(m).upper() if name not in ("nDCG", "DCG") else str(m).lower()) == m
