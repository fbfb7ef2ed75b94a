"""Issue #51's pre-registered run (docs/results/README.md, "Pre-registration: does the reader check
predict where UDCG helps? (issue #51)"): its two configs, and their questions disjoint from every
published run's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from udcg.experiment.config import load_config
from udcg.experiment.reporting import question_order

ROOT = Path(__file__).resolve().parents[1]
CONFIGS, RESULTS = ROOT / "configs", ROOT / "docs" / "results"
TARGET = 200  # the plan's questions per arm


def _yaml(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def test_the_arms_are_the_published_configs_but_their_names_and_skip():
    """Arm A is nq-qwen1.5b-confirm's config, arm B nq-qwen0.5b-pool15's, each but its name and data.skip;
    the two arms differ only in the reader (so they answer identical contexts)."""
    for arm, published in (("nq-qwen1.5b-readercheck", "nq-qwen1.5b-confirm"), ("nq-qwen0.5b-readercheck", "nq-qwen0.5b-pool15")):
        new, old = _yaml(arm), _yaml(published)
        assert (new.pop("name"), old.pop("name")) == (arm, published)
        assert new["data"].pop("skip") == 350 and (new["data"].pop("limit"), old["data"].pop("limit")) == (5, 50)
        assert new == old
    a, b = _yaml("nq-qwen1.5b-readercheck"), _yaml("nq-qwen0.5b-readercheck")
    assert (a["reader"].pop("model"), b["reader"].pop("model")) == ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    assert {**a, "name": ""} == {**b, "name": ""}


def test_the_questions_are_unseen_by_every_published_run():
    """The arms' first 200 questions (the plan's target; a chunk's limit only cuts them) are the 351st to 550th
    of the seed-0 order, and none is a question of any published validate run (NQ or not)."""
    from udcg.experiment import questions
    from udcg.io.sources import default_data_dir, load_dataset

    data_dir = default_data_dir()
    if data_dir is None or not (data_dir / "nq-open-gold").is_dir():
        pytest.skip("no shared NQ data: set $UDCG_DATA_DIR to the folder holding nq-open-gold/")
    picked = {}
    for arm in ("nq-qwen1.5b-readercheck", "nq-qwen0.5b-readercheck"):
        cfg = load_config(CONFIGS / f"{arm}.yaml", [f"data.limit={TARGET}", f"data.data_dir={data_dir}"])
        picked[arm] = [q.qid for q in questions.select(load_dataset(cfg.data.questions, data_dir=cfg.data.data_dir), cfg)]
    a, b = picked.values()
    assert a == b and len(set(a)) == TARGET  # the same questions, in the same order, for both readers
    confirm = load_config(CONFIGS / "nq-qwen1.5b-confirm.yaml", [f"data.limit={350 + TARGET}", f"data.data_dir={data_dir}"])
    assert [q.qid for q in questions.select(load_dataset("nq", data_dir=confirm.data.data_dir), confirm)][350:] == a
    published = {folder.parent.parent.name: set(question_order(folder.parent.parent))
                 for folder in RESULTS.glob("*/data/pools.jsonl.gz") if not folder.parent.parent.name.endswith("-readercheck")}
    assert len(published) >= 8 and published["nq-qwen1.5b-confirm"] and all(s for s in published.values())
    assert {name: sorted(s & set(a)) for name, s in published.items() if s & set(a)} == {}


# ---------------------------------------------------------------- the analysis, on toy runs


def _toy(run: Path, contexts: list[tuple], passes: bool, n: int = 3) -> Path:
    import gzip
    import json

    from tests.test_results_table import _per_question

    _per_question(run, {"UDCG": [0.5] * n, "nDCG": [0.4] * n}, pair_acc={"UDCG": [0.8] * n, "nDCG": [0.7] * n})
    with gzip.open(run / "data" / "contexts.jsonl.gz", "wt") as fh:
        for qid, outcome, udcg, ndcg in contexts:
            fh.write(json.dumps({"qid": qid, "study": "main", "outcome": outcome,
                                 "metrics": {"UDCG": udcg, "nDCG": ndcg}}) + "\n")
    with gzip.open(run / "data" / "annotations.jsonl.gz", "wt") as fh:  # 12 relevant, 12 irrelevant pairs
        for i in range(24):
            relevant = i % 2 == 0
            p_abs = 0.1 if relevant else (0.9 if passes else 0.2)  # the failing reader answers from distractors
            fh.write(json.dumps({"qid": f"q{i % n + 1}", "p_abs": p_abs, "relevant": relevant}) + "\n")
    return run


def _arms(tmp_path, n_b: int = 3):
    # A: q1's pair tied by nDCG, UDCG right (S2 +0.5); q2 untied (no S2); q3 tied, UDCG wrong (-0.5): mean 0.
    a = _toy(tmp_path / "a", [("q1", "correct", 0.6, 0.3), ("q1", "wrong", 0.4, 0.3), ("q2", "correct", 0.7, 0.5),
                              ("q2", "abstained", 0.5, 0.2), ("q3", "abstained", 0.4, 0.0), ("q3", "wrong", 0.5, 0.0)], True)
    # B: q1 tied by both (S2 0); q2 tied by nDCG, UDCG right (+0.5); q3 untied, both wrong (S3 0): mean +0.25.
    b = _toy(tmp_path / "b", [("q1", "correct", 0.5, 0.3), ("q1", "wrong", 0.5, 0.3), ("q2", "correct", 0.6, 0.5),
                              ("q2", "wrong", 0.4, 0.5), ("q3", "correct", 0.4, 0.1), ("q3", "wrong", 0.5, 0.2)], False, n_b)
    return a, b


def _plan(module):
    return module.Plan(target=3, flips=2_000, boot=2_000, check_boot=100)


def test_the_analysis_by_hand(tmp_path):
    from tests.conftest import load_script

    module = load_script("reader_check_confirm")
    lines, rows = module.analysis(*_arms(tmp_path), _plan(module))
    text = "\n".join(lines)
    assert "| A | a | 1.000 [1.000, 1.000] | 0% | can | 2 | +0.0000 |" in text
    assert "| B | b | 1.000 [1.000, 1.000] | 100% | cannot | 2 | +0.2500 |" in text
    assert "- Delta = S2(A) − S2(B) = -0.2500," in text and "(2 and 2 usable questions, 1 in both)" in text
    assert "**verdict: not shown at this size: no difference detected**" in text  # 3 questions decide nothing
    secondary = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:3] for line in lines if line.startswith("| T")}
    assert secondary["T1 arm A's S2 (UDCG on nDCG's ties − 0.5)"] == ["2", "+0.0000"]
    assert secondary["T3 Delta on the questions usable in both arms, paired"] == ["1", "+0.5000"]  # q1: 0.5 - 0
    assert secondary["T4 S3 (UDCG − nDCG on the untied pairs), arm A − arm B"][0] == "1 / 1"  # q2 in A, q3 in B
    assert "- arm A: 3 pairs over 3 questions, nDCG ties 2 (66.7%)" in text and "S1 +0.1000." in text
    assert rows[0] == {"qid": "q1", "S2_A": 0.5, "S2_B": 0.0, "S3_A": None, "S3_B": None}


@pytest.mark.parametrize("a_passes, b_fails, p, delta, start", [
    (True, True, 0.01, 0.1, "supported"), (True, True, 0.01, -0.1, "contradicted"),
    (True, True, 0.2, 0.1, "not shown at this size"), (False, True, 0.01, 0.1, "not a test of the check"),
    (True, False, 0.01, 0.1, "not a test of the check")])
def test_the_decision_table(a_passes, b_fails, p, delta, start):
    from tests.conftest import load_script

    assert load_script("reader_check_confirm").decision(a_passes, b_fails, p, delta, 0.05).startswith(start)


def test_nothing_is_computed_or_written_before_the_target(tmp_path, capsys):
    from tests.conftest import load_script

    module = load_script("reader_check_confirm")
    a, b = _arms(tmp_path, n_b=2)
    out = tmp_path / "out"
    assert module.main([str(a), str(b), "--out", str(out)], _plan(module)) == 0
    assert "a: 3, b: 2 of 3 questions: incomplete" in capsys.readouterr().out and not out.exists()
    assert module.main([str(a), str(b), "--out", str(out)], _plan(module)._replace(target=2)) == 0
    assert (out / "README.md").is_file() and "**verdict:" in (out / "README.md").read_text(encoding="utf-8")
    assert module.main([str(a), str(tmp_path / "not-yet")], _plan(module)) == 0  # before arm B's first chunk
    assert "a: 3, not-yet: 0 of 3 questions: incomplete" in capsys.readouterr().out


def test_the_published_analysis_rebuilds(tmp_path, monkeypatch, capsys):
    """The verdict (written once both runs hold 200 questions by scripts/reader_check_confirm.py --out)."""
    from tests.conftest import load_script

    published = RESULTS / "reader-check-confirm"
    if not (published / "README.md").is_file():
        pytest.skip("the runs have not reached the plan's 200 questions yet")
    monkeypatch.chdir(ROOT)
    out = tmp_path / "reader-check-confirm"
    runs = ["docs/results/nq-qwen1.5b-readercheck", "docs/results/nq-qwen0.5b-readercheck"]
    assert load_script("reader_check_confirm").main([*runs, "--out", str(out)]) == 0
    capsys.readouterr()
    readme = (out / "README.md").read_text(encoding="utf-8").replace(out.as_posix(), "docs/results/reader-check-confirm")
    assert readme == (published / "README.md").read_text(encoding="utf-8") and "**verdict: " in readme
    assert (out / "per-question.jsonl.gz").read_bytes() == (published / "per-question.jsonl.gz").read_bytes()
