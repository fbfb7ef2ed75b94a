"""Issue #48, after the DPR trial (docs/trial-dpr.md): the reader check's "hangs on the unjudged
labels" rule is absolute as well as relative (2 of 35 flipping pairs hang), its line leads with the
count; on qrels made by answer containment the judge command proposes a model judge, not
``--judge rules`` (which re-applies the rule that made them), and a folder judged by the rules says
so; ``annotate --unjudged judge`` says the pairs and the time before it judges."""

from __future__ import annotations

import json
import shlex

import numpy as np

import udcg
from udcg.cli import main
from udcg.flows.reader_check import judge_command, judge_estimate, labels_caveat, suggested_judge
from udcg.metrics.reader_auc import auc, relabelled_aucs
from udcg.metrics.reader_check import ReaderPairs, check_reader_pairs
from udcg.metrics.reader_verdict import FRAGILE_MIN, fragile_limit
from tests.test_labels_short_answers import annotate_toy


def _trial_like(answered: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """10 relevant and 35 unjudged pairs over 5 queries, shaped as the DPR trial's: AUC below 0.75,
    the reader answering (p_abs 0.35) from ``answered`` of the unjudged pairs besides two it is sure of."""
    rel_p = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    unj_p = [0.01, 0.02] + [0.35] * answered + [0.6 + 0.3 * i / (32 - answered) for i in range(33 - answered)]
    p = np.array(rel_p + unj_p)
    rel = np.r_[np.ones(10, bool), np.zeros(35, bool)]
    return p, rel, rel.copy(), [f"q{i % 5}" for i in range(45)]


def test_two_of_35_flipping_pairs_hang_and_the_line_leads_with_the_count():
    check = check_reader_pairs(ReaderPairs(*_trial_like()), n_boot=200)
    fr = check.fragility
    assert check.verdict == "cannot" and check.n_unjudged == 35 and fr.flips_at == 2 and fr.verdict_after == "can"
    assert 2 / 35 > 0.05 and fragile_limit(35) == FRAGILE_MIN == 3  # the share rule alone said "more than 5%"
    assert check.hangs_on_labels and check.to_dict()["fragility"]["limit"] == 3
    line = next(x for x in check.lines() if x.startswith("  labels: "))
    assert line.startswith("  labels: 2 pairs would turn it to can (AUC ")
    assert "of the 35 unjudged pairs taken as irrelevant (5.7%); it hangs on them when at most max(3, 5% of them) = 3 " \
           "do: the verdict hangs on the unjudged labels; judge them:" in line
    assert [fragile_limit(n) for n in (1, 35, 60, 151, 1346)] == [3, 3, 3, 7, 67]
    assert check_reader_pairs(ReaderPairs(*_trial_like(12)), n_boot=200).fragility.flips_at == 3  # 3 still hangs


def test_a_verdict_four_pairs_flip_on_35_does_not_hang_and_says_its_count_first():
    check = check_reader_pairs(ReaderPairs(*_trial_like(13)), n_boot=200)
    assert check.fragility.flips_at == 4 and not check.hangs_on_labels
    line = next(x for x in check.lines() if x.startswith("  labels: "))
    assert line == ("  labels: 4 pairs would turn it to can, relabelled relevant (lowest p_abs first), of the 35 unjudged "
                    "pairs taken as irrelevant (11.4%); it hangs on them when at most max(3, 5% of them) = 3 do")


def test_relabelled_aucs_are_exact_at_the_threshold():
    """Hypothesis found it: one relabelled pair makes the AUC exactly 0.75 ("can"), but the running
    count in floating point read 0.7499999999999999 and the fragility said 2 pairs."""
    pairs = ([(0.05, False, True)] + [(0.05, True, False)] * 5 + [(0.3, False, False)] * 2 + [(0.3, True, False)] * 3
             + [(0.5, False, False)] * 3 + [(0.5, True, False)] * 3 + [(0.7, False, False)] * 4
             + [(0.7, True, False)] * 2 + [(0.95, False, False)] * 5 + [(0.95, True, False)] * 2)
    p = np.array([x[0] for x in pairs])
    rel = np.array([x[1] for x in pairs])
    jud = rel | np.array([x[2] for x in pairs])
    check = check_reader_pairs(ReaderPairs(p, rel, jud, [f"q{i % 6}" for i in range(len(p))]), n_boot=100)
    assert check.verdict == "cannot" and check.fragility.flips_at == 1 and check.fragility.auc_after == 0.75
    irr = ~rel
    moved = np.flatnonzero(irr & ~jud)[np.argsort(p[irr & ~jud], kind="stable")]
    now = irr.copy()
    now[moved[0]] = False
    assert relabelled_aucs(p, irr, moved)[1] == auc(p, now) == 0.75


# ---------------------------------------------------------------- containment qrels: the judge


def test_on_containment_qrels_the_judge_is_a_model_and_rules_say_they_are_circular(tmp_path, tiny_model_dir, capsys):
    out, err = annotate_toy(tmp_path, tiny_model_dir, capsys)
    meta = json.loads((out / "meta.json").read_text())
    # qrels by containment over the whole corpus: every qrels pair agrees, no unjudged pair holds an answer
    assert meta["containment"] == {"qrels_pairs": 10, "qrels_agree": 10, "qrels_relevant": 10, "unjudged": 30,
                                   "unjudged_contained": 0, "judge": None}
    assert suggested_judge(meta) == str(tiny_model_dir)
    command = judge_command(out, meta)
    assert command.endswith(f"--unjudged judge --judge {tiny_model_dir}") and "--judge rules" not in command
    estimate = judge_estimate(30, meta)
    assert estimate.startswith(f"30 pairs to judge with --judge {tiny_model_dir}, a generated label a pair; not --judge "
                               "rules: answer containment relabels none of them (none holds an answer alias), and the "
                               "qrels agree with containment on every pair they judge: the rule that made them")
    assert "at least" in estimate and "pairs/s over 40 pairs" in estimate  # the folder's measured reader rate
    # run the rules judge anyway: 0 unjudged, and the output says by what rule
    rules = shlex.split(judge_command(out, meta, "rules"))
    assert main(rules[1:]) == 0  # with progress: it counts the 30 pairs it judges, not the runs' 40
    err = capsys.readouterr().err
    assert "judge relevance: 30 unjudged pairs, by --judge rules (answer containment; no model)" in err
    assert "judge relevance: 30/30 (100%)" in err and "/40" not in err
    assert err.index("judge relevance: 30") < err.index("relevance of these pairs: judge 30, qrels 10")
    caveat = ("  labels: the 30 pairs labelled by annotate's judge were judged by --judge rules, answer containment, and "
              "the qrels agree with containment on all 10 pairs they judge in the last annotate call (made by it, or "
              "indistinguishable from it): the same rule applied again, not an independent judgment (0 unjudged does "
              f"not mean judged); a model judges them: rerun with --judge {tiny_model_dir}")
    assert caveat in err.splitlines()
    check = udcg.reader_check(out, n_boot=200)
    assert check.n_unjudged == 0 and caveat in check.lines() and check.to_dict()["labels_caveat"] == caveat[10:]
    assert main(["reader-check", str(out), "--n-boot", "200"]) == 0 and caveat in capsys.readouterr().out.splitlines()
    # compare's block says it too, where it counts the judge's labels
    assert main(["compare", "--qrels", str(tmp_path / "toy" / "qrels" / "test.tsv"), "--utilities", str(out),
                 "--metrics", "UDCG@5,nDCG@5", "--n-boot", "200", "--run", str(tmp_path / "bm25.trec"),
                 "--run", str(tmp_path / "dense.trec")]) == 0
    assert caveat in capsys.readouterr().out.splitlines()
    assert labels_caveat({**meta, "containment": {**meta["containment"], "judge": str(tiny_model_dir)}},
                         {"judge": 30}) == ""  # a model's labels are another judgment


def test_a_model_judge_says_its_pairs_and_time_before_it_starts(tmp_path, tiny_model_dir, capsys):
    out, _ = annotate_toy(tmp_path, tiny_model_dir, capsys)
    meta = json.loads((out / "meta.json").read_text())
    argv = shlex.split(judge_command(out, meta))[1:] + ["--no-progress", "--limit", "1"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("judge relevance: "))
    assert line.startswith(f"judge relevance: 6 unjudged pairs to label with {tiny_model_dir} before the reader, a "
                           "generated reply (up to 128 tokens) a pair")
    assert err.index(line) < err.index("relevance of these pairs: ")
    assert json.loads((out / "meta.json").read_text())["containment"]["judge"] == str(tiny_model_dir)


def test_where_containment_adds_labels_the_command_stays_rules(tmp_path, tiny_model_dir, capsys):
    """A qrels that misses a passage holding the answer: --judge rules adds that label, so it stays the
    proposal (the packaged example's case: nq6's four Super Bowl passages)."""
    from tests.test_labels_short_answers import _folder

    folder, _ = _folder(tmp_path)
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text("".join(x + "\n" for x in qrels.read_text().splitlines() if not x.startswith("q2\tq2a0\t")))
    out, _ = annotate_toy(tmp_path, tiny_model_dir, capsys)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["containment"]["unjudged_contained"] == 1 and suggested_judge(meta) == "rules"
    assert judge_command(out, meta).endswith("--unjudged judge --judge rules")
    assert judge_estimate(31, meta).startswith("31 pairs to judge: --judge rules (answer containment) runs no model")


def test_the_dpr_trials_folder(tmp_path, capsys):
    """The DPR trial's utilities (tests/data/dpr-trial-qwen0.5b: the 0.5B reader's p_abs of BM25's and
    MiniLM's top 5 on scripts/make_dpr_trial.py's collection, its meta.json as annotate wrote it): the
    2 of 35 pairs the trial found by hand now hang the verdict, the command judges them with the
    folder's reader, not the rules, and the recorded labels block names dpr4's `2002`."""
    import shutil
    from pathlib import Path

    folder = tmp_path / "utilities"
    shutil.copytree(Path(__file__).parent / "data" / "dpr-trial-qwen0.5b", folder)
    check = udcg.reader_check(folder)
    assert (check.n_relevant, check.n_judged_irrelevant, check.n_unjudged) == (10, 0, 35)
    assert f"{check.auc:.3f}" == "0.666" and check.borderline and check.verdict == "cannot"
    fr = check.fragility
    assert fr.flips_at == 2 and fr.pairs == (("dpr3", "dpr:13258884"), ("dpr1", "dpr:239961")) and check.hangs_on_labels
    assert check.judge_command == (f"udcg annotate --corpus dpr-trial --run dpr-trial/runs/bm25.trec --run "
                                   f"dpr-trial/runs/dense.trec --depth 5 --model qwen2.5-coder-0.5b -o {folder} "
                                   "--unjudged judge --judge qwen2.5-coder-0.5b")
    assert check.judge_estimate.startswith("35 pairs to judge with --judge qwen2.5-coder-0.5b, a generated label a pair; "
                                           "not --judge rules")
    assert main(["reader-check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "  labels: 2 pairs would turn it to can (AUC 0.750, answers from 42% of the irrelevant pairs), relabelled " \
           "relevant (lowest p_abs first: dpr3 dpr:13258884, dpr1 dpr:239961), of the 35 unjudged pairs" in out
    assert "  containment of a short/numeric answer: labels likely loose: 1 of 5 queries (dpr4 `2002` 15 relevant;" in out
