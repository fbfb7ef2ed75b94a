"""read_collection on BEIR folders, JSONL/gz/Parquet files and datasets folders; located errors;
check_run; the packaged nq-example and its generator."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests import lazy
from tests.conftest import load_script
from udcg.io.beir import Collection, check_run, read_collection
from udcg.errors import InputError
from udcg.records import Passage, Question
from udcg.io.sources import default_data_dir, example_path
from udcg.io.trec import read_run

datasets = lazy.importorskip("datasets")

CORPUS = [{"_id": "d1", "title": "Paris", "text": "Paris is the capital of France."},
          {"_id": "d2", "title": "", "text": "Berlin is the capital of Germany."},
          {"_id": "d3", "title": "Rome", "text": "Rome is in Italy."}]
QUERIES = [{"_id": "q1", "text": "capital of france", "metadata": {"answers": ["Paris"]}},
           {"_id": "q2", "text": "capital of germany", "metadata": {"answers": ["Berlin", "Berlin, Germany"]}}]
QRELS = "q1\td1\t1\nq2\td2\t1\nq2\td3\t0\n"
EXPECTED = Collection(
    corpus={"d1": Passage("d1", "Paris is the capital of France.", "Paris"),
            "d2": Passage("d2", "Berlin is the capital of Germany.", ""),
            "d3": Passage("d3", "Rome is in Italy.", "Rome")},
    queries={"q1": Question("q1", "capital of france", ("Paris",)),
             "q2": Question("q2", "capital of germany", ("Berlin", "Berlin, Germany"))},
    qrels={"q1": {"d1": 1.0}, "q2": {"d2": 1.0, "d3": 0.0}}, source="")


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def beir(folder: Path, header: bool = True, corpus_name: str = "corpus.jsonl") -> Path:
    write(folder / corpus_name, jsonl(CORPUS))
    write(folder / "queries.jsonl", jsonl(QUERIES))
    write(folder / "qrels" / "test.tsv", ("query-id\tcorpus-id\tscore\n" if header else "") + QRELS)
    return folder


def same(c: Collection, expected: Collection = EXPECTED) -> bool:
    return (dict(c.corpus), dict(c.queries), c.qrels) == (dict(expected.corpus), dict(expected.queries), expected.qrels)


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """Keep datasets' Parquet cache inside the test folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


# ---------------------------------------------------------------- every layout gives the same collection


@pytest.mark.parametrize("header", [True, False])
def test_beir_folder_with_and_without_qrels_header(tmp_path, header):
    c = read_collection(beir(tmp_path / "b", header=header))
    assert same(c) and c.source == str(tmp_path / "b")


def test_beir_folder_with_gz_corpus_and_explicit_paths(tmp_path):
    folder = beir(tmp_path / "b", corpus_name="corpus.jsonl.gz")
    assert same(read_collection(folder))
    assert same(read_collection(folder / "corpus.jsonl.gz", folder / "queries.jsonl", folder / "qrels" / "test.tsv"))


def test_folder_without_qrels_gives_empty_qrels_and_split_picks_the_file(tmp_path):
    folder = beir(tmp_path / "b")
    write(folder / "qrels" / "dev.tsv", "q1 0 d3 2\n")  # 4-column TREC qrels work too
    assert read_collection(folder, split="dev").qrels == {"q1": {"d3": 2.0}}
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels" / "dev.tsv").unlink()
    (folder / "qrels").rmdir()
    assert read_collection(folder).qrels == {}


def test_answers_file_fills_and_overrides_and_top_level_answers(tmp_path):
    folder = tmp_path / "b"
    write(folder / "corpus.jsonl", jsonl(CORPUS))
    write(folder / "queries.jsonl", jsonl([{"_id": "q1", "text": "capital of france", "answers": "Paris"},
                                          {"_id": "q2", "text": "capital of germany", "metadata": {}}]))
    assert read_collection(folder).queries["q2"].answers == ()
    answers = write(tmp_path / "answers.jsonl", jsonl([{"qid": "q2", "answers": ["Berlin", "Berlin, Germany"]}]))
    c = read_collection(folder, answers=answers, qrels=write(tmp_path / "q.tsv", QRELS))
    assert same(c)
    over = write(tmp_path / "over.jsonl", jsonl([{"_id": "q1", "answers": ["Paris, France"]}]))
    assert read_collection(folder, answers=over).queries["q1"].answers == ("Paris, France",)


def test_datasets_saved_folder_and_parquet(tmp_path, hf_cache):
    qrels = write(tmp_path / "qrels.tsv", QRELS)
    corpus_ds = datasets.Dataset.from_list(CORPUS)
    queries_ds = datasets.Dataset.from_list(QUERIES)
    corpus_ds.save_to_disk(str(tmp_path / "corpus-ds"))
    queries_ds.save_to_disk(str(tmp_path / "queries-ds"))
    assert same(read_collection(tmp_path / "corpus-ds", tmp_path / "queries-ds", qrels))
    # a DatasetDict: the 'corpus' split, and its 'queries' split as the default queries
    datasets.DatasetDict({"corpus": corpus_ds, "queries": queries_ds}).save_to_disk(str(tmp_path / "dd"))
    assert same(read_collection(tmp_path / "dd", qrels=qrels))
    datasets.DatasetDict({"train": corpus_ds}).save_to_disk(str(tmp_path / "one"))  # the only split
    assert same(read_collection(tmp_path / "one", tmp_path / "queries-ds", qrels))
    # Parquet through datasets.load_dataset("parquet"), ids given as integers are read as strings
    corpus_ds.to_parquet(str(tmp_path / "corpus.parquet"))
    queries_ds.to_parquet(str(tmp_path / "queries.parquet"))
    assert same(read_collection(tmp_path / "corpus.parquet", tmp_path / "queries.parquet", qrels))
    datasets.Dataset.from_list([{"id": 7, "text": "seven"}]).to_parquet(str(tmp_path / "int.parquet"))
    c = read_collection(tmp_path / "int.parquet", tmp_path / "queries.parquet")
    assert c.corpus == {"7": Passage("7", "seven")} and c.qrels == {}


def test_json_list_corpus_and_other_id_fields(tmp_path):
    rows = [{"docid": "d1", "text": "a"}, {"doc_id": "d2", "text": "b"}, {"id": 3, "text": "c", "title": None}]
    corpus = write(tmp_path / "corpus.json", json.dumps(rows))
    queries = write(tmp_path / "q.jsonl", jsonl([{"qid": "q1", "query": "x"}, {"query_id": 2, "question": "y"}]))
    c = read_collection(corpus, queries)
    assert list(c.corpus) == ["d1", "d2", "3"] and c.queries["2"] == Question("2", "y")


# ---------------------------------------------------------------- located errors


@pytest.mark.parametrize("member, text, fragment", [
    ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d2"}\n', r"corpus.jsonl:2: missing field 'text'"),
    ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"text": "b"}\n', r"corpus.jsonl:2: missing field '_id' .*'docid'"),
    ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n',
     r"corpus.jsonl:2: duplicate docid 'd1' \(first at .*corpus.jsonl:1"),
    ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b",}\n', r"corpus.jsonl:2: invalid JSON"),
    ("corpus.jsonl", '{"_id": "d 1", "text": "a"}\n', r"corpus.jsonl:1: field '_id' = 'd 1' is empty or has white"),
    ("corpus.jsonl", '{"_id": true, "text": "a"}\n', r"corpus.jsonl:1: field '_id' = True must be a string or an int"),
    ("corpus.jsonl", '{"_id": "d1", "text": "a", "title": 5}\n', r"corpus.jsonl:1: field 'title' must be a string"),
    ("corpus.jsonl", '{"_id": "d1", "text": " ", "title": ""}\n', r"corpus.jsonl:1: document 'd1' has empty"),
    ("queries.jsonl", '{"_id": "q1", "text": "x", "metadata": {"answers": [1]}}\n',
     r"queries.jsonl:1: field 'metadata.answers' must be a list of strings"),
    ("queries.jsonl", '{"_id": "q1", "text": "x", "metadata": "Paris"}\n',
     r"queries.jsonl:1: field 'metadata' must be an object"),
    ("queries.jsonl", '{"_id": "q1", "text": "x"}\n\n{"_id": "q1", "text": "y"}\n',
     r"queries.jsonl:3: duplicate query id 'q1' \(first at .*queries.jsonl:1"),
    ("queries.jsonl", '{"_id": "q1"}\n', r"queries.jsonl:1: missing field 'text'"),
    ("queries.jsonl", '{"_id": "q1", "text": ""}\n', r"queries.jsonl:1: field 'text' must be the non-empty query text"),
    ("qrels/test.tsv", "q1\td1\t1\nq1 0 d2 1\n", r"test.tsv:2: 4 fields .*but line 1 has 3"),
    ("qrels/test.tsv", "q1\td1\t1\nq2\td1\tyes\n", r"test.tsv:2: field 'score' = 'yes' is not a number"),
    ("qrels/test.tsv", "q1\td1\t1\nq9\td1\t1\n", r"test.tsv: 1 of 2 judged queries are not in the queries, e.g. 'q9'"),
])
def test_bad_folder_members_name_file_line_and_field(tmp_path, member, text, fragment):
    folder = beir(tmp_path / "b")
    write(folder / member, text)
    with pytest.raises(InputError, match=fragment):
        read_collection(folder)


def test_bad_gz_and_answers_files(tmp_path):
    folder = beir(tmp_path / "b", corpus_name="corpus.jsonl.gz")
    write(folder / "corpus.jsonl.gz", '{"_id": "d1", "text": "a"}\n[1]\n')
    with pytest.raises(InputError, match=r"corpus.jsonl.gz:2: expected a JSON object"):
        read_collection(folder)
    (folder / "corpus.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match=r"corpus.jsonl.gz: cannot read as gzip"):
        read_collection(folder)
    folder = beir(tmp_path / "c")
    for text, fragment in [('{"qid": "q7", "answers": ["x"]}\n', r"answers.jsonl:1: answers for query 'q7'"),
                           ('{"qid": "q1", "answers": ["x"]}\n{"_id": "q1", "answers": "y"}\n',
                            r"answers.jsonl:2: duplicate query id 'q1' \(first at .*answers.jsonl:1"),
                           ('{"qid": "q1"}\n', r"answers.jsonl:1: missing field 'answers'"),
                           ('{"qid": "q1", "answers": []}\n', r"answers.jsonl:1: field 'answers' is empty")]:
        with pytest.raises(InputError, match=fragment):
            read_collection(folder, answers=write(tmp_path / "answers.jsonl", text))


def test_missing_members_and_paths_say_what_is_expected(tmp_path):
    folder = beir(tmp_path / "b")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(InputError, match=r"no queries.jsonl \(or queries.jsonl.gz\) in this folder"):
        read_collection(folder)
    with pytest.raises(InputError, match=r"no corpus.jsonl"):
        read_collection(tmp_path / "b" / "qrels")
    folder = beir(tmp_path / "c")
    with pytest.raises(InputError, match=r"no dev.tsv for split 'dev' \(splits here: test"):
        read_collection(folder, split="dev")
    with pytest.raises(InputError, match="no such file or folder"):
        read_collection(tmp_path / "nope.jsonl", folder / "queries.jsonl")
    with pytest.raises(InputError, match="no queries given"):
        read_collection(folder / "corpus.jsonl")


def test_bad_tables_name_the_file_and_row(tmp_path, hf_cache):
    datasets.Dataset.from_list([{"_id": "d1", "text": "a"}, {"_id": "d2", "text": None}]).to_parquet(
        str(tmp_path / "c.parquet"))
    queries = write(tmp_path / "q.jsonl", jsonl(QUERIES))
    with pytest.raises(InputError, match=r"c.parquet: row 1: missing field 'text'"):
        read_collection(tmp_path / "c.parquet", queries)
    write(tmp_path / "bad.parquet", "not parquet")
    with pytest.raises(InputError, match=r"bad.parquet: cannot read as Parquet"):
        read_collection(tmp_path / "bad.parquet", queries)
    ds = datasets.Dataset.from_list(CORPUS)
    datasets.DatasetDict({"a": ds, "b": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(InputError, match=r"dd: splits a, b, none named 'corpus'"):
        read_collection(tmp_path / "dd", queries)
    datasets.DatasetDict({"corpus": ds, "extra": ds}).save_to_disk(str(tmp_path / "no-queries"))
    with pytest.raises(InputError, match="no-queries: no queries given"):
        read_collection(tmp_path / "no-queries")


def test_hub_without_network_is_a_clean_input_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # fail at once instead of retrying
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError, match=r"hf:udcg-no-such/dataset:corpus: cannot load from the Hugging Face hub"):
        read_collection("hf:udcg-no-such/dataset:corpus")
    with pytest.raises(InputError, match="no data set name after 'hf:'"):
        read_collection("hf:")


# ---------------------------------------------------------------- check_run


def test_check_run(tmp_path):
    c = read_collection(beir(tmp_path / "b"))
    check_run({"q1": {"d1": 2.0, "d3": 1.0}}, c, "run.trec")  # a query of the collection may be absent
    with pytest.raises(InputError, match=r"run.trec: 2 of 3 run queries are not in the queries of .*, e.g. 'q8'"):
        check_run({"q1": {"d1": 1.0}, "q8": {"d1": 1.0}, "q9": {"d1": 1.0}}, c, "run.trec")
    with pytest.raises(InputError, match=r"run.trec: 2 retrieved documents are not in the corpus .*'x1' for query 'q2'"):
        check_run({"q1": {"d1": 1.0}, "q2": {"x1": 1.0, "x2": 0.5}}, c, "run.trec")
    run = write(tmp_path / "dup.trec", "q1 Q0 d1 1 2 t\nq1 Q0 d1 2 1 t\n")  # read_run refuses duplicates
    with pytest.raises(InputError, match=r"dup.trec:2: docid 'd1' appears twice"):
        read_run(run)


# ---------------------------------------------------------------- the packaged example


def test_packaged_example_reads_and_its_runs_check():
    folder = example_path()
    c = read_collection(folder)
    assert len(c.queries) == 20 and set(c.qrels) == set(c.queries)
    assert all(q.answers for q in c.queries.values()) and len(c.corpus) >= 200
    assert all(d in c.corpus for rels in c.qrels.values() for d in rels)
    for name in ("bm25", "dense", "hybrid"):
        run = read_run(folder / "runs" / f"{name}.trec")
        check_run(run, c, f"{name}.trec")
        assert set(run) == set(c.queries) and all(len(docs) == 10 for docs in run.values())
    assert "CC BY-SA 3.0" in (folder / "README.md").read_text()
    assert "nq-example" in (folder.parent / "ATTRIBUTION.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not (default_data_dir() or Path("/nonexistent")).joinpath("nq-open-gold").is_dir(),
                    reason="shared data folder is absent")
def test_make_example_regenerates_the_packaged_folder_byte_for_byte(tmp_path):
    pytest.importorskip("bm25s")
    module = load_script("make_example")
    assert module.main(["--data-dir", str(default_data_dir()), "--out", str(tmp_path)]) == 0
    packaged = sorted(p.relative_to(example_path()) for p in example_path().rglob("*") if p.is_file())
    assert packaged == sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    # The dense run's scores are float32 dot products printed to 6 decimals: another CPU's kernels
    # can move the last digit (seen: 1e-6 on a few lines). Ids and ranks are held exactly, scores to 2e-6.
    assert all((tmp_path / p).read_bytes() == (example_path() / p).read_bytes() for p in packaged if p.name != "dense.trec")
    dense = [p for p in packaged if p.name == "dense.trec"]
    for p in dense:
        made, shipped = ((folder / p).read_text().splitlines() for folder in (tmp_path, example_path()))
        assert len(made) == len(shipped)
        for a, b in zip(made, shipped):
            fa, fb = a.split(), b.split()
            assert fa[:4] == fb[:4] and fa[5:] == fb[5:] and abs(float(fa[4]) - float(fb[4])) <= 2e-6, (a, b)
