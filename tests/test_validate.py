"""udcg validate: the studies on hand-computed toys, the pipeline with a scripted reader (content,
resumability, byte-identical reruns after kill -9), and the smoke config with SmolLM2-135M."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from tests.conftest import ScriptedBackend
from udcg.flows.scoring import read_contexts
from udcg.errors import InputError
from udcg.experiment import context_records, studies
from udcg.io import contexts
from udcg.io.contexts import ContextFile
from udcg.experiment.config import from_dict, load_config
from udcg.flows.correlate import correlation_table
from udcg.metrics.paired_tests import CorrelationTests
from udcg.experiment.validate import run_validation

REPO_ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- a scripted reader


def _h(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") / 2**32


WORDS = ("politician", "journalist", "composer", "actor", "dentist", "jockey", "novelist")  # occupations


def _reader_first(chat, candidates) -> dict[str, float]:
    """Abstains rarely on passages naming an occupation, often otherwise."""
    user = chat[-1]["content"].lower()
    p = 0.1 if any(w in user for w in WORDS) else 0.3 + 0.6 * _h(user)
    return {c: math.log(p) for c in candidates}


def _reader_continuation(chat, text) -> list[float]:
    return [-0.1 - _h(chat[-1]["content"] + text)] * max(1, len(text.split()))


def _reader_answer(chat, params) -> str:
    """The occupation a passage names (or a guess, or NO-RESPONSE)."""
    user = chat[-1]["content"].lower()
    hits = [w for w in WORDS if w in user]
    r = _h(user)
    return hits[0] if hits and r < 0.7 else "NO-RESPONSE" if r < 0.85 else "banker"


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def scripted_reader(delay: float = 0.0, kill_after: int | None = None, reads: bool = False) -> ScriptedBackend:
    """Deterministic stand-in for an LLM reader over the PopQA sample; with ``reads``, a
    ``PromptReader`` (the same three values from one ``read`` call). ``delay`` seconds per call;
    after ``kill_after`` generate calls (read calls with ``reads``), SIGKILL to its own process."""
    return ScriptedBackend(first=_reader_first, continuation=_reader_continuation, answer=_reader_answer,
                           reads=reads, delay=delay, fault=None if kill_after is None else _sigkill,
                           fault_on="read" if reads else "generate", fault_after=kill_after or 0)


def tally(reader: ScriptedBackend) -> dict[str, int]:
    """The reader's work: chats asked for p_abs (next_token) and log-likelihoods (continuation),
    generate calls and the chats they answered (generated), read calls."""
    return {"next_token": reader.n_chats("next_token_logprobs"), "continuation": reader.n_chats("continuation_logprobs"),
            "generate": reader.n_calls("generate"), "generated": reader.n_chats("generate"), "read": reader.n_calls("read")}


def scripted_config(out: Path, **sections) -> dict:
    raw = {"name": "scripted", "output": str(out), "data": {"questions": "popqa-sample", "limit": 8},
           "pool": {"size": 8}, "reader": {"model": "scripted", "chunk_size": 8, "max_new_tokens": 8},
           "contexts": {"k": 3, "n_contexts": 4}, "metrics": {"n_boot": 500},
           "studies": {"k_values": [1, 3], "oracle_k": 3}}
    for key, value in sections.items():
        raw.setdefault(key, {}).update(value)
    return raw


def run_scripted(config_json: str, delay: float = 0.0, kill_after: int | None = None, reads: bool = False) -> dict:
    """Entry point for the subprocess of the resume tests."""
    reader = scripted_reader(delay, kill_after, reads)
    run_validation(from_dict(json.loads(config_json)), backends={"scripted": reader})
    return tally(reader)


def outputs(run_dir: Path) -> dict[str, bytes]:
    """Every output file except timings, caches and the resolved config (which names the folder)."""
    skip = {"run.json", "config.yaml"}
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in skip and "cache" not in p.relative_to(run_dir).parts}


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("scripted") / "run"
    reader = scripted_reader()
    result = run_validation(from_dict(scripted_config(out)), backends={"scripted": reader})
    return out, result, tally(reader)


# ---------------------------------------------------------------- studies on toys


def test_split_is_by_question_seeded_and_order_free():
    qids = [f"q{i}" for i in range(10)]
    split = studies.split_questions(qids, 0.5, seed=3)
    assert sum(s == "train" for s in split.values()) == 5
    assert studies.split_questions(qids[::-1], 0.5, seed=3) == split
    assert studies.split_questions(qids, 0.5, seed=4) != split
    assert set(studies.split_questions(qids, 0.0, 0).values()) == {"test"}
    assert set(studies.split_questions(qids, 1.0, 0).values()) == {"train"}
    assert sum(s == "train" for s in studies.split_questions(qids[:3], 0.5, 0).values()) == 2  # 1.5 rounds up


def toy_scores():
    S = context_records.PassageScore
    return {"a": S(True, 0.2, True, grade=5, erag=1.0, answer_ll=-0.5), "b": S(False, 0.5, False, grade=2, erag=0.0, answer_ll=-3.0),
            "c": S(False, 0.9, False, grade=2, erag=0.5, answer_ll=-2.0), "d": S(True, 0.6, True, grade=None, erag=1.0)}


def test_context_record_holds_the_per_position_fields():
    rec = context_records.context_record("q", "q:0", "main", "test", ["b", "a"], toy_scores(), n_relevant=2,
                                         corpus_grades=[0, 2, 0, 0, 1])
    assert rec.relevant == (False, True) and rec.p_abs == (0.5, 0.2)
    assert rec.utilities == pytest.approx([-0.5, 0.8]) and rec.grades == (2, 5) and rec.erag == (0.0, 1.0)
    assert rec.answer_ll == (-3.0, -0.5) and rec.contains == (False, True) and rec.n_relevant == 2
    partial = context_records.context_record("q", "q:1", "main", "test", ["a", "d"], toy_scores(), 2, [0, 2, 0, 0, 1])
    assert partial.grades is None and partial.answer_ll is None  # d has neither: the metric becomes NA
    line = contexts.to_json(partial)
    assert "grades" not in line and "answer_ll" not in line


def test_score_records_by_hand():
    recs = [context_records.context_record("q", f"q:{i}", "main", "test", docids, toy_scores(), 2, [0, 2, 0, 0, 1])
            for i, docids in enumerate((["a", "b"], ["b", "c"], ["a", "d"]))]
    scored = studies.score_records(recs, ["UDCG", "P", "RR", "nDCG", "eRAG", "ANSWER_PROB", "RA-nWG"], gamma=1 / 3,
                                   ablations=True)
    assert all(r.metrics is None for r in recs)  # the input records are left as they were
    m0, m1, m2 = (r.metrics for r in scored)
    assert m0["UDCG"] == pytest.approx(expit((0.8 - 0.5 / 3) / 2))
    assert m1["UDCG"] == pytest.approx(expit((-0.5 - 0.1) / 3 / 2))
    assert m0["UDCG(rel-only)"] == pytest.approx(expit(0.8 / 2)) and m1["UDCG(rel-only)"] == pytest.approx(0.5)
    assert (m0["P"], m0["RR"], m1["RR"], m2["P"]) == (0.5, 1.0, 0.0, 1.0)
    assert m0["nDCG"] == pytest.approx(1 / (1 + 1 / math.log2(3)))  # one of the pool's 2 relevant, at rank 1
    assert m2["nDCG"] == pytest.approx(1.0)
    assert (m0["eRAG"], m1["eRAG"]) == (0.5, 0.25) and m0["ANSWER_PROB"] == pytest.approx(-1.75)
    assert m2["ANSWER_PROB"] is None and m2["RA-nWG"] is None  # d has no log-likelihood and no grade
    assert m0["RA-nWG"] == pytest.approx(1.0) and m1["RA-nWG"] == 0.0  # the one grade-5 passage is the oracle
    assert "UDCG_theta" not in m0  # no fitted model: left out, not invented
    with pytest.raises(InputError, match="several k"):
        studies.score_records(recs + [context_records.context_record("q", "x", "main", "test", ["a"], toy_scores(), 2, None)],
                              ["UDCG"], 1 / 3)


def graded(qid, cid, utilities, outcome, **metrics):
    return contexts.from_json({"qid": qid, "cid": cid, "split": "train", "relevant": [u > 0 for u in utilities],
                                      "utilities": utilities, "answer": "", "outcome": outcome, "metrics": metrics})


def test_correlate_matches_the_hand_ranking_and_leaves_na_out():
    recs = [graded("q1", "a", [0.9], "correct", M=0.9, N=0.1), graded("q1", "b", [-0.1], "abstained", M=0.5, N=0.5),
            graded("q1", "c", [-0.9], "wrong", M=0.1, N=None), graded("q2", "d", [0.5], "correct", M=1.0, N=0.0),
            graded("q2", "e", [0.5], "wrong", M=0.0, N=1.0), graded("q3", "f", [0.5], "correct", M=0.3, N=0.3),
            graded("q3", "g", [0.5], "correct", M=0.2, N=0.3), graded("q3", "h", [0.1], None, M=0.0, N=0.0)]
    table, notes = studies.correlate_records(recs, ["M", "N"], "M", "zero", 200, 0, "toy")
    rows = {r["metric"]: r for r in table.rows}
    assert rows["M"]["mean_rho"] == pytest.approx(1.0) and rows["M"]["n_questions"] == 2
    # N is NA on a context of q1: q1 has no rho for N (never NA -> 0, which would give 0.5); q2: -1
    assert rows["N"]["mean_rho"] == pytest.approx(-1.0) and rows["N"]["n_questions"] == 1
    assert rows["N"]["na_metric"] == 1 and rows["M"]["na_metric"] == 0
    assert rows["M"]["no_rho_outcome"] == 1  # q3's graded outcomes are all "correct"
    assert notes == {"contexts": 7, "ungraded_contexts": 1, "na_values": 1, "questions": 3}
    # M leads, but on 2 questions no Holm-corrected test tells it apart: no best mark
    assert rows["M"]["best"] == "" and rows["N"]["diff_vs_baseline"] == pytest.approx(-2.0)  # on q2 only
    assert (rows["M"]["pair_acc"], rows["N"]["pair_acc"]) == (1.0, 0.0)


def test_every_metric_read_off_the_graded_prompt_is_circular_at_k1_and_only_there():
    names = ["UDCG", "UDCG@1", "UDCG_theta", "UDCG_theta(rel-only)", "UDCG_theta(binary)", "UDCG(rel-only)",
             "ANSWER_PROB", "eRAG", "nDCG", "RR", "P", "Success", "containment@1", "RA-nWG"]
    one = [graded("q1", "a", [0.9], "correct"), graded("q1", "b", [-0.4], "wrong")]
    assert studies.circular_metrics(one, names) == ("UDCG", "UDCG@1", "UDCG_theta", "UDCG_theta(rel-only)",
                                                    "UDCG_theta(binary)", "UDCG(rel-only)", "ANSWER_PROB", "eRAG")
    two = [graded("q1", "a", [0.9, 0.1], "correct"), graded("q1", "b", [-0.4, 0.1], "wrong")]
    assert studies.circular_metrics(two, names) == () and studies.circular_metrics([], names) == ()


def test_fit_theta_is_deterministic_and_none_without_pairs():
    rng = np.random.default_rng(0)
    recs = []
    for q in range(6):
        for c in range(4):
            u = rng.uniform(-1, 1, 3).round(3).tolist()
            recs.append(graded(f"q{q}", f"{q}:{c}", u, "correct" if sum(u) > 0 else "wrong"))
    a, b = (studies.fit_theta_records(recs, "full", 0.01, seed=0) for _ in range(2))
    assert np.array_equal(a.coef_, b.coef_) and a.k_ == 3
    before = np.random.get_state()[1].copy()
    studies.fit_theta_records(recs, "binary", 0.01, seed=0)
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's global generator is left as it was
    same = [dataclasses.replace(r, outcome=dataclasses.replace(r.outcome, label="wrong")) for r in recs]
    assert studies.fit_theta_records(same, "full", 0.01, 0) is None


def test_position_and_oracle_tables_by_hand():
    def rec(cid, rel, outcome, **m):
        return contexts.from_json({"qid": cid.split(":")[0], "cid": cid, "relevant": rel, "answer": "", "outcome": outcome,
                                          "metrics": {"UDCG": 0.5, "RR": 1.0 / (1 + rel.index(True)) if True in rel else 0.0, **m}})

    pos = [rec("q1:pos0", [True, False], "correct"), rec("q1:pos1", [False, True], "wrong"),
           rec("q2:pos0", [True, False], "abstained"), rec("q2:pos1", [False, True], "wrong")]
    t = studies.position_table(pos, 2)
    assert [r["position"] for r in t.rows] == [1, 2]
    assert (t.rows[0]["correct"], t.rows[0]["abstained"], t.rows[0]["wrong"]) == (50.0, 50.0, 0.0)
    assert (t.rows[1]["wrong"], t.rows[1]["RR"], t.rows[1]["UDCG"]) == (100.0, 0.5, 0.5)
    assert (t.rows[0]["correct_low"], t.rows[0]["p_vs_1"]) == (pytest.approx(9.453, abs=1e-3), 1.0)  # 1 of 2 correct
    assert (t.rows[1]["correct_low"], t.rows[1]["p_vs_1"]) == (0.0, 1.0)  # q1 correct -> wrong: one discordant pair
    empty = studies.position_table(pos, 3).rows[2]  # no context has its relevant passage at position 3
    assert empty["n_questions"] == 0 and all(math.isnan(empty[c]) for c in ("correct_low", "correct_high", "p_vs_1"))
    orc = [rec("q1:oracle-binary", [True, False], "correct"), rec("q2:oracle-binary", [False, False], "abstained"),
           rec("q1:oracle-utility", [True, True], "correct"), rec("q2:oracle-utility", [False, False], None)]
    t = {r["selection"]: r for r in studies.oracle_table(orc, 2).rows}
    assert (t["binary"]["correct"], t["binary"]["abstained"], t["binary"]["with_relevant"]) == (50.0, 50.0, 50.0)
    assert t["utility"]["correct"] == 100.0 and t["utility"]["n_questions"] == 2  # the ungraded one is not counted
    assert math.isnan(t["binary"]["p_wrong"])  # the reference itself
    assert (t["utility"]["p_correct"], t["utility"]["p_wrong"]) == (1.0, 1.0)  # q1 correct in both; q2 ungraded

    wrong_to_abstain = [rec(f"q{i}:oracle-{sel}", [True], out) for i in range(6)
                        for sel, out in (("binary", "wrong"), ("utility", "abstained"))]
    t = {r["selection"]: r for r in studies.oracle_table(wrong_to_abstain, 1).rows}
    assert t["utility"]["p_wrong"] == pytest.approx(2 / 2 ** 6) and t["utility"]["p_correct"] == 1.0


def test_mcnemar_exact_by_hand_and_against_scipy():
    assert studies.mcnemar_exact(0, 0) == 1.0
    assert studies.mcnemar_exact(3, 0) == pytest.approx(2 / 8)  # all 3 discordant pairs one way: 2 · (1/2)³
    assert studies.mcnemar_exact(2, 2) == 1.0
    from scipy.stats import binomtest

    for b, c in [(1, 9), (10, 2), (7, 7), (0, 12), (15, 4)]:
        assert studies.mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue)
        assert studies.mcnemar_exact(b, c) == studies.mcnemar_exact(c, b)


def test_k_sweep_table_collects_each_k():
    recs = [graded("q1", "a", [0.9], "correct", M=0.9), graded("q1", "b", [-0.9], "wrong", M=0.1)]
    per_k = {k: studies.correlate_records(recs, ["M"], "M", "zero", 50, 0, f"k{k}")[0] for k in (3, 1)}
    t = studies.k_sweep_table(per_k)
    assert [(r["k"], r["metric"], r["mean_rho"]) for r in t.rows] == [(1, "M", 1.0), (3, "M", 1.0)]


# ---------------------------------------------------------------- pools


def test_bm25_pools_over_the_shared_nq_gold_passages(tmp_path):
    from udcg.io.sources import default_data_dir
    from udcg.experiment import questions

    data_dir = default_data_dir()
    if data_dir is None or not (data_dir / "nq-open-gold").is_dir():
        pytest.skip("no shared NQ data: set $UDCG_DATA_DIR to the folder holding nq-open-gold/")
    cfg = from_dict({"data": {"questions": "nq", "limit": 5, "select": "random"},
                     "pool": {"source": "bm25", "size": 10, "corpus": ["nq"], "corpus_relevant_only": True}}, "t.yaml")
    pooled, stats = questions.cached_pools(cfg, tmp_path)
    assert len(pooled) == 5 and all(len(q.passages) == 10 for q in pooled)
    assert stats["corpus_size"] > 2000 and 0 <= stats["labelled_hit"] <= 1
    for q in pooled:  # the question's own gold passage is relevant wherever BM25 ranks it
        gold = [p for p in q.passages if p.docid == f"nq-gold:{q.qid[2:]}"]
        assert all(p.relevant for p in gold)
        assert [p.score for p in q.passages] == sorted((p.score for p in q.passages), reverse=True)
    again, _ = questions.cached_pools(cfg, tmp_path)  # from the cache, scores included
    assert again == pooled and [p.score for p in again[0].passages] == [p.score for p in pooled[0].passages]


def test_random_selection_grows_by_appending():
    """A larger data.limit keeps the smaller run's questions, in order, so a grown run reuses its cache."""
    from udcg.experiment import questions

    items = list(range(500))
    pick = {n: questions.select(items, from_dict({"data": {"questions": "nq", "limit": n, "select": "random"}}, "t.yaml"))
            for n in (20, 100)}
    assert pick[100][:20] == pick[20] and len(set(pick[100])) == 100
    assert pick[20] != items[:20]  # random, not the first ones


@pytest.mark.parametrize("select", ["random", "first"])
def test_data_skip_takes_the_questions_after_the_first_ones_of_the_same_order(select):
    """Issue #51: data.skip = S leaves out the first S questions of the order a run cut at S holds, so a new
    run's questions are disjoint from it; grown, it appends as any run does."""
    from udcg.experiment import questions

    items = list(range(500))

    def pick(limit, skip=0):
        data = {"questions": "nq", "limit": limit, "select": select, **({"skip": skip} if skip else {})}
        return questions.select(items, from_dict({"data": data}, "t.yaml"))

    assert pick(30, skip=120) == pick(150)[120:] and not set(pick(30, skip=120)) & set(pick(120))
    assert pick(40, skip=120)[:30] == pick(30, skip=120)  # grows by appending
    assert len(pick(600, skip=490)) == 10 and pick(600, skip=490)[:9] == pick(499)[490:]  # past the end: what is left
    with pytest.raises(InputError, match="data.skip = -1: must be an integer >= 0"):
        from_dict({"data": {"questions": "nq", "skip": -1}}, "t.yaml")


# ---------------------------------------------------------------- the pipeline, scripted reader


def test_pipeline_writes_every_record_and_table(scripted_run):
    out, result, calls = scripted_run
    for name in ("config.yaml", "run.json", "pools.jsonl", "annotations.jsonl", "contexts.jsonl", "answers.jsonl",
                 "report.md", "summary.json", "studies/k1.jsonl", "studies/positions.jsonl", "studies/oracle.jsonl",
                 "theta/full-k3.json", "figures/fig1-positions.png", "figures/fig2-k.png", "figures/theta-weights.png",
                 "data/contexts.jsonl.gz", "data/pools.jsonl.gz", "data/annotations.jsonl.gz", "data/notes.json",
                 "data/per-question.jsonl.gz"):
        assert (out / name).is_file(), name
    for table in ("table3", "table3-all", "table4", "fig2-k", "fig1-positions", "table2-oracle", "theta-weights", "theta-cv"):
        for suffix in (".md", ".csv", ".json"):
            assert (out / "tables" / f"{table}{suffix}").is_file()
    assert (out / "figures" / "fig2-k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert all(f in report for f in ("Table 3", "Table 4", "Table 2", "Fig. 1", "Fig. 2", "figures/fig2-k.png",
                                     "figures/theta-weights.png", "Kendall", "pairwise accuracy"))
    names = {r["metric"] for r in result.table3.rows}
    assert names >= {"UDCG", "nDCG", "RR", "AP", "P", "Success", "eRAG", "ANSWER_PROB"}
    for column in ("mean_tau_b", "tau_b_ci_low", "p_tau_b", "p_tau_b_holm", "pair_acc", "pair_acc_ci_high", "p_pair_acc_holm"):
        assert column in result.table3.columns


def test_rule_grades_drop_ra_nwg_from_the_correlation_tables_with_a_note(scripted_run):
    out, result, _ = scripted_run
    assert all("RA-nWG" not in {r["metric"] for r in t.rows} for t in result.tables.values() if "metric" in t.columns)
    assert "linear function of P" in (out / "report.md").read_text()
    assert result.notes["dropped_from_correlation"]["metrics"] == ["RA-nWG"]
    rows = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    assert all("RA-nWG" in r["metrics"] for r in rows)  # still computed, published with the data


def test_the_circular_metrics_at_k1_are_flagged_never_best_and_outside_holm(scripted_run):
    out, result, _ = scripted_run
    circular = {"UDCG", "UDCG_theta", "ANSWER_PROB", "eRAG"}
    k1 = {r["metric"]: r["circular"] for r in result.tables["fig2-k"].rows if r["k"] == 1}
    assert {m for m, c in k1.items() if c == "yes"} == circular & set(k1) >= {"UDCG", "ANSWER_PROB", "eRAG"}
    assert all(not r["circular"] for r in result.tables["fig2-k"].rows if r["k"] != 1)
    k1_table = json.loads((out / "summary.json").read_text())["tables"]["fig2-k"]
    assert any(r["metric"] == "eRAG" and r["circular"] == "yes" for r in k1_table)
    assert "circular" in (out / "tables" / "fig2-k.md").read_text()
    assert "At k = 1 UDCG, UDCG_theta, ANSWER_PROB and eRAG are circular" in (out / "report.md").read_text()


def test_theta_C_is_chosen_by_cross_validation_and_recorded(scripted_run):
    out, result, _ = scripted_run
    saved = json.loads((out / "theta" / "full-k3.json").read_text())
    assert saved["params"]["C"] == "auto" and saved["C"] in saved["cv"]["C"] and saved["scaler"]["scale"]
    assert result.notes["theta_C"]["full-k3"] == saved["C"]
    chosen = [r for r in result.tables["theta-cv"].rows if r["model"] == "full-k3" and r["chosen"]]
    assert [r["C"] for r in chosen] == [saved["C"]] and saved["cv"]["rule"] == saved["params"]["cv_rule"] == "one-se"
    assert "within one standard error" in result.tables["theta-cv"].title
    weights = [r for r in result.tables["theta-weights"].rows if r["model"] == "full-k3"]
    assert [r["alpha"] for r in weights] == pytest.approx(saved["alpha"])
    for r in result.tables["theta-weights"].rows:  # every fit says how much of it is the margin, and if saturated
        saved = json.loads((out / "theta" / f"{r['model']}.json").read_text())
        assert r["pairs_in_margin"] == saved["margin_share"] and r["cos_mean_diff"] == saved["cosine_mean_difference"]
        assert r["saturated"] == ("yes" if saved["margin_share"] >= 0.99 else "")
    assert "not a positional effect" in result.tables["theta-weights"].title


def test_refit_theta_on_a_run_fitted_by_the_same_code_changes_no_byte(scripted_run, tmp_path):
    """scripts/refit_theta.py's engine, on a copy of the run's published part: the same data, models and report."""
    from udcg.experiment.validate import refit_theta

    out, _, _ = scripted_run
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("config.yaml", "data", "theta", "tables", "figures", "report.md", "summary.json"):
        (shutil.copytree if (out / name).is_dir() else shutil.copy)(out / name, copy / name)
    before = {p.relative_to(copy): p.read_bytes() for p in sorted(copy.rglob("*")) if p.is_file()}
    result = refit_theta(copy)
    assert {p.relative_to(copy): p.read_bytes() for p in sorted(copy.rglob("*")) if p.is_file()} == before
    assert set(result.tables) >= {"table3", "theta-weights", "theta-cv"}


def test_report_rebuilds_every_output_from_the_data_alone_byte_for_byte(scripted_run, tmp_path):
    """`udcg report RUN -o FRESH` (no model, no data set): the same tables, figures, report and summary."""
    out, _, _ = scripted_run
    published = tmp_path / "published"
    published.mkdir()
    for name in ("config.yaml", "data", "theta"):  # all a published run needs for its report
        src = out / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, published / name)
    fresh = tmp_path / "fresh"
    done = subprocess.run([sys.executable, "-m", "udcg", "report", str(published), "-o", str(fresh)], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "UDCG_DATA_DIR": str(tmp_path / "none")})
    assert done.returncode == 0, done.stderr[-2000:]
    made = {str(p.relative_to(fresh)): p.read_bytes() for p in sorted(fresh.rglob("*")) if p.is_file()}
    assert set(made) >= {"report.md", "summary.json", "tables/table3.md", "tables/fig2-k.json", "figures/fig2-k.png",
                         "figures/fig1-positions.png", "figures/theta-weights.png"}
    assert made == {name: (out / name).read_bytes() for name in made}
    assert "torch" not in subprocess.run([sys.executable, "-c", "import sys, udcg.experiment.reporting as r; "
                                          "r.report(sys.argv[1], sys.argv[2]); print(' '.join(sys.modules))",
                                          str(published), str(tmp_path / "again")],
                                         capture_output=True, text=True, check=True).stdout.split()


def test_published_data_is_gzipped_deterministically_and_complete(scripted_run):
    import gzip

    out, _, _ = scripted_run
    for name in ("contexts", "pools", "annotations", "per-question"):
        raw = (out / "data" / f"{name}.jsonl.gz").read_bytes()
        assert raw[4:8] == b"\0\0\0\0" and raw[3] == 0  # gzip mtime 0, no file name: same data, same bytes
    contexts = [json.loads(line) for line in gzip.decompress((out / "data" / "contexts.jsonl.gz").read_bytes()).splitlines()]
    assert {r["study"] for r in contexts} == {"main", "k1", "positions", "oracle"}
    for key in ("pids", "relevant", "p_abs", "utilities", "answer", "outcome", "split", "metrics"):
        assert all(key in r for r in contexts), key
    assert gzip.decompress((out / "data" / "pools.jsonl.gz").read_bytes()) == (out / "pools.jsonl").read_bytes()
    assert gzip.decompress((out / "data" / "annotations.jsonl.gz").read_bytes()) == (out / "annotations.jsonl").read_bytes()
    per_q = [json.loads(line) for line in gzip.decompress((out / "data" / "per-question.jsonl.gz").read_bytes()).splitlines()]
    assert {r["table"] for r in per_q} == {"table3", "table3-all", "table4", "k1", "k3"}
    assert set(per_q[0]) == {"table", "metric", "qid", "rho", "tau_b", "pair_acc", "status"}
    udcg_rho = [r["rho"] for r in per_q if r["table"] == "table3" and r["metric"] == "UDCG" and r["rho"] is not None]
    row = next(r for r in json.loads((out / "summary.json").read_text())["tables"]["table3"] if r["metric"] == "UDCG")
    assert row["mean_rho"] == pytest.approx(np.mean(udcg_rho))


def test_shuffled_context_order_permutes_the_prompts_only(scripted_run, tmp_path):
    out, _, _ = scripted_run
    shuffled = tmp_path / "shuffled"
    run_validation(from_dict(scripted_config(shuffled, contexts={"order": "shuffled"}, studies={"positions": False,
                                                                                                 "oracle": False})),
                   backends={"scripted": scripted_reader()})
    pool_order = {r["cid"]: r["pids"] for r in map(json.loads, (out / "contexts.jsonl").read_text().splitlines())}
    mixed = {r["cid"]: r["pids"] for r in map(json.loads, (shuffled / "contexts.jsonl").read_text().splitlines())}
    assert pool_order.keys() == mixed.keys() and all(sorted(mixed[c]) == sorted(pool_order[c]) for c in mixed)
    assert sum(mixed[c] != pool_order[c] for c in mixed) > len(mixed) // 2
    assert "passages in shuffled order" in (shuffled / "report.md").read_text()
    assert "order: shuffled" in (shuffled / "config.yaml").read_text()


def test_contexts_are_balanced_and_the_answers_shared(scripted_run):
    out, _, calls = scripted_run
    rows = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    assert len(rows) == 8 * 4 and {len(r["pids"]) for r in rows} == {3}
    for qid in {r["qid"] for r in rows}:
        assert sum(any(r["relevant"]) for r in rows if r["qid"] == qid) == 2  # half of 4
    pools = [json.loads(line) for line in (out / "pools.jsonl").read_text().splitlines()]
    n_passages = sum(len(p["passages"]) for p in pools)
    assert calls["next_token"] == calls["continuation"] == n_passages == 8 * 8
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    n_multi = sum(len(a["pids"]) > 1 for a in answers)
    assert calls["generate"] == math.ceil(n_passages / 8) + math.ceil(n_multi / 8)  # k = 1 contexts reuse eRAG's answers


def test_stored_metrics_agree_with_the_contexts_file_route(scripted_run):
    out, result, _ = scripted_run
    rows = read_contexts(str(out / "contexts.jsonl"))
    spec = "UDCG,nDCG,RR,AP,P,Success,eRAG,ANSWER_PROB"
    stored = {r["metric"]: r["mean_rho"] for r in result.tables["table3-all"].rows}
    # recompute from the per-position fields, not the stored values
    rows = ContextFile(tuple(dataclasses.replace(r, metrics=None) for r in rows.records), rows.where, rows.sources)
    again = {r["metric"]: r["mean_rho"] for r in correlation_table(rows, spec, CorrelationTests(n_boot=500)).rows}
    assert again == pytest.approx({m: stored[m] for m in again})


def test_theta_trains_on_train_questions_and_table3_uses_the_others(scripted_run):
    out, result, _ = scripted_run
    rows = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    split = {r["qid"]: r["split"] for r in rows}
    assert sorted(split.values()).count("train") == 4
    n_test = result.notes["correlation"]["table3"]["questions"]
    assert n_test == 4 and "UDCG_theta" in {r["metric"] for r in result.table3.rows}


def test_a_grown_run_computes_only_the_new_questions(tmp_path):
    """data.limit raised on an existing run folder: the first questions' model work is all reused."""
    out = tmp_path / "grown"
    first = scripted_reader()
    run_validation(from_dict(scripted_config(out, data={"limit": 4})), backends={"scripted": first})
    first_qids = {json.loads(line)["qid"] for line in (out / "contexts.jsonl").read_text().splitlines()}
    grown = scripted_reader()
    run_validation(from_dict(scripted_config(out, data={"limit": 8})), backends={"scripted": grown})
    assert tally(first)["next_token"] == tally(grown)["next_token"] == 4 * 8  # p_abs: 8 passages per question
    assert tally(first)["continuation"] == tally(grown)["continuation"] == 4 * 8  # ANSWER_PROB likewise
    assert len((out / "annotations.jsonl").read_text().splitlines()) == 8 * 8
    answered = [json.loads(line)["key"] for line in (out / "cache" / "answers.jsonl").read_text().splitlines()]
    new = sum(key.split("\t")[0] not in first_qids for key in answered)
    assert tally(grown)["generated"] == new  # only the new questions' prompts are answered


def test_a_study_added_to_a_finished_run_answers_only_its_contexts(tmp_path):
    out = tmp_path / "run"
    run_validation(from_dict(scripted_config(out, studies={"positions": False})), backends={"scripted": scripted_reader()})
    before = set((out / "cache" / "answers.jsonl").read_text().splitlines())
    added = scripted_reader()
    run_validation(from_dict(scripted_config(out, studies={"positions": True})), backends={"scripted": added})
    new = [json.loads(line)["key"] for line in (out / "cache" / "answers.jsonl").read_text().splitlines()
           if line not in before]
    positions = {"\t".join([r["qid"], *r["pids"]])
                 for r in map(json.loads, (out / "studies" / "positions.jsonl").read_text().splitlines())}
    assert new and set(new) <= positions and tally(added)["generated"] == len(new)


def test_rerun_computes_nothing_and_writes_the_same_bytes(scripted_run, tmp_path):
    out, _, _ = scripted_run
    before = outputs(out)
    reader = scripted_reader()
    run_validation(load_config(out / "config.yaml"), backends={"scripted": reader})
    assert reader.calls == []  # no model call of any kind
    assert outputs(out) == before


def test_a_cache_from_another_model_is_refused(scripted_run, tmp_path):
    out, _, _ = scripted_run
    raw = scripted_config(out)
    raw["reader"]["model"] = "other"
    other = scripted_reader()
    other.name = "other"
    with pytest.raises(InputError, match="delete"):
        run_validation(from_dict(raw), backends={"other": other})


def _judge_reply(chat, params) -> str:
    """An LLM judge's reply in the judges' JSON: relevance and grade by whether the document names
    an acceptable answer, outcomes by the predicted answer; an answer "banker" gets an unreadable
    reply (it must stay ungraded, never become a label)."""
    prompt = chat[0]["content"]
    answers = prompt.split("Acceptable answers list: ")[1].split("\n")[0].lower()
    if "Predicted answer: " in prompt:
        said = prompt.split("Predicted answer: ")[1].split("\n")[0].lower()
        grade = "C" if "no-response" in said else "A" if any(w in said and w in answers for w in WORDS) else "B"
        return "hmm" if "banker" in said else json.dumps({"motivation": "m", "grade": grade})
    doc = prompt.split("Document: ")[1].split("\n```")[0].lower()
    hit = any(w in doc and w in answers for w in WORDS)
    grade = (5 if hit else 2) if "utility scale" in prompt.lower() else ("A" if hit else "B")
    return json.dumps({"motivation": "m", "grade": grade})


def test_llm_judges_for_relevance_grades_and_outcomes(tmp_path):
    judge = ScriptedBackend(name="judge", answer=_judge_reply)
    raw = scripted_config(tmp_path / "run", pool={"relevance_judge": "judge"}, grading={"judge": "judge"},
                          metrics={"grades": "judge"})
    result = run_validation(from_dict(raw), backends={"scripted": scripted_reader(), "judge": judge})
    kinds = {("Predicted answer" in p, "utility scale" in p.lower()) for p in judge.prompts}
    assert len(judge.calls[0].chats) == 8 and max(len(c.chats) for c in judge.calls) <= 8  # reader.chunk_size
    assert kinds == {(True, False), (False, True), (False, False)}  # answer, grade and relevance prompts
    pools = [json.loads(line) for line in (tmp_path / "run" / "pools.jsonl").read_text().splitlines()]
    for item in pools:
        for p in item["passages"]:
            named = any(w in p["text"].lower() and w in " ".join(item["answers"]).lower() for w in WORDS)
            assert p["is_relevant"] == named
    grades = {(a["qid"], a["pid"]): a["grade"] for a in
              map(json.loads, (tmp_path / "run" / "annotations.jsonl").read_text().splitlines())}
    assert set(grades.values()) == {2, 5}
    answers = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert {a["outcome"] for a in answers if a["answer"] == "banker"} == {None}
    assert all(a["outcome"] == "abstained" for a in answers if a["answer"] == "NO-RESPONSE")
    n_banker = sum(r["answer"] == "banker" for r in map(json.loads, (tmp_path / "run" / "contexts.jsonl").read_text().splitlines()))
    assert result.notes["correlation"]["table3-all"]["ungraded_contexts"] == n_banker > 0
    assert "judge" in result.notes["grading"]


def _subprocess(config: dict, delay: float, kill_after: int | None, reads: bool = False) -> subprocess.Popen:
    code = ("import sys, json; from tests.test_validate import run_scripted; "
            f"print(json.dumps(run_scripted(sys.argv[1], {delay}, {kill_after}, {reads})))")
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(config)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(config: dict, reads: bool = False) -> dict:
    done = _subprocess(config, delay=0.0, kill_after=None, reads=reads)
    stdout, stderr = done.communicate()
    assert done.returncode == 0, stderr[-2000:]
    return json.loads(stdout.strip().splitlines()[-1])


def test_kill_9_at_a_random_moment_then_resume_gives_identical_outputs(scripted_run, tmp_path):
    reference, _, _ = scripted_run
    config = scripted_config(tmp_path / "run")
    seed = int(time.time())
    wait = random.Random(seed).uniform(0.5, 6.0)
    proc = _subprocess(config, delay=0.15, kill_after=None)
    time.sleep(wait)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    _finish(config)
    assert outputs(tmp_path / "run") == outputs(reference), f"killed after {wait:.2f}s (seed {seed})"


def test_kill_9_in_the_middle_of_the_answers_then_resume_recomputes_only_the_rest(scripted_run, tmp_path):
    reference, _, first_calls = scripted_run
    config = scripted_config(tmp_path / "run")
    proc = _subprocess(config, delay=0.0, kill_after=10)  # 8 chunks of single passages, then 2 of contexts
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    calls = _finish(config)
    assert calls["next_token"] == calls["continuation"] == 0  # the per-passage work survived the kill
    assert calls["generate"] == first_calls["generate"] - 10
    assert outputs(tmp_path / "run") == outputs(reference)


def test_a_prompt_reader_fills_the_three_caches_in_one_call_per_chunk(scripted_run, tmp_path):
    """A reader with read(): one call per chunk of pooled passages instead of three, the same outputs
    byte for byte; a run begun by the separate calls is finished by read() without duplicates."""
    reference, _, first_calls = scripted_run
    reader = scripted_reader(reads=True)
    run_validation(from_dict(scripted_config(tmp_path / "run")), backends={"scripted": reader})
    calls = tally(reader)
    assert calls["read"] == 8 and calls["next_token"] == calls["continuation"] == 0
    assert calls["generate"] == first_calls["generate"] - 8  # the per-passage answers came from read()
    assert outputs(tmp_path / "run") == outputs(reference)

    half = tmp_path / "half"
    run_validation(from_dict(scripted_config(half, data={"limit": 4})), backends={"scripted": scripted_reader()})
    (half / "cache" / "answers.jsonl").unlink()  # p_abs and log-likelihoods of 4 questions done, no answers
    grown = scripted_reader(reads=True)
    run_validation(from_dict(scripted_config(half)), backends={"scripted": grown})
    calls = tally(grown)
    assert calls["read"] == 8 and calls["next_token"] == calls["continuation"] == 0
    for name in ("annotate.jsonl", "answers.jsonl", "answer-ll.jsonl"):
        keys = [json.loads(line)["key"] for line in (half / "cache" / name).read_text().splitlines()]
        single = [k for k in keys if k.count("\t") == 1]  # answers.jsonl also holds the context answers
        assert len(keys) == len(set(keys)) and len(single) == 8 * 8, name
    assert outputs(half) == outputs(reference)


def test_a_prompt_reader_without_answer_prob_reads_no_continuation(tmp_path):
    reader = scripted_reader(reads=True)
    raw = scripted_config(tmp_path / "run", metrics={"names": ["UDCG", "nDCG", "eRAG"]})
    result = run_validation(from_dict(raw), backends={"scripted": reader})
    calls = tally(reader)
    assert calls["read"] == 8 and calls["next_token"] == calls["continuation"] == 0
    assert not (tmp_path / "run" / "cache" / "answer-ll.jsonl").exists()
    assert {r["metric"] for r in result.table3.rows} >= {"UDCG", "eRAG"}


def test_kill_9_while_reading_passages_then_resume_gives_identical_outputs(scripted_run, tmp_path):
    reference, _, _ = scripted_run
    config = scripted_config(tmp_path / "run")
    proc = _subprocess(config, delay=0.0, kill_after=5, reads=True)  # 5 of 8 chunks read, then SIGKILL
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    calls = _finish(config, reads=True)
    assert calls["read"] == 3 and calls["next_token"] == calls["continuation"] == 0
    assert outputs(tmp_path / "run") == outputs(reference)


# ---------------------------------------------------------------- the smoke config, a real model


@pytest.mark.slow
def test_smoke_config_end_to_end_with_smollm2(tmp_path):
    out = tmp_path / "smoke"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "udcg", "validate", str(REPO_ROOT / "configs" / "smoke.yaml"), "-o", str(out),
                           "--no-progress", "--set", "reader.threads=1"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Table 3" in done.stdout and "| UDCG |" in done.stdout and "| eRAG |" in done.stdout
    rows = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 4 and all(r["outcome"] in ("correct", "abstained", "wrong") for r in rows)
    assert all(0.0 <= p <= 1.0 for r in rows for p in r["p_abs"]) and all(isinstance(r["answer"], str) for r in rows)
    annotations = [json.loads(line) for line in (out / "annotations.jsonl").read_text().splitlines()]
    assert len(annotations) == 4 * 6 and all(a["answer_ll"] < 0 and a["answer"] for a in annotations)
    run = json.loads((out / "run.json").read_text())
    assert run["reader"] == "smollm2-135m"
    for step in ("pools", "passages", "contexts", "answers", "outcomes", "metrics", "report"):
        assert step in run["timings"]["steps"]
    print(f"smoke run: {seconds:.1f}s wall; steps {json.dumps(run['timings']['steps'])}")


def test_theta_loaded_from_a_run_that_trained_on_these_questions_is_flagged_in_sample(scripted_run, tmp_path):
    """Issue 35: theta.from_run pointing at a run whose train questions are correlated here: UDCG_theta
    is in-sample, so it is marked circular (never best, outside Holm) and the report says why."""
    out, _, _ = scripted_run
    again = tmp_path / "again"
    shutil.copytree(out / "cache", again / "cache")  # the same model work, no recomputation
    result = run_validation(from_dict(scripted_config(again, theta={"from_run": str(out)})),
                            backends={"scripted": scripted_reader()})
    assert result.notes["theta_in_sample"]["in_sample"] and "of this run's 8 questions trained it" in \
        result.notes["theta_in_sample"]["why"]
    row = next(r for r in result.tables["table3"].rows if r["metric"] == "UDCG_theta")
    assert row["circular"] == "yes" and row["best"] == "" and math.isnan(row["p_holm"])
    report = (again / "report.md").read_text()
    assert report.splitlines()[2].startswith("**Verdict.** ") and "is in-sample (" in report
