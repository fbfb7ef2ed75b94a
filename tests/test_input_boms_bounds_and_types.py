"""Round three (issue 26), the input side: byte-order marks and line ends in every reader, one
place that bounds every numeric option and config value (``udcg.bounds``), type checks at the
Python API's entry, checks that tie inputs together (an answer reader's utilities, the API's
utility range, the API top-list rule), and ``report`` on a damaged run folder. No model is
loaded: a test that reaches a model fails (``no_model``)."""

from __future__ import annotations

import argparse
import codecs
import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from udcg import bounds
from udcg.cli import build_parser, main
from udcg.errors import InputError

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "badinput"
CONTEXTS = CORPUS / "contexts_k3.jsonl"
BOM = codecs.BOM_UTF8


def one_error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"udcg {command}: error: "), err
    return lines[0]


@pytest.fixture
def no_model(monkeypatch):
    from udcg.llm import registry

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(registry, "load_backend", refuse)


# ---------------------------------------------------------------- 2. byte-order marks, encodings, line ends

RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 3.0 r\n"
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"


@pytest.mark.parametrize("which", ["run", "qrels", "both"])
@pytest.mark.parametrize("ends", ["\n", "\r\n"])
@pytest.mark.parametrize("packed", [False, True])
def test_a_bom_does_not_rename_the_first_query(which, ends, packed, tmp_path, capsys):
    """P@1 was 0.0 for q1 (its id read as '\\ufeffq1'); now 1.0 for both queries, with no note."""
    def write(name: str, text: str, bom: bool) -> Path:
        data = (BOM if bom else b"") + text.replace("\n", ends).encode()
        path = tmp_path / (name + (".gz" if packed else ""))
        path.write_bytes(gzip.compress(data) if packed else data)
        return path

    run = write("run.trec", RUN, which in ("run", "both"))
    qrels = write("qrels.txt", QRELS, which in ("qrels", "both"))
    out = tmp_path / "out.tsv"
    assert main(["score", "--run", str(run), "--qrels", str(qrels), "--metrics", "P@1", "-o", str(out)]) == 0
    assert "no qrels" not in capsys.readouterr().err
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert {(q, float(v)) for q, m, v in rows if q != "all"} == {("q1", 1.0), ("q2", 1.0)}


def test_the_columnar_parser_falls_back_on_a_bom_and_gives_the_same_run(tmp_path):
    from udcg.io.trec import read_run
    from udcg.io.trec_columns import read_run_columns

    plain, marked, packed = tmp_path / "plain.trec", tmp_path / "bom.trec", tmp_path / "bom.trec.gz"
    plain.write_text(RUN)
    marked.write_bytes(BOM + RUN.encode())
    packed.write_bytes(gzip.compress(BOM + RUN.encode()))
    expected = read_run(plain)
    assert list(expected) == ["q1", "q2"]
    for path in (marked, packed):
        assert read_run(path) == expected
        assert read_run_columns(path).to_run() == expected


def test_a_bom_inside_a_trec_file_is_a_located_error(tmp_path):
    """Two files joined, each with its BOM: the second one would rename a query in the middle."""
    from udcg.io.trec import read_qrels, read_run
    from udcg.io.trec_columns import read_run_columns

    run = tmp_path / "joined.trec"
    run.write_bytes(BOM + b"q1 Q0 d1 1 2.0 r\n" + BOM + b"q2 Q0 d3 1 3.0 r\n")
    for read in (read_run, read_run_columns):
        with pytest.raises(InputError, match=r"joined.trec:2: a byte-order mark \(U\+FEFF\) inside the file"):
            read(run)
    qrels = tmp_path / "joined.qrels"
    qrels.write_bytes(b"q1 0 d1 1\n" + BOM + b"q2 0 d3 1\n")
    with pytest.raises(InputError, match="joined.qrels:2: a byte-order mark"):
        read_qrels(qrels)


@pytest.mark.parametrize("bom, where", [(codecs.BOM_UTF16_LE, ":1: the file is UTF-16"),
                                        (codecs.BOM_UTF16_BE, ":1: the file is UTF-16"),
                                        (codecs.BOM_UTF32_LE, ":1: the file is UTF-16 or UTF-32"),
                                        (codecs.BOM_UTF32_BE, ":1: the file is UTF-16 or UTF-32")])
def test_a_utf16_or_utf32_file_is_refused_with_its_location(bom, where, tmp_path):
    from udcg.io.files import read_text, stream_lines

    path = tmp_path / "wide.jsonl"
    path.write_bytes(bom + '{"a": 1}\n'.encode("utf-16-le"))
    with pytest.raises(InputError, match=where):
        read_text(path)
    with pytest.raises(InputError, match=where):
        list(stream_lines(path))


def test_text_files_drop_a_leading_bom_and_read_crlf(tmp_path):
    """read_text, read_json, read_records (JSON list, JSONL, one pretty object), the streamed lines
    and the corpus scan: the first id is the same with and without a BOM, with \\n or \\r\\n."""
    from udcg.io.files import JsonlScan, read_json, read_records, read_text, stream_lines

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(BOM + b'{"_id": "d1"}\n\xff\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: bytes that are not UTF-8 at offset 17"):  # offset in the file
        read_text(bad)
    for ends in ("\n", "\r\n"):
        lines = ['{"_id": "d1", "text": "one"}', '{"_id": "d2", "text": "two"}']
        for name, text in (("list.json", "[" + ",".join(lines) + "]"), ("lines.jsonl", ends.join(lines) + ends),
                           ("pretty.json", '{\n  "_id": "d1",\n  "text": "one"\n}'.replace("\n", ends))):
            path = tmp_path / name
            path.write_bytes(BOM + text.encode())
            assert not read_text(path).startswith("\ufeff")
            assert read_records(path)[0][1]["_id"] == "d1", (name, ends)
        assert read_json(tmp_path / "list.json")[0]["_id"] == "d1"
        path = tmp_path / "lines.jsonl"
        first = next(stream_lines(path))[1]
        assert first.startswith(b'{"_id"')
        scan = JsonlScan(path, ("_id",), keep={"d1", "d2"})
        assert [obj["_id"] for _, obj in scan.rows()] == ["d1", "d2"]
        packed = tmp_path / "lines.jsonl.gz"
        packed.write_bytes(gzip.compress(path.read_bytes()))
        assert [obj["_id"] for _, obj in JsonlScan(packed, ("_id",), keep={"d1"}).rows()] == ["d1"]


def test_a_beir_folder_with_boms_and_crlf_reads_as_without(tmp_path):
    """corpus.jsonl (streamed, by id), queries.jsonl and qrels/test.tsv, each with a BOM and \r\n."""
    from udcg.io.beir import read_collection

    folder = tmp_path / "beir"
    shutil.copytree(REPO / "udcg" / "data" / "nq-example", folder)
    first_doc = json.loads((folder / "corpus.jsonl").read_text().splitlines()[0])["_id"]
    plain = read_collection(folder, docids={first_doc})
    for path in (folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv"):
        path.write_bytes(BOM + path.read_bytes().replace(b"\n", b"\r\n"))
    for docids in ({first_doc}, None):
        marked = read_collection(folder, docids=docids)
        assert first_doc in marked.corpus and marked.corpus[first_doc].text == plain.corpus[first_doc].text
        assert marked.queries.keys() == plain.queries.keys() and marked.qrels == plain.qrels
        assert not any(q.startswith("\ufeff") for q in marked.queries)


@pytest.mark.parametrize("name", ["good_authors.json", "contexts_k3.jsonl"])
def test_score_reads_authors_and_contexts_files_with_a_bom_and_crlf(name, tmp_path, capsys):
    plain = CORPUS / name
    marked = tmp_path / name
    marked.write_bytes(BOM + plain.read_bytes().replace(b"\n", b"\r\n"))
    assert main(["score", str(plain), "-o", str(tmp_path / "a.jsonl"), "--metrics", "UDCG,P"]) == 0
    assert main(["score", str(marked), "-o", str(tmp_path / "b.jsonl"), "--metrics", "UDCG,P"]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_utilities_file_and_a_theta_model_with_a_bom(tmp_path):
    from udcg.annotate.utilities import load_utilities
    from udcg.flows.theta import load_theta

    qrels = tmp_path / "u.qrels"
    qrels.write_bytes(BOM + b"q1 0 d1 0.5\r\nq1 0 d2 -0.25\r\n")
    assert load_utilities(qrels).as_dict() == {"q1": {"d1": 0.5, "d2": -0.25}}
    theta = tmp_path / "theta.json"
    theta.write_bytes(BOM + (CORPUS / "theta_k2.json").read_bytes())
    assert load_theta(theta).k_ == load_theta(CORPUS / "theta_k2.json").k_ == 2


def test_a_yaml_config_with_a_bom_and_crlf_loads(tmp_path):
    from udcg.experiment.config import load_config

    config = tmp_path / "c.yaml"
    config.write_bytes(BOM + b"name: bom\r\nseed: 3\r\ncontexts:\r\n  k: 2\r\n")
    cfg = load_config(config)
    assert (cfg.name, cfg.seed, cfg.contexts.k) == ("bom", 3, 2)


# ---------------------------------------------------------------- 3. one place that bounds every number

BOUNDED_CLI = [
    (["compare", "--run", "a", "--run", "b", "--n-boot", "10000000000"], ["--n-boot 10000000000", "<= 1000000"]),
    (["compare", "--run", "a", "--run", "b", "--n-resamples", "100000000"], ["--n-resamples 100000000", "1..1000000"]),
    (["compare", "--run", "a", "--run", "b", "--seed", "-1"], ["--seed -1", "0..4294967295"]),
    (["compare", "--run", "a", "--run", "b", "--alpha", "1.5"], ["--alpha 1.5", "(0, 1)"]),
    (["compare", "--run", "a", "--run", "b", "--gamma", "inf"], ["--gamma inf", "a number in [0, 100]"]),
    (["correlate", "x.jsonl", "--n-boot", "10000000000"], ["--n-boot 10000000000", "100..1000000"]),
    (["correlate", "x.jsonl", "--n-resamples", "0"], ["--n-resamples 0", "integer >= 1"]),
    (["fit-theta", "x.jsonl", "-o", "t.json", "--seed", "-5"], ["--seed -5", "0..4294967295"]),
    (["fit-theta", "x.jsonl", "-o", "t.json", "--cv-folds", "1"], ["--cv-folds 1", "2..1000"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--estimator", "sampling", "--temperature", "nan"],
     ["--temperature nan", "(0, 100]"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--temperature", "0"], ["--temperature 0.0", "(0, 100]"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--samples", "100000"], ["--samples 100000", "1..10000"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--max-retries", "1000"], ["--max-retries 1000", "0..100"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--timeout", "0"], ["--timeout 0.0", "[0.001, 604800]"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--timeout", "inf"], ["--timeout inf", "[0.001, 604800]"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--concurrency", "0"], ["--concurrency 0", "1..10000"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--rpm", "-3"], ["--rpm -3.0", "[0.01, 1000000000]"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--seed", "4294967296"], ["--seed 4294967296"]),
    (["annotate", "--corpus", "c", "--run", "r", "-o", "o", "--model", "m", "--depth", "10000000"],
     ["--depth 10000000", "1..1000000"]),
    (["annotate", "x.json", "-o", "o.json", "--model", "m", "--target-width", "2"], ["--target-width 2", "(0, 1]"]),
    (["judge", "relevance", "x.json", "-o", "o.jsonl", "--retries", "1000"], ["--retries 1000", "0..100"]),
    (["judge", "relevance", "x.json", "-o", "o.jsonl", "--f1-threshold", "nan"], ["--f1-threshold nan", "(0, 1]"]),
    (["answer", "--run", "r", "--corpus", "c", "--model", "m", "-o", "o", "--k", "10000000"], ["--k 10000000"]),
    (["answer", "--run", "r", "--corpus", "c", "--model", "m", "-o", "o", "--subsets", "-1"], ["--subsets -1", "0..10000"]),
    (["answer", "--run", "r", "--corpus", "c", "--model", "m", "-o", "o", "--max-new-tokens", "0"], ["--max-new-tokens 0"]),
    (["score", "x.jsonl", "-o", "o.jsonl", "--k", "1000000000"], ["--k 1000000000", "positive integer"]),
    (["serve", "--model", "m", "--port", "99999"], ["--port 99999", "0..65535"]),
    (["score", "x.jsonl", "-o", "o.jsonl", "--k", "9" * 4000], ["--k an integer of about 4,0", "digits: must be"]),
    (["compare", "--run", "a", "--run", "b", "--power", "1"], ["--power 1.0", "(0, 1)"]),
]


@pytest.mark.parametrize("argv, words", BOUNDED_CLI, ids=[" ".join(a[:1] + a[-2:])[:60] for a, _ in BOUNDED_CLI])
def test_every_bounded_option_is_one_line_before_any_work(argv, words, capsys, no_model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of these exists, and nothing is read: the bound comes first
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, argv[0])
    assert all(w in line for w in words), line
    assert list(tmp_path.iterdir()) == []


def _numeric_options(parser: argparse.ArgumentParser, command: str | None = None):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _numeric_options(sub, command or name)
        elif action.type in (int, float):
            yield command, action.dest, action.option_strings


def test_every_numeric_option_of_every_command_has_a_bound():
    """The one place: a new int/float option without a bound in udcg.bounds fails here."""
    options = list(_numeric_options(build_parser()))
    assert len(options) > 30
    missing = [f"udcg {c} {flags}" for c, dest, flags in options if bounds.option_bound(c, dest) is None]
    assert not missing, missing


def test_bound_values_and_words():
    assert bounds.CUTOFF.describe() == "an integer >= 1 and <= 1000000 (1..1000000, a positive integer)"
    assert bounds.SEED.allows(0) and bounds.SEED.allows(2**32 - 1) and not bounds.SEED.allows(2**32)
    assert not bounds.SEED.allows(-1) and not bounds.SEED.allows(1.0) and not bounds.SEED.allows(True)
    import numpy as np

    assert bounds.SEED.allows(np.int64(7)) and bounds.WEIGHT.allows(np.float64(0.5))
    assert not bounds.WEIGHT.allows(math.nan) and not bounds.WEIGHT.allows(math.inf) and not bounds.WEIGHT.allows("1")
    assert bounds.LEVEL.allows(0.05) and not bounds.LEVEL.allows(0) and not bounds.LEVEL.allows(1)
    with pytest.raises(InputError, match=r"^n_boot = 10000000000: must be an integer >= 1 and <= 1000000"):
        bounds.check_value("n_boot", 10**10, bounds.RESAMPLES)
    with pytest.raises(InputError, match=r"^--k an integer of about 5,001 digits: must be"):
        bounds.check_option("--k", 10**5000, bounds.CUTOFF)
    with pytest.raises(InputError, match=r"^--k 1234567890123456789012345678901234567890\.\.\.: must be"):
        bounds.check_option("--k", 123456789012345678901234567890123456789012345, bounds.CUTOFF)


def test_the_measure_grammar_refuses_an_absurd_cutoff():
    """UDCG@99999999999 --unannotated zero tried a 14.6 TiB allocation."""
    from udcg.metrics import measures

    assert measures.MAX_CUTOFF == bounds.MAX_CUTOFF  # the grammar's copy (metrics import nothing of udcg)
    assert str(measures.parse_measure("P@1000000")) == "P@1000000"
    for text in ("UDCG@99999999999", "P@1000001", "nDCG@" + "9" * 5000):
        with pytest.raises(InputError, match=r"is too large: a cutoff must be an integer in 1\.\.1000000"):
            measures.parse_measure(text)
    with pytest.raises(InputError, match="too large"):
        measures.make_measure("UDCG", 10**11)


def test_compare_with_an_absurd_cutoff_is_one_line(capsys, tmp_path):
    utilities = tmp_path / "u.txt"
    utilities.write_text("q1 0 d1 0.5\nq1 0 d2 -0.2\n")
    run_b = tmp_path / "b.trec"
    shutil.copy(CORPUS / "good_run.txt", run_b)
    assert main(["compare", "--run", str(CORPUS / "good_run.txt"), "--run", str(run_b), "--utilities", str(utilities),
                 "--metrics", "UDCG@99999999999", "--unannotated", "zero"]) == 2
    assert "cutoff 99999999999 is too large" in one_error_line(capsys.readouterr().err, "compare")


@pytest.mark.parametrize("raw, words", [
    ({"metrics": {"n_boot": 10**10}}, ["metrics.n_boot = 10000000000", "100..1000000"]),
    ({"seed": -1}, ["seed = -1", "0..4294967295"]),
    ({"pool": {"size": 10**7}}, ["pool.size = 10000000", "1..1000000"]),
    ({"studies": {"k_values": [1, 0]}}, ["studies.k_values = 0", "positive integer"]),
    ({"reader": {"chunk_size": 0}}, ["reader.chunk_size = 0", "positive integer"]),
    ({"reader": {"threads": 10**6}}, ["reader.threads = 1000000", "1..4096"]),
    ({"grading": {"f1_threshold": 0}}, ["grading.f1_threshold = 0", "(0, 1]"]),
    ({"metrics": {"gamma": -1}}, ["metrics.gamma = -1", "a number in [0, 100]"]),
    ({"theta": {"C_grid": [0.1, 0]}}, ["theta.C_grid = 0", "> 0"]),
])
def test_config_values_are_bounded_at_load(raw, words):
    from udcg.experiment.config import from_dict

    with pytest.raises(InputError) as e:
        from_dict(raw, "c.yaml")
    assert str(e.value).startswith("c.yaml: ") and all(w in str(e.value) for w in words), str(e.value)


def test_a_report_config_with_absurd_n_boot_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(REPO / "docs/results/nq-qwen0.5b-shuffled", run, ignore=shutil.ignore_patterns("cache"))
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("n_boot: 10000", "n_boot: 10000000000"))
    assert "n_boot: 10000000000" in config.read_text()
    assert main(["report", str(run), "-o", str(tmp_path / "out")]) == 2
    assert "metrics.n_boot = 10000000000" in one_error_line(capsys.readouterr().err, "report")


API_CASES = [
    (lambda u: u.udcg("abc"), "utilities: give a list of numbers"),
    (lambda u: u.udcg([[0.1, 0.2], [0.3]]), "of unequal lengths or non-numbers"),
    (lambda u: u.udcg({"a": 1}), "got dict"),
    (lambda u: u.udcg([0.1, None]), "utilities: give a list of numbers"),
    (lambda u: u.udcg(["0.5"]), "utilities: give a list of numbers"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, metrics=None), "metrics: give a list of measures"),
    (lambda u: u.evaluate({"q1": ["d1"]}, {"q1": {"d1": 1}}, metrics=["P@1"]), "query 'q1' maps to a list"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, {"q1": ["d1"]}, metrics=["P@1"]), "qrels: query 'q1' maps to a list"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": {"d1": 5.0}}, metrics=["UDCG@1"]),
     "the utility of ('q1', 'd1') is 5.0, not a number in [-1, 1]"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": {"d1": math.nan}}, metrics=["UDCG@1"]),
     "is nan, not a number in [-1, 1]"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": ["d1"]}, metrics=["UDCG@1"]), "maps to a list"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": {"d1": 0.5}}, metrics=["UDCG@99999999999"],
                          unannotated="zero"), "too large"),
    (lambda u: u.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": {"d1": 0.5}}, metrics=["UDCG@1"], gamma=math.nan),
     "gamma = nan"),
    (lambda u: u.compare({"a": {"q1": {"d1": 1.0}}, "b": {"q1": {"d1": 2.0}}}, {"q1": {"d1": 1}}, metrics=["P@1"],
                         n_boot=10**10), "n_boot = 10000000000: must be an integer >= 100 and <= 1000000"),
    (lambda u: u.compare({"a": {"q1": {"d1": 1.0}}, "b": {"q1": {"d1": 2.0}}}, {"q1": {"d1": 1}}, metrics=["P@1"],
                         seed=-1), "seed = -1: must be an integer >= 0"),
    (lambda u: u.compare({"a": {"q1": {"d1": 1.0}}, "b": {"q1": {"d1": 2.0}}}, {"q1": {"d1": 1}}, metrics=["P@1"],
                         n_resamples=2.5), "n_resamples = 2.5"),
    (lambda u: u.compare({"a": {"q1": {"d1": 1.0}}, "b": {"q1": {"d1": 2.0}}}, {"q1": {"d1": 1}}, metrics=["P@1"],
                         alpha=0), "alpha = 0: must be a number in (0, 1)"),
]


@pytest.mark.parametrize("call, words", API_CASES, ids=[w[:40] for _, w in API_CASES])
def test_the_python_api_checks_types_and_ranges_at_its_entry(call, words):
    import udcg

    with pytest.raises(InputError) as e:
        call(udcg)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_python_api_still_scores_good_input():
    import udcg

    assert udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2]) == pytest.approx(0.5349, abs=1e-4)
    assert udcg.udcg_many([[1, 0], [0, 0]]).shape == (2,)  # integers are numbers
    assert udcg.evaluate({"q1": {"d1": 1.0}}, None, utilities={"q1": {"d1": -1}}, metrics="UDCG@1").means()["UDCG@1"] < 0.5


# ---------------------------------------------------------------- 4. checks that tie things together


def test_candidate_logprob_never_reads_a_shorter_token_as_no_response():
    """A top list with 'N' but no 'NO' gave p_abs 0.99 for every passage (exp(-0.01)); now -inf and a note."""
    from udcg.llm.openai_wire import candidate_logprob

    lp, note = candidate_logprob({"N": -0.01, "The": -4.6}, "NO-RESPONSE")
    assert lp == -math.inf and "first token 'NO' absent" in note and "shorter 'N'" in note
    assert candidate_logprob({"NO": -0.3, "N": -0.01}, "NO-RESPONSE") == (-0.3, "")
    assert candidate_logprob({"NO-": -0.2, "NO": -0.3}, "NO-RESPONSE") == (-0.2, "")  # a longer first token
    assert candidate_logprob({"N": -0.01}, "NO-RESPONSE", first_token="N") == (-0.01, "")  # an override is kept
    assert candidate_logprob({" NO": -0.4, " N": -0.1}, " NO-RESPONSE") == (-0.4, "")
    assert candidate_logprob({"-": -0.4}, "-x") == (-0.4, "")  # no leading letters: one character is a token


def test_answer_refuses_utilities_of_another_reader(tmp_path, capsys, no_model):
    from udcg.annotate.utilities import UtilityRecord, write_utilities

    folder = tmp_path / "beir"
    shutil.copytree(REPO / "udcg/data/nq-example", folder)
    line = (folder / "runs" / "bm25.trec").read_text().splitlines()[0].split()
    qid, docid = line[0], line[2]
    record = UtilityRecord(qid=qid, docid=docid, p_abs=0.2, relevant=True, relevance_source="qrels",
                           model="another-reader", estimator="first-token", prompt_version="udcg-code-v1")
    utilities = tmp_path / "u"
    write_utilities(utilities, {(qid, docid): record}, {"model": "another-reader", "prompt_version": "udcg-code-v1",
                                                        "estimator": "first-token"})
    argv = ["answer", "--corpus", str(folder), "--run", str(folder / "runs" / "bm25.trec"), "--k", "1",
            "--utilities", str(utilities), "--model", "smollm2-135m", "-o", str(tmp_path / "a.jsonl"), "--no-progress"]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, "answer")
    assert "made with model 'another-reader'" in line and "'smollm2-135m'" in line
    assert main([*argv, "--prompt", "paper-fig4-v1"]) == 2
    assert "made with model" in capsys.readouterr().err  # the model is checked first; the prompt below
    from dataclasses import replace

    write_utilities(utilities, {(qid, docid): replace(record, model="smollm2-135m")},
                    {"model": "smollm2-135m", "prompt_version": "udcg-code-v1", "estimator": "first-token"})
    assert main([*argv, "--prompt", "paper-fig4-v1"]) == 2
    assert "made with prompt_version 'udcg-code-v1'" in one_error_line(capsys.readouterr().err, "answer")


# ---------------------------------------------------------------- 5. report on a damaged run folder


@pytest.fixture
def run_folder(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REPO / "docs/results/nq-qwen0.5b-shuffled", run, ignore=shutil.ignore_patterns("cache"))
    return run


def _rewrite_gz(path: Path, edit) -> None:
    lines = gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)
    path.write_bytes(gzip.compress("".join(edit(lines)).encode()))


def _notes(run: Path, edit) -> None:
    path = run / "data" / "notes.json"
    notes = json.loads(path.read_text())
    edit(notes)
    path.write_text(json.dumps(notes))


DAMAGE = {
    "bad line in contexts": (lambda run: _rewrite_gz(run / "data/contexts.jsonl.gz",
                                                     lambda ls: ls[:6] + ['{"study": "main", "qid": \n'] + ls[7:]),
                             ["contexts.jsonl.gz:7: invalid JSON"]),
    "non-object line": (lambda run: _rewrite_gz(run / "data/contexts.jsonl.gz", lambda ls: ls[:2] + ["[1, 2]\n"] + ls[3:]),
                        ["contexts.jsonl.gz:3: expected a JSON object"]),
    "not gzip": (lambda run: (run / "data/contexts.jsonl.gz").write_bytes(b"\x1f\x8b\x08junk"),
                 ["contexts.jsonl.gz: cannot read as gzip"]),
    "truncated notes": (lambda run: (run / "data/notes.json").write_text((run / "data/notes.json").read_text()[:200]),
                        ["notes.json:", "invalid JSON"]),
    "theta key kX": (lambda run: _notes(run, lambda n: n.update(theta={"kX": ["full"]})),
                     ["notes.json: field 'theta' holds 'kX'", "rerun udcg validate"]),
    "theta variant": (lambda run: _notes(run, lambda n: n.update(theta={"k5": ["fancy"]})), ["'theta' holds 'k5'"]),
    "notes a list": (lambda run: (run / "data/notes.json").write_text("[1]"), ["expected a JSON object of notes"]),
    "notes without pool_stats": (lambda run: _notes(run, lambda n: n.pop("pool_stats")),
                                 ["field 'pool_stats' is missing or not an object"]),
    "questions not a number": (lambda run: _notes(run, lambda n: n["pool_stats"].update(questions="many")),
                               ["'pool_stats.questions' is missing or not an integer"]),
    "a study missing": (lambda run: (run / "config.yaml").write_text((run / "config.yaml").read_text()
                                                                     .replace("positions: false", "positions: true")),
                        ["no contexts of study 'positions'"]),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_report_on_a_damaged_run_folder_is_one_located_line(case, run_folder, tmp_path, capsys):
    damage, words = DAMAGE[case]
    damage(run_folder)
    assert main(["report", str(run_folder), "-o", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys.readouterr().err, "report")
    assert all(w in line for w in words), line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.md"))


def test_report_of_an_intact_copy_still_works(run_folder, tmp_path, capsys):
    assert main(["report", str(run_folder), "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "report.md").read_text() == (run_folder / "report.md").read_text()


def test_report_stops_a_gzip_bomb_at_its_limit(run_folder, tmp_path, capsys):
    """A 1 MB gzip inflated to 1 GiB (2.3 GB resident); now it stops at 100x its size."""
    import resource

    with gzip.open(run_folder / "data/contexts.jsonl.gz", "wb", compresslevel=9) as f:
        for _ in range(1024):
            f.write(b" " * 1024**2)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["report", str(run_folder), "-o", str(tmp_path / "out")]) == 2
    assert "decompresses to more than" in one_error_line(capsys.readouterr().err, "report")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 600 * 1024  # KiB: well under the 1 GiB


@pytest.mark.parametrize("meta, words", [('{"splits": 5}', "field 'splits' must be a non-empty list"),
                                         ("[1]", "field 'splits' must be"),
                                         ('{"splits": ["../x"]}', "split '../x' has no folder"),
                                         ('{"splits": ["train"]}', "split 'train' has no folder"),
                                         ('{"splits": ', "invalid JSON")])
def test_a_datasets_folder_with_a_bad_dataset_dict_is_a_located_error(meta, words, tmp_path, capsys, no_model):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "dataset_dict.json").write_text(meta)
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 1.0 r\n")
    assert main(["answer", "--run", str(run), "--corpus", str(corpus), "--queries", str(run), "--model", "m",
                 "-o", str(tmp_path / "out.jsonl")]) == 2
    line = one_error_line(capsys.readouterr().err, "answer")
    assert "dataset_dict.json" in line and words in line, line
