"""Issue #48 item 6 (the label half): on the packaged example, with the relevance labels removed or
loosened on purpose, the label checks and the fragility appear, and nothing else in the output
changes. The utilities are a real annotation of the three runs' top 5 by smollm2-135m, kept as its
resume cache (tests/data/nq-example-smollm2/annotations.jsonl): `udcg annotate` rebuilds the
folder from it without loading the model, for the qrels each test gives."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

import udcg
from udcg.cli import main
from udcg.io.sources import example_path
from udcg.io.trec import read_run
from udcg.metrics.gains import ranked_docids

CACHE = Path(__file__).parent / "data" / "nq-example-smollm2" / "annotations.jsonl"
RUNS = ("bm25", "dense", "hybrid")
MODEL = "smollm2-135m"


def _qrels(folder: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        out.setdefault(q, {})[d] = int(r)
    return out


def _write_qrels(folder: Path, qrels: dict[str, dict[str, int]]) -> None:
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, docs in qrels.items() for d, r in docs.items()))


def _example(tmp: Path, name: str, change=None) -> Path:
    folder = tmp / name
    shutil.copytree(example_path(), folder)
    if change is not None:
        _write_qrels(folder, change(_qrels(folder), folder))
    return folder


def _annotate(folder: Path, out: Path, capsys) -> str:
    out.mkdir()
    shutil.copy(CACHE, out / "annotations.jsonl")
    argv = ["annotate", "--corpus", str(folder), "--depth", "5", "--model", MODEL, "-o", str(out), "--no-progress"]
    for run in RUNS:
        argv += ["--run", str(folder / "runs" / f"{run}.trec")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "(no model loaded)" in err  # every pair's p_abs from the cache
    return err


def _compare(folder: Path, utilities: Path, capsys, *extra: str, metrics: str = "UDCG@5,nDCG@5,P@5",
             qrels: Path | None = None) -> tuple[str, str]:
    argv = ["compare", "--qrels", str(qrels or folder / "qrels" / "test.tsv"), "--utilities", str(utilities),
            "--metrics", metrics, "--n-boot", "500", *extra]
    for run in RUNS:
        argv += ["--run", str(folder / "runs" / f"{run}.trec")]
    assert main(argv) == 0
    out = capsys.readouterr()
    return out.out, out.err


def _block(text: str) -> tuple[list[str], list[str]]:
    """(the label block's lines, every other line) of compare's output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("labels ("))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end], lines[:start] + lines[end:]


def _row(out: str, run_a: str) -> str:
    """The 'significant' cell of UDCG@2, run_a vs hybrid."""
    return next(line for line in out.splitlines() if line.startswith(f"| UDCG@2 | {run_a} | hybrid |")).split("|")[-2].strip()


def _drop_half(qrels: dict, folder: Path) -> dict:
    """Every other query loses its relevant passage; it keeps one judged-irrelevant passage that no
    run retrieves, so the query stays among the scored ones (the qrels' queries)."""
    runs = [read_run(folder / "runs" / f"{r}.trec") for r in RUNS]
    corpus = [json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_text().splitlines()]
    out = {}
    for i, (q, docs) in enumerate(sorted(qrels.items(), key=lambda kv: int(kv[0][2:]))):
        if i % 2:
            out[q] = docs
            continue
        retrieved = {d for run in runs for d in ranked_docids(run[q])}
        out[q] = {next(d for d in corpus if d not in retrieved and d not in docs): 0}
    return out


def _loosen(qrels: dict, folder: Path) -> dict:
    """nq4's qrels mark 20% of the corpus relevant (60 of 299 passages), its gold passage among them."""
    corpus = [json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_text().splitlines()]
    loose = dict(qrels)
    loose["nq4"] = {**qrels["nq4"], **{d: 1 for d in [d for d in corpus if d not in qrels["nq4"]][:59]}}
    return loose


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return tmp_path_factory.mktemp("labels")


def _plain(folders: Path, name: str, capsys) -> tuple[Path, Path]:
    """The packaged example and its utilities, the labels as shipped."""
    plain = _example(folders, f"plain-{name}")
    _annotate(plain, folders / f"utilities-{name}", capsys)
    return plain, folders / f"utilities-{name}"


def test_annotate_prints_and_records_the_block(folders, capsys):
    folder = _example(folders, "plain-a")
    err = _annotate(folder, folders / "utilities-a", capsys)
    assert "labels (qrels, top 5 of each run): unjudged pairs, counted irrelevant (R = -1): bm25 82/100 (82%), " \
           "dense 80/100 (80%), hybrid 81/100 (81%)" in err
    meta = json.loads((folders / "utilities-a" / "meta.json").read_text())
    assert meta["labels"]["corpus_size"] == 299 and meta["labels"]["zero_relevant"] == []
    assert meta["labels"]["lines"] == [line for line in err.splitlines() if line.startswith("labels (")]
    assert main(["reader-check", str(folders / "utilities-a")]) == 0
    assert meta["labels"]["lines"][0] in capsys.readouterr().out


def test_half_the_relevant_labels_dropped(folders, capsys):
    plain, utilities = _plain(folders, "b", capsys)
    dropped = _example(folders, "dropped", _drop_half)
    err = _annotate(dropped, folders / "utilities-dropped", capsys)
    assert "queries without a relevant document: 10 of 20 (nq0, nq2, nq4, nq6, nq8, ... (all: udcg -v))" in err
    # on the dropped labels, dense beats hybrid on UDCG@2, and the block says that hangs on one pair
    out, _ = _compare(dropped, folders / "utilities-dropped", capsys, metrics="UDCG@2,nDCG@5,P@5")
    assert "| UDCG@2 | dense | hybrid | 0.0165 [0.0000, 0.0413] | 11 / 6 / 3 |" in out and _row(out, "dense") == "yes"
    block, _ = _block(out)
    assert len(block) == 3 and "queries without a relevant document: 10 of 20" in block[1]
    assert block[2].startswith("  fragility: UDCG@2 dense vs hybrid ends (not significant) with 1 of its 45 unjudged "
                               "pairs relabelled relevant")
    head, command = block[2].split("it hangs on the unjudged labels: judge them (45 pairs): ")
    assert command == (f"udcg annotate --corpus {dropped} --run {dropped}/runs/dense.trec --run "
                       f"{dropped}/runs/hybrid.trec --depth 2 --model {MODEL} -o {folders / 'utilities-dropped'} "
                       "--unjudged judge --judge rules")  # flows.reader_check.judge_command, as the reader check's
    # the command works: the rules judge labels the 45 pairs (no model time) and the difference is gone
    assert main([*shlex.split(command)[1:], "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "(no model loaded)" in err and "relevance of these pairs: judge 45, qrels 10" in err
    out, _ = _compare(dropped, folders / "utilities-dropped", capsys, metrics="UDCG@2,nDCG@5,P@5")
    assert _row(out, "dense") == "no" and "fragility: UDCG@2 dense vs hybrid" not in out
    assert "; of them labelled by annotate's judge in the utilities (UDCG reads its label): bm25 " in out
    # nothing else changes: UDCG@5 on the same utilities, with the plain and the dropped qrels
    before, _ = _compare(plain, utilities, capsys, metrics="UDCG@5")
    after, _ = _compare(plain, utilities, capsys, metrics="UDCG@5", qrels=dropped / "qrels" / "test.tsv")
    (first, *_), rest_before = _block(before)
    block_after, rest_after = _block(after)
    assert rest_after == rest_before and first.startswith("labels (")
    assert "queries without a relevant document: 10 of 20" in block_after[1]


def test_a_query_whose_qrels_match_a_fifth_of_the_corpus(folders, capsys):
    plain, utilities = _plain(folders, "c", capsys)
    loose = _example(folders, "loose", _loosen)
    err = _annotate(loose, folders / "utilities-loose", capsys)
    assert "implausible relevant counts: 1 of 20 queries (nq4 60 = 20% of the corpus; flagged at >= 10 relevant)" in err
    after, _ = _compare(plain, utilities, capsys, qrels=loose / "qrels" / "test.tsv", metrics="UDCG@5")
    block, _ = _block(after)
    assert "implausible relevant counts: 1 of 20 queries (nq4 60;" in block[1]  # no corpus size in compare
    plain_udcg, _ = _compare(plain, utilities, capsys, metrics="UDCG@5")
    assert _block(after)[1] == _block(plain_udcg)[1]  # the rest, byte for byte
    rows = folders / "rows.tsv"
    _, err = _compare(plain, utilities, capsys, "--label-rows", str(rows), qrels=loose / "qrels" / "test.tsv")
    assert "nq4\t60\tnan\tfalse\ttrue\t" in rows.read_text()
    main(["-v", "compare", "--qrels", str(loose / "qrels" / "test.tsv"), "--utilities", str(utilities), "--metrics",
          "UDCG@5", "--n-boot", "200", *[x for r in RUNS for x in ("--run", str(plain / "runs" / f"{r}.trec"))]])
    assert "  query nq4: 60 relevant (implausible)" in capsys.readouterr().err


def test_the_python_api_carries_the_checks(folders, capsys):
    plain, utilities = _plain(folders, "d", capsys)
    runs = {r: plain / "runs" / f"{r}.trec" for r in RUNS}
    scores = udcg.evaluate(runs["bm25"], plain / "qrels" / "test.tsv", utilities=utilities, metrics="UDCG@5,nDCG@5")
    assert scores.labels.unjudged == (82,) and scores.labels.ranked == (100,)
    cmp = udcg.compare(runs, plain / "qrels" / "test.tsv", utilities=utilities, metrics="UDCG@5", n_boot=200)
    assert any(note.startswith("labels (qrels, top 5") for note in cmp.to_dict()["notes"])
