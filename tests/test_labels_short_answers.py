"""Issue #48, after the DPR trial (docs/trial-dpr.md): a query whose relevant labels rest on answer
containment of a bare number or a short token (dpr4's ``2002``: 15 passages, 9 of them wrong, at
3.75 times the median) is named in the labels block where the answers are at hand, in every place
the block goes (annotate's text, ``-v``, meta.json, the API, compare's block and --label-rows from the
folder's record); the blind implausible-count rule is unchanged where it fires."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import udcg
from udcg.cli import main
from udcg.metrics.labels import LOOSE_MIN, SHORT_FACTOR, SHORT_MIN, label_check
from udcg.text import contains_answer, short_answer

# the DPR trial's five queries and relevant counts by containment (scripts/make_dpr_trial.py's output)
DPR_COUNTS = {"dpr0": 4, "dpr1": 6, "dpr2": 2, "dpr3": 1, "dpr4": 15}
DPR_SHORT = {"dpr4": "2002"}  # the others: the Saint Lawrence River, Roy Raymond, ... (none short)


def _check(counts: dict[str, int], short: dict[str, str] | None, corpus_size: int | None = 751):
    qids = list(counts)
    top_k = {"run": ([0] * len(qids), [5] * len(qids))}  # (unjudged, ranked) per query
    return label_check(qids, list(counts.values()), top_k, k=5, corpus_size=corpus_size,
                       short_answers=None if short is None else {q: short.get(q, "") for q in qids})


@pytest.mark.parametrize("answers, short", [(["2002"], "2002"), (["3"], "3"), (["four"], "four"), (["UK"], "UK"),
                                            (["1,000"], "1,000"), (["Roy Raymond"], ""), (["three"], "three"),
                                            (["Saint Lawrence River"], ""), (["Gordon Wharmby", "1999"], "1999"),
                                            (["Wexner"], "")])
def test_what_a_short_answer_is(answers, short):
    assert short_answer(answers) == short


def test_the_dpr_trials_counts_flag_dpr4_and_the_blind_rule_does_not():
    blind = _check(DPR_COUNTS, None)
    assert blind.implausible == () and blind.short_loose == () and len(blind.lines()) == 1  # as in the trial
    check = _check(DPR_COUNTS, DPR_SHORT)
    assert check.loose_at == blind.loose_at == pytest.approx(37.55)  # 5% of 751 (10 x the median 4 = 40): the blind rule as before
    assert check.short_at == max(SHORT_MIN, SHORT_FACTOR * 4) == 8 and [q.qid for q in check.short_loose] == ["dpr4"]
    assert check.lines()[1] == (
        "  containment of a short/numeric answer: labels likely loose: 1 of 5 queries (dpr4 `2002` 15 relevant; "
        "flagged at >= 8 relevant, 2x the median 4 and at least 5, for an answer that is a bare number or one token "
        "of <= 4 characters): made by answer containment, such qrels mark every passage where the token occurs; "
        "check them before reading any measure")
    data = check.to_dict()
    assert data["short_loose"] == ["dpr4"] and data["short_at"] == 8
    assert data["thresholds"]["short_min"] == SHORT_MIN and data["thresholds"]["short_factor"] == SHORT_FACTOR
    row = next(r for r in data["per_query"] if r["qid"] == "dpr4")
    assert row["short_answer"] == "2002" and row["short_loose"] is True
    # a short answer at the median is not flagged: the rule needs both the answer and the count
    assert _check({**DPR_COUNTS, "dpr4": 4}, DPR_SHORT).short_loose == ()


def test_the_biomedical_trials_answer_is_named_once():
    """``3`` in 708 of 3,572 passages: the blind rule fires as before and names the answer; the
    short line does not repeat it."""
    counts = {"b1": 708, "b2": 3, "b3": 2, "b4": 4, "b5": 1}
    blind, check = _check(counts, None, 3572), _check(counts, {"b1": "3"}, 3572)
    assert [q.qid for q in check.implausible] == [q.qid for q in blind.implausible] == ["b1"]
    assert check.loose_at == blind.loose_at == max(LOOSE_MIN, min(30, 0.05 * 3572))
    assert len(check.lines()) == 2 and "b1 708 = 20% of the corpus, answer `3`;" in check.lines()[1]


# ---------------------------------------------------------------- a toy collection, qrels by containment

ANSWERS = {"q1": ["2002"], "q2": ["Roy Raymond"], "q3": ["Saint Lawrence River"], "q4": ["Leslie Wexner"],
           "q5": ["Gordon Wharmby"]}
QUESTIONS = {"q1": "when did the actor who played wesley die", "q2": "who was the creator of victoria's secret",
             "q3": "where do the great lakes meet the ocean", "q4": "who bought victoria's secret",
             "q5": "who played wesley in last of the summer wine"}


def _corpus() -> dict[str, str]:
    docs = {}
    for i in range(8):  # "2002" in 8 passages, one of them about the question
        docs[f"y{i}"] = ("Gordon Wharmby, who played Wesley, died in 2002." if i == 0 else
                         f"A passage about topic {i} that mentions the year 2002 in passing.")
    for q, (alias,) in ANSWERS.items():
        if q != "q1":
            docs.update({f"{q}a{j}": f"Passage {j} says that {alias} is the answer to {QUESTIONS[q]}." for j in range(3)})
    docs.update({f"f{i}": f"An unrelated filler passage number {i} about weather and rivers." for i in range(80)})
    return docs


def _folder(tmp: Path) -> tuple[Path, list[Path]]:
    """A BEIR folder whose qrels are answer containment over the whole corpus (as the DPR trial's),
    and two runs whose top 5 mix relevant passages with fillers."""
    folder = tmp / "toy"
    (folder / "qrels").mkdir(parents=True)
    docs = _corpus()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": QUESTIONS[q], "metadata": {
        "answers": a}}) + "\n" for q, a in ANSWERS.items()))
    qrels = {q: [d for d, t in docs.items() if contains_answer(t, a)] for q, a in ANSWERS.items()}
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t1\n" for q, ds in qrels.items() for d in ds))
    runs = []
    for r, name in enumerate(("bm25", "dense")):
        path = tmp / f"{name}.trec"
        lines = []
        for n, q in enumerate(ANSWERS):
            top = [qrels[q][r]] + [f"f{(5 * n + 2 * r + j) % 80}" for j in range(4)]
            lines += [f"{q} Q0 {d} {i + 1} {10 - i} {name}\n" for i, d in enumerate(top)]
        path.write_text("".join(lines))
        runs.append(path)
    return folder, runs


def annotate_toy(tmp: Path, model: Path, capsys, *extra: str, out: Path | None = None) -> tuple[Path, str]:
    folder, runs = _folder(tmp) if not (tmp / "toy").exists() else (tmp / "toy", [tmp / "bm25.trec", tmp / "dense.trec"])
    out = out or tmp / "utilities"
    argv = [*extra, "annotate", "--corpus", str(folder), "--depth", "5", "--model", str(model), "-o", str(out),
            "--no-progress", *[x for r in runs for x in ("--run", str(r))]]
    assert main(argv) == 0
    return out, capsys.readouterr().err


def test_annotate_names_the_short_answer_query_everywhere(tmp_path, tiny_model_dir, capsys):
    out, err = annotate_toy(tmp_path, tiny_model_dir, capsys, "-v")
    # relevant by containment: q1 8, q2..q5 3 each: median 3, so flagged at max(5, 6) = 6; 8 < 10 = the blind rule's
    line = next(x for x in err.splitlines() if "containment of a short/numeric answer" in x)
    assert line.startswith("  containment of a short/numeric answer: labels likely loose: 1 of 5 queries (q1 `2002` "
                           "8 relevant; flagged at >= 6 relevant")
    assert "implausible relevant counts" not in err
    assert "  query q1: 8 relevant (short/numeric answer `2002`: labels likely loose)" in err  # -v
    meta = json.loads((out / "meta.json").read_text())
    assert meta["labels"]["short_loose"] == ["q1"] and meta["labels"]["short_answers"] == {"q1": "2002"}
    assert line in meta["labels"]["lines"]
    # the API: annotate's report carries the check
    report = udcg.annotate_runs(tmp_path / "toy", [tmp_path / "bm25.trec", tmp_path / "dense.trec"], out,
                                str(tiny_model_dir), depth=5, show_progress=False)
    assert [q.qid for q in report.labels.short_loose] == ["q1"]
    # compare and score read no answers: they take the ones annotate recorded with the utilities
    rows = tmp_path / "rows.tsv"
    argv = ["compare", "--qrels", str(tmp_path / "toy" / "qrels" / "test.tsv"), "--utilities", str(out), "--metrics",
            "UDCG@5,nDCG@5", "--n-boot", "200", "--label-rows", str(rows),
            "--run", str(tmp_path / "bm25.trec"), "--run", str(tmp_path / "dense.trec")]
    capsys.readouterr()
    assert main(argv) == 0
    assert "containment of a short/numeric answer: labels likely loose: 1 of 5 queries (q1 `2002` 8 relevant;" \
        in capsys.readouterr().out
    header, *lines = rows.read_text().splitlines()
    assert header.split("\t")[:7] == ["qid", "relevant", "corpus_share", "zero_relevant", "implausible", "short_answer",
                                      "short_loose"]
    assert next(x for x in lines if x.startswith("q1\t")).split("\t")[1:7] == ["8", "nan", "false", "false", "2002",
                                                                             "true"]
    scores = udcg.evaluate(tmp_path / "bm25.trec", tmp_path / "toy" / "qrels" / "test.tsv", utilities=out,
                           metrics="UDCG@5")
    assert [q.qid for q in scores.labels.short_loose] == ["q1"]
    # without the utilities' record (a qrels file alone) no answers are at hand: no line, as before
    scores = udcg.evaluate(tmp_path / "bm25.trec", tmp_path / "toy" / "qrels" / "test.tsv", metrics="nDCG@5")
    assert scores.labels.short_at is None and scores.labels.short_loose == ()
