"""``irds:NAME`` inputs (issue 37): ir_datasets datasets built from local files, offline, read wherever
udcg reads a corpus, queries or qrels (annotate, answer, score, compare, the validation's data sets,
the Python API, udcg.pyterrier), with the same results as the same data given as a BEIR folder.

The datasets are the packaged example written as TSV / TREC files and registered by a module named
in ``$UDCG_IRDS_MODULES`` (as a user names a dataset of their own): ``udcg-example/nq``
(``ir_datasets.create_dataset``: docs without titles, which the reader's prompt leaves out anyway,
queries without answers, qrels), ``udcg-example/nq-answers`` (docs with titles, queries with an
``answers`` field, the same qrels) and ``udcg-example/docs-only``. The
reader is a real OpenAI-compatible server on 127.0.0.1 (``scripts/instant_openai_server.py``).
The memory at scale (1M documents, 2,000 pairs) is measured by ``scripts/bench_irds_memory.py``."""

from __future__ import annotations

import json

import pytest

import udcg
from tests.conftest import load_script
from udcg.cli import main
from udcg.errors import InputError
from udcg.io.sources import example_path, load_dataset

EX = example_path()
RUN = EX / "runs" / "bm25.trec"
REGISTER = '''
import json, typing
import ir_datasets
from ir_datasets.formats import BaseQueries

FOLDER = {folder!r}


class AnswerQuery(typing.NamedTuple):
    query_id: str
    text: str
    answers: typing.Tuple[str, ...]


class TitledDoc(typing.NamedTuple):
    doc_id: str
    title: str
    text: str


class AnswerQueries(BaseQueries):
    def queries_iter(self):
        for line in open(FOLDER + "/queries.jsonl", encoding="utf-8"):
            obj = json.loads(line)
            yield AnswerQuery(obj["_id"], obj["text"], tuple(obj["metadata"]["answers"]))

    def queries_cls(self):
        return AnswerQuery


files = ir_datasets.create_dataset(docs_tsv=FOLDER + "/docs.tsv", queries_tsv=FOLDER + "/queries.tsv",
                                   qrels_trec=FOLDER + "/qrels.trec")
ir_datasets.registry.register("udcg-example/nq", files)
titled = ir_datasets.formats.TsvDocs(ir_datasets.util.LocalDownload(FOLDER + "/titled.tsv"), doc_cls=TitledDoc)
ir_datasets.registry.register("udcg-example/nq-answers", ir_datasets.Dataset(titled, AnswerQueries(), files.qrels_handler()))
ir_datasets.registry.register("udcg-example/docs-only", ir_datasets.create_dataset(docs_tsv=FOLDER + "/docs.tsv"))
'''


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("irds")
    docs = [json.loads(line) for line in (EX / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (EX / "queries.jsonl").open()]
    (folder / "docs.tsv").write_text("".join(f"{d['_id']}\t{d['text']}\n" for d in docs))  # no titles: the
    (folder / "titled.tsv").write_text("".join(f"{d['_id']}\t{d['title']}\t{d['text']}\n" for d in docs))  # prompt has none
    (folder / "queries.tsv").write_text("".join(f"{q['_id']}\t{q['text']}\n" for q in queries))
    (folder / "queries.jsonl").write_text((EX / "queries.jsonl").read_text())
    rows = [line.split("\t") for line in (EX / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    (folder / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in rows))
    (folder / "udcg_irds_testsets.py").write_text(REGISTER.format(folder=str(folder)))
    with load_script("instant_openai_server").Process(0.0) as server, pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(folder))
        mp.setenv("UDCG_IRDS_MODULES", "udcg_irds_testsets")
        mp.setenv("OPENAI_API_KEY", "sk-irds-tests")
        yield server


def _annotate(corpus: str, out, server, capsys, *extra: str) -> str:
    capsys.readouterr()
    assert main(["annotate", "--corpus", corpus, "--run", str(RUN), "--depth", "5", "--model", "bench", "--api-base",
                 server.url, "-o", str(out), "--no-progress", *extra]) == 0
    return capsys.readouterr().err


def test_annotate_reads_the_docstore_and_writes_what_the_beir_folder_gives(datasets, tmp_path, capsys):
    err = _annotate("irds:udcg-example/nq", tmp_path / "irds", datasets, capsys)
    assert "corpus: 83 documents looked up in the ir_datasets docstore, 83 found" in err
    assert "relevance of these pairs: qrels 18, unjudged-irrelevant 82" in err  # the dataset's qrels
    _annotate(str(EX), tmp_path / "beir", datasets, capsys)
    for name in ("utilities.qrels", "utilities.jsonl"):
        assert (tmp_path / "irds" / name).read_bytes() == (tmp_path / "beir" / name).read_bytes()


def test_score_compare_and_the_api_take_irds_qrels(datasets, tmp_path, capsys):
    _annotate("irds:udcg-example/nq", tmp_path / "u", datasets, capsys)
    outputs = []
    for qrels in ("irds:udcg-example/nq", str(EX / "qrels" / "test.tsv")):
        assert main(["score", "--run", str(RUN), "--qrels", qrels, "--utilities", str(tmp_path / "u"), "--metrics",
                     "UDCG@5,nDCG@5", "-o", str(tmp_path / "s.tsv")]) == 0
        assert main(["compare", "--run", str(RUN), "--run", str(EX / "runs" / "dense.trec"), "--qrels", qrels,
                     "--metrics", "nDCG@5,P@5"]) == 0
        outputs.append(((tmp_path / "s.tsv").read_text(), capsys.readouterr().out))
    assert outputs[0] == outputs[1] and "| bm25 |" in outputs[0][1]
    a = udcg.evaluate(RUN, "irds:udcg-example/nq", utilities=tmp_path / "u", metrics="UDCG@5,nDCG@5")
    assert a.per_query() == udcg.evaluate(RUN, EX / "qrels" / "test.tsv", utilities=tmp_path / "u",
                                          metrics="UDCG@5,nDCG@5").per_query()


def test_answers_come_from_the_queries_where_the_dataset_has_them(datasets, tmp_path, capsys, monkeypatch):
    err = _annotate("irds:udcg-example/nq-answers", tmp_path / "a", datasets, capsys, "--unjudged", "judge")
    assert "relevance of these pairs: judge 82, qrels 18" in err  # the unjudged judged against the dataset's answers
    with pytest.raises(InputError, match=r"irds:udcg-example/nq: 20 question\(s\) without 'answers'"):
        udcg.annotate_runs("irds:udcg-example/nq", [RUN], tmp_path / "b", "bench", depth=5, api_base=datasets.url,
                           unjudged="judge", show_progress=False)
    monkeypatch.setenv("OPENAI_BASE_URL", datasets.url)  # where openai:bench is served
    for corpus, out in (("irds:udcg-example/nq-answers", "irds.jsonl"), (str(EX), "beir.jsonl")):
        assert main(["answer", "--corpus", corpus, "--run", str(RUN), "--k", "3", "--model", "openai:bench",
                     "-o", str(tmp_path / out), "--no-progress"]) == 0
    assert (tmp_path / "irds.jsonl").read_bytes() == (tmp_path / "beir.jsonl").read_bytes()


def test_the_validation_reads_queries_with_answers_and_their_judged_documents(datasets):
    questions = load_dataset("irds:udcg-example/nq-answers", limit=3)
    assert [q.qid for q in questions] == ["nq0", "nq1", "nq2"]
    assert all(q.answers and len(q.passages) == 1 and q.passages[0].relevant for q in questions)
    assert questions[0].passages[0].text.startswith("The first Nobel Prize in Physics")
    with pytest.raises(InputError, match="irds:udcg-example/nq: the dataset's queries have no reference answers"):
        load_dataset("irds:udcg-example/nq")


def test_pyterrier_frames_from_irds(datasets):
    topics = udcg.pyterrier.topics("irds:udcg-example/nq")
    qrels = udcg.pyterrier.qrels("irds:udcg-example/nq")
    assert len(topics) == 20 and list(topics.columns) == ["qid", "query"]
    assert qrels.equals(udcg.pyterrier.qrels(EX / "qrels" / "test.tsv"))


def test_what_a_dataset_lacks_is_one_line(datasets, tmp_path, capsys):
    cases = [("irds:udcg-example/docs-only", "this ir_datasets dataset has no queries (give a queries file with --queries)"),
             ("irds:no/such-dataset", "ir_datasets has no dataset 'no/such-dataset'")]
    for corpus, message in cases:
        assert main(["annotate", "--corpus", corpus, "--run", str(RUN), "--depth", "5", "--model", "bench",
                     "--api-base", datasets.url, "-o", str(tmp_path / "x"), "--no-progress"]) == 2
        err = capsys.readouterr().err  # udcg's one-line error last (ir_datasets quiet: see the test below)
        assert message in err.splitlines()[-1] and "Traceback" not in err
    err = _annotate("irds:udcg-example/docs-only", tmp_path / "y", datasets, capsys, "--queries", str(EX / "queries.jsonl"))
    assert "relevance of these pairs: unjudged-irrelevant 100" in err  # no qrels in the dataset: none judged


def test_a_validate_config_takes_an_irds_data_set(datasets):
    from udcg.experiment.config import from_dict, to_yaml
    from udcg.experiment.questions import retrieve_pools

    cfg = from_dict({"data": {"questions": "irds:udcg-example/nq-answers", "limit": 3},
                     "pool": {"source": "bm25", "size": 5}})
    assert "questions: irds:udcg-example/nq-answers" in to_yaml(cfg)
    pooled, _ = retrieve_pools(cfg)
    assert [q.qid for q in pooled] == ["nq0", "nq1", "nq2"] and all(len(q.passages) == 5 for q in pooled)
    assert all(any(p.relevant for p in q.passages) for q in pooled)  # the judged document is in its pool
    with pytest.raises(InputError, match="irds:udcg-example/nq: the dataset's queries have no reference answers"):
        retrieve_pools(from_dict({"data": {"questions": "irds:udcg-example/nq", "limit": 3}}))


def test_on_bad_input_udcg_error_is_the_only_line_and_bars_only_where_progress_is(tmp_path):
    """ir_datasets printed "[INFO] [starting] building docstore", its bar and "[INFO] Opening ... with
    direct file access" before udcg's one-line error (under --no-progress too). Now its logger is
    quiet while udcg reads (restored after), and its bar is drawn only where progress is asked for.
    Each run is a fresh process on a dataset whose docstore is not built yet."""
    import logging
    import os
    import subprocess
    import sys

    from udcg.io import irds

    def run(name: str, *extra: str, env: dict | None = None) -> list[str]:
        folder = tmp_path / name
        folder.mkdir()
        docs = [json.loads(line) for line in (EX / "corpus.jsonl").open()]
        (folder / "docs.tsv").write_text("".join(f"{d['_id']}\t{d['text']}\n" for d in docs))
        (folder / f"udcg_irds_{name}.py").write_text(
            "import ir_datasets\nir_datasets.registry.register("
            f"'udcg-fresh/{name}', ir_datasets.create_dataset(docs_tsv={str(folder / 'docs.tsv')!r}))\n")
        done = subprocess.run(
            [sys.executable, "-m", "udcg", "annotate", "--corpus", f"irds:udcg-fresh/{name}", "--run", str(RUN), "--depth",
             "5", "--model", "bench", "--api-base", "http://127.0.0.1:9/v1", "-o", str(folder / "out"), *extra],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
                 "UDCG_IRDS_MODULES": f"udcg_irds_{name}", "OPENAI_API_KEY": "sk-0123456789abcdef", **(env or {})},
            capture_output=True, text=True, timeout=300, cwd=folder, check=False)
        assert done.returncode == 2 and not done.stdout, done.stderr
        assert not (folder / "out").exists()
        return done.stderr.splitlines()

    error = "udcg annotate: error: irds:udcg-fresh/{}: this ir_datasets dataset has no queries (give a queries file with --queries)"
    assert run("quiet", "--no-progress") == ["reader bench: requests go to http://127.0.0.1:9/v1", error.format("quiet")]
    shown = run("bars", env={"UDCG_PROGRESS": "1"})  # progress asked for: ir_datasets' docstore bar, no log line
    assert shown[-1] == error.format("bars") and any("docs_iter" in line for line in shown), shown
    assert not any("[INFO]" in line for line in shown), shown
    logger = logging.getLogger("ir_datasets")
    before = logger.level
    assert irds.dataset_qrels("irds:udcg-example/nq")["nq0"] and logger.level == before  # restored after the read


def test_hiding_the_library_bars_drops_only_the_bars(capsys):
    """With progress off, the bars ir_datasets draws while udcg reads are hidden, but any other line
    written to stderr in that moment (a warning) is still shown, after the read."""
    import sys

    from udcg.io.irds import _quiet
    from udcg.progress import follow_libraries

    follow_libraries(False)
    try:
        with _quiet():
            sys.stderr.write("\rdocs  10%|#         | 1/10\rdocs 100%|##########| 10/10\n")
            sys.stderr.write("UserWarning: a line worth keeping\n")
    finally:
        follow_libraries(True)
    assert capsys.readouterr().err == "UserWarning: a line worth keeping\n"
