"""scripts/confirm_equivalence.py: the issue #38 pre-registration's confirmatory analysis, on toy runs."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from tests.conftest import load_script
from tests.test_results_table import _per_question


def _contexts(run, contexts):
    with gzip.open(run / "data" / "contexts.jsonl.gz", "wt") as fh:
        for qid, outcome, udcg, ndcg in contexts:
            fh.write(json.dumps({"qid": qid, "study": "main", "outcome": outcome,
                                 "metrics": {"UDCG": udcg, "nDCG": ndcg}}) + "\n")


def _run(tmp_path):
    run = tmp_path / "nq-qwen1.5b"
    # rho per question; q1-q3 are the 'seen' ones, q4-q8 the confirmatory sample:
    # UDCG - nDCG there = +0.01, -0.02, 0.0, +0.015, -0.005 (mean 0)
    udcg = [0.9, 0.1, 0.5, 0.51, 0.48, 0.5, 0.515, 0.495]
    ndcg = [0.1, 0.2, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5]
    _per_question(run, {"UDCG": udcg, "nDCG": ndcg},
                  pair_acc={"UDCG": [0.9, 0.5, 0.5, 0.8, 0.7, 0.9, 0.6, 0.7], "nDCG": [0.5] * 8})
    # q4: nDCG ties the two contexts, UDCG orders them right; q5: both order them, nDCG wrongly
    _contexts(run, [("q4", "correct", 0.6, 0.3), ("q4", "wrong", 0.4, 0.3),
                    ("q5", "correct", 0.7, 0.1), ("q5", "abstained", 0.5, 0.2), ("q1", "correct", 0.1, 0.1),
                    ("q1", "wrong", 0.9, 0.1)])
    return run


def test_nothing_is_computed_before_the_target(tmp_path):
    lines = load_script("confirm_equivalence").analysis(_run(tmp_path))
    assert lines == ["nq-qwen1.5b: incomplete: 8 of 350 questions. The confirmatory statistics are computed only once "
                     "question 350 has run (pre-registration (f))."]


def test_the_confirmatory_analysis_by_hand(tmp_path):
    module = load_script("confirm_equivalence")
    lines = module.analysis(_run(tmp_path), module.Plan(after=3, target=8, flips=10_000, boot=2_000))
    text = "\n".join(lines)
    assert lines[0] == "Confirmatory sample: questions 4-8 of nq-qwen1.5b (5 questions, 5 usable)."
    assert "- D = +0.0000," in text
    # mean 0: two-sided p 1 (exact, 5 questions); every d + 0.03 > 0 and every d - 0.03 < 0: each one-sided
    # p is 1/32 (only the identity flip is as extreme), so TOST p = 0.03125 < 0.05: equivalent
    assert "- two-sided p = 1.0000 (exact)" in text
    assert "- TOST at ±0.03: p = 0.0312 (exact) (H0 D ≤ −0.03: 0.0312; H0 D ≥ +0.03: 0.0312)" in text
    assert "**verdict: equivalent within ±0.03" in text
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in lines if line.startswith("| S")}
    # S1: pairwise accuracy UDCG - nDCG on q4-q8: 0.3, 0.2, 0.4, 0.1, 0.2
    assert rows["S1 pairwise accuracy, UDCG − nDCG"][1:3] == ["5", "+0.2400"]
    # S2: only q4 has a pair nDCG ties, ordered right by UDCG: 1 - 0.5; S3: only q5 has an untied pair: UDCG
    # orders it right (1), nDCG wrongly (0)
    assert rows["S2 UDCG on the pairs nDCG ties, − 0.5"][1:3] == ["1", "+0.5000"]
    assert rows["S3 on the other pairs, UDCG − nDCG"][1:3] == ["1", "+1.0000"]
    assert rows["S4 D over questions 1-8 (not confirmatory)"][1:3] == ["8", f"{np.mean([0.8, -0.1, 0.2, 0.01, -0.02, 0, 0.015, -0.005]):+.4f}"]
    # (e): the share nDCG ties, over the confirmatory questions' pairs only (q1's tied pair is not among them)
    assert ("S2's share (descriptive): of the confirmatory questions' 2 outcome-differing context pairs (2 questions), "
            "nDCG scores 1 equal (50.0%); pooled over them, UDCG orders 1.000 of those right (a tie: 0.5), and of the "
            "others UDCG 1.000, nDCG 0.000.") in text


@pytest.mark.parametrize("p_two, p_tost, mean, start", [
    (0.01, 0.2, 0.05, "different: UDCG follows"), (0.01, 0.2, -0.05, "different: nDCG follows"),
    (0.3, 0.01, 0.0, "equivalent within ±0.03"), (0.01, 0.01, 0.01, "different, but by less than ±0.03"),
    (0.3, 0.3, 0.0, "inconclusive at this size")])
def test_the_decision_table(p_two, p_tost, mean, start):
    assert load_script("confirm_equivalence").decision(p_two, p_tost, mean, 0.05, 0.03).startswith(start)


def test_a_small_p_never_prints_as_zero():
    module = load_script("confirm_equivalence")
    assert [module._v(p) for p in (0.5, 0.0312, 0.0001, 9.99999e-7, 0.0)] == ["0.5000", "0.0312", "0.0001", "1.0e-06",
                                                                                "0.0000"]
    assert re.fullmatch(r"1\.0e-06 ± \d\.\de-06 \(Monte Carlo SE\)", module._p(1 / 1_000_001, 1_000_000, 300))


def test_the_confirmatory_config_is_nq_qwen15b_but_its_name():
    import yaml
    from pathlib import Path

    configs = Path(__file__).resolve().parents[1] / "configs"
    original, confirm = (yaml.safe_load((configs / f"{n}.yaml").read_text()) for n in ("nq-qwen1.5b", "nq-qwen1.5b-confirm"))
    assert (original.pop("name"), confirm.pop("name")) == ("nq-qwen1.5b", "nq-qwen1.5b-confirm")
    assert confirm == original


def test_out_writes_nothing_before_the_target(tmp_path, capsys):
    out = tmp_path / "confirm-equivalence"
    assert load_script("confirm_equivalence").main([str(_run(tmp_path)), "--out", str(out)]) == 0
    assert "incomplete: 8 of 350" in capsys.readouterr().out and not out.exists()


def test_out_writes_the_analysis_and_the_values_behind_it(tmp_path, capsys):
    module = load_script("confirm_equivalence")
    run, out = _run(tmp_path), tmp_path / "confirm-equivalence"
    plan = module.Plan(after=3, target=8, flips=10_000, boot=2_000)
    assert module.main([str(run), "--out", str(out)], plan) == 0
    printed = capsys.readouterr().out
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert f"    python scripts/confirm_equivalence.py {run.as_posix()} --out {out.as_posix()}\n" in readme
    assert printed in readme and "**verdict: equivalent within ±0.03" in readme
    with gzip.open(out / "per-question.jsonl.gz", "rt") as fh:
        rows = [json.loads(line) for line in fh]
    assert [r["qid"] for r in rows] == ["q4", "q5", "q6", "q7", "q8"]  # the confirmatory questions, in order
    assert [round(r["rho_UDCG"] - r["rho_nDCG"], 6) for r in rows] == [0.01, -0.02, 0.0, 0.015, -0.005]
    assert [round(r["pair_acc_UDCG"] - r["pair_acc_nDCG"], 6) for r in rows] == [0.3, 0.2, 0.4, 0.1, 0.2]
    # q4: nDCG ties its one pair, UDCG orders it right; q5: the pair is untied, UDCG right, nDCG wrong
    assert (rows[0]["UDCG_on_nDCG_ties"], rows[0]["UDCG_elsewhere"]) == (1.0, None)
    assert (rows[1]["UDCG_on_nDCG_ties"], rows[1]["UDCG_elsewhere"], rows[1]["nDCG_elsewhere"]) == (None, 1.0, 0.0)
    assert rows[2]["UDCG_on_nDCG_ties"] is None  # no contexts published for q6
    again = tmp_path / "again"
    assert module.main([str(run), "--out", str(again)], plan) == 0
    assert (again / "per-question.jsonl.gz").read_bytes() == (out / "per-question.jsonl.gz").read_bytes()


def test_out_inside_the_run_folder_is_refused(tmp_path, capsys):
    """The run's own files are rebuilt by udcg report: the analysis goes beside them, never among them."""
    run = _run(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        load_script("confirm_equivalence").main([str(run), "--out", str(run / "confirm")])
    assert exit_.value.code == 2 and "inside the run folder" in capsys.readouterr().err
    assert not (run / "confirm").exists()


def test_the_tost_p_carries_the_one_sided_monte_carlo_error():
    """Issue #51 item 3: the TOST p is the larger of two one-sided p, whose Monte Carlo error is one
    tail's, sqrt(p (1 - p) / flips): 0.0003 at p 0.126 and 1,000,000 flips, not the two-sided 0.0005."""
    module = load_script("confirm_equivalence")
    assert module._p(0.1260, 1_000_000, 300, "greater") == "0.1260 ± 0.0003 (Monte Carlo SE)"
    assert module._p(0.2922, 1_000_000, 300) == "0.2922 ± 0.0007 (Monte Carlo SE)"


def test_the_post_hoc_lines_by_hand(tmp_path):
    """Issue #51: outside the plan, labelled so. q4's two contexts have one nDCG (issue #28's first rule
    dropped such a question): D over q5-q8 = mean(-0.02, 0, 0.015, -0.005) = -0.0025. S1's parts: q4's one
    pair is tied and UDCG orders it right (1/1 x 0.5), q5's is untied, UDCG right and nDCG wrong (1/1 x 1)."""
    module = load_script("confirm_equivalence")
    lines = module.analysis(_run(tmp_path), module.Plan(after=3, target=8, flips=10_000, boot=2_000))
    post = lines[lines.index("Post hoc (issue #51, written after the verdict; not part of the plan, which it leaves "
                             "unchanged):"):]
    text = "\n".join(post)
    assert "the floor of the two-sided test" not in text  # every p here is exact
    assert "- D without the 1 usable questions on whose contexts a metric is constant" in text
    assert "0 of them have no relevant passage in the pool" in text and "their mean ρ_UDCG +0.510" in text
    assert "D = -0.0025," in text and "(4 questions)" in text
    assert "over the 2 questions with outcome-differing pairs: +0.2500 from nDCG's ties and +0.5000 from" in text


def test_a_p_at_the_floor_of_the_flips_is_named_so(tmp_path):
    """S1 and S2's published p, 2.0e-06, is 2 / (1,000,000 + 1): no flip reached them (not one flip)."""
    module = load_script("confirm_equivalence")
    plan = module.Plan(after=3, target=8, flips=1_000_000, boot=2_000)
    data = module.load(_run(tmp_path), plan)
    lines = module.post_hoc(data, data.order[3:8], {"n": 5}, [2 / 1_000_001, 2 / 1_000_001, 0.44], plan)
    assert ("- S1 and S2: p = 2.0e-06 is the floor of the two-sided test at 1,000,000 flips, 2 / (1,000,000 + 1): no "
            "flip reached the observed mean.") in lines
