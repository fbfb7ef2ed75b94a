"""The Python API's door (``udcg.api``): every argument of a public function is checked for its
type, and a number for its range (``udcg.bounds.PARAMETERS``, the one entry the command line
checks too: the same refusal and range), before any file is read or model loaded. A wrong one is
one ``InputError`` line naming the argument and what it must be, never a TypeError,
AttributeError or OverflowError from deep inside.

``checked(command, **checks)`` wraps a function: an argument with a check of its own (a run, a
metric list ...) is checked by it; any other by the annotation of the parameter it fills (``str``,
``int | None``, ``str | Path``, ``bool`` ...), the ``**options`` of a flow by the annotations of the
flow function they go to (``options_of``), an unknown option name refused. Integer ids of a run,
qrels or utilities dict are made strings here (``{'q': {1: 1.0}}`` then meets qrels ``{'q': {'1':
1}}``, as in a TREC file, where every id is text).
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from udcg import bounds
from udcg.errors import InputError
from udcg.io import frames
from udcg.metrics.gains import all_str_keys
from udcg.options import declared

Check = Callable[[str, Any], Any]  # (argument name, value) -> the value to use, or an InputError


def _wrong(name: str, expected: str, value: Any) -> InputError:
    shown = "" if value is None else f" ({bounds.short(value)})"
    return InputError(f"{name}: give {expected}, got {bounds.kind(value)}{shown}")


def as_given(name: str, value: Any) -> Any:
    """No check here (the function checks the argument itself)."""
    return value


def path(name: str, value: Any) -> str | Path:
    """A file or folder path: a non-empty str or an os.PathLike."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip()):
        return value
    raise _wrong(name, "a file or folder path (a non-empty str or pathlib.Path)", value)


def paths(name: str, value: Any) -> list[str | Path]:
    """A non-empty list (or tuple) of paths; one str is refused (it is not a list of files)."""
    if isinstance(value, (str, os.PathLike)):
        raise InputError(f"{name}: give a list of file paths, got one path {bounds.short(str(value))} (wrap it in a list)")
    if not isinstance(value, (list, tuple)) or not value:
        raise _wrong(name, "a non-empty list of file paths", value)
    return [path(f"{name}[{i}]", item) for i, item in enumerate(value)]


def optional(check: Check) -> Check:
    return lambda name, value: None if value is None else check(name, value)


def one_of(where: str) -> Check:
    """A value among the choices named by ``where`` (``"module:NAME"``, a tuple of strings read when
    first checked, so that ``import udcg`` loads none of those modules), refused before anything
    runs: ``test = 'x': choose one of permutation, t, wilcoxon`` (the command line's choices)."""
    module, _, attribute = where.partition(":")

    def check(name: str, value: Any) -> Any:
        choices = getattr(importlib.import_module(module), attribute)
        if not isinstance(value, str) or value not in choices:
            raise InputError(f"{name} = {bounds.short(value)}: choose one of {', '.join(choices)}")
        return value
    return check


def _id(what: str, key: Any) -> str:
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str(key)
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return str(int(key))
    raise InputError(f"{what}: id {bounds.short(key)} is {bounds.kind(key)}; ids must be strings or integers")


def _string_keys(table: Mapping, what: str) -> Mapping:
    """``table`` with its keys as strings (the same object when they all are); an id given both as
    an integer and as a string is refused (they would be one query or document)."""
    if all(type(k) is str for k in table):
        return table
    out: dict[str, Any] = {}
    for key, value in table.items():
        text = _id(what, key)
        if text in out:
            raise InputError(f"{what}: id {text!r} is given twice (once as an integer, once as a string)")
        out[text] = value
    return out


def _all_str_keys(tables: Iterable[Mapping]) -> bool:
    """Whether every key of every table is a str (a str subclass passes, as ``_id`` would keep it):
    read by the C dict walk (``gains.all_str_keys``: no string built, half the time of the join
    below or less on ``scripts/bench_evaluate.py``'s dicts); without it at C speed still: ``str.join`` refuses any
    other key, ``map`` runs it over the tables and a zero-length deque drains the map without a
    Python loop or keeping the joined strings."""
    known = all_str_keys(tables)
    if known is not None:
        return known
    try:
        collections.deque(map("".join, tables), maxlen=0)
    except TypeError:
        return False
    return True


def id_table(what: str) -> Check:
    """A ``{qid: {docid: value}}`` dict (ids made strings), a file path, or a DataFrame or ranx object
    (read into that dict, ``udcg.io.frames``)."""
    def check(name: str, value: Any) -> Any:
        if frames.is_ranx(value):
            return value  # read by the flows (udcg.io.frames); kept whole here, so its .name can name the run
        value = frames.as_dict(value, what, name)
        if isinstance(value, (str, os.PathLike)):
            return path(name, value)
        if not isinstance(value, Mapping):
            raise _wrong(name, f"a {{qid: {{docid: {what}}}}} dict or a file path", value)
        frames.check_nested(value, name, what)
        if set(map(type, value)) <= {str} and _all_str_keys(value.values()):
            return value
        return {qid: _string_keys(docs, f"{name}: query {qid!r}")
                for qid, docs in _string_keys(value, name).items()}
    return check


def utilities(name: str, value: Any) -> Any:
    """Utilities: a dict (ids made strings), a file or folder path, or a read ``Utilities``."""
    module = sys.modules.get("udcg.annotate.utilities")
    if module is not None and isinstance(value, module.Utilities):
        return value
    return id_table("utility")(name, value)


def run_set(name: str, value: Any) -> Any:
    """``{name: run}`` (each a dict or a file) or a list of run files."""
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise InputError(f"{name}: run names must be strings, got {bounds.kind(key)} ({bounds.short(key)})")
        return {key: id_table("score")(f"run {key!r}", run) for key, run in value.items()}
    if isinstance(value, (list, tuple)) and value and all(map(frames.is_ranx, value)):
        return value  # named by their .name (udcg.api)
    if isinstance(value, (list, tuple)):
        return paths(name, value)
    raise _wrong(name, "a {name: run} dict or a list of run files", value)


def run_map(name: str, value: Any) -> Any:
    """``{name: run}`` only (``score_runs``)."""
    if not isinstance(value, Mapping):
        raise _wrong(name, "a {name: run} dict (each run a {qid: {docid: score}} dict or a file)", value)
    return run_set(name, value)


def metrics(name: str, value: Any) -> Any:
    """Measures: a comma-separated str, a Measure, or a list of them."""
    from udcg.metrics.measures import Measure

    if isinstance(value, (str, Measure)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(m, (str, Measure)) for m in value):
        return value
    raise _wrong(name, "a list of measures (['UDCG@5', 'nDCG@5']) or a comma-separated str", value)


def theta(name: str, value: Any) -> Any:
    """A fitted UDCG_theta (``UDCGTheta``) or the path of a saved one."""
    module = sys.modules.get("udcg.metrics.udcg_theta")  # an instance exists only once its module is imported
    if module is not None and isinstance(value, module.UDCGTheta):
        return value
    if isinstance(value, (str, os.PathLike)):
        return path(name, value)
    raise _wrong(name, "a fitted udcg UDCGTheta or the path of a saved one", value)


def model(name: str, value: Any) -> str:
    """A model: its name (an alias, a hub id, SCHEME:NAME) or its folder (a str or os.PathLike)."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str) and value.strip():
        return value
    raise _wrong(name, "a model name or folder (a non-empty str or pathlib.Path)", value)


def api_base(name: str, value: Any) -> str:
    """One base URL, several comma-separated, or a list of them (joined as the command line takes them)."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(u, str) and u.strip() for u in value):
        return ",".join(u.strip() for u in value)
    if isinstance(value, str) and value.strip():
        return value
    raise _wrong(name, "a base URL, several comma-separated, or a list of URL strings", value)


# ---------------------------------------------------------------- checks read from annotations

_TYPES = {"str", "Path", "int", "float", "bool", "None"}


def _by_annotation(annotation: Any) -> set[str] | None:
    """The simple types an annotation string allows (``"int | None"`` -> {int, None}); None when it
    names anything else (that argument then needs a check of its own, or is not checked)."""
    if not isinstance(annotation, str):
        return None
    words = {w.strip() for w in annotation.split("|")}
    return words if words <= _TYPES else None


def _fits(value: Any, words: set[str]) -> bool:
    if value is None:
        return "None" in words
    if isinstance(value, bool):
        return "bool" in words
    if isinstance(value, str):  # a path is never empty
        return bool(value.strip()) if "Path" in words else "str" in words
    if isinstance(value, os.PathLike):
        return "Path" in words
    if isinstance(value, numbers.Integral):
        return bool(words & {"int", "float"})
    return isinstance(value, numbers.Real) and "float" in words


def _describe(words: set[str]) -> str:
    names = {"str": "a str", "Path": "a path (str or pathlib.Path)", "int": "an integer", "float": "a number",
             "bool": "True or False", "None": "None"}
    if "Path" in words:
        words = words - {"str"}
    return " or ".join(names[w] for w in sorted(words, key=list(names).index))


def _check_by_annotation(command: str, name: str, value: Any, parameter: inspect.Parameter) -> Any:
    """A number with a bound in ``udcg.bounds.PARAMETERS`` is checked against it (``n_boot = 50: must
    be ...``, the range and reason ``--n-boot 50`` gets); anything else against the parameter's annotation."""
    bound = bounds.option_bound(command, name)
    if bound is not None and (isinstance(value, numbers.Real) and not isinstance(value, bool)
                              or isinstance(value, str) and bound.words):  # C: a number or 'auto'
        return bounds.check_value(name, value, bound)
    words = _by_annotation(parameter.annotation)
    if words is not None and not _fits(value, words):
        raise _wrong(name, _describe(words), value)
    return value


def checked(command: str, *, options_of: str | None = None, **checks: Check):
    """``func`` with every argument checked first (see the module doc); ``command``: the operation
    whose bounds apply (its entry in ``udcg.bounds.PARAMETERS``, the command's); ``options_of``: ``"module:function"``
    (or ``"module:Class"``) that ``**options`` are passed to."""
    def wrap(func):
        signature = inspect.signature(func)
        rest = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)
        named = [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
        options_class = getattr(func, "declared_options", None)  # Options.door's: it checks its own options
        by_options = {o.name for o in declared(options_class)} if options_class else set()

        @functools.wraps(func)
        def call(*args, **kwargs):
            try:
                given = signature.bind(*args, **kwargs)
            except TypeError as e:
                raise InputError(f"{func.__name__}(): {e}") from None
            for name, value in given.arguments.items():
                if name == rest:
                    given.arguments[name] = _options(func.__name__, command, options_of, value, checks, named)
                elif name in checks:
                    given.arguments[name] = checks[name](name, value)
                elif name in by_options:
                    continue  # checked once, by the options object the function builds (Options.of)
                else:
                    given.arguments[name] = _check_by_annotation(command, name, value, signature.parameters[name])
            return func(*given.args, **given.kwargs)

        call.operation, call.options_of = command, options_of  # what the door checks (read by tests)
        return call

    return wrap


def _options(caller: str, command: str, target: str | None, options: dict, checks: Mapping[str, Check],
             named: Iterable[str] = ()) -> dict:
    """The ``**options`` of ``caller``, each checked by the parameter of ``target`` it fills: a
    function's keyword-only parameters, or a class's with a default (``ModelChoice``'s options);
    ``named``: the caller's own keywords, listed first where an unknown one is refused."""
    if target is None:
        return options
    module, _, function = target.partition(":")
    found = getattr(importlib.import_module(module), function)
    parameters = {name: p for name, p in inspect.signature(found).parameters.items()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY or inspect.isclass(found) and p.default is not p.empty}
    out = {}
    for name, value in options.items():
        if name in checks:
            out[name] = checks[name](name, value)
        elif name in parameters:
            out[name] = _check_by_annotation(command, name, value, parameters[name])
        else:
            known = ", ".join([*named, *parameters])
            raise InputError(f"{caller}(): unknown option {name!r} (its options: {known})")
    return out
