"""A model string is resolved once (``udcg.llm.registry.resolve``): local or API, the name its
results record and the options its backend takes, the same in every command. A scheme added with
``register_scheme`` is an API or a local one for annotate, answer and judge alike."""

from __future__ import annotations

import json
import math

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.llm import registry
from udcg.llm.base import BaseBackend, GenerationParams
from udcg.llm.lazy import LazyBackend
from udcg.llm.registry import ModelChoice, ModelSpec, resolve

GREEDY = GenerationParams()
REPLY = json.dumps({"motivation": "m", "grade": "A"})  # the answer judge's "correct"


class ToyBackend(BaseBackend):
    """A small real backend: every reply is ``REPLY``, every candidate has probability 1/4."""

    def __init__(self, model: str, **options: object) -> None:
        self.name, self.options = model, options

    def generate(self, chats, params=GREEDY):
        return [[REPLY] * params.n for _ in chats]

    def next_token_logprobs(self, chats, candidates):
        return [{c: math.log(0.25) for c in candidates} for _ in chats]

    def continuation_logprobs(self, requests):
        return [[math.log(0.25)] for _ in requests]


@pytest.fixture
def toy(monkeypatch):
    """``register(api)`` adds the scheme ``toy`` (gone after the test); ``built`` holds every backend
    made, ``specs`` every spec resolved for a ``toy:`` model."""
    built, specs = [], []

    def factory(model, **options):
        built.append(ToyBackend(model, **options))
        return built[-1]

    def recording(model, **kw):
        spec = real(model, **kw)
        if str(model).startswith("toy:"):
            specs.append(spec)
        return spec

    real = registry.resolve
    monkeypatch.setattr(registry, "resolve", recording)

    class Toy:
        def register(self, api: bool) -> None:
            registry.register_scheme("toy", factory, api=api)

    t = Toy()
    t.built, t.specs = built, specs
    with registry.SCHEMES.scoped():  # the scheme is gone after the test
        yield t


def test_local_names_are_the_alias_the_folder_name_or_the_hub_id(tmp_path):
    assert resolve("qwen2.5-coder-0.5b") == ModelSpec("qwen2.5-coder-0.5b", None, False, "qwen2.5-coder-0.5b")
    folder = tmp_path / "my-model"
    folder.mkdir()
    assert resolve(str(folder)).name == "my-model" and not resolve(str(folder)).api
    assert resolve("org/name").name == "org/name"
    assert resolve("qwen2.5:0.5b").scheme is None and resolve("C:/models/x").scheme is None


def test_an_api_model_records_the_name_after_the_scheme():
    spec = resolve("openai:gpt-4o-mini")
    assert (spec.model, spec.scheme, spec.api, spec.name) == ("openai:gpt-4o-mini", "openai", True, "gpt-4o-mini")
    served = resolve("gpt-4o-mini", base_urls=["http://127.0.0.1:9/v1"])
    assert (served.model, served.api, served.name) == ("openai:gpt-4o-mini", True, "gpt-4o-mini")
    assert resolve("llama3:8b", base_urls=["http://127.0.0.1:9/v1"]).name == "llama3:8b"  # no scheme 'llama3'
    assert resolve("openai:x", name="shown").name == "shown"


def test_options_of_the_other_kind_are_refused_or_left_out():
    with pytest.raises(InputError, match=r"--batch-size 4: 'openai:m' is an API model, .*--chunk-size"):
        resolve("openai:m", batch_size=4)
    with pytest.raises(InputError, match=r"--device cpu: 'openai:m' is an API model"):
        resolve("openai:m", device="cpu")
    api = resolve("openai:m", device=None, timeout=3.0, defaults={"device": "auto", "dtype": "float32"})
    assert dict(api.options) == {"timeout": 3.0}  # defaults of a local model are left out, never refused
    local = resolve("qwen2.5-coder-0.5b", batch_size=2, timeout=3.0, max_concurrency=8, defaults={"dtype": "float32"})
    assert dict(local.options) == {"batch_size": 2, "dtype": "float32"}
    with pytest.raises(InputError, match="give the served model name"):
        resolve("openai:")
    with pytest.raises(InputError, match="unknown backend scheme 'nope'"):
        resolve("nope:model")
    with pytest.raises(InputError, match="non-empty"):
        resolve(" ")


def test_a_lazy_backend_records_the_spec_name_before_and_after_loading(toy):
    toy.register(api=True)
    lazy = LazyBackend("toy:reader")
    assert lazy.name == "reader" and lazy.load_seconds == 0 and toy.built == []
    assert lazy.generate([[{"role": "user", "content": "q"}]]) == [[REPLY]]
    assert lazy.name == "reader" == toy.built[0].name
    with pytest.raises(TypeError, match="api must be True"):
        registry.register_scheme("other", ToyBackend, api="yes")


def _beir(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "Paris is the capital of France.", "d2": "Lyon is a city in France.", "d3": "Saturn has rings."}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in docs.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "capital of france",
                                                      "metadata": {"answers": ["Paris"]}}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    run = tmp_path / "a.trec"
    run.write_text("q1 Q0 d2 1 3 a\nq1 Q0 d1 2 2 a\nq1 Q0 d3 3 1 a\n")
    return folder, run


def _commands(out, folder, run, extra=(), answers=None):
    """annotate --run, answer and judge answer (of ``answers``, default answer's output), each with
    the model toy:reader, writing under ``out``."""
    out.mkdir()
    utilities, answers = out / "utilities", answers or out / "answers.jsonl"
    return [
        ["annotate", "--corpus", str(folder), "--run", str(run), "--depth", "2", "--model", "toy:reader",
         "-o", str(utilities), "--no-progress", *extra],
        ["answer", "--corpus", str(folder), "--run", str(run), "--k", "2", "--model", "toy:reader",
         "--utilities", str(utilities), "-o", str(out / "answers.jsonl"), "--no-progress", *extra],
        ["judge", "answer", str(answers), "-o", str(out / "judged.jsonl"), "--judge", "toy:reader",
         "--no-progress", *extra]]


def _all_three(tmp_path, toy, capsys, api: bool, out: str):
    """The toy scheme registered (API or local) and annotate, answer and judge run with it into
    tmp_path/out; returns the BEIR folder and run they read."""
    toy.register(api=api)
    folder, run = _beir(tmp_path)
    for argv in _commands(tmp_path / out, folder, run):
        assert main(argv) == 0, capsys.readouterr().err
    return folder, run


@pytest.mark.parametrize("api", [True, False])
def test_a_registered_scheme_is_the_same_model_in_annotate_answer_and_judge(tmp_path, toy, capsys, api):
    _all_three(tmp_path, toy, capsys, api, "out")
    assert len(toy.specs) >= 3 and len({(s.model, s.scheme, s.api, s.name) for s in toy.specs}) == 1
    assert toy.specs[0].api is api and toy.specs[0].name == "reader"
    out = tmp_path / "out"
    meta = json.loads((out / "utilities" / "meta.json").read_text())
    assert meta["model"] == "reader" and meta["estimator"] == ("api-logprobs" if api else "first-token")
    assert {json.loads(line)["model"] for line in (out / "answers.jsonl").read_text().splitlines()} == {"reader"}
    assert {json.loads(line)["judge"] for line in (out / "judged.jsonl").read_text().splitlines()} == {"reader"}
    local_options = [{k for k in b.options if k in registry.LOCAL_ONLY} for b in toy.built]
    assert local_options == ([set()] * 3 if api else [{"device", "dtype"}, {"device", "dtype"}, set()])


@pytest.mark.parametrize("api", [True, False])
def test_batch_size_is_refused_by_every_command_for_an_api_scheme(tmp_path, toy, capsys, api):
    folder, run = _all_three(tmp_path, toy, capsys, api, "first")
    built = len(toy.built)
    for argv in _commands(tmp_path / "second", folder, run, ["--batch-size", "4"], tmp_path / "first" / "answers.jsonl"):
        rc, err = main(argv), capsys.readouterr().err
        if api:
            assert rc == 2 and "--batch-size 4: 'toy:reader' is an API model" in err, err
        else:
            assert rc == 0 and toy.built[-1].options["batch_size"] == 4, err
    assert len(toy.built) == built + (0 if api else 3)


# ---------------------------------------------------------------- one model value


LOCAL_FLAGS = ["--device", "cpu", "--dtype", "float32", "--batch-size", "4"]
API_FLAGS = ["--api-base", "http://127.0.0.1:9/v1", "--api-key-env", "K", "--concurrency", "3", "--rpm", "60",
             "--timeout", "5", "--max-retries", "2", "--tokenizer", "smollm2-135m", "--scoring", "completions"]
MODEL_COMMANDS = {"annotate": ["annotate", "in.json", "-o", "o.json", "--model", "m"],
                  "answer": ["answer", "--run", "r.trec", "--corpus", "c", "-o", "o.jsonl", "--model", "m"],
                  "judge": ["judge", "relevance", "in.json", "-o", "o.jsonl", "--judge", "m"],
                  "serve": ["serve", "--model", "m"]}


def test_every_command_that_runs_a_model_makes_one_choice_from_the_same_flags():
    from udcg.cli import build_parser
    from udcg.commands._parser import model_choice

    choices = {name: model_choice(build_parser().parse_args(argv + LOCAL_FLAGS + (API_FLAGS if name != "serve" else [])))
               for name, argv in MODEL_COMMANDS.items()}
    full = ModelChoice("m", device="cpu", dtype="float32", batch_size=4, api_base="http://127.0.0.1:9/v1",
                       api_key_env="K", concurrency=3, rpm=60.0, timeout=5.0, max_retries=2, tokenizer="smollm2-135m",
                       scoring="completions")
    assert choices["annotate"] == choices["answer"] == choices["judge"] == full
    assert choices["serve"] == ModelChoice("m", device="cpu", dtype="float32", batch_size=4)  # its --api-key-env: its own


def test_a_choice_resolves_as_the_keywords_of_the_python_api():
    from udcg.flows.annotate import reader

    choice = ModelChoice("gpt-x", api_base="http://127.0.0.1:9/v1", timeout=3.0)
    keywords = {"api_base": "http://127.0.0.1:9/v1", "timeout": 3.0, "samples": 5}  # the API's: model's and annotate's
    assert reader(choice).spec == reader(ModelChoice.split("gpt-x", keywords)[0]).spec
    assert ModelChoice.split("gpt-x", keywords)[1] == {"samples": 5}
    assert reader(ModelChoice.split(choice, {"timeout": 7.0})[0]).spec.options["timeout"] == 7.0  # added to a choice
    spec = choice.spec()
    assert (spec.model, spec.api, dict(spec.options)) == ("openai:gpt-x", True, {"base_urls": ["http://127.0.0.1:9/v1"],
                                                                                 "timeout": 3.0})


def test_serve_takes_the_local_model_options_and_an_api_model_refuses_them(capsys):
    assert main(["serve", "--model", "openai:m", "--device", "cpu", "--port", "0"]) == 2
    assert "--device cpu: 'openai:m' is an API model" in capsys.readouterr().err


def test_annotate_estimator_choices_come_from_the_estimator_registry():
    """The CLI's --estimator choices are the registry's names (no second, hard-coded list), and the
    Python API refuses an unknown estimator in one line before any model loads."""
    import argparse

    from udcg.annotate.estimators import estimator_names
    from udcg.cli import build_parser
    from udcg.errors import InputError
    from udcg.flows.annotate import reader
    from udcg.flows.annotate_options import AnnotateOptions

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices["annotate"]._actions if a.dest == "estimator")
    assert tuple(action.choices) == estimator_names()
    assert {"first-token", "sequence", "sampling", "api-logprobs"} <= set(action.choices)
    with pytest.raises(InputError, match="estimator = 'nope': choose one of .*register_estimator"):
        reader("qwen2.5-coder-0.5b", AnnotateOptions(estimator="nope"))


@pytest.mark.parametrize("option, value", [("concurrency", 0), ("timeout", -1.0), ("batch_size", 0), ("rpm", True),
                                           ("max_retries", 101)])
def test_a_model_choice_built_in_python_refuses_what_the_command_line_refuses(option, value):
    """A ``ModelChoice`` passed to the API skips the door's keyword checks, so it checks its own
    numbers against the same bounds (udcg.bounds.MODEL) with the API door's message."""
    import udcg
    from udcg.bounds import MODEL, check_value
    from udcg.errors import InputError

    with pytest.raises(InputError) as refused:
        check_value(option, value, MODEL[option])
    with pytest.raises(InputError) as got:
        udcg.ModelChoice("qwen2.5-coder-0.5b", **{option: value})
    assert str(got.value) == str(refused.value)


MODEL_OPTIONS = "device, dtype, batch_size, api_base, api_key_env, concurrency, rpm, timeout, max_retries, tokenizer, scoring"


@pytest.mark.parametrize("api, message", [
    (3, "api: give a dict of the model's options ({'api_base': ..., 'timeout': ...}) or None, got an int (3)"),
    ("http://h/v1", "api: give a dict of the model's options ({'api_base': ..., 'timeout': ...}) or None, got a str"),
    ({"x": 1}, f"api: unknown option 'x' (a model's options: {MODEL_OPTIONS})"),
    ({1: 2}, f"api: unknown option 1 (a model's options: {MODEL_OPTIONS})"),
    ({"batch_size": 2}, "api: 'batch_size' is given twice (as the keyword batch_size and in api); give it once"),
])
def test_model_choice_of_refuses_a_bad_api_in_one_line(api, message, tmp_path):
    """``api`` was unpacked as ``**api``: a raw TypeError (``argument after ** must be a mapping``,
    ``unexpected keyword argument 'x'``); now one InputError naming it, from ``ModelChoice.of`` and
    from the API functions that pass it on, before any file is read."""
    import udcg
    from udcg.errors import InputError
    from udcg.io.sources import example_path

    calls = [lambda: ModelChoice.of("m", batch_size=4, api=api),
             lambda: udcg.judge("answer", tmp_path / "in.jsonl", tmp_path / "o.jsonl", judge="m", batch_size=4, api=api),
             lambda: udcg.answer_runs(example_path(), ["r.trec"], tmp_path / "a.jsonl", "m", batch_size=4, api=api)]
    for call in calls:
        with pytest.raises(InputError) as e:
            call()
        assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_model_choice_of_takes_the_api_dict_beside_the_keywords():
    choice = ModelChoice.of("m", batch_size=None, api={"api_base": "http://127.0.0.1:9/v1", "timeout": 3.0, "rpm": None})
    assert choice == ModelChoice("m", api_base="http://127.0.0.1:9/v1", timeout=3.0)
    assert ModelChoice.of(choice, api={"max_retries": 2}) == ModelChoice("m", api_base="http://127.0.0.1:9/v1",
                                                                          timeout=3.0, max_retries=2)
