"""Round four (issue 36), the commands and the Python API: ``annotate --run --limit``, integer ids
and wrong types at the Python API's door (``udcg.api_args``), ``--gamma 1e308``, two annotate
commands on one folder, an output folder that holds an input. ``udcg serve`` and a core install
without the extras are in ``test_serve_abandoned_requests.py`` and ``test_core_install.py``."""

from __future__ import annotations

import inspect
import json
import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import udcg
from udcg import api, bounds
from udcg.cli import main
from udcg.errors import InputError
from udcg.io.sources import example_path

REPO = Path(__file__).resolve().parents[1]
CONTEXTS = REPO / "tests" / "badinput" / "contexts_k3.jsonl"


class ModelLoaded(Exception):
    pass


@pytest.fixture
def no_model(monkeypatch):
    """A call that gets as far as loading a model raises ModelLoaded: its arguments passed the door."""
    from udcg.llm import registry

    def refuse(*args, **kwargs):
        raise ModelLoaded

    monkeypatch.setattr(registry, "load_backend", refuse)


def one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text, text
    return text


# ---------------------------------------------------------------- item 4: integer ids, output=None


def test_integer_docids_and_qids_match_string_ones():
    """P@1 was 0.0 for {'q': {1: 1.0}} against qrels {'q': {'1': 1}}: ids are made strings at the door."""
    assert udcg.evaluate({"q": {1: 1.0}}, {"q": {"1": 1}}, metrics=["P@1"]).means() == {"P@1": 1.0}
    scores = udcg.evaluate({1: {1: 1.0, 2: 0.5}}, {"1": {"1": 1}}, metrics=["P@1", "nDCG@2"])
    assert scores.qids == ("1",) and scores.means()["P@1"] == 1.0 and not scores.notes
    np = pytest.importorskip("numpy")
    assert udcg.evaluate({np.int64(7): {np.int32(3): 1.0}}, {"7": {"3": 2}}, metrics="P@1").means()["P@1"] == 1.0
    utilities = udcg.read_utilities({1: {2: 0.5}})
    assert utilities == {"1": {"2": 0.5}}
    cmp = udcg.compare({"a": {"q": {1: 1.0}}, "b": {"q": {2: 1.0}}}, {"q": {"1": 1}}, metrics="P@1", n_boot=100,
                       n_resamples=50)
    cells = cmp.to_dict()["cells"]
    assert (cells["a"]["P@1"]["mean"], cells["b"]["P@1"]["mean"]) == (1.0, 0.0)


@pytest.mark.parametrize("table, words", [
    ({"q": {1: 1.0, "1": 0.5}}, "id '1' is given twice"),
    ({1: {"d": 1.0}, "1": {"d": 1.0}}, "id '1' is given twice"),
    ({"q": {1.5: 1.0}}, "id 1.5 is a float; ids must be strings or integers"),
    ({("q",): {"d": 1.0}}, "ids must be strings or integers"),
])
def test_ids_that_are_neither_strings_nor_integers_or_collide_are_refused(table, words):
    with pytest.raises(InputError) as e:
        udcg.evaluate(table, {"q": {"d": 1}}, metrics="P@1")
    assert words in one_line(e.value)


def test_annotate_runs_refuses_output_none_before_any_work(no_model, tmp_path, monkeypatch):
    """annotate_runs(output=None) wrote a folder named 'None'."""
    monkeypatch.chdir(tmp_path)
    ex = example_path()
    with pytest.raises(InputError) as e:
        udcg.annotate_runs(ex, [ex / "runs" / "bm25.trec"], None, "smollm2-135m")
    assert one_line(e.value).startswith("output: give a path") and not (tmp_path / "None").exists()


# ---------------------------------------------------------------- item 14: wrong types at the door, every function

RUN = {"q1": {"d1": 1.0, "d2": 0.5}}
QRELS = {"q1": {"d1": 1}}
UTIL = {"q1": {"d1": 0.5, "d2": -0.1}}


def _good(tmp: Path) -> dict[str, dict]:
    """A call of every public function that passes the door (the flows then reach a model, refused)."""
    ex = example_path()
    run = str(ex / "runs" / "bm25.trec")
    return {
        "udcg": dict(utilities=[0.5, -0.2], gamma=0.3),
        "udcg_many": dict(utilities=[[0.5, -0.2]], gamma=0.3),
        "evaluate": dict(run=RUN, qrels=QRELS, utilities=UTIL, metrics=["UDCG@2", "P@1"], gamma=0.3, theta=None,
                         unannotated="error", model=None, prompt_version=None),
        "score_runs": dict(runs={"a": RUN}, qrels=QRELS, utilities=UTIL, metrics=["UDCG@2", "P@1"], gamma=0.3,
                           theta=None, unannotated="error", model=None, prompt_version=None),
        "compare": dict(runs={"a": RUN, "b": {"q1": {"d2": 1.0}}}, qrels=QRELS, utilities=None, metrics=["P@1"],
                        test="permutation", alpha=0.05, correction="measure", power=0.8, n_resamples=50, n_boot=100,
                        seed=0, answers=None, model=None, prompt_version=None, judged_only=False, ties=None,
                        equivalence=0.01),
        "read_utilities": dict(utilities={"q1": {"d1": 0.5}}, model=None, prompt_version=None),
        "named_runs": dict(paths=["a.trec"]),
        "annotate_runs": dict(corpus=str(ex), runs=[run], output=str(tmp / "ann"), model="smollm2-135m", depth=2,
                              queries=None, qrels=None, answers=None, unjudged="irrelevant", judge="rules", limit=None,
                              show_progress=False, api_base=None, samples=3, timeout=5.0),
        "answer_runs": dict(corpus=str(ex), runs=[run], output=str(tmp / "answers.jsonl"), model="smollm2-135m", k=2,
                            limit=1, samples=0),
        "judge": dict(task="answer", path=str(CONTEXTS), output=str(tmp / "judged.jsonl"), judge="rules", batch_size=None),
        "fit_theta": dict(contexts=str(CONTEXTS), output=str(tmp / "theta.json"), k=None, variant="full", C=0.01,
                          cv_folds=5, cv_score="spearman", seed=0),
        "correlate": dict(contexts=str(CONTEXTS), metrics=None, baseline=None, gamma=0.3, theta=None,
                          constant_metric="zero", n_boot=100, seed=0, test="permutation", n_resamples=50,
                          equivalence=0.03),
        "reader_check": dict(utilities=str(tmp / "utilities"), n_boot=100, seed=0),
    }


WRONG = {"None": None, "int": 5, "str": "5", "float": 2.5, "bool": True, "list": [1], "dict": {"a": 1},
         "object": object(), "10**400": 10**400, "nan": math.nan, "bytes": b"x", "-3": -3}


def test_every_public_function_is_in_the_table(tmp_path):
    public = {name for name in (*udcg._API, *api.__all__) if inspect.isfunction(getattr(api, name))}
    assert public == set(_good(tmp_path))


@pytest.mark.parametrize("function", sorted(_good(Path("."))))
def test_a_wrong_type_in_any_argument_is_one_input_error_line(function, tmp_path, no_model, monkeypatch):
    """Each argument of each public function given each of 12 wrong values: an InputError of one line
    naming the argument, a value (a wrong value that is also a right one: '5' as a model name), or the
    model load the flows reach: never TypeError, AttributeError, OverflowError (15 such before)."""
    monkeypatch.chdir(tmp_path)  # a wrong value that is a right path ('5') is written here, not in the checkout
    func = getattr(udcg, function) if function in udcg._API else getattr(api, function)
    base = _good(tmp_path)[function]
    bad = []
    for arg in base:
        for label, value in WRONG.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    func(**{**base, arg: value})
                except (InputError, ModelLoaded) as e:
                    if isinstance(e, InputError) and ("\n" in str(e) or len(str(e)) > 400):
                        bad.append((arg, label, f"message: {e}"))
                except Exception as e:  # noqa: BLE001 (what the test looks for)
                    bad.append((arg, label, f"{type(e).__name__}: {str(e)[:100]}"))
    assert not bad, bad


ISSUE_CASES = [
    (lambda tmp: udcg.compare(runs=None), "runs: give a {name: run} dict or a list of run files, got None"),
    (lambda tmp: udcg.fit_theta(CONTEXTS, tmp / "t.json", k="5"), "k: give an integer or None, got a str ('5')"),
    (lambda tmp: udcg.evaluate({"q": {"1": 1.0}}, {"q": {"1": 10**400}}, metrics="P@1"),
     "qrels relevance: a value is an integer too large for a float"),
    (lambda tmp: udcg.evaluate({"q": {"1": 10**400}}, {"q": {"1": 1}}, metrics="P@1"),
     "run scores: a value is an integer too large for a float"),
    (lambda tmp: udcg.udcg([0.5, -0.5], gamma=10**400), "gamma = an integer of about 401 digits: must be a number in [0, 100]"),
    (lambda tmp: udcg.fit_theta(CONTEXTS, tmp / "t.json", C=10**400), "C = an integer of about 401 digits: must be a finite number > 0"),
    (lambda tmp: udcg.annotate_runs(example_path(), example_path() / "runs" / "bm25.trec", tmp / "u", "m"),
     "runs: give a list of file paths, got one path"),
    (lambda tmp: udcg.annotate_runs(example_path(), ["r"], tmp / "u", "m", api_base=[5]),
     "api_base: give a base URL, several comma-separated, or a list of URL strings"),
    (lambda tmp: udcg.annotate_runs(example_path(), ["r"], tmp / "u", "m", concurency=5),
     "annotate_runs(): unknown option 'concurency'"),
    (lambda tmp: udcg.answer_runs(example_path(), ["r"], tmp / "a.jsonl", "m", k="5"), "k: give an integer, got a str"),
    (lambda tmp: udcg.judge(["answer"], CONTEXTS, tmp / "j.jsonl"), "task: give a str, got a list"),
    (lambda tmp: udcg.correlate(CONTEXTS, metrics=5), "metrics: give a str or None, got an int (5)"),
    (lambda tmp: udcg.correlate(CONTEXTS, theta=5), "theta: give a path (str or pathlib.Path) or None, got an int (5)"),
    (lambda tmp: udcg.evaluate(RUN, QRELS, metrics="P@1", theta=5), "theta: give a fitted udcg UDCGTheta or the path"),
    (lambda tmp: udcg.score_runs(["a.trec"], QRELS), "runs: give a {name: run} dict"),
    (lambda tmp: api.named_runs(None), "paths: give a non-empty list of file paths, got None"),
    (lambda tmp: udcg.compare({"a": RUN, "b": RUN}, QRELS, answers=5), "answers: give a file or folder path"),
    (lambda tmp: udcg.annotate_runs(example_path(), ["r"], tmp / "u", "m", depth=10**400), "depth = an integer of about"),
    (lambda tmp: udcg.evaluate(RUN, QRELS, metrics=None), "metrics: give a list of measures"),
    (lambda tmp: udcg.compare(), "compare(): missing a required argument: 'runs'"),
]


@pytest.mark.parametrize("call, words", ISSUE_CASES, ids=[w[:40] for _, w in ISSUE_CASES])
def test_the_issues_wrong_types_are_one_line_naming_the_argument(call, words, tmp_path, no_model):
    with pytest.raises(InputError) as e:
        call(tmp_path)
    assert words in one_line(e.value)


def test_api_base_as_a_list_is_the_comma_separated_fleet():
    from udcg.api_args import api_base

    assert api_base("api_base", ["http://a/v1", " http://b/v1 "]) == "http://a/v1,http://b/v1"


def test_good_input_still_scores_through_the_door(tmp_path):
    assert udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2]) == pytest.approx(0.5349, abs=1e-4)
    ex = example_path()
    scores = udcg.evaluate(ex / "runs" / "bm25.trec", ex / "qrels" / "test.tsv", metrics=["P@5", "nDCG@5"])
    assert len(scores.qids) == 20 and 0 < scores.means()["nDCG@5"] < 1
    assert api.named_runs([Path("x/bm25.trec")]) == {"bm25": Path("x/bm25.trec")}


# ---------------------------------------------------------------- item 15: extreme gamma


@pytest.mark.parametrize("gamma", ["1e308", "101", "1e400"])
def test_an_extreme_gamma_is_refused_on_the_command_line(gamma, tmp_path, capsys):
    """--gamma 1e308 printed numpy's overflow warning and then UDCG = 0 for every query."""
    ex = example_path()
    code = main(["score", "--run", str(ex / "runs" / "bm25.trec"), "--qrels", str(ex / "qrels" / "test.tsv"),
                 "--metrics", "P@1", "--gamma", gamma, "-o", str(tmp_path / "s.tsv")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--gamma" in err, err
    assert not (tmp_path / "s.tsv").exists()


def test_the_largest_gamma_computes_without_a_warning_and_not_zero():
    from udcg.metrics.udcg import MAX_GAMMA, udcg_matrix as matrix

    assert MAX_GAMMA == bounds.MAX_GAMMA  # the metric's copy (metrics import nothing of udcg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = matrix([[-1.0] * 5, [1.0, -1.0, -1.0, -1.0, -1.0]], gamma=MAX_GAMMA)
    assert (values > 0).all() and values[0] == pytest.approx(1 / (1 + math.exp(MAX_GAMMA)))


# ---------------------------------------------------------------- items 2 and 18: annotate --run


@pytest.fixture(scope="module")
def instant_server():
    from tests.conftest import load_script

    with load_script("instant_openai_server").Process(0.0) as s:
        yield s


def _annotate(server, out: Path, *runs: str, extra: tuple[str, ...] = ()) -> list[str]:
    ex = example_path()
    return [sys.executable, "-m", "udcg", "annotate", "--corpus", str(ex), *[a for r in runs for a in ("--run", str(ex / "runs" / r))],
            "--depth", "3", "--model", "bench", "--api-base", server.url, "-o", str(out), "--no-progress", *extra]


def _env(tmp: Path) -> dict:
    import os

    return {**os.environ, "OPENAI_API_KEY": "test-key", "PYTHONPATH": str(REPO)}


def test_annotate_run_honours_limit(instant_server, tmp_path):
    """--limit 3 with --run annotated every query, without a word; now the first 3 queries of the queries file."""
    out = tmp_path / "u"
    done = subprocess.run(_annotate(instant_server, out, "bm25.trec", "dense.trec", extra=("--limit", "3")),
                          capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    first3 = [json.loads(line)["_id"] for line in (example_path() / "queries.jsonl").read_text().splitlines()[:3]]
    records = [json.loads(line) for line in (out / "utilities.jsonl").read_text().splitlines()]
    assert {r["qid"] for r in records} == set(first3)
    assert json.loads((out / "meta.json").read_text())["runs"]["bm25"]["queries"] == 3


def test_two_annotate_commands_on_one_folder_both_land_in_meta(instant_server, tmp_path):
    """Two commands with different runs at once: meta.json kept only the last writer's run. The test
    holds the folder's lock until both commands wait on it (each had read meta.json by then)."""
    from udcg.io.cache import AppendCache

    out = tmp_path / "u"
    lock = AppendCache(out / "annotations.jsonl")
    procs = [subprocess.Popen(_annotate(instant_server, out, run), stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
             for run in ("bm25.trec", "dense.trec")]
    try:
        for p in procs:  # each says it waits for the lock
            for line in p.stderr:
                if "another udcg process is writing this cache" in line:
                    break
    finally:
        lock.close()
    for p in procs:
        p.stderr.read()
        assert p.wait(timeout=120) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert set(meta["runs"]) == {"bm25", "dense"}
    from udcg.annotate.utilities import load_utilities

    assert meta["pairs"] == len(load_utilities(out)) > 60
    assert not [p for p in out.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]


@pytest.mark.parametrize("held", ["run", "qrels"])
def test_annotate_into_a_folder_that_holds_its_input_is_refused(held, tmp_path, capsys, no_model):
    """-o a folder holding the input run or qrels was accepted, and the advice to delete the output
    folder would then delete inputs."""
    ex = tmp_path / "nq"
    shutil.copytree(example_path(), ex)
    folder = ex / "runs" if held == "run" else ex / "qrels"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    code = main(["annotate", "--corpus", str(ex), "--run", str(ex / "runs" / "bm25.trec"), "--qrels",
                 str(ex / "qrels" / "test.tsv"), "--model", "smollm2-135m", "-o", str(folder), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"-o {folder}: holds the input" in err, err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_the_api_refuses_an_output_folder_that_holds_a_run(tmp_path, no_model):
    ex = tmp_path / "nq"
    shutil.copytree(example_path(), ex)
    with pytest.raises(InputError) as e:
        udcg.annotate_runs(ex, [ex / "runs" / "bm25.trec"], ex / "runs", "smollm2-135m")
    assert "holds the input runs" in one_line(e.value)


@pytest.mark.parametrize("option, words", [
    # ran past 120 s (critical value inf); the sign-flip test's own floor says no p reaches it (test_compare_power.py)
    (["--alpha", "5e-324", "--test", "t"], "is too small for a t-test on 20 queries"),
    (["--power", "1e-300"], "power = 1e-300 is not above the test's level"),  # ValueError traceback from brentq
])
def test_extreme_alpha_and_power_are_one_line(option, words, capsys):
    """Found by the adversarial pass (extreme floats): the minimum detectable difference hung or crashed."""
    ex = example_path()
    code = main(["compare", "--run", str(ex / "runs" / "bm25.trec"), "--run", str(ex / "runs" / "dense.trec"),
                 "--qrels", str(ex / "qrels" / "test.tsv"), "--metrics", "P@5", "--n-boot", "100", *option])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and words in err[-1] and err[-1].startswith("udcg compare: error: "), err


def test_a_model_folder_given_as_a_path_passes_the_door(no_model, tmp_path):
    ex = example_path()
    with pytest.raises(ModelLoaded):
        udcg.annotate_runs(ex, [ex / "runs" / "bm25.trec"], tmp_path / "u", tmp_path / "my-model", depth=1, limit=1,
                           show_progress=False)


@pytest.mark.parametrize("temperature", [1e-300, 1e-45, 5e-324])
def test_a_tiny_sampling_temperature_draws_the_most_likely_token(temperature):
    """Found by the adversarial pass (extreme floats): logits / 1e-300 overflowed, every probability was
    NaN and the sampler drew the last token of the vocabulary, the least likely here (silently wrong;
    `udcg serve` accepts such a temperature from any client, `annotate --temperature` too)."""
    torch = pytest.importorskip("torch")
    from udcg.llm.base import GenerationParams
    from udcg.llm.decoding import pick_tokens

    logits = torch.tensor([[1.0, 2.0, 3.0, -50.0], [5.0, 1.0, 0.0, 0.0]])
    for top_p in (1.0, 0.9):
        params = GenerationParams(temperature=temperature, top_p=top_p, max_new_tokens=1)
        assert pick_tokens(logits, [torch.Generator().manual_seed(s) for s in (0, 1)], params) == [2, 0]
