"""An output never replaces one of the command's own inputs: for every command, ``-o`` naming an
input file (or a file inside an input folder) is a one-line error, exit 2, and the input is
unchanged byte for byte. The check runs before any work (``udcg.cli``), so no model is loaded."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from udcg.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def example(tmp_path):
    assert main(["example", str(tmp_path / "ex")]) == 0
    return tmp_path / "ex"


@pytest.fixture
def contexts(tmp_path):
    """A real judged contexts file (the published NQ run's contexts, first 40 lines)."""
    lines = gzip.open(ROOT / "docs/results/nq-qwen0.5b/data/contexts.jsonl.gz", "rt").read().splitlines()[:40]
    path = tmp_path / "contexts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _refused(capsys, argv: list[str], victim: Path) -> None:
    before = victim.read_bytes()
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("udcg ") and ": error: -o " in err[0], err
    assert victim.read_bytes() == before


def test_score_and_compare_refuse_to_write_over_a_run_or_the_qrels(example, capsys):
    run, qrels = example / "runs/bm25.trec", example / "qrels/test.tsv"
    _refused(capsys, ["score", "--run", str(run), "--qrels", str(qrels), "--metrics", "P@5", "-o", str(run)], run)
    _refused(capsys, ["compare", "--run", str(run), "--run", str(example / "runs/dense.trec"), "--qrels", str(qrels),
                      "--metrics", "P@5", "-o", str(qrels)], qrels)


def test_a_link_to_an_input_is_the_input(example, tmp_path, capsys):
    run = example / "runs/bm25.trec"
    link = tmp_path / "link.tsv"
    link.symlink_to(run)
    _refused(capsys, ["score", "--run", str(run), "--qrels", str(example / "qrels/test.tsv"), "--metrics", "P@5",
                      "-o", str(link)], run)


def test_annotate_refuses_its_input_file_and_a_file_inside_the_corpus_folder(example, tmp_path, capsys):
    src = tmp_path / "authors.jsonl"
    shutil.copy(ROOT / "udcg/data/popqa-sample.jsonl", src)
    _refused(capsys, ["annotate", str(src), "-o", str(src), "--model", "smollm2-135m"], src)
    # the corpus folder as the utilities folder would write among the collection's files
    corpus = example / "corpus.jsonl"
    _refused(capsys, ["annotate", "--corpus", str(example), "--run", str(example / "runs/bm25.trec"), "--depth", "2",
                      "--model", "smollm2-135m", "-o", str(example)], corpus)


def test_answer_refuses_to_write_over_a_run_or_a_corpus_file(example, capsys):
    run = example / "runs/bm25.trec"
    _refused(capsys, ["answer", "--corpus", str(example), "--run", str(run), "--k", "5", "--model", "smollm2-135m",
                      "-o", str(run)], run)
    _refused(capsys, ["answer", "--corpus", str(example), "--run", str(run), "--k", "5", "--model", "smollm2-135m",
                      "-o", str(example / "queries.jsonl")], example / "queries.jsonl")


def test_judge_fit_theta_and_correlate_refuse_their_contexts_file(contexts, capsys):
    _refused(capsys, ["judge", "answer", str(contexts), "-o", str(contexts), "--judge", "rules"], contexts)
    _refused(capsys, ["fit-theta", str(contexts), "--k", "5", "-o", str(contexts)], contexts)
    _refused(capsys, ["correlate", str(contexts), "--metrics", "UDCG,nDCG", "-o", str(contexts)], contexts)


def test_report_refuses_a_data_file_of_its_run_but_rebuilds_the_run_folder_in_place(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs/results/nq-qwen0.5b", run, ignore=shutil.ignore_patterns("cache"))
    victim = run / "data" / "notes.json"
    _refused(capsys, ["report", str(run), "-o", str(victim)], victim)
    assert main(["report", str(run), "-o", str(run)]) == 0  # the documented in-place rebuild
    capsys.readouterr()


def test_a_new_output_beside_the_inputs_is_fine(example, capsys):
    out = example / "runs" / "per_query.tsv"
    assert main(["score", "--run", str(example / "runs/bm25.trec"), "--qrels", str(example / "qrels/test.tsv"),
                 "--metrics", "P@5", "-o", str(out)]) == 0
    capsys.readouterr()
    assert out.is_file()
