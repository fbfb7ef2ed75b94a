"""Issue #52: each option declared once (``udcg.options``). The mechanism (flags, config keys and API
keywords made from one declaration, one check for both doors), and a scan of ``udcg/`` that fails on
a second declaration of a converted operation's option: a choice tuple written again, a default
written again in a signature of the flows, commands or API above the metrics, or a flag added by
hand beside the generated ones."""

from __future__ import annotations

import argparse
import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest

import udcg
from udcg import bounds
from udcg.cli import build_parser, main
from udcg.errors import InputError
from udcg.flows.annotate_options import UNJUDGED, AnnotateOptions
from udcg.flows.answer_options import AnswerOptions
from udcg.flows.correlate_options import CorrelateOptions
from udcg.flows.judge_options import JudgeOptions
from udcg.flows.reader_check_options import ReaderCheckOptions
from udcg.flows.run_options import CompareOptions, ScoringOptions
from udcg.flows.theta_options import FitThetaOptions
from udcg.grade.rules import MATCHES
from udcg.metrics.paired_tests import CompareTests, CorrelationTests, PairedTests
from udcg.io.sources import example_path
from udcg.llm.serve_options import ServeOptions
from udcg.options import declared

PACKAGE = Path(udcg.__file__).parent
# the operations whose options are declared once
CONVERTED = (ScoringOptions, CompareOptions, CorrelateOptions, AnswerOptions, JudgeOptions, ServeOptions,
             FitThetaOptions, AnnotateOptions, ReaderCheckOptions)
# Where the converted operations' options are read: a literal default of a declared name in a
# signature here is a second declaration (udcg.metrics is below: its kernels' keywords are their own,
# but a paired-tests default is written only in metrics/constants.py: PAIRED_DEFAULTS below, which
# covers flows/correlate.py's correlation_table and correlation_table_of, whose settings are one record).
# (flows/own_runs.py's select_queries and run_contexts, which annotate and the tests call too, are not
# converted: answer passes them every option it declares; its annotate_run_pairs takes AnnotateOptions. Nor is
# integrations/pyterrier.py, whose Utility's depth, unjudged and judge read AnnotateOptions' defaults, and whose
# output, the transformer's folder, is its own.)
READERS = ("commands/compare.py", "commands/score.py", "commands/correlate.py", "flows/run_compare.py",
           "flows/run_scores.py", "flows/score.py", "flows/compare_config.py", "flows/answer_plan.py",
           "commands/answer.py", "flows/answer.py", "commands/judge.py", "flows/judge.py", "commands/serve.py",
           "llm/server.py", "commands/fit_theta.py", "flows/theta.py", "commands/annotate.py",
           "flows/annotate.py", "commands/reader_check.py", "flows/reader_check.py")
# the paired tests' settings, each a record (udcg.metrics.paired_tests) whose defaults are metrics/constants.py's:
# {field: default} of every field but the seed (0 is every seed's default, of many different seeds) and the
# records' own baseline; "method" is the kernels' name for the test (metrics.stats)
PAIRED_DEFAULTS = {f.name: f.default for r in (PairedTests, CompareTests, CorrelationTests) for f in fields(r)
                   if f.name not in ("seed", "baseline")}
PAIRED_DEFAULTS["method"] = PAIRED_DEFAULTS["test"]
# udcg/api.py's functions of the converted operations
API_DOORS = ("compare", "evaluate", "score_runs", "correlate", "answer_runs", "judge", "fit_theta", "annotate_runs",
             "reader_check")
# each choice tuple's one definition: the metrics' constants, the answer rules' (MATCHES) beside the rules, the
# policies of an unjudged pair (UNJUDGED) beside annotate's options
CHOICES_HOME = {"metrics/constants.py", "grade/rules.py", "flows/annotate_options.py"}
EX = example_path()
RUNS = [str(EX / "runs" / "bm25.trec"), str(EX / "runs" / "dense.trec")]
QRELS = str(EX / "qrels" / "test.tsv")


def _options() -> dict[str, object]:
    return {o.name: o for cls in CONVERTED for o in declared(cls)}


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text())


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _missing


_missing = object()


# ---------------------------------------------------------------- the scan: a second declaration fails


def test_every_choice_tuple_is_written_once():
    """A tuple (or list) of the words of a declared choice list anywhere in udcg/ but its home: a
    second declaration (``choices=("error", "zero", "worst")`` in a command). (A registry's names,
    annotate's estimators, are registered one by one: no tuple of them is written.)"""
    wanted = {tuple(o.choices) for o in _options().values() if o.choices and not callable(o.choices)}
    assert len(wanted) >= 4
    found = []
    for where, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List)) and node.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                words = tuple(e.value for e in node.elts)
                if words in wanted:
                    found.append((where, node.lineno, words))
    homes = [f for f in found if f[0] in CHOICES_HOME]
    assert {words for _, _, words in homes} == wanted, homes
    assert [f for f in found if f[0] not in CHOICES_HOME] == []


def _signatures(where: str, tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if where == "api.py" and node.name not in API_DOORS:
                continue
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, default in pairs:
                yield node.name, arg.arg, default


def _second(default: ast.AST) -> bool:
    """A literal default other than None (None: "not given", the declared default then applies)."""
    value = _literal(default)
    return value is not _missing and value is not None


def test_no_default_of_a_declared_option_is_written_again():
    """A parameter named as a declared option with a literal default (``unannotated: str =
    "error"``) where the converted operations are read: a second declaration of that default."""
    options = _options()
    second = []
    for where, tree in _trees():
        if where not in READERS and where != "api.py":
            continue
        for function, name, default in _signatures(where, tree):
            if name in options and _second(default):
                second.append(f"{where}: {function}({name}={ast.unparse(default)})")
    assert second == []


def test_no_flag_of_a_declared_option_is_added_by_hand():
    """The commands of the converted operations add no flag the declaration makes."""
    commands = {"commands/compare.py": CompareOptions, "commands/score.py": ScoringOptions,
                "commands/correlate.py": CorrelateOptions, "commands/answer.py": AnswerOptions,
                "commands/judge.py": JudgeOptions, "commands/serve.py": ServeOptions,
                "commands/fit_theta.py": FitThetaOptions, "commands/annotate.py": AnnotateOptions,
                "commands/reader_check.py": ReaderCheckOptions}
    by_hand = []
    for where, tree in _trees():
        if where not in commands:
            continue
        flags = {name for o in declared(commands[where]) for name in (o.flag, o.short) if name}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                names = {_literal(a) for a in node.args}
                if names & flags:
                    by_hand.append(f"{where}:{node.lineno}: {sorted(names & flags)}")
    assert by_hand == []


def _paired_defaults_written(tree: ast.Module):
    """(where, name) of each literal paired-tests default (``PAIRED_DEFAULTS``) in ``tree``: a
    keyword of a signature, a dataclass field, or an option's first argument (``option(0.05, ...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            found = [(node.name, arg.arg, d) for arg, d in pairs]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "option" and value.args:
                value = value.args[0]
            found = [("field", node.target.id, value)]
        else:
            continue
        for where, name, default in found:
            value = _literal(default)
            if name in PAIRED_DEFAULTS and value is not _missing and value is not None and value == PAIRED_DEFAULTS[name]:
                yield f"{where}:{node.lineno}", name


def test_each_paired_tests_default_is_written_once():
    """A paired-tests default (``n_boot`` 10,000, ``alpha`` 0.05, ``test`` permutation, ``correction``
    measure, ``power`` 0.8, ``level`` 0.95, ...) written as a literal anywhere in udcg/ but
    metrics/constants.py: a second declaration. The metrics records, the options of compare and
    correlate, ``compare_scores``, the correlation tables and the metrics' kernels read the constants."""
    second = [f"{where}: {at} {name}" for where, tree in _trees() if where != "metrics/constants.py"
              for at, name in _paired_defaults_written(tree)]
    assert second == []


def test_the_options_build_the_paired_tests_records_with_their_defaults():
    """``CompareOptions.tests()`` and ``CorrelateOptions.tests(baseline)`` build the metrics' records;
    each option of a record's field declares the record's default (both from metrics/constants.py)."""
    assert CompareOptions().tests() == CompareTests()
    assert CorrelateOptions().tests("UDCG") == CorrelationTests()
    assert CompareOptions(n_boot=500, correction="table").tests() == CompareTests(n_boot=500, correction="table")
    for options, record in ((CompareOptions, CompareTests), (CorrelateOptions, CorrelationTests)):
        shared = {o.name for o in declared(options)} & {f.name for f in fields(record)}
        assert shared >= {"test", "n_resamples", "n_boot", "seed"}
        assert all(getattr(options, name) == getattr(record, name) for name in shared - {"baseline"})
    with pytest.raises(InputError, match="^compare_scores: correction 'holm' is unknown"):
        CompareTests(correction="holm")  # the record checks itself, as compare_scores's keywords were checked


def test_the_scan_finds_a_second_declaration(tmp_path):
    """The scans are not vacuous: each finds the declarations the converted code once had."""
    tree = ast.parse('def compare_runs(runs, *, unannotated: str = "error", n_boot=10_000, qrels=None):\n'
                     '    p.add_argument("--test", choices=("permutation", "t", "wilcoxon"))\n')
    options = _options()
    seconds = [name for _, name, d in _signatures("flows/run_compare.py", tree) if name in options and _second(d)]
    assert seconds == ["unannotated", "n_boot"]
    tuples = [tuple(e.value for e in n.elts) for n in ast.walk(tree) if isinstance(n, ast.Tuple)]
    assert CompareOptions.__dataclass_fields__["test"].metadata["option"].choices in tuples
    # the paired tests' defaults as compare_scores, the options and the kernels once wrote them
    tree = ast.parse('def compare_scores(scores, *, test="permutation", alpha=0.05, n_boot=10_000, seed=0, level=0.9):\n'
                     '    pass\n'
                     'def bootstrap_ci(values, n_boot: int = 10_000, level: float = 0.95, method="permutation"):\n'
                     '    pass\n'
                     'class CompareOptions:\n'
                     '    power: float = option(0.8, "power of the minimum detectable difference")\n'
                     '    correction: str = "measure"\n'
                     '    alpha: float = option(ALPHA, "read from the constant")\n')
    assert [name for _, name in _paired_defaults_written(tree)] == ["test", "alpha", "n_boot", "n_boot", "level",
                                                                    "method", "power", "correction"]


# ---------------------------------------------------------------- the mechanism


def _compare_parser() -> argparse.ArgumentParser:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["compare"]


def test_the_flags_are_made_from_the_declaration():
    parser = _compare_parser()
    actions = {a.dest: a for a in parser._actions}
    for o in declared(CompareOptions):
        action = actions[o.dest]
        assert o.flag in action.option_strings and action.default is None  # None: not given
        assert (tuple(action.choices) if action.choices else None) == o.choices
        assert action.type is o.convert
    assert actions["n_boot"].help == "bootstrap resamples for the intervals (default 10000)"
    assert actions["metrics"].help == "measures (default UDCG@5,nDCG@5,P@5,RR@5)"
    assert isinstance(actions["run"], argparse._AppendAction) and isinstance(actions["judged_only"],
                                                                             argparse._StoreTrueAction)


def test_from_args_takes_a_flag_given_then_the_file_then_the_default():
    args = build_parser().parse_args(["compare", "--run", "a", "--run", "b", "--test", "t", "--n-boot", "500"])
    options = CompareOptions.from_args(args, {"test": "wilcoxon", "seed": 7})
    assert options.runs == ("a", "b") and options.test == "t" and options.n_boot == 500  # the flags
    assert options.seed == 7  # the file's key
    assert options.alpha == CompareOptions.alpha == 0.05 and options.metrics == ScoringOptions.metrics  # defaults
    assert options.prompt_version is None and options.judged_only is False


@pytest.mark.parametrize("keywords, message", [
    ({"n_boot": 50}, "n_boot = 50: must be an integer >= 100"),
    ({"test": "anova"}, "test = 'anova': choose one of permutation, t, wilcoxon"),
    ({"correction": 1}, "correction = 1: choose one of measure, table, none"),
    ({"alpha": "a"}, "alpha: give a number, got a str ('a')"),
    ({"judged_only": 1}, "judged_only: give True or False, got an int (1)"),
    ({"model": 3}, "model: give a str or None, got an int (3)"),
    ({"gamma": True}, "gamma: give a number, got a bool (True)"),
    ({"answers": ""}, "answers: give a path (str or pathlib.Path) or None, got a str ('')"),
])
def test_an_object_built_in_python_refuses_what_the_doors_refuse(keywords, message):
    with pytest.raises(InputError) as e:
        CompareOptions(**keywords)
    assert str(e.value).startswith(message), str(e.value)


def test_a_number_is_made_the_type_its_bound_says():
    import numpy as np

    options = CompareOptions(n_boot=np.int64(1000), alpha=np.float32(0.25))
    assert type(options.n_boot) is int and type(options.alpha) is float and options.alpha == 0.25


def test_the_api_door_refuses_an_unknown_keyword_and_the_command_lines_own():
    for name in ("nboot", "output", "label_rows", "format"):
        with pytest.raises(InputError, match=rf"^compare\(\): got an unexpected keyword argument '{name}'$"):
            udcg.compare(RUNS, QRELS, **{name: 1})


def test_the_api_signature_is_the_declaration():
    """``help(udcg.compare)`` shows every keyword with its default, from the declaration."""
    parameters = inspect.signature(udcg.compare).parameters
    api = [o for o in declared(CompareOptions) if o.api]
    assert list(parameters) == ["runs", "qrels", *[o.name for o in api if o.name != "qrels"]]
    assert all(parameters[o.name].default == o.default for o in api)
    assert list(inspect.signature(udcg.evaluate).parameters)[2:] == [o.name for o in declared(ScoringOptions)
                                                                     if o.api and o.name != "qrels"]


@pytest.mark.parametrize("name, value", [("n_boot", 50), ("alpha", 1.5), ("power", 0.0), ("seed", -1), ("gamma", -1.0),
                                         ("n_resamples", 0)])
def test_one_check_for_both_doors(name, value, capsys):
    """The command line (``--n-boot 50``) and the API (``n_boot=50``) give one line with the same rule."""
    flag = f"--{name.replace('_', '-')}"
    assert main(["compare", "--run", RUNS[0], "--run", RUNS[1], "--qrels", QRELS, flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.compare(RUNS, QRELS, **{name: value})
    rule = bounds.PARAMETERS["compare"][name].describe()
    assert err == f"udcg compare: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}"


# ---------------------------------------------------------------- adding an option: --digits, and the recipe

DOC = (PACKAGE.parent / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end != -1 else len(DOC)]


def test_the_adding_an_option_recipe_of_the_architecture_page_runs():
    import re

    block = re.search(r"<!-- option -->\n```python\n(.*?)```", _section("Adding an option"), flags=re.DOTALL).group(1)
    exec(compile(block, "docs/architecture.md (option)", "exec"), {})


def test_the_steps_the_recipe_names_are_where_it_says():
    """The three places of the recipe: the field, its range, the code that reads it (``--digits``)."""
    section = _section("Adding an option")
    for where in ("flows/run_options.py", 'bounds.PARAMETERS["compare"]', "flows/run_compare.py"):
        assert where in section, where
    assert "digits" in CompareOptions.__dataclass_fields__ and "digits" in bounds.PARAMETERS["compare"]
    source = (PACKAGE / "flows" / "run_compare.py").read_text()
    assert "o.digits" in source


def _markdown(capsys, *extra: str) -> str:
    assert main(["compare", "--run", RUNS[0], "--run", RUNS[1], "--qrels", QRELS, "--metrics", "nDCG@5,P@5",
                 "--n-boot", "200", *extra]) == 0
    return capsys.readouterr().out


def test_digits_sets_the_decimals_of_the_markdown_and_latex_tables(capsys, tmp_path):
    default, four, two = _markdown(capsys), _markdown(capsys, "--digits", "4"), _markdown(capsys, "--digits", "2")
    assert default == four and two != four
    row = next(line for line in two.splitlines() if line.startswith("| a | bm25 |"))
    assert row == "| a | bm25 | 0.90 [0.75, 1.00] | 0.18 [0.15, 0.20] |", row  # means 2 decimals, intervals at least 2
    six = next(line for line in _markdown(capsys, "--digits", "6").splitlines() if line.startswith("| a | bm25 |"))
    assert six.startswith("| a | bm25 | 0.900000 [0.7500, 1.0000] |"), six
    latex = _markdown(capsys, "--digits", "3", "--format", "latex")
    assert "0.900" in latex and "0.9000" not in latex
    assert _markdown(capsys, "--format", "json", "--digits", "2") == _markdown(capsys, "--format", "json")  # every digit
    (tmp_path / "c.yaml").write_text("digits: 3\n")  # a --config key as every option is
    assert _markdown(capsys, "--config", str(tmp_path / "c.yaml")) == _markdown(capsys, "--digits", "3")


@pytest.mark.parametrize("value", ["0", "13"])
def test_digits_out_of_range_is_one_line(value, capsys):
    assert main(["compare", "--run", RUNS[0], "--run", RUNS[1], "--qrels", QRELS, "--digits", value]) == 2
    out, err = capsys.readouterr()
    assert not out and err == (f"udcg compare: error: --digits {value}: must be an integer >= 1 and <= 12 (1..12, a "
                               "positive integer) (decimals of the table's numbers; 0 would print every p as < 1)\n")


# ---------------------------------------------------------------- answer: the same declaration


def _answer_parser() -> argparse.ArgumentParser:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["answer"]


def test_answer_flags_and_api_keywords_are_made_from_the_declaration():
    actions = {flag: a for a in _answer_parser()._actions for flag in a.option_strings}
    for o in declared(AnswerOptions):
        assert actions[o.flag].dest == o.dest and actions[o.flag].default is None
    assert actions["--subsets"].dest == actions["--samples"].dest == "samples"  # the API's keyword; --samples: old
    assert actions["--k"].help == "documents per context (default 5)"
    args = build_parser().parse_args(["answer", "--corpus", "c", "--run", "r", "--model", "m", "-o", "o",
                                      "--subsets", "3", "--k", "2"])
    options = AnswerOptions.from_args(args)
    assert (options.samples, options.k, options.depth, options.prompt) == (3, 2, 20, "udcg-code-v1")
    parameters = inspect.signature(udcg.answer_runs).parameters
    api = [o for o in declared(AnswerOptions) if o.api]
    assert [o.name for o in declared(AnswerOptions) if not o.api] == ["detect"]
    assert list(parameters)[-len(api):] == [o.name for o in api]
    assert all(parameters[o.name].default == o.default for o in api)


@pytest.mark.parametrize("name", ["nope", "detect", "prompt_version"])
def test_the_answer_door_refuses_an_unknown_keyword_and_the_command_lines_own(name, tmp_path):
    with pytest.raises(InputError, match=rf"^answer_runs\(\): got an unexpected keyword argument '{name}'$"):
        udcg.answer_runs(EX, RUNS, tmp_path / "a.jsonl", "smollm2-135m", **{name: 1})
    assert not (tmp_path / "a.jsonl").exists()


@pytest.mark.parametrize("name, flag, value", [("k", "--k", 0), ("samples", "--subsets", -1), ("depth", "--depth", 0),
                                               ("seed", "--seed", -1), ("max_new_tokens", "--max-new-tokens", 0),
                                               ("chunk_size", "--chunk-size", 0)])
def test_one_check_for_both_answer_doors(name, flag, value, capsys, tmp_path):
    out = tmp_path / "a.jsonl"
    assert main(["answer", "--corpus", str(EX), "--run", RUNS[0], "--model", "smollm2-135m", "-o", str(out),
                 flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.answer_runs(EX, RUNS, out, "smollm2-135m", **{name: value})
    rule = bounds.PARAMETERS["answer"][name].describe()
    assert err == f"udcg answer: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}" and not out.exists()


# ---------------------------------------------------------------- judge: the same declaration, both doors

ANSWERS = Path(__file__).parent / "badinput" / "answer_items_duplicate.jsonl"  # refused later: the options first


def test_the_judge_api_signature_is_the_declaration():
    parameters = inspect.signature(udcg.judge).parameters
    api = [o.name for o in declared(JudgeOptions) if o.api]
    assert list(parameters)[-len(api):] == api
    assert all(parameters[o.name].default == o.default for o in declared(JudgeOptions))
    with pytest.raises(InputError, match=r"^judge\(\): got an unexpected keyword argument 'max_new_token'$"):
        udcg.judge("answer", ANSWERS, "o.jsonl", max_new_token=8)


@pytest.mark.parametrize("name, value", [("max_new_tokens", 0), ("retries", -1), ("chunk_size", 0),
                                         ("f1_threshold", 1.5)])
def test_one_check_for_both_judge_doors(name, value, capsys, tmp_path):
    flag = f"--{name.replace('_', '-')}"
    assert main(["judge", "answer", str(ANSWERS), "-o", str(tmp_path / "o.jsonl"), flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.judge("answer", ANSWERS, tmp_path / "o.jsonl", **{name: value})
    rule = bounds.PARAMETERS["judge"][name].describe()
    assert err == f"udcg judge: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}"
    assert not (tmp_path / "o.jsonl").exists()


def test_the_judge_flags_are_made_from_the_declaration():
    parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["judge"]
    actions = {a.dest: a for a in parser._actions}
    for o in declared(JudgeOptions):
        assert o.flag in actions[o.dest].option_strings and actions[o.dest].default is None
    assert actions["match"].help.startswith("answer rule: span (default") and actions["match"].choices is MATCHES
    options = JudgeOptions.from_args(parser.parse_args(["answer", "x", "-o", "y", "--match", "f1", "--keep-raw"]))
    assert options == JudgeOptions(match="f1", keep_raw=True) and options.max_new_tokens == 128


# ---------------------------------------------------------------- fit-theta: the same declaration, UDCGTheta's defaults

THETA_CONTEXTS = Path(__file__).parent / "badinput" / "contexts_k3.jsonl"


def test_the_fit_theta_flags_and_api_keywords_are_made_from_the_declaration():
    from udcg.metrics.udcg_theta import UDCGTheta

    parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["fit-theta"]
    actions = {a.dest: a for a in parser._actions}
    for o in declared(FitThetaOptions):
        assert o.flag in actions[o.dest].option_strings and actions[o.dest].default is None
    assert actions["C"].help.startswith("SVM-rank's C (default 0.01, its default)")
    options = FitThetaOptions.from_args(parser.parse_args(["x", "-o", "y", "--C", "auto", "--cv-folds", "3"]))
    assert options == FitThetaOptions(C="auto", cv_folds=3) and FitThetaOptions.from_args(
        parser.parse_args(["x", "-o", "y", "--C", "2"])).C == 2.0
    parameters = inspect.signature(udcg.fit_theta).parameters
    assert list(parameters) == ["contexts", "output", *[o.name for o in declared(FitThetaOptions)]]
    assert all(parameters[o.name].default == o.default for o in declared(FitThetaOptions))
    # the estimator's defaults are the declaration's (one home: udcg.metrics.constants)
    theta = UDCGTheta().get_params()
    assert (theta["variant"], theta["C"], theta["cv"], theta["cv_score"], theta["random_state"]) == (
        FitThetaOptions.variant, FitThetaOptions.C, FitThetaOptions.cv_folds, FitThetaOptions.cv_score,
        FitThetaOptions.seed)
    assert declared(FitThetaOptions)[1].choices == ("full", "rel-only", "binary")


@pytest.mark.parametrize("name, value", [("k", 0), ("cv_folds", 1), ("seed", -1), ("C", 0.0)])
def test_one_check_for_both_fit_theta_doors(name, value, capsys, tmp_path):
    flag = f"--{name.replace('_', '-')}"
    out = tmp_path / "t.json"
    assert main(["fit-theta", str(THETA_CONTEXTS), "-o", str(out), flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.fit_theta(THETA_CONTEXTS, out, **{name: value})
    rule = bounds.PARAMETERS["fit-theta"][name].describe()
    assert err == f"udcg fit-theta: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}" and not out.exists()


@pytest.mark.parametrize("keywords, message", [
    ({"C": "big"}, "C = 'big': must be a finite number > 0 or 'auto'"),
    ({"C": [1]}, "C: give a number or 'auto', got a list ([1])"),
    ({"variant": "x"}, "variant = 'x': choose one of full, rel-only, binary"),
    ({"cv_score": 3}, "cv_score = 3: choose one of spearman, pairwise"),
    ({"cv_folds": True}, "cv_folds: give an integer, got a bool (True)"),
    ({"cv_fold": 3}, "fit_theta(): got an unexpected keyword argument 'cv_fold'"),
])
def test_the_fit_theta_door_refuses_in_one_line(keywords, message, tmp_path):
    with pytest.raises(InputError) as e:
        udcg.fit_theta(THETA_CONTEXTS, tmp_path / "t.json", **keywords)
    assert str(e.value).startswith(message), str(e.value)


# ---------------------------------------------------------------- annotate and reader-check: the same declaration


def _parser(command: str) -> argparse.ArgumentParser:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def test_the_annotate_flags_are_made_from_the_declaration_in_their_groups():
    """``--run``'s options in the "your runs" group, the reader's beside ``--model``; the estimators are the
    registry's names when the parser is made."""
    from udcg.annotate.estimators import estimator_names

    parser = _parser("annotate")
    actions = {a.dest: a for a in parser._actions}
    for o in declared(AnnotateOptions):
        assert o.flag in actions[o.dest].option_strings and actions[o.dest].default is None
    groups = {g.title: [a.dest for a in g._group_actions] for g in parser._action_groups}
    assert groups["your runs (BEIR folder or files, TREC runs)"] == ["run", "corpus", "queries", "qrels", "answers",
                                                                      "depth", "unjudged", "judge"]
    assert groups["options"][-9:] == ["estimator", "prompt", "limit", "chunk_size", "samples", "temperature",
                                      "target_width", "seed", "no_progress"]
    assert tuple(actions["estimator"].choices) == estimator_names() and actions["unjudged"].choices is UNJUDGED
    assert actions["depth"].help == "documents per run and query to annotate (default 10)"
    assert actions["prompt"].help.startswith("reader prompt version (udcg-code-v1 = the authors' code")
    options = AnnotateOptions.from_args(parser.parse_args(["data.json", "-o", "o", "--model", "m", "--samples", "5"]))
    assert options == AnnotateOptions(samples=5) and (options.depth, options.judge, options.prompt) == (
        10, "rules", "udcg-code-v1")


def test_the_annotate_api_signature_is_the_declaration_and_the_models_keywords():
    parameters = inspect.signature(udcg.annotate_runs).parameters
    api = [o.name for o in declared(AnnotateOptions) if o.api]
    assert list(parameters)[-len(api) - 1:-1] == api and list(parameters)[-1] == "model_options"
    assert all(parameters[o.name].default == o.default for o in declared(AnnotateOptions))
    with pytest.raises(InputError, match=r"^annotate_runs\(\): unknown option 'samplez' \(its options: show_progress, "
                                         r"queries, .*, seed, device, dtype, batch_size, api_base, .*, scoring\)$"):
        udcg.annotate_runs(EX, RUNS, "never-written", "smollm2-135m", samplez=3)


@pytest.mark.parametrize("keywords, message", [
    ({"depth": 0}, "depth = 0: must be an integer >= 1 "),
    ({"unjudged": "maybe"}, "unjudged = 'maybe': choose one of irrelevant, judge, error"),
    ({"estimator": "nope"}, "estimator = 'nope': choose one of first-token, sequence, sampling, api-logprobs (more plug "
                            "in with udcg.annotate.estimators.register_estimator)"),
    ({"estimator": 5}, "estimator: give a str or None, got an int (5)"),
    ({"queries": ""}, "queries: give a path (str or pathlib.Path) or None, got a str ('')"),
    ({"temperature": 0.0}, "temperature = 0.0: must be a number in (0, 100]"),
])
def test_an_annotate_options_object_refuses_what_the_doors_refuse(keywords, message):
    with pytest.raises(InputError) as e:
        AnnotateOptions(**keywords)
    assert str(e.value).startswith(message), str(e.value)


def test_an_estimator_registered_after_the_options_module_is_one():
    from udcg.annotate import estimators

    estimators.register_estimator("test-later", lambda backend, chats: [0.5] * len(chats))
    try:
        assert AnnotateOptions(estimator="test-later").estimator_for(api=False) == "test-later"
    finally:
        estimators._ESTIMATORS.pop("test-later")
    assert AnnotateOptions().estimator_for(api=True) == "api-logprobs"


@pytest.mark.parametrize("name, value", [("depth", 0), ("samples", 0), ("seed", -1), ("limit", 0),
                                         ("target_width", 1.5), ("chunk_size", 0), ("concurrency", 0)])
def test_one_check_for_both_annotate_doors(name, value, capsys, tmp_path):
    flag = f"--{name.replace('_', '-')}"
    out = tmp_path / "u"
    assert main(["annotate", "--corpus", str(EX), "--run", RUNS[0], "--model", "smollm2-135m", "-o", str(out),
                 flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.annotate_runs(EX, RUNS[:1], out, "smollm2-135m", **{name: value})
    rule = bounds.PARAMETERS["annotate"][name].describe()
    assert err == f"udcg annotate: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}" and not out.exists()


def test_the_reader_check_flags_and_keywords_are_made_from_the_declaration():
    parser = _parser("reader-check")
    actions = {a.dest: a for a in parser._actions}
    for o in declared(ReaderCheckOptions):
        assert o.flag in actions[o.dest].option_strings and actions[o.dest].default is None
    assert actions["output"].option_strings == ["-o", "--output"] and actions["plot"].metavar == "FILE"
    options = ReaderCheckOptions.from_args(parser.parse_args(["u", "--n-boot", "200", "--json"]))
    assert options == ReaderCheckOptions(n_boot=200, json=True) and options.seed == 0
    parameters = inspect.signature(udcg.reader_check).parameters
    assert list(parameters) == ["utilities", "n_boot", "seed"]
    assert (parameters["n_boot"].default, parameters["seed"].default) == (1000, 0)
    for name in ("json", "output", "nboot"):
        with pytest.raises(InputError, match=rf"^reader_check\(\): got an unexpected keyword argument '{name}'$"):
            udcg.reader_check("never-read", **{name: 1})


@pytest.mark.parametrize("name, value", [("n_boot", 50), ("seed", -1)])
def test_one_check_for_both_reader_check_doors(name, value, capsys):
    flag = f"--{name.replace('_', '-')}"
    assert main(["reader-check", "never-read", flag, str(value)]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as e:
        udcg.reader_check("never-read", **{name: value})
    rule = bounds.PARAMETERS["reader-check"][name].describe()
    assert err == f"udcg reader-check: error: {flag} {bounds.short(value)}: must be {rule}"
    assert str(e.value) == f"{name} = {bounds.short(value)}: must be {rule}"


# ---------------------------------------------------------------- one check per value, at either door


def test_a_declared_option_is_checked_once_at_each_door(monkeypatch, tmp_path, capsys):
    """The command line's bounds pass (``bounds.check_options``) and the API's (``api_args.checked``)
    leave a declared option to its options object: ``--n-boot 200`` is range-checked once."""
    seen = []
    for name in ("check", "check_value", "check_option"):
        real = getattr(bounds, name)
        monkeypatch.setattr(bounds, name, lambda *a, _real=real, _name=name: seen.append((_name, a)) or _real(*a))
    missing = str(tmp_path / "missing.trec")
    assert main(["compare", "--run", missing, "--run", missing, "--n-boot", "200", "--qrels", QRELS]) == 2
    assert [a for _, a in seen if 200 in a] == [(200, bounds.PARAMETERS["compare"]["n_boot"], "--n-boot 200")]
    seen.clear()
    with pytest.raises(InputError):
        udcg.compare({"a": missing, "b": missing}, qrels=QRELS, n_boot=300)
    assert [a for _, a in seen if 300 in a] == [(300, bounds.PARAMETERS["compare"]["n_boot"], "n_boot = 300")]
    capsys.readouterr()
