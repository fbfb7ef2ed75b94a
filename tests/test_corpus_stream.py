"""Reading only the documents a command needs (``read_collection(..., docids=...)``): the filtered read
equals the full read restricted to the needed ids in every layout; unreadable lines are errors only
when they hold a needed document; duplicates and missing run documents are located errors; memory
does not grow with the corpus; ``udcg annotate`` / ``udcg answer --run`` read only their top-depth."""

from __future__ import annotations

import gzip
import json
import logging
import random
import tracemalloc
from pathlib import Path

import pytest

from tests import lazy
from udcg.cli import main
from udcg.errors import InputError
from udcg.io import files
from udcg.io.beir import check_run, read_collection
from udcg.io.files import JsonlScan, read_records, stream_lines

datasets = lazy.importorskip("datasets")

QUERIES = [{"_id": "q1", "text": "who wrote hamlet", "metadata": {"answers": ["Shakespeare"]}},
           {"_id": "q2", "text": "capital of france", "metadata": {"answers": ["Paris"]}}]


def _doc(rng: random.Random, i: int) -> dict:
    """A corpus record in one of the shapes real files have: id first or not, other id fields,
    integer ids, nested objects holding id-like keys, text with quotes, braces and non-ASCII."""
    shape = i % 7
    text = rng.choice(["Paris is in France.", 'He said "id": {no}.', "Ünïcödé ✓ text", "a\\b \"q\" }"]) + f" {i}"
    if shape == 1:
        return {"title": f"t{i}", "text": text, "_id": f"d{i}"}  # the id key is not first
    if shape == 2:
        return {"id": i, "text": text}  # an integer id
    if shape == 3:
        return {"_id": f"d{i}", "text": text, "metadata": {"id": f"x{i}", "_id": f"y{i}"}}  # nested id keys
    if shape == 4:
        return {"docid": f"d{i}", "title": "", "text": text, "extra": [{"doc_id": "z"}]}
    if shape == 5:
        return {"metadata": {"_id": f"m{i}"}, "_id": f"d{i}", "text": text}  # a nested id before the real one
    return {"_id": f"d{i}", "title": f"title {i}", "text": text}


def _ids(n: int) -> list[str]:
    return [str(i) if i % 7 == 2 else f"d{i}" for i in range(n)]


def _beir(folder: Path, docs: list[dict], name: str = "corpus.jsonl", qrels: str = "q1\td0\t1\nq2\td3\t1\n") -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(d, ensure_ascii=i % 2 == 0) + ("\r\n" if i % 5 == 0 else "\n") + ("\n" if i % 9 == 0 else "")
                   for i, d in enumerate(docs))
    data = text.encode("utf-8")
    (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def _restricted(full, needed):
    return {d: full.corpus[d] for d in needed if d in full.corpus}


# ---------------------------------------------------------------- the filtered read equals the full read


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz"])
def test_filtered_jsonl_read_equals_the_full_read_restricted(tmp_path, name):
    rng = random.Random(0)
    folder = _beir(tmp_path / "b", [_doc(rng, i) for i in range(700)], name)
    full = read_collection(folder)
    for seed in range(5):
        needed = set(random.Random(seed).sample(_ids(700), 40)) | {"d999999", "x3", "y3", "m5", "z"}
        part = read_collection(folder, docids=needed)
        assert dict(part.corpus) == _restricted(full, needed) and len(part.corpus) == 40
        assert (dict(part.queries), part.qrels, part.source) == (dict(full.queries), full.qrels, full.source)
        assert (part.scan.scanned, part.scan.kept, part.scan.skipped) == (700, 40, 0)
    assert full.scan is None


def test_filtered_table_reads_equal_the_full_read_restricted(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    rows = [{"_id": f"d{i}", "title": f"t{i}", "text": f"text {i} ✓"} for i in range(30_000)]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(str(tmp_path / "c.parquet"), batch_size=7_000)
    ds.save_to_disk(str(tmp_path / "saved"))
    queries = datasets.Dataset.from_list([{"_id": q["_id"], "text": q["text"]} for q in QUERIES])
    datasets.DatasetDict({"corpus": ds, "queries": queries}).save_to_disk(str(tmp_path / "dict"))
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    needed = {"d0", "d6999", "d7000", "d29999", "d12345", "absent"}
    for source, q in [(tmp_path / "c.parquet", tmp_path / "q.jsonl"), (tmp_path / "saved", tmp_path / "q.jsonl"),
                      (tmp_path / "dict", None)]:
        full, part = read_collection(source, q), read_collection(source, q, docids=needed)
        assert dict(part.corpus) == _restricted(full, needed) and len(part.corpus) == 5, source
        assert part.scan.scanned == 30_000 and dict(part.queries) == dict(full.queries)
    assert not (tmp_path / "hf-cache").exists()  # Parquet is read with pyarrow, the Hugging Face cache untouched
    datasets.Dataset.from_list([{"id": 7, "text": "seven"}, {"id": 8, "text": "eight"}]).to_parquet(
        str(tmp_path / "int.parquet"))
    assert list(read_collection(tmp_path / "int.parquet", tmp_path / "q.jsonl", docids={"8"}).corpus) == ["8"]
    datasets.Dataset.from_list([{"_id": "a", "text": "x"}, {"_id": None, "text": "y"}]).to_parquet(
        str(tmp_path / "null.parquet"))
    with pytest.raises(InputError, match=r"null.parquet: row 1: missing field '_id'"):  # no id: still located
        read_collection(tmp_path / "null.parquet", tmp_path / "q.jsonl", docids={"a"})


def test_a_json_list_corpus_is_filtered_too(tmp_path):
    rows = [{"docid": "d1", "text": "a"}, {"doc_id": "d2", "text": "b"}, {"id": 3, "text": "c"}]
    (tmp_path / "corpus.json").write_text(json.dumps(rows, indent=1))
    (tmp_path / "q.jsonl").write_text(json.dumps(QUERIES[0]) + "\n")
    part = read_collection(tmp_path / "corpus.json", tmp_path / "q.jsonl", docids={"3", "d1"})
    assert sorted(part.corpus) == ["3", "d1"] and part.scan.scanned == 3


# ---------------------------------------------------------------- unreadable lines, duplicates, missing documents


def _big(folder: Path, n: int, bad_at: int, bad: str) -> Path:
    lines = [json.dumps({"_id": f"d{i}", "title": "", "text": f"passage {i} about something"}) for i in range(n)]
    lines[bad_at] = bad
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    return folder


@pytest.mark.parametrize("bad", ['{"_id": "d25000", "title": "", "text": "torn in the midd',
                                 '{"title": "x", "text": "no id and broken", ',
                                 "not json at all", "[1, 2]"])
def test_an_unreadable_line_of_an_unneeded_document_is_a_counted_warning(tmp_path, caplog, bad):
    folder = _big(tmp_path / "b", 50_000, 25_000, bad)
    with caplog.at_level(logging.WARNING):
        part = read_collection(folder, docids={"d1", "d49999"})
    assert sorted(part.corpus) == ["d1", "d49999"] and part.scan.skipped == 1
    assert part.scan.first_skipped.startswith(f"{folder / 'corpus.jsonl'}:25001: ")
    assert "1 unreadable corpus lines skipped (none holds a needed document), first at " in caplog.text
    assert "corpus.jsonl:25001" in caplog.text
    with pytest.raises(InputError, match=r"1 retrieved documents in the top 1 are not in the corpus .*'d25000'.*"
                                         r"1 unreadable corpus lines were skipped, first at .*corpus.jsonl:25001"):
        check_run({"q1": {"d25000": 1.0}}, read_collection(folder, docids={"d25000"} if "d25000" not in bad else {"d1"}),
                  "run.trec", depth=1)


def test_an_unreadable_line_of_a_needed_document_stops_the_cli_at_its_line(tmp_path, capsys):
    folder = _big(tmp_path / "b", 50_000, 25_000, '{"_id": "d25000", "title": "", "text": "torn in the midd')
    (tmp_path / "run.trec").write_text("q1 Q0 d7 1 3 r\nq1 Q0 d25000 2 2 r\nq2 Q0 d8 1 3 r\n")
    out = tmp_path / "u"
    assert main(["annotate", "--corpus", str(folder), "--run", str(tmp_path / "run.trec"), "--depth", "2",
                 "--model", "no-such-model-loaded", "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "corpus.jsonl:25001: invalid JSON" in err, err
    assert not out.exists()
    bad = folder / "corpus.jsonl"
    bad.write_bytes(bad.read_bytes().replace(b'"d25000", "title": ""', b'"d25000", "title": "\xff"'))
    with pytest.raises(InputError, match=r"corpus.jsonl:25001: bytes that are not UTF-8"):
        read_collection(folder, docids={"d25000"})
    assert read_collection(folder, docids={"d1"}).corpus.keys() == {"d1"}  # not needed: never decoded


def test_duplicates_among_needed_ids_are_located_errors(tmp_path):
    docs = [{"_id": "d1", "text": "a"}, {"_id": "d2", "text": "b"}, {"_id": "d1", "text": "c"},
            {"_id": "d3", "text": "x"}, {"id": 2, "text": "e"}, {"_id": "d3", "text": "y"}]
    folder = _beir(tmp_path / "b", docs)
    with pytest.raises(InputError, match=r"corpus.jsonl:4: duplicate docid 'd1' \(first at .*corpus.jsonl:1"):
        read_collection(folder, docids={"d1"})
    assert sorted(read_collection(folder, docids={"d2", "2"}).corpus) == ["2", "d2"]  # unneeded duplicates: unseen


def test_a_run_document_missing_from_the_corpus_is_the_check_run_error(tmp_path, capsys):
    folder = _beir(tmp_path / "b", [{"_id": f"d{i}", "text": f"text {i}"} for i in range(10)])
    run = {"q1": {"d1": 3.0, "d99": 2.0, "d98": 1.0}}
    part = read_collection(folder, docids={"d1", "d99"})
    with pytest.raises(InputError, match=r"run.trec: 1 retrieved documents in the top 2 are not in the corpus of "
                                         r".*, e.g. 'd99' for query 'q1' \(give the corpus this run retrieved from\)"):
        check_run(run, part, "run.trec", depth=2)
    check_run(run, read_collection(folder, docids={"d1"}), "run.trec", depth=1)  # below the depth: not used
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 3 r\nq1 Q0 d99 2 2 r\n")
    assert main(["annotate", "--corpus", str(folder), "--run", str(tmp_path / "run.trec"), "--depth", "2",
                 "--model", "no-such-model-loaded", "-o", str(tmp_path / "u"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not in the corpus" in err and "'d99'" in err, err


def test_qrels_documents_missing_from_the_corpus_are_still_logged(tmp_path, caplog):
    folder = _beir(tmp_path / "b", [{"_id": f"d{i}", "text": f"t {i}"} for i in range(5)],
                   qrels="q1\td0\t1\nq1\tgone\t1\nq2\td4\t0\n")
    with caplog.at_level(logging.WARNING):
        part = read_collection(folder, docids={"d1"})
    assert "1 judged documents are not in the corpus, e.g. 'gone'" in caplog.text  # over all qrels documents
    assert part.qrels == {"q1": {"d0": 1.0, "gone": 1.0}, "q2": {"d4": 0.0}}


# ---------------------------------------------------------------- streaming bounds and memory


def test_a_streamed_gzip_bomb_stops_at_the_ratio_bound(tmp_path):
    line = b'{"_id": "x", "text": "' + b"a" * (1 << 20) + b'"}\n'
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(line * 70, compresslevel=9))  # 70 MiB from a few hundred KiB
    with pytest.raises(InputError, match=r"corpus.jsonl.gz: decompresses to more than 67,108,864 bytes"):
        for _ in stream_lines(path):
            pass


def test_the_whole_file_size_limit_does_not_apply_to_a_stream(tmp_path):
    path = tmp_path / "corpus.jsonl"
    with open(path, "wb") as f:  # a sparse file over MAX_FILE_BYTES: one endless line of NUL bytes
        f.truncate(files.MAX_FILE_BYTES + 1)
    with pytest.raises(InputError, match=r"-byte limit"):
        read_records(path)
    with pytest.raises(InputError, match=r"corpus.jsonl:1: a line of more than 67,108,864 bytes"):
        next(stream_lines(path))


def test_memory_of_a_filtered_read_does_not_grow_with_the_corpus(tmp_path):
    """300,000 documents (about 40 MB): the full read holds at least the file's text; the filtered
    read holds one line and the 500 needed documents."""
    path = tmp_path / "corpus.jsonl"
    with open(path, "w") as f:
        for start in range(0, 300_000, 10_000):
            f.write("".join(f'{{"_id": "d{i}", "title": "", "text": "passage number {i} with some words in it for '
                            f'the reader to read"}}\n' for i in range(start, start + 10_000)))
    size = path.stat().st_size
    needed = {f"d{i}" for i in range(0, 300_000, 600)}
    tracemalloc.start()
    try:
        scan = JsonlScan(path, ("_id", "id", "docid", "doc_id"), needed)
        kept = list(scan.rows())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 500 and scan.scanned == 300_000 and scan.nbytes == size
    assert peak < size / 20, (peak, size)


# ---------------------------------------------------------------- the commands read only their top-depth


def _tiny_collection(tmp_path: Path) -> tuple[Path, Path]:
    docs = {"d1": "Hamlet is a tragedy written by William Shakespeare.", "d2": "Paris is the capital of France.",
            "d3": "The Thames flows through London.", "d4": "Lyon is a city in France."}
    folder = _beir(tmp_path / "b", [{"_id": d, "text": t} for d, t in docs.items()], qrels="q1\td1\t1\nq2\td2\t1\n")
    run = tmp_path / "run.trec"  # ranks 3 and 4 name documents the corpus lacks: below the depth, never read
    run.write_text("q1 Q0 d1 1 9 r\nq1 Q0 d3 2 8 r\nq1 Q0 gone1 3 7 r\nq2 Q0 d2 1 9 r\nq2 Q0 d4 2 8 r\n"
                   "q2 Q0 gone2 3 7 r\nq2 Q0 gone3 4 6 r\n")
    return folder, run


def test_annotate_and_answer_read_only_the_documents_they_use(tmp_path, tiny_model_dir, capsys):
    folder, run = _tiny_collection(tmp_path)
    assert main(["annotate", "--corpus", str(folder), "--run", str(run), "--depth", "2", "--model",
                 str(tiny_model_dir), "-o", str(tmp_path / "u"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "corpus: 4 documents scanned, 4 kept (the ones used);" in err and "MB/s" in err, err
    assert main(["answer", "--corpus", str(folder), "--run", str(run), "--k", "1", "--model", str(tiny_model_dir),
                 "--device", "cpu", "-o", str(tmp_path / "answers.jsonl"), "--no-progress"]) == 0
    assert "corpus: 4 documents scanned, 2 kept (the ones used);" in capsys.readouterr().err
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert [r["pids"] for r in records] == [["d1"], ["d2"]]
    assert main(["answer", "--corpus", str(folder), "--run", str(run), "--k", "1", "--samples", "1", "--depth", "3",
                 "--model", str(tiny_model_dir), "-o", str(tmp_path / "a2.jsonl"), "--no-progress"]) == 2
    err = capsys.readouterr().err  # with --samples the pool is the top --depth: rank 3 is used, and missing
    assert "retrieved documents in the top 3 are not in the corpus" in err and "gone" in err, err


def _random_line(rng: random.Random, i: int) -> str:
    """A valid corpus line with a random key order, spacing, id field and id spelling."""
    docid = rng.choice([f"d{i}", f"é{i}", i, -i - 1, f"e\\u00{30 + i % 10}-{i}"])
    value = json.dumps(docid) if not isinstance(docid, str) or "\\u" not in docid else f'"{docid}"'
    pairs = [(rng.choice(["_id", "id", "docid", "doc_id"]), value), ("text", json.dumps(f"t {i} " + rng.choice(
        ['"_id": "zz"', "{", "}", "id\"", "\\", ""]))), ("title", json.dumps(rng.choice(["", "a title"])))]
    if rng.random() < 0.3:
        pairs.append(("metadata", json.dumps({rng.choice(["_id", "id"]): f"n{i}", "k": [1, {"docid": "m"}]})))
    rng.shuffle(pairs)
    sp = rng.choice(["", " ", "  "])
    return sp + "{" + ",".join(f'{sp}"{k}"{sp}:{sp}{v}' for k, v in pairs) + sp + "}" + sp


def test_filtered_read_of_random_lines_equals_the_full_read_restricted(tmp_path):
    for seed in range(60):
        rng = random.Random(seed)
        folder = tmp_path / f"b{seed}"
        _beir(folder, [], qrels="q1\tzz\t1\n")
        (folder / "corpus.jsonl").write_text("\n".join(_random_line(rng, i) for i in range(40)) + "\n")
        full = read_collection(folder)
        needed = set(rng.sample(sorted(full.corpus), 10)) | {"n3", "m", "zz", "absent"}
        part = read_collection(folder, docids=needed)
        assert dict(part.corpus) == _restricted(full, needed), seed


def test_table_rows_with_an_unreadable_id_are_read_for_their_error_and_no_others(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "q.jsonl").write_text(json.dumps(QUERIES[0]) + "\n")
    n = 20_000
    pq.write_table(pa.table({"_id": [f"d{i}" for i in range(n)], "docid": [{"k": i} for i in range(n)],
                             "text": [f"t {i}" for i in range(n)]}), tmp_path / "struct.parquet", row_group_size=5_000)
    part = read_collection(tmp_path / "struct.parquet", tmp_path / "q.jsonl", docids={"d7", "d19999"})
    assert sorted(part.corpus) == ["d19999", "d7"]  # the lesser id column is never consulted
    pq.write_table(pa.table({"_id": [None, None], "id": [{"k": 1}, None], "docid": ["a", "b"], "text": ["x", "y"]}),
                   tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=r"bad.parquet: row 0: field 'id' = \{'k': 1\} must be a string or an int"):
        read_collection(tmp_path / "bad.parquet", tmp_path / "q.jsonl", docids={"b"})
    pq.write_table(pa.table({"_id": [1.5, 2.5], "text": ["x", "y"]}), tmp_path / "float.parquet")
    with pytest.raises(InputError, match=r"float.parquet: row 0: field '_id' = 1.5 must be a string or an int"):
        read_collection(tmp_path / "float.parquet", tmp_path / "q.jsonl", docids={"b"})
