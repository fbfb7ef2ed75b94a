"""Round five (issue 49, items 4 and 8): a DataFrame row without an id is a located error, not a
row dropped (or read as the document "None"); an output folder never goes into an input folder."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from udcg.cli import main
from udcg.errors import InputError

QRELS = {"q1": {"d1": 1, "d2": 0}}


@pytest.mark.parametrize("bad, words", [(None, "docno is"), (math.nan, "docno is NaN"), (pd.NA, "docno is"),
                                        ("", "docno is empty"), ("  ", "docno is blank"), (2.0, "the float 2.0")])
def test_a_run_frame_row_without_a_document_id_is_a_located_error(bad, words):
    """It was read as the unjudged document "None" / "nan" (P@3 0.33, nDCG 1.0, no word)."""
    from udcg import api

    run = pd.DataFrame({"qid": ["q1", "q1", "q1"], "docno": ["d1", bad, "d2"], "score": [3.0, 2.0, 1.0]})
    with pytest.raises(InputError) as e:
        api.evaluate(run, QRELS, metrics=["nDCG@3", "P@3"])
    assert str(e.value).startswith("run: row 1 (qid='q1', ") and words in str(e.value), str(e.value)


@pytest.mark.parametrize("bad", [None, math.nan, ""])
def test_a_missing_query_id_in_a_qrels_or_utilities_frame_is_refused_too(bad):
    from udcg.io.frames import frame_to_dict

    for value, column in (("relevance", "label"), ("utility", "utility")):
        frame = pd.DataFrame({"query_id": ["q1", bad], "doc_id": ["d1", "d2"], column: [1.0, 0.0]})
        with pytest.raises(InputError, match=r"row 1 .*query_id is"):
            frame_to_dict(frame, value, value)


def test_integer_and_text_ids_still_read():
    from udcg.io.frames import frame_to_dict

    frame = pd.DataFrame({"qid": [1, 1], "docno": [10, 11], "score": [2.0, 1.0]})
    assert frame_to_dict(frame, "score", "run") == {"1": {"10": 2.0, "11": 1.0}}


@pytest.fixture
def example(tmp_path):
    assert main(["example", str(tmp_path / "ex")]) == 0
    return tmp_path / "ex"


@pytest.mark.parametrize("inside", ["qrels", "qrels/new", "runs", "fresh", "."])
def test_annotate_never_writes_its_folder_into_the_corpus_folder(example, inside, capsys):
    """``annotate -o <BEIR folder>/qrels`` wrote utilities.qrels and meta.json among the qrels."""
    before = sorted(p.relative_to(example) for p in example.rglob("*"))
    out = example / inside
    rc = main(["annotate", "--corpus", str(example), "--run", str(example / "runs/bm25.trec"), "--depth", "1",
               "--model", "smollm2-135m", "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    refused = ("the input folder --corpus" in err[0] and ("lies inside" in err[0] or "is the input" in err[0])
               or "holds the input --run" in err[0])  # runs/: the folder that holds the runs says so first
    assert refused and "an output never" in err[0], err
    assert sorted(p.relative_to(example) for p in example.rglob("*")) == before


def test_the_api_refuses_an_output_folder_inside_an_input_folder(example):
    from udcg import api

    with pytest.raises(InputError, match=r"lies inside the input folder corpus"):
        api.annotate_runs(example, [example / "runs/bm25.trec"], example / "qrels", "smollm2-135m", depth=1)
    assert not (example / "qrels" / "meta.json").exists()


def test_an_output_folder_beside_the_corpus_is_still_fine(example, tmp_path):
    from udcg.io.writing import check_outputs

    check_outputs([("-o", tmp_path / "utilities", True)], [("--corpus", example), ("--run", example / "runs/bm25.trec")])
    check_outputs([("-o", example, True)], [("RUN_DIR", example)], in_place=True)  # report's in-place rebuild
