"""Data set loaders on the real shared files, malformed inputs, containment labelling, the packaged sample."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import statistics
from pathlib import Path

import pytest

from tests.conftest import load_script
from udcg.io import sources as ds
from udcg.errors import InputError
from udcg.text import contains_answer
from udcg.records import Passage, Question

SHARED = ds.default_data_dir()  # tests/conftest.py sets it to ../shared/data beside the checkout, when there
needs_shared = pytest.mark.skipif(SHARED is None or not SHARED.is_dir(), reason=f"shared data folder {SHARED} is "
                                  f"absent (set {ds.DATA_DIR_ENV} to the shared data folder to run these tests)")


def _unique(seq):
    return len(set(seq)) == len(seq)


# ---------------------------------------------------------------- real files


@needs_shared
def test_popqa_real_file_counts_and_containment_rate_match_the_readme():
    qs = ds.load_dataset("popqa")
    assert len(qs) == 100 and _unique([q.qid for q in qs])
    q = qs[0]
    assert (q.qid, q.text) == ("4382392", "What is Henry Feilden's occupation?")
    assert q.answers[0] == "politician" and q.passages[0].docid == "11341299"
    assert q.passages[0].score == pytest.approx(1.6985543)
    assert all(p.relevant is None for q in qs for p in q.passages)
    assert all(p.text.strip() for q in qs for p in q.passages)  # empty passages dropped by default
    assert all(_unique([p.docid for p in q.passages]) and len(q.passages) <= 25 for q in qs)
    # README: "95% of questions have >=1 passage containing an answer alias, median 3"
    labelled = ds.label_by_containment(qs)
    assert all(p.relevant == contains_answer(p.text, q.answers) for q in labelled for p in q.passages)
    assert sum(any(p.relevant for p in q.passages) for q in labelled) == 95
    assert statistics.median(sum(p.relevant for p in q.passages) for q in labelled) == 3


@needs_shared
def test_popqa_source_options():
    path = SHARED / "popqa-contriever-100" / "popqa_longtail_w_gs_example.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    full = ds.load_popqa(path, keep_empty=True)
    assert [len(q.passages) for q in full] == [len(r["ctxs"]) for r in raw]
    contriever = ds.load_popqa(path, contriever_only=True, keep_empty=True)
    assert [len(q.passages) for q in contriever] == [sum("id" in c for c in r["ctxs"]) for r in raw]
    assert all(p.score is not None for q in contriever for p in q.passages)
    gs = [p for q in full for p in q.passages if p.docid.startswith("popqa-gs:")]
    assert len(gs) == sum(len(r["ctxs"]) - sum("id" in c for c in r["ctxs"]) for r in raw) == 442
    assert all(p.score is None for p in gs)


@needs_shared
def test_nq_open_gold_and_pon():
    nq = ds.load_dataset("nq")
    assert len(nq) == 2655 and all(len(q.passages) == 1 and q.passages[0].relevant is True for q in nq)
    assert nq[0].qid == "nq0" and nq[0].answers == ("Wilhelm Conrad Röntgen",)
    pon = ds.load_dataset("nq-pon")
    assert len(pon) == 2889 and pon[0].qid == "-3290814144789249484" and pon[0].passages[0].docid == "20994698"
    # README: 2,605 questions of the PoN file are also in the lost-in-the-middle file
    assert len({q.text for q in nq} & {q.text for q in pon}) == 2605


@needs_shared
def test_squad_relevant_paragraph_is_the_one_the_question_was_written_on():
    qs = ds.load_dataset("squad")
    assert len(qs) == 10570 and _unique([q.qid for q in qs])
    paragraphs = {p.docid: p.text for q in qs for p in q.passages}
    assert len(paragraphs) == 2067
    # independent reading of the raw file: question id -> (paragraph text, answer spans)
    raw = {}
    for f in sorted((SHARED / "squad-v1.1-dev").glob("*.json")):
        for article in json.loads(f.read_text())["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    raw[qa["id"]] = (para["context"], qa["answers"], len(article["paragraphs"]))
    for q in qs[::97]:
        context, answers, n_paras = raw[q.qid]
        relevant = [p for p in q.passages if p.relevant]
        assert len(relevant) == 1 and relevant[0].text == context and len(q.passages) == n_paras
        assert all(p.relevant is None for p in q.passages if p is not relevant[0])
        for a in answers:
            assert context[a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]
            assert a["text"] in q.answers


@needs_shared
def test_nomiracl_passages_round_trip_to_the_prompt():
    folder = SHARED / "nomiracl-en"
    for name, label in (("en.test.relevant.jsonl", None), ("en.test.nonrelevant.jsonl", False)):
        qs = ds.load_nomiracl(folder / name)
        raw = [json.loads(line) for line in (folder / name).read_text().splitlines()]
        assert len(qs) == 250
        for q, r in zip(qs, raw):
            assert [p.docid for p in q.passages] == r["docids"]
            assert all(p.relevant is label and p.text for p in q.passages)
            assert f"QUESTION:\n{q.text}\n\nCONTEXTS:\n[1] {q.passages[0].text}" in r["prompt"]
            at = [r["prompt"].index(f"\n\n[{i}] {p.text}") for i, p in enumerate(q.passages[1:], start=2)]
            assert at == sorted(at)  # each passage, stripped, follows its number, in order
    first = ds.load_nomiracl(folder / "en.test.nonrelevant.jsonl", limit=1)[0]
    assert first.text == "In 2006’s Doomsday, what country is Bad Wolf Bay in?"
    assert first.passages[0].text.startswith("Battle of Bad Axe: The next day")


@needs_shared
def test_dpr_labels_and_duplicate_positive():
    path = SHARED / "dpr-nq-dev-sample" / "dpr_sample.json"
    raw = json.loads(path.read_text())
    qs = ds.load_dpr(path)
    assert len(qs) == 5
    for q, r in zip(qs, raw):
        pos = {str(c["passage_id"]) for c in r["positive_ctxs"]}
        assert {p.docid for p in q.passages if p.relevant} == pos
        assert _unique([p.docid for p in q.passages])
        assert q.passages[0].relevant is True and q.answers == tuple(r["answers"])
    # the first record lists its positive passage twice (gold + retrieved): kept once, first entry
    assert raw[0]["positive_ctxs"][0]["passage_id"] == raw[0]["positive_ctxs"][1]["passage_id"]
    assert qs[0].passages[0].score == 1000.0


@needs_shared
def test_load_dataset_dispatch_by_name_folder_file_and_limit():
    by_alias = ds.load_dataset("dpr")
    assert by_alias == ds.load_dataset(SHARED / "dpr-nq-dev-sample")
    assert by_alias == ds.load_dataset(SHARED / "dpr-nq-dev-sample" / "dpr_sample.json")
    nq_file = SHARED / "nq-open-gold" / "nq-open-oracle.jsonl.gz"
    assert ds.load_dataset(nq_file, limit=7) == ds.load_nq_open_gold(nq_file)[:7]
    first = ds.load_squad(SHARED / "squad-v1.1-dev" / "dev-v1.1.first24articles.json")
    squad = ds.load_dataset("squad", limit=len(first) + 3)  # spans both halves, in name order
    assert squad[:len(first)] == first and len(squad) == len(first) + 3
    assert len(ds.load_dataset("nomiracl", limit=260)) == 260  # spans both files
    with pytest.raises(InputError, match="not a known data set"):
        ds.load_dataset("no-such-set")
    with pytest.raises(InputError, match="limit"):
        ds.load_dataset("dpr", limit=0)


def test_a_shared_set_needs_a_data_folder_and_there_is_no_default(monkeypatch, tmp_path):
    monkeypatch.delenv(ds.DATA_DIR_ENV, raising=False)
    assert ds.default_data_dir() is None
    with pytest.raises(InputError, match=f"nq: a shared data set, but no shared data folder is given \\(set "
                                         f"{ds.DATA_DIR_ENV}=FOLDER or data.data_dir"):
        ds.load_dataset("nq")
    with pytest.raises(InputError, match="data set folder not found"):
        ds.load_dataset("nq", data_dir=tmp_path)  # given, but it does not hold nq-open-gold/
    monkeypatch.setenv(ds.DATA_DIR_ENV, str(tmp_path))
    assert ds.default_data_dir() == tmp_path and ds.shared_data_dir("nq") == tmp_path
    assert ds.shared_data_dir("nq", "elsewhere") == Path("elsewhere")  # the given folder wins
    assert len(ds.load_dataset("popqa-sample", limit=2)) == 2  # a packaged sample needs no folder


def test_a_hub_data_set_of_authors_items_loads_through_datasets(monkeypatch):
    import datasets

    items = json.loads(ds.sample_path("authors-sample.json").read_text())
    asked = []

    def fake_load_dataset(name, config=None):
        asked.append((name, config))
        return datasets.DatasetDict({"test": datasets.Dataset.from_list(items)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    questions = ds.load_dataset("hf:someone/authors:v1", limit=2)
    assert asked == [("someone/authors", "v1")]
    assert [(q.qid, q.text) for q in questions] == [(str(i["example_id"]), i["question"]) for i in items[:2]]
    assert [p.docid for p in questions[0].passages] == [p["doc_id"] for p in items[0]["passages"]]
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None: datasets.Dataset.from_list([{"question": "q"}]))
    with pytest.raises(InputError, match=r"hf:someone/plain: row 0: no 'passages'"):
        ds.load_dataset("hf:someone/plain")


# ---------------------------------------------------------------- malformed input


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


POPQA_LINE = {"id": 1, "question": "Q?", "answers": ["a"], "ctxs": [{"id": "7", "title": "T", "text": "x a", "score": "1.5"}]}


@pytest.mark.parametrize("mutate, match", [
    (lambda o: o.pop("question"), r"popqa\.jsonl:2: missing field 'question'"),
    (lambda o: o.update(answers="a"), r":2: field 'answers' must be list"),
    (lambda o: o.update(answers=[]), r":2: field 'answers' is empty"),
    (lambda o: o["ctxs"][0].update(score="high"), r":2: ctxs\[0\]: field 'score' = 'high' is not a number"),
    (lambda o: o["ctxs"][0].pop("text"), r":2: ctxs\[0\]: missing field 'text'"),
    (lambda o: o["ctxs"].append(dict(o["ctxs"][0])), r":2: question '1' lists passage id '7' twice"),
    (lambda o: o.update(ctxs=[]), r":2: question '1' has no usable passage"),
])
def test_popqa_malformed(tmp_path, mutate, match):
    bad = json.loads(json.dumps(POPQA_LINE))
    mutate(bad)
    path = _write(tmp_path, "popqa.jsonl", json.dumps(POPQA_LINE) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError, match=match):
        ds.load_popqa(path)


def test_popqa_invalid_json_line_and_duplicate_ids(tmp_path):
    with pytest.raises(InputError, match=r":2: invalid JSON"):
        ds.load_popqa(_write(tmp_path, "a.jsonl", json.dumps(POPQA_LINE) + "\n{oops\n"))
    with pytest.raises(InputError, match="duplicate question id '1'"):
        ds.load_popqa(_write(tmp_path, "b.jsonl", (json.dumps(POPQA_LINE) + "\n") * 2))
    with pytest.raises(InputError, match="empty"):
        ds.load_popqa(_write(tmp_path, "c.jsonl", ""))


def test_nq_gzip_errors(tmp_path):
    path = tmp_path / "nq.jsonl.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="gzip"):
        ds.load_nq_open_gold(path)
    good = {"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "a", "hasanswer": True, "isgold": True}]}
    bad = {"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "a", "isgold": "yes"}]}
    path.write_bytes(gzip.compress((json.dumps(good) + "\n" + json.dumps(bad) + "\n").encode()))
    with pytest.raises(InputError, match=r"nq\.jsonl\.gz:2: ctxs\[0\]: field 'isgold' must be bool"):
        ds.load_nq_open_gold(path)
    assert ds.load_nq_open_gold(path, limit=1)[0].passages[0].relevant is True


def test_squad_pon_dpr_malformed(tmp_path):
    squad = {"data": [{"title": "A", "paragraphs": [{"context": "c", "qas": [{"id": "1", "question": "q", "answers": []}]}]}]}
    with pytest.raises(InputError, match=r"data\[0\]: paragraphs\[0\]: qas\[0\]: field 'answers' is empty"):
        ds.load_squad(_write(tmp_path, "s.json", json.dumps(squad)))
    with pytest.raises(InputError, match="expected a SQuAD object"):
        ds.load_squad(_write(tmp_path, "s2.json", "[1]"))
    with pytest.raises(InputError, match=r"record 0: missing field 'idx_gold_in_corpus'"):
        ds.load_nq_pon(_write(tmp_path, "p.json", json.dumps([{"example_id": 1, "question": "q", "answers": ["a"], "text": "t"}])))
    ctx = {"passage_id": "9", "title": "t", "text": "x"}
    dpr = [{"question": "q", "answers": ["a"], "positive_ctxs": [ctx], "hard_negative_ctxs": [ctx], "negative_ctxs": []}]
    with pytest.raises(InputError, match=r"record 0: hard_negative_ctxs\[0\]: passage '9' is listed as both"):
        ds.load_dpr(_write(tmp_path, "d.json", json.dumps(dpr)))


def _nomiracl_line(n_passages: int, n_ids: int, numbers=None) -> str:
    numbers = numbers or list(range(1, n_passages + 1))
    contexts = "\n\n".join(f"[{i}] Title {i}: text {i}" for i in numbers)
    prompt = f"Intro.\n\nQUESTION:\nwho?\n\nCONTEXTS:\n{contexts}\n\nOUTPUT:\n"
    return json.dumps({"query_id": "q1", "docids": [f"d{i}" for i in range(n_ids)], "prompt": prompt}) + "\n"


def test_nomiracl_parsing_and_errors(tmp_path):
    q = ds.load_nomiracl(_write(tmp_path, "en.nonrelevant.jsonl", _nomiracl_line(3, 3)))[0]
    assert (q.qid, q.text, [p.text for p in q.passages]) == ("q1", "who?", ["Title 1: text 1", "Title 2: text 2", "Title 3: text 3"])
    assert all(p.relevant is False for p in q.passages)
    assert all(p.relevant is None for p in ds.load_nomiracl(_write(tmp_path, "en.relevant.jsonl", _nomiracl_line(3, 3)))[0].passages)
    with pytest.raises(InputError, match=r"x\.jsonl:1: 'prompt' holds 3 numbered passages but 'docids' has 4"):
        ds.load_nomiracl(_write(tmp_path, "x.jsonl", _nomiracl_line(3, 4)), split="relevant")
    with pytest.raises(InputError, match="not numbered"):
        ds.load_nomiracl(_write(tmp_path, "y.jsonl", _nomiracl_line(3, 3, numbers=[1, 3, 2])), split="relevant")
    with pytest.raises(InputError, match="cannot tell the NoMIRACL split"):
        ds.load_nomiracl(_write(tmp_path, "z.jsonl", _nomiracl_line(3, 3)))


def test_unknown_shape(tmp_path):
    with pytest.raises(InputError, match="unknown data set shape"):
        ds.load_dataset(_write(tmp_path, "w.json", json.dumps([{"foo": 1}])))


def _load_quiz(path, limit=None):
    """A shape of this test: one JSON object per line, {"quiz_id", "ask", "accept", "docs": [[pid, text]]}."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()][:limit]
    return [Question(r["quiz_id"], r["ask"], tuple(r["accept"]),
                     tuple(Passage(docid, text) for docid, text in r["docs"])) for r in rows]


def test_a_registered_shape_is_read_by_load_dataset_then_removed(tmp_path):
    """A file shape added through the registry (no private global patched): ``load_dataset`` reads a
    real file of that shape with its loader, before the built-in shapes (this one also holds
    "passages", which the authors' shape would take); a taken name is refused; once removed, the file
    is an unknown shape again, and the built-in shapes are as they were."""
    lines = [{"quiz_id": "z1", "ask": "capital of France?", "accept": ["Paris"], "passages": 1,
              "docs": [["d1", "Paris is the capital of France."], ["d2", "Berlin is in Germany."]]},
             {"quiz_id": "z2", "ask": "2 + 2?", "accept": ["4"], "passages": 1, "docs": [["d3", "2 + 2 = 4"]]}]
    path = _write(tmp_path, "quiz.jsonl", "\n".join(json.dumps(r) for r in lines) + "\n")
    builtin = ds.SHAPES.names()
    assert ds.SHAPES.loader_for(path.read_text()) is not _load_quiz
    shape = ds.register_shape("quiz", ['"quiz_id"', '"accept"'], _load_quiz)
    try:
        assert ds.SHAPES.names() == ["quiz", *builtin] and shape.keys == ('"quiz_id"', '"accept"')
        questions = ds.load_dataset(path)
        assert [q.qid for q in questions] == ["z1", "z2"] and questions[0].passage("d2").text == "Berlin is in Germany."
        assert [q.qid for q in ds.load_dataset(path, limit=1)] == ["z1"]
        with pytest.raises(ValueError, match="'quiz' is already registered"):
            ds.register_shape("quiz", ['"x"'], _load_quiz)
        with pytest.raises(ValueError, match="keys must be a non-empty list"):
            ds.register_shape("other", '"quiz_id"', _load_quiz)
    finally:
        ds.unregister_shape("quiz")
    assert ds.SHAPES.names() == builtin
    with pytest.raises(InputError, match=r"quiz\.jsonl:1: missing field .example_id."):  # the authors' shape takes it now
        ds.load_dataset(path)
    with pytest.raises(ValueError, match="'quiz' was not added"):
        ds.unregister_shape("quiz")


# ---------------------------------------------------------------- containment labelling


def test_label_by_containment_fills_missing_only_and_never_mutates():
    q = Question("q", "Who?", ("The Beatles", "Fab Four"), (
        Passage("1", "Songs by the beatles."),            # article + case + punctuation differ
        Passage("2", "Beatlesque music.", relevant=True),  # existing label kept
        Passage("3", "Not the fab fourteen."),             # token boundary: no match
    ))
    before = q.passages
    (out,) = ds.label_by_containment([q])
    assert [p.relevant for p in out.passages] == [True, True, False]
    assert q.passages == before and q.passages[0].relevant is None
    (all_new,) = ds.label_by_containment([q], only_missing=False)
    assert [p.relevant for p in all_new.passages] == [True, False, False]
    no_answers = Question("n", "?", (), (Passage("1", "x"),))
    assert ds.label_by_containment([no_answers])[0].passages[0].relevant is None


# ---------------------------------------------------------------- the packaged sample


AUTHORS_SHA256 = "a8cd16297ad8c84d13733ec47cc6cc79b54ab2bbf346ee78f2728199ed7dff9c"


def test_packaged_samples_exist_are_small_and_load():
    sizes = {name: ds.sample_path(name).stat().st_size for name in ds.SAMPLES}
    assert sum(sizes.values()) < 1_000_000
    qs = ds.load_sample("popqa-sample.jsonl")
    assert len(qs) == 12 and all(p.relevant is not None for q in qs for p in q.passages)
    assert all(any(p.relevant for p in q.passages) for q in qs)
    assert (ds.sample_path("authors-sample.json").parent / "ATTRIBUTION.md").is_file()
    with pytest.raises(InputError, match="unknown packaged sample"):
        ds.sample_path("nope.json")
    assert ds.load_dataset("popqa-sample", limit=2) == qs[:2]


def test_authors_sample_is_their_file_and_its_udcg_values_reproduce():
    path = ds.sample_path("authors-sample.json")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == AUTHORS_SHA256
    items = json.loads(path.read_text())
    for item in items:  # naive recomputation of their stored values: weights +1 and -0.333
        (model,) = item["udcg"]
        u = [(1 if p["is_relevant"] else -1) * (1 - p["models_info"][model]["no_res_prob"]) for p in item["passages"]]
        s = sum(max(x, 0) for x in u) / len(u) + 0.333 * sum(min(x, 0) for x in u) / len(u)
        assert 1 / (1 + math.exp(-s)) == pytest.approx(item["udcg"][model], abs=1e-12)
    assert [q.qid for q in ds.load_sample("authors-sample.json")] == ["example_1", "example_2", "example_3"]


@needs_shared
def test_make_sample_regenerates_the_packaged_file_byte_for_byte(tmp_path):
    module = load_script("make_sample")
    out = tmp_path / "popqa-sample.jsonl"
    assert module.main(["--data-dir", str(SHARED), "--out", str(out)]) == 0
    assert out.read_bytes() == ds.sample_path("popqa-sample.jsonl").read_bytes()
