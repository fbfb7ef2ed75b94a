"""Issue 39 item 3: every bound declared once (``udcg.bounds.PARAMETERS``) and applied by both doors,
the command line (``udcg.cli``) and the Python API (``udcg.api_args``), with the same refusal and
the same message; and ``udcg compare --n-boot 50`` / ``udcg.compare(..., n_boot=50)`` give one
answer on the packaged example."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math

import pytest

import udcg
from udcg import api, bounds
from udcg.cli import build_parser, main
from udcg.errors import InputError
from udcg.io.sources import example_path

RUN = {"q1": {"d1": 1.0, "d2": 0.5}}
QRELS = {"q1": {"d1": 1}}

# Each API function with a command, how to call both with every argument valid (nothing of these
# exists: a bound is refused before any file is read or model loaded).
DOORS = {
    "evaluate": (["score", "x.jsonl", "-o", "o.jsonl"], lambda **kw: udcg.evaluate(RUN, QRELS, metrics="P@1", **kw)),
    "compare": (["compare", "--run", "a", "--run", "b"],
                lambda **kw: udcg.compare({"a": RUN, "b": RUN}, QRELS, metrics="P@1", **kw)),
    "correlate": (["correlate", "x.jsonl"], lambda **kw: udcg.correlate("x.jsonl", **kw)),
    "reader_check": (["reader-check", "u"], lambda **kw: udcg.reader_check("u", **kw)),
    "fit_theta": (["fit-theta", "x.jsonl", "-o", "t.json"], lambda **kw: udcg.fit_theta("x.jsonl", "t.json", **kw)),
    "annotate_runs": (["annotate", "--corpus", "c", "--run", "r", "-o", "o", "--model", "m"],
                      lambda **kw: udcg.annotate_runs("c", ["r"], "o", "m", **kw)),
    "answer_runs": (["answer", "--corpus", "c", "--run", "r", "-o", "o", "--model", "m"],
                    lambda **kw: udcg.answer_runs("c", ["r"], "o", "m", **kw)),
    "judge": (["judge", "relevance", "x.json", "-o", "o.jsonl"],
              lambda **kw: udcg.judge("relevance", "x.json", "o.jsonl", **kw)),
}


def _cli_options(command: str) -> set[str]:
    """The attributes of one command's options (argparse dests)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.dest for a in sub._actions}


def _api_parameters(function) -> set[str]:
    """The arguments an API function takes: its own and those its ``**options`` go to (``options_of``)."""
    names = set(inspect.signature(function).parameters)
    if function.options_of:  # a function's keyword-only parameters, or a class's with a default (ModelChoice's)
        module, _, name = function.options_of.partition(":")
        target = getattr(importlib.import_module(module), name)
        names |= {n for n, p in inspect.signature(target).parameters.items()
                  if p.kind is p.KEYWORD_ONLY or inspect.isclass(target) and p.default is not p.empty}
    return names


def _outside(bound: bounds.Bound) -> list:
    """The values just outside the bound: below its bottom, above its top (where it has one), and a
    word it does not allow (where it allows one)."""
    below = (float(bound.low) if bound.low_open else float(bound.low) - 1) if not bound.integer else int(bound.low) - 1
    above = [int(bound.high) + 1 if bound.integer else float(bound.high) * 2] if math.isfinite(bound.high) else []
    return [below, *above, *[f"not-{word}" for word in bound.words[:1]]]  # C: a number or 'auto'


def _shared() -> list[tuple[str, str, object]]:
    """(API function, parameter, value outside its bound) for every bounded parameter that a command
    and the API function running it both take."""
    out = []
    for function, (argv, _) in DOORS.items():
        door = getattr(api, function)
        table = bounds.PARAMETERS[door.operation]
        both = _cli_options(argv[0]) & _api_parameters(door)
        out += [(function, name, value) for name in sorted(both & set(table)) for value in _outside(table[name])]
    return out


SHARED = _shared()


def test_the_table_covers_every_door_and_many_parameters():
    """Every API function with a command is driven here, and every bounded parameter they share."""
    functions = {name for name in api.__all__ if getattr(getattr(api, name), "operation", None) in bounds.PARAMETERS}
    assert set(DOORS) == functions - {"udcg", "udcg_many", "score_runs", "read_utilities", "named_runs"}
    assert len({(f, n) for f, n, _ in SHARED}) >= 40, SHARED
    assert {f for f, _, _ in SHARED} == set(DOORS)


@pytest.mark.parametrize("function, name, value", SHARED, ids=[f"{f}-{n}={v}" for f, n, v in SHARED])
def test_a_bound_refuses_alike_at_both_doors(function, name, value, tmp_path, monkeypatch, capsys):
    """The same value out of range: exit 2 and one line from the command line, an InputError from
    the API, with one message: the parameter (spelled ``--n-boot`` / ``n_boot``), the value, the
    range and its reason."""
    monkeypatch.chdir(tmp_path)
    argv, call = DOORS[function]
    flag = bounds.FLAGS.get(argv[0], {}).get(name, f"--{name.replace('_', '-')}")  # answer's --subsets is samples
    assert main([*argv, flag, str(value)]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and not out, err
    with pytest.raises(InputError) as e:
        call(**{name: value})
    shown = bounds.short(value)
    cli_head, _, cli_rule = lines[0].partition(": must be ")
    api_head, _, api_rule = str(e.value).partition(": must be ")
    assert cli_head == f"udcg {argv[0]}: error: {flag} {shown}", lines[0]
    assert api_head == f"{name} = {shown}", str(e.value)
    assert cli_rule == api_rule == bounds.PARAMETERS[getattr(api, function).operation][name].describe()
    assert list(tmp_path.iterdir()) == []  # refused before any work


# ---------------------------------------------------------------- compare --n-boot 50: one answer

EX = example_path()
RUNS = [str(EX / "runs" / "bm25.trec"), str(EX / "runs" / "dense.trec")]
ARGS = ["compare", "--run", RUNS[0], "--run", RUNS[1], "--qrels", str(EX / "qrels" / "test.tsv"),
        "--metrics", "P@5,nDCG@5", "--format", "json"]


def test_compare_n_boot_50_is_refused_alike_by_the_command_and_the_api(capsys):
    """``udcg.compare(n_boot=50)`` scored where ``udcg compare --n-boot 50`` was refused (at least
    100): both refuse it now, with one message; 50 random sign flips (a valid, coarse p) pass both."""
    assert main([*ARGS, "--n-boot", "50"]) == 2
    line = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.compare(RUNS, str(EX / "qrels" / "test.tsv"), metrics="P@5,nDCG@5", n_boot=50)
    rule = ("an integer >= 100 and <= 1000000 (100..1000000) "
            "(fewer leave under 2.5 resampled means beyond each end of a 95% interval)")
    assert line == f"udcg compare: error: --n-boot 50: must be {rule}"
    assert str(e.value) == f"n_boot = 50: must be {rule}"


@pytest.mark.parametrize("n_boot, n_resamples", [(100, 50), (250, 100_000)])
def test_compare_gives_the_same_numbers_from_the_command_and_the_api(n_boot, n_resamples, capsys):
    """At the floor (and with 50 sign flips, now allowed by both) the command's JSON and the API's
    Comparison are one table, number for number."""
    assert main([*ARGS, "--n-boot", str(n_boot), "--n-resamples", str(n_resamples)]) == 0
    printed = json.loads(capsys.readouterr().out)
    cmp = udcg.compare(RUNS, str(EX / "qrels" / "test.tsv"), metrics="P@5,nDCG@5", n_boot=n_boot,
                       n_resamples=n_resamples)
    assert printed == json.loads(cmp.format("json"))
    assert (printed["n_boot"], printed["n_resamples"]) == (n_boot, n_resamples)


@pytest.mark.parametrize("options, words", [
    ({"depth": 0}, "depth = 0: must be an integer >= 1 "),
    ({"depth": 5, "chunk_size": 0}, "chunk_size = 0: must be an integer >= 1 "),
    ({"depth": 5, "timeout": 0.0}, "timeout = 0.0: must be a number in [0.001, "),
])
def test_the_pyterrier_utility_checks_the_bounds_of_annotate(options, words):
    """``udcg.pyterrier.Utility`` is a third door to the annotate flow: the same table, the API's words
    (the flow itself no longer checks a bound)."""
    pytest.importorskip("pyterrier")
    with pytest.raises(InputError) as e:
        udcg.pyterrier.Utility("smollm2-135m", output="never-written", **options)
    assert str(e.value).startswith(words), str(e.value)


def test_every_declared_bound_is_an_option_of_its_command():
    """No bound declared for a parameter its command does not have (a renamed option would leave
    one behind, bounding nothing)."""
    for operation, table in bounds.PARAMETERS.items():
        assert set(table) <= _cli_options(operation), (operation, set(table) - _cli_options(operation))


# ---------------------------------------------------------------- a floor under every timeout


@pytest.mark.parametrize("value", [1e-300, 0.0009])
def test_a_timeout_no_request_can_meet_is_refused_at_every_door(value, tmp_path, monkeypatch, capsys):
    """``--timeout 1e-300`` (and ``timeout=1e-300``, ``reader.timeout: 1e-300``) was accepted: every
    request then timed out. The SECONDS bound has a floor of a millisecond, said with its reason,
    read by the command line, the API and a config alike; the floor itself is allowed."""
    from udcg.experiment.config import load_config

    monkeypatch.chdir(tmp_path)
    rule = bounds.SECONDS.describe()
    assert rule == "a number in [0.001, 604800] (a timeout under a millisecond is one no request can meet)"
    argv, call = DOORS["annotate_runs"]
    assert main([*argv, "--timeout", repr(value)]) == 2
    assert capsys.readouterr().err.strip() == f"udcg annotate: error: --timeout {bounds.short(value)}: must be {rule}"
    with pytest.raises(InputError, match=r"^timeout = .*: must be a number in \[0\.001, "):
        call(timeout=value)
    path = tmp_path / "c.yaml"
    path.write_text(f"name: t\nreader:\n  model: smollm2-135m\n  timeout: {value:.1e}\n")  # YAML 1.1 wants the dot
    with pytest.raises(InputError, match=r"reader\.timeout.*\[0\.001, "):
        load_config(path)
    assert bounds.check(bounds.MIN_TIMEOUT, bounds.SECONDS, "--timeout") == 0.001
    assert list(tmp_path.iterdir()) == [path]  # refused before any work


def _choice_options() -> list[tuple[str, str, tuple]]:
    """(API function, parameter, the command line's choices) for every option with argparse choices
    that the API function running the command also takes."""
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return [(function, a.dest, tuple(a.choices)) for function, (argv, _) in DOORS.items()
            for a in subs[argv[0]]._actions
            if a.choices and a.option_strings and a.dest in _api_parameters(getattr(api, function))]


CHOICES = _choice_options()


def test_the_choice_options_are_those_of_both_doors():
    assert {(f, name) for f, name, _ in CHOICES} >= {
        ("evaluate", "unannotated"), ("compare", "test"), ("compare", "correction"), ("compare", "unannotated"),
        ("correlate", "constant_metric"), ("correlate", "test"), ("fit_theta", "variant"), ("fit_theta", "cv_score"),
        ("annotate_runs", "unjudged"), ("annotate_runs", "scoring"), ("annotate_runs", "estimator"),
        ("judge", "match")}


@pytest.mark.parametrize("function, name, choices", CHOICES, ids=[f"{f}-{n}" for f, n, _ in CHOICES])
def test_a_value_outside_the_choices_is_refused_alike_at_both_doors(function, name, choices, capsys):
    """The API refuses what the command line's argparse refuses, before any file is read (none of
    the paths exists), naming the argument and the same choices in the same order."""
    argv, call = DOORS[function]
    with pytest.raises(InputError) as refused:
        call(**{name: "bogus"})
    assert str(refused.value).startswith(f"{name} = 'bogus': choose one of {', '.join(choices)}")
    for value in choices:  # and each choice the command line offers passes the API's door
        try:
            call(**{name: value})
        except InputError as e:
            assert "choose one of" not in str(e), (name, value, str(e))
    with pytest.raises(SystemExit) as exit_:
        main([*argv, f"--{name.replace('_', '-')}", "bogus"])
    assert exit_.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err


def test_the_config_choices_are_the_doors_choices():
    """A validate config takes the same words as the command line and the API for the same setting."""
    from udcg.experiment.config import CHOICES as CONFIG
    from udcg.grade.judges import MATCHES
    from udcg.llm.openai_backend import SCORING
    from udcg.metrics.correlation import CONSTANT_METRIC
    from udcg.metrics.udcg_theta import CV_SCORES

    assert CONFIG["reader.scoring"] == SCORING and CONFIG["grading.match"] == MATCHES
    assert CONFIG["metrics.constant_metric"] == CONSTANT_METRIC and CONFIG["theta.cv_score"] == CV_SCORES
