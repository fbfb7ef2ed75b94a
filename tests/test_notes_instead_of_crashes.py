"""Issue 17 from the good side: the values and notes that replaced a crash or a silent default.
PROC / %PROC score (they raised KeyError: 'PROC'), a dropped UDCG says why, a missing baseline
says there are no p-values, and the append-only cache still cuts a torn last line (kill -9)
while refusing a damaged complete one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.io.cache import AppendCache

CORPUS = Path(__file__).parent / "badinput"


def test_proc_and_percent_proc_score_by_hand(tmp_path, capsys):
    """grades [5, 2]; corpus counts [1, 3, 0, 2, 4] give weights w4 = w5 = 1, w1..w3 = 0 (rarity
    ratio capped at 1); K = 2: corpus oracle 2, observed 1, so RA-nWG = 0.5. The pool [1, 1, 0, 0, 1]
    holds one grade-5 passage: its oracle is 1, PROC@2 = 1/2 and %PROC = RA-nWG / PROC = 1."""
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"qid": "q1", "relevant": [True, False], "utilities": [0.5, -0.2], "grades": [5, 2],
                               "corpus_grades": [1, 3, 0, 2, 4], "pool_grades": [1, 1, 0, 0, 1]}) + "\n")
    out = tmp_path / "s.jsonl"
    assert main(["score", str(src), "-o", str(out), "--metrics", "RA-nWG@2,PROC@2,%PROC@2"]) == 0
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics == pytest.approx({"RA-nWG@2": 0.5, "PROC@2": 0.5, "%PROC@2": 1.0})
    capsys.readouterr()


def test_pool_grades_larger_than_corpus_is_refused(tmp_path, capsys):
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"qid": "q1", "relevant": [True], "utilities": [0.5], "grades": [5],
                               "corpus_grades": [0, 0, 0, 0, 1], "pool_grades": [0, 0, 0, 0, 2]}) + "\n")
    assert main(["score", str(src), "-o", str(tmp_path / "s.jsonl"), "--metrics", "PROC"]) == 2
    assert "'pool_grades'" in capsys.readouterr().err


def test_two_models_without_model_says_why_udcg_is_left_out(tmp_path, capsys):
    item = json.loads((CORPUS / "good_authors.json").read_text())[0]
    for p in item["passages"]:
        p["models_info"]["other"] = {"no_res_prob": 0.5}
    src = tmp_path / "two.json"
    src.write_text(json.dumps([item]))
    assert main(["score", str(src), "-o", str(tmp_path / "s.json")]) == 0
    captured = capsys.readouterr()
    assert "UDCG left out of the default metrics" in captured.err and "m, other" in captured.err
    assert "choose one with --model" in captured.err
    assert main(["score", str(src), "-o", str(tmp_path / "s2.json"), "--model", "m"]) == 0
    assert "| UDCG |" in capsys.readouterr().out


def test_correlate_without_its_default_baseline_says_there_are_no_p_values(tmp_path, capsys):
    rows = [{"qid": f"q{q}", "cid": f"c{c}", "relevant": [c == 0, c == 1], "p_abs": [0.2, 0.4],
             "outcome": ["correct", "wrong"][c]} for q in range(3) for c in range(2)]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["correlate", str(src), "--metrics", "P,RR", "--n-boot", "100"]) == 0
    assert "no p-values: the baseline UDCG is not among --metrics" in capsys.readouterr().err


def test_cache_still_cuts_a_torn_last_line_but_names_a_damaged_one(tmp_path):
    path = tmp_path / "cache.jsonl"
    good = json.dumps({"key": "a", "v": 1}) + "\n"
    path.write_text(good + '{"key": "b", "v"')  # killed while writing the second record
    with AppendCache(path) as cache:
        assert list(cache.done) == ["a"]
    assert path.read_text() == good
    path.write_text(good + "not json\n" + json.dumps({"key": "c", "v": 3}) + "\n")
    with pytest.raises(InputError, match=r"cache.jsonl:2: cache line is invalid JSON"):
        AppendCache(path)
    assert "not json" in path.read_text(), "a damaged line is reported, never cut with everything after it"
