"""Runs read as columns (udcg/io/trec_columns.py -> udcg/flows/run_tables.py ->
udcg.metrics.gains.row_table) against the dict path (read_run -> run_table): the same run, the same
GainTable (ties, float32 ties, missing and unjudged queries, utilities with NaN), the same scores
and notes, the same located error for a bad line, and the same values as ir_measures."""

from __future__ import annotations

import math
from pathlib import Path

import ir_measures
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udcg.errors import InputError
from udcg.flows import run_scores
from udcg.flows.run_scores import score_runs
from udcg.flows.run_tables import columns_table
from udcg.io import trec_columns
from udcg.io.trec import read_qrels, read_run
from udcg.io.trec_columns import RunColumns, read_run_columns
from udcg.metrics.evaluate import run_table
from udcg.metrics.gains import RunRows, ranked_rows, row_table

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e39 as float32


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8"))
    return path


def fast(path: Path) -> RunColumns | None:
    """The columns when the fast path takes the file, else None (it would fall back)."""
    return trec_columns._fast_columns(path)


def same_run(columns: RunColumns, run: dict) -> None:
    got = columns.to_run()
    assert got == run
    assert list(got) == list(run)
    assert all(list(got[q]) == list(run[q]) for q in run)  # file order within a query


def same_table(a, b) -> None:
    assert a.qids == b.qids
    assert a.tied_queries == b.tied_queries
    for x, y in [(a.gains, b.gains), (a.ideal, b.ideal), (a.n_judged, b.n_judged), (a.depth, b.depth),
                 (a.first_tie, b.first_tie)]:  # issue #34: where the first tie of each query lies
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    assert a.extra.keys() == b.extra.keys()
    for name in a.extra:
        assert a.extra[name].shape == b.extra[name].shape
        np.testing.assert_array_equal(a.extra[name], b.extra[name])  # NaN == NaN here


def both_tables(path: Path, qrels, utilities=None, depth=None):
    return columns_table(read_run_columns(path), qrels, utilities, depth), run_table(read_run(path), qrels, utilities, depth)


# ---------------------------------------------------------------- hand-made


RUN = ("q2 Q0 b 1 3.0 t\n"
       "q2 Q0 a 2 3.0 t\n"  # tie: b before a (docid descending)
       "q2 Q0 c 3 1.0000000001 t\n"  # float32 tie with d: d before c
       "q2 Q0 d 4 1.0 t\n"
       "q1 Q0 x 1 -0.0 t\n"  # -0.0 ties 0.0: z before x
       "q1 Q0 z 2 0.0 t\n"
       "q9 Q0 a 1 5 t\n"  # no qrels: skipped, counted in the notes
       "q2 Q0 e 5 7 t\n")  # a query's lines need not be together
QRELS = {"q1": {"z": 1, "x": 2}, "q2": {"a": 3, "c": 1, "zz": 2}, "q3": {"a": 1}}  # q3: not in the run


@pytest.mark.parametrize("delimiter", [" ", "\t"])
def test_hand_made_run_same_as_the_dict_path(tmp_path, delimiter):
    path = write(tmp_path, "run.trec", RUN.replace(" ", delimiter))
    columns = fast(path)
    assert columns is not None, "a plain file takes the fast path"
    same_run(columns, read_run(path))
    assert columns.qids == ("q2", "q1", "q9")
    utilities = {"q2": {"e": 0.5, "a": float("nan"), "b": -1.0}, "q1": {"z": 0.25}, "q8": {"a": 1.0}}
    for depth in (None, 2, 10):
        a, b = both_tables(path, QRELS, utilities, depth)
        same_table(a, b)
    a, _ = both_tables(path, QRELS)
    assert a.qids == ("q1", "q2", "q3")
    np.testing.assert_array_equal(a.gains, [[1, 2, 0, 0, 0], [0, 0, 3, 0, 1], [0, 0, 0, 0, 0]])  # e b a d c / z x
    np.testing.assert_array_equal(a.depth, [2, 5, 0])


def test_score_runs_from_a_file_equals_score_runs_from_the_dict(tmp_path):
    path = write(tmp_path, "run.trec", RUN)
    qrels = write(tmp_path, "qrels.txt", "".join(f"{q} 0 {d} {r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
    metrics = ["nDCG@3", "P@2", "RR", "AP", "R@10", "UDCG@3"]
    utilities = {"q2": {"e": 0.5, "b": -1.0, "a": 0.1}, "q1": {"z": 0.25, "x": 0.0}}
    for kwargs in ({"metrics": metrics[:-1]}, {"metrics": metrics, "utilities": utilities, "unannotated": "zero"},
                   {"metrics": ["UDCG@2"], "utilities": utilities, "unannotated": "worst"}):
        q = qrels if "P@2" in kwargs["metrics"] else None
        ours = score_runs({"r": path}, q, **kwargs)["r"]
        theirs = score_runs({"r": read_run(path)}, q, **kwargs)["r"]
        assert ours.qids == theirs.qids and ours.notes == theirs.notes and ours.coverage == theirs.coverage
        for m in theirs.values:
            np.testing.assert_array_equal(ours.values[m], theirs.values[m])
    notes = score_runs({"r": path}, qrels, metrics=["P@10"])["r"].notes
    assert notes[0].startswith("1 run queries have no qrels") and notes[1].startswith("1 scored queries have no documents")


def test_the_utility_checks_of_the_dict_path(tmp_path):
    path = write(tmp_path, "run.trec", RUN)
    for bad, message in [({"q2": {"a": "high"}}, "every value must be a number"), ({"q2": {"a": math.inf}}, "NaN or inf")]:
        for run in (read_run_columns(path), read_run(path)):
            make = columns_table if isinstance(run, RunColumns) else run_table
            with pytest.raises(InputError, match=message):
                make(run, QRELS, bad, 3)
    # a bad value of a document outside the run is not read (as on the dict path)
    same_table(*both_tables(path, QRELS, {"q2": {"nowhere": "x", "a": 0.5}}, 3))
    # keys that are not strings match nothing, as on the dict path
    same_table(*both_tables(path, {"q2": {1: 2, "a": 1}, 7: {"a": 1}}, {"q2": {2: 0.5, "b": 0.1}}, 3))


def test_row_table_hand_computed():
    # rows: (query, score, docid): ties broken by the docid rank, smallest first
    query = np.array([1, 0, 1, 1, -1, 0])
    scores = np.array([2.0, 1.0, 2.0, 3.0, 9.0, 1.0])
    docids = np.array(["a", "p", "b", "c", "z", "q"])
    asked = []

    def docid_rank(rows):
        asked.append(sorted(rows.tolist()))
        names = docids[rows]
        return np.argsort(np.argsort(names)[::-1])  # descending docid -> 0, 1, ...

    assert ranked_rows(query, scores, 2, docid_rank).tolist() == [5, 1, 3, 2, 0]  # q p | c b a
    assert asked == [[0, 1, 2, 5]]  # only the tied rows
    relevance = np.array([1.0, 0.0, 2.0, 0.0, 5.0, 3.0])
    table = row_table(("q0", "q1"), RunRows(query, scores, relevance, docid_rank), np.array([1, 2]),
                      np.array([3.0, 2.0, 1.0]))
    np.testing.assert_array_equal(table.gains, [[3, 0, 0], [0, 2, 1]])
    np.testing.assert_array_equal(table.ideal, [[3, 0], [2, 1]])
    np.testing.assert_array_equal(table.depth, [2, 3])


# ---------------------------------------------------------------- the fallback: same errors, same runs


@pytest.mark.parametrize("text", [
    "1 Q0 d1 1 2 t\n1 Q0 d1 2 1 t\n",  # duplicate
    "1 Q0 d1 1 2 t\n2 Q0 d1 1 2 t\n1 Q0 d2 2 1 t\n1 Q0 d1 3 0 t\n",  # duplicate, lines apart
    "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 high t\n",  # bad score
    "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 1_0 t\n1 Q0 d3 3 x t\n",  # Python reads 1_0, pyarrow does not
    "1 Q0 d1 1 nan t\n", "1 Q0 d1 1 inf t\n", "1 Q0 d1 1 1e999 t\n",  # not finite
    "1 Q0 d1 1 2.5\n",  # five fields
    "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 2 t x\n",  # seven fields
    "1 Q0 d1 1 2.5 t\n1 Q0 d2  2 t\n",  # an empty field = five fields
    "1 Q0 d1 1 2.5 t\n1\tQ0 d2 2 2 t x\n",  # a tab in a space-separated file
    "1 Q0 d1 1 2.5 t\n1 Q0 d\xa02 2 2 t\n",  # a no-break space splits for Python: seven fields
    "1 Q0 d1 1 2.5 t\n1 Q0 d\u20282 2 2 t\n",  # a Unicode line separator
    "1 Q0 d1 1 2 t\n1 Q0 d\x0c2 2 1 t\n",  # a form feed ends a line for Python
    "1 Q0 d1 1 2 t\n1 Q0 d\r2 2 1 t\n",  # so does a lone carriage return
    "1\tQ0\td1\t1\t2\tt\n1\tQ0\td 2\t2\t1\tt\n",  # a space in a tab-separated file
    "\ufeff1 Q0 d1 1 2 t\n1 Q0 d2 2 x t\n",  # BOM, then a bad score
    "\n\n", "   \n", "",
])
@pytest.mark.parametrize("scan_bytes", [trec_columns.SCAN_BYTES, 1, 3])  # checks across block boundaries
def test_bad_files_give_the_same_located_error(tmp_path, monkeypatch, text, scan_bytes):
    monkeypatch.setattr(trec_columns, "SCAN_BYTES", scan_bytes)
    path = write(tmp_path, "run.trec", text)
    with pytest.raises(InputError) as theirs:
        read_run(path)
    with pytest.raises(InputError) as ours:
        read_run_columns(path)
    assert str(ours.value) == str(theirs.value)
    assert f"{path}" in str(ours.value)


def test_bad_bytes_and_missing_files_give_the_same_error(tmp_path):
    bad = tmp_path / "latin1.trec"
    bad.write_bytes(b"1 Q0 d1 1 2 t\n1 Q0 d\xe9 2 1 t\n")
    for path in (bad, tmp_path / "missing.trec", tmp_path):
        with pytest.raises(InputError) as theirs:
            read_run(path)
        with pytest.raises(InputError) as ours:
            read_run_columns(path)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("text", [
    "1 Q0 d1 1 2 t \n1 Q0 d2 2 1 t\n",  # trailing space
    "1  Q0 d1 1 2 t\n",  # two spaces
    "1 Q0 d1 1 2 t\n1\tQ0\td2\t2\t1\tt\n",  # both delimiters
    "1 Q0 d1 1 2 t\r\n1 Q0 d2 2 1 t\r\n\r\n",  # CRLF (the fast path takes it)
    "1 Q0 d1 1 2 t\r1 Q0 d2 2 1 t\r",  # old Mac line ends
    "\n\n1 Q0 é1 1 2 t\n\n1 Q0 d2 2 1_0 t",  # blank lines, UTF-8, a Python-only number, no final newline
    "\ufeff1 Q0 d1 1 2 t\n",  # a BOM is part of the first qid for Python
])
@pytest.mark.parametrize("scan_bytes", [trec_columns.SCAN_BYTES, 1, 3])
def test_irregular_but_valid_files_read_the_same(tmp_path, monkeypatch, text, scan_bytes):
    monkeypatch.setattr(trec_columns, "SCAN_BYTES", scan_bytes)
    path = write(tmp_path, "run.trec", text)
    same_run(read_run_columns(path), read_run(path))
    if "\r\n" in text:
        assert fast(path) is not None, "CRLF files take the fast path"


def test_gzipped_run(tmp_path):
    import gzip

    path = tmp_path / "run.trec.gz"
    path.write_bytes(gzip.compress(RUN.encode()))
    assert fast(path) is not None
    same_run(read_run_columns(path), read_run(path))


def test_many_arrow_chunks(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    lines = [f"q{q} Q0 doc{d} 1 {s:.1f} t\n" for q in range(40) for d, s in
             zip(rng.choice(10_000, 50, replace=False), rng.normal(size=50))]
    rng.shuffle(lines)
    path = write(tmp_path, "run.trec", "".join(lines))
    monkeypatch.setattr(trec_columns, "BLOCK_BYTES", 1 << 10)
    columns = fast(path)
    assert columns is not None and columns.docids.num_chunks > 20
    same_run(columns, read_run(path))
    qrels = {f"q{q}": {f"doc{d}": int(g) for d, g in zip(rng.choice(10_000, 400), rng.integers(0, 3, 400))} for q in range(45)}
    same_table(*both_tables(path, qrels, {"q3": {lines[0].split()[2]: 0.5}}, 5))
    duplicate = write(tmp_path, "dup.trec", "".join(lines) + lines[0])
    with pytest.raises(InputError, match=f"dup.trec:{len(lines) + 1}: docid .* appears twice"):
        read_run_columns(duplicate)


def test_a_duplicate_across_arrow_chunks_is_found():
    docids = pa.chunked_array([pa.array(["d1", "a-docid-longer-than-8", "d3"]), pa.array(["a-docid-longer-than-8"])])
    assert trec_columns._has_twice(np.array([0, 0, 0, 0], np.int32), docids)
    assert not trec_columns._has_twice(np.array([0, 0, 0, 1], np.int32), docids)  # another query
    other = pa.chunked_array([pa.array(["a-docid-longer-than-8", "a-docid-longer-than-9", "a-docid-longer-than-"])])
    assert not trec_columns._has_twice(np.zeros(3, np.int32), other)


def test_without_pyarrow_the_line_parser_does_it(tmp_path, monkeypatch):
    path = write(tmp_path, "run.trec", RUN)

    def no_pyarrow(path):
        raise ImportError("no pyarrow")
    monkeypatch.setattr(trec_columns, "_fast_columns", no_pyarrow)
    same_run(read_run_columns(path), read_run(path))


def test_score_runs_reads_the_qrels_before_the_runs(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(run_scores, "_load_run", lambda run, what: calls.append(run))
    with pytest.raises(InputError, match="q.txt:1: field 'relevance' = 'high'"):
        score_runs({"r": tmp_path / "run.trec"}, write(tmp_path, "q.txt", "q1 0 d1 high\n"), metrics=["P@1"])
    assert calls == []


# ---------------------------------------------------------------- random runs


IDS = ["d", "D1", "d10", "é", "ab", "abcdefgh", "abcdefghi", "abcdefgh0", "x\x00y", "zz"]
SCORES = [0.0, -0.0, 1.0, 1.0000000001, 1.00000001, -2.5, 3.0, 1e39, -1e39, 7.25, 1e-300]


@st.composite
def run_files(draw):
    qids = draw(st.lists(st.sampled_from(["1", "2", "10", "q", "é"]), min_size=1, max_size=4, unique=True))
    lines = []
    for qid in qids:
        docs = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=8, unique=True))
        lines += [(qid, d, draw(st.sampled_from(SCORES))) for d in docs]
    lines = draw(st.permutations(lines)) if draw(st.booleans()) else lines
    return lines


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=run_files(), delimiter=st.sampled_from([" ", "\t"]), newline=st.sampled_from(["\n", "\r\n"]),
       scan_bytes=st.sampled_from([1 << 22, 2, 5]), data=st.data())
def test_random_runs_same_tables_as_the_dict_path(tmp_path, lines, delimiter, newline, scan_bytes, data):
    text = "".join(f"{q}{delimiter}Q0{delimiter}{d}{delimiter}{i}{delimiter}{s!r}{delimiter}t{newline}"
                   for i, (q, d, s) in enumerate(lines))
    path = write(tmp_path, "run.trec", text)
    run = read_run(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trec_columns, "SCAN_BYTES", scan_bytes)  # the checks across block boundaries
        assert fast(path) is not None, "a plain file takes the fast path"
    same_run(read_run_columns(path), run)
    qids = ["1", "2", "10", "q", "é", "z"]
    qrels = data.draw(st.dictionaries(st.sampled_from(qids), st.dictionaries(st.sampled_from(IDS + ["nowhere"]),
                      st.integers(-1, 3), max_size=5), min_size=1, max_size=5), label="qrels")
    utilities = data.draw(st.dictionaries(st.sampled_from(qids), st.dictionaries(
        st.sampled_from(IDS), st.one_of(st.floats(-1, 1), st.just(math.nan)), max_size=6), max_size=5), label="utilities")
    depth = data.draw(st.sampled_from([None, 1, 3, 20]), label="depth")
    same_table(*both_tables(path, qrels, utilities, depth))
    same_table(*both_tables(path, None, utilities, depth))  # without qrels: the run's own queries


# ---------------------------------------------------------------- against ir_measures


def test_a_real_shaped_run_against_ir_measures(tmp_path):
    rng = np.random.default_rng(7)
    run_lines, qrels_lines = [], []
    for i in range(150):
        docs = rng.choice(100_000, size=120, replace=False)
        scores = np.sort(np.round(rng.normal(10, 2, size=100), 2))[::-1]  # rounded: ties
        if i % 30 != 3:  # some judged queries are missing from the run
            run_lines += [f"q{i} Q0 doc{d} {r} {s:.2f} bench\n" for r, (d, s) in enumerate(zip(docs[:100], scores), 1)]
        judged = np.concatenate([rng.choice(docs[:100], size=8, replace=False), docs[100:103]])
        qrels_lines += [f"q{i} 0 doc{d} {g}\n" for d, g in zip(judged, rng.integers(0, 4, size=len(judged)))]
    run_lines += ["extra Q0 doc1 1 1.0 bench\n"]  # a run query without qrels
    run = write(tmp_path, "run.trec", "".join(run_lines))
    qrels = write(tmp_path, "qrels.txt", "".join(qrels_lines))
    assert fast(run) is not None
    # measures of ir_measures' pytrec_eval provider, which breaks ties as trec_eval does (its RR@k
    # comes from the msmarco provider: ties by docid ascending)
    measures = ["nDCG@10", "RR", "R@100", "AP", "P@5", "nDCG"]
    ours = score_runs({"r": run}, qrels, metrics=measures)["r"]
    theirs: dict = {}
    for m in ir_measures.iter_calc([ir_measures.parse_measure(x) for x in measures], ir_measures.read_trec_qrels(str(qrels)),
                                   ir_measures.read_trec_run(str(run))):
        theirs.setdefault(str(m.measure), {})[m.query_id] = m.value
    for measure in measures:
        got = dict(zip(ours.qids, ours.values[measure].tolist()))
        for qid, value in theirs[measure].items():
            assert got[qid] == pytest.approx(value, abs=1e-9), (measure, qid)
    judged = {q: {d: int(r) for d, r in docs.items()} for q, docs in read_qrels(qrels).items()}
    means = ir_measures.calc_aggregate([ir_measures.parse_measure(x) for x in measures], judged, read_run(run))
    for measure, value in means.items():
        assert ours.means()[str(measure)] == pytest.approx(value, abs=1e-9)
