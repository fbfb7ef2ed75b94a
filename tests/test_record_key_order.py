"""The key order of every record `udcg annotate` writes, pinned as it was before the p_abs
estimate's fields were declared once (issue #52): the annotation cache (annotations.jsonl and the
authors' run's ``.cache.jsonl``), utilities.jsonl, and the authors' ``models_info[<model>].udcg``
record. A refactor of the records may change no byte of these files, so no key may move."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tests.conftest import ScriptedBackend
from udcg.cli import main
from udcg.llm import registry

EXAMPLE = resources.files("udcg") / "data" / "nq-example"
AUTHORS = resources.files("udcg") / "data" / "authors-sample.json"

CACHE_KEYS = ["qid", "pid", "model", "estimator", "p_abs", "prompt_version", "ci_low", "ci_high", "n_samples", "note",
              "estimator_used", "censored"]
SAMPLING_KEYS = ["samples", "temperature", "target_width", "seed"]
RESUME_KEYS = ["key", "input"]  # the resumable runner's: the key, and the fingerprint of what the reader saw
UTILITY_KEYS = ["qid", "docid", "p_abs", "relevant", "relevance_source", "model", "estimator", "prompt_version",
                "ci_low", "ci_high", "n_samples", "note", "utility"]


def _backend(rest: str, **options: object) -> ScriptedBackend:
    def first(chat, candidates):  # a value per chat, from its text: real, differing p_abs
        return {c: -0.2 - (len(chat[-1]["content"]) % 11) / 4 for c in candidates}

    def answer(chat, params):
        n = len(chat[-1]["content"])
        return ["NO-RESPONSE" if (n + i) % 3 == 0 else "Paris" for i in range(params.n)]

    return ScriptedBackend(name=rest, first=first, answer=answer)


@pytest.fixture()
def scripted():
    with registry.SCHEMES.scoped():
        registry.register_scheme("keyorder", _backend, api=False)
        yield "keyorder:reader"


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cache_keys(rec: dict, sampling: bool) -> None:
    got = list(rec)
    assert got == RESUME_KEYS + CACHE_KEYS + (SAMPLING_KEYS if sampling else []), got


@pytest.mark.parametrize("estimator", ["first-token", "sampling"])
def test_annotate_run_writes_its_records_keys_in_the_pinned_order(scripted, estimator, tmp_path, capsys):
    out = tmp_path / "utilities"
    assert main(["annotate", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "bm25.trec"), "--depth", "2",
                 "--limit", "3", "--model", scripted, "--estimator", estimator, "--samples", "4", "-o", str(out),
                 "--no-progress"]) == 0
    cache = _lines(out / "annotations.jsonl")
    assert cache
    for rec in cache:
        _cache_keys(rec, estimator == "sampling")
    utilities = _lines(out / "utilities.jsonl")
    assert len(utilities) == len(cache)
    assert all(list(rec) == UTILITY_KEYS for rec in utilities)
    if estimator == "sampling":
        assert all(rec["n_samples"] == 4 and rec["ci_low"] is not None for rec in utilities)


@pytest.mark.parametrize("estimator", ["first-token", "sampling"])
def test_annotate_of_the_authors_format_writes_its_record_keys_in_the_pinned_order(scripted, estimator, tmp_path, capsys):
    out = tmp_path / "annotated.json"
    assert main(["annotate", str(AUTHORS), "--model", scripted, "--estimator", estimator, "--samples", "4",
                 "-o", str(out), "--no-progress"]) == 0
    for rec in _lines(tmp_path / "annotated.json.cache.jsonl"):
        _cache_keys(rec, estimator == "sampling")
    items = json.loads(out.read_text())
    records = [p["models_info"]["reader"] for item in items for p in item["passages"]]
    assert records
    want = (["estimator", "p_abs", "prompt_version", "ci_low", "ci_high", "n_samples", "estimator_used", "utility"]
            if estimator == "sampling" else ["estimator", "p_abs", "prompt_version", "estimator_used", "utility"])
    for info in records:
        assert list(info) == ["no_res_prob", "udcg"]
        assert list(info["udcg"]) == want, list(info["udcg"])


def test_records_of_older_files_still_read(tmp_path):
    """A cache record from before estimator_used and censored, and a utilities.jsonl line with only
    the keys a reader needs, read as before: the later fields take their defaults."""
    from udcg.annotate.runner import annotation_from, annotation_record
    from udcg.annotate.utilities import load_utilities
    from udcg.records import Annotation, Estimate

    old = {"qid": "q1", "pid": "d1", "model": "m", "estimator": "first-token", "p_abs": 0.25,
           "prompt_version": "udcg-code-v1", "ci_low": None, "ci_high": None, "n_samples": None, "note": ""}
    a = annotation_from(old)
    assert isinstance(a, Estimate) and (a.docid, a.p_abs, a.estimator_used, a.censored) == ("d1", 0.25, "", False)
    assert annotation_record(a) == {**old, "estimator_used": "", "censored": None}
    assert annotation_from({**old, "censored": True}).censored is True
    assert list(annotation_record(Annotation(qid="q", docid="d", model="m", estimator="e", p_abs=0.5,
                                             prompt_version="p", censored=True))) == CACHE_KEYS
    (tmp_path / "u.jsonl").write_text(json.dumps({"qid": "q1", "docid": "d1", "p_abs": 0.25, "relevant": True}) + "\n")
    rec = load_utilities(tmp_path / "u.jsonl").records["q1", "d1"]
    assert (rec.p_abs, rec.utility, rec.ci_low, rec.note, rec.relevance_source) == (0.25, 0.75, None, "", "given")
    assert list(rec.to_dict()) == UTILITY_KEYS
