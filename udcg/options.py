"""Options declared once: an operation's options are one frozen dataclass, each field declared by
``option(default, help, ...)`` with its type (``kind``), default, choices, flag and help text; its
range is the operation's entry in ``udcg.bounds.PARAMETERS`` (read here, not repeated). From that one
declaration (the style of ``ModelChoice``, scikit-learn's ``_parameter_constraints`` and
ir_measures' ``ParamInfo``):

- ``cls.add_arguments(parser)`` makes the command's flags (type, choices, the help with its
  default); a flag's parsed default is None, so that a flag not given is known (``--config`` may set
  it), and the parser records the declared defaults (``config_defaults``) and options
  (``config_options``) for a config file's keys (``udcg.flows.compare_config``);
- ``cls.from_args(args, from_file)`` builds the object from the parsed args: a flag given, else the
  config file's key, else the default, each value checked with the flag's label (``--n-boot 50: must
  be ...``);
- ``cls.of(caller, **keywords)`` is the Python API's door: an unknown keyword refused by name, each
  value checked with the keyword's label (``n_boot = 50: must be ...``) by the same ``check``, in
  ``__post_init__`` (so an object built in Python refuses what the command line refuses).

A field whose ``kind`` is None (a run, a list of measures, margins) is checked by the flow that reads
it, or by the API door's own checks (``udcg.api_args``), never here a second time.
"""

from __future__ import annotations

import argparse
import inspect
import numbers
import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from udcg import bounds
from udcg.errors import InputError

_EXPECTED = {str: "a str", Path: "a path (str or pathlib.Path)", int: "an integer", float: "a number",
             bool: "True or False"}


@dataclass(frozen=True)
class Option:
    """One option as declared (a field's metadata): ``help`` (``{default}`` is replaced by the
    default), ``flag`` (the command line's spelling; "": ``--`` and the field's name with dashes),
    ``short`` (``-o``), ``kind`` (int, float, str, bool: a switch, Path; None: checked by its reader),
    ``choices`` (the words allowed, or a function that returns them: a registry that plugins extend,
    read when the flags are made, the value then checked by the class that declares it), ``repeated``
    (a flag given several times: a tuple), ``metavar``, ``api`` (False: the command line's own, as
    ``-o``, not a keyword of the API), ``parsed`` (the parsed name where it is not the flag's:
    answer's ``--subsets`` is ``args.samples``), ``parse`` (what turns the flag's text into the value
    where ``kind`` does not: fit-theta's ``--C``, a number or ``auto``), ``group`` (the command's
    argument group it is shown in, named by the command: annotate's ``runs``; "": its own options).
    ``name``, ``default`` and ``bound`` are the field's, filled by ``declared``."""

    help: str
    flag: str = ""
    short: str = ""
    kind: type | None = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    repeated: bool = False
    metavar: str | None = None
    api: bool = True
    parsed: str = ""
    parse: Callable[[str], Any] | None = None
    group: str = ""
    name: str = ""
    default: Any = None
    bound: bounds.Bound | None = None

    @property
    def dest(self) -> str:
        """The parsed name (``args.prompt`` for ``--prompt``)."""
        return self.parsed or self.flag.lstrip("-").replace("-", "_")

    @property
    def key(self) -> str:
        """Its key in a config file: the flag with ``_`` for ``-``, plural when repeated (``runs``)."""
        return f"{self.dest}s" if self.repeated else self.dest

    @property
    def switch(self) -> bool:
        return self.kind is bool

    @property
    def convert(self) -> Callable[[str], Any] | None:
        """What turns the flag's text into the value (``parse``, else int, float), None: the text itself."""
        return self.parse or (self.kind if self.kind in (int, float) else None)


def option(default: Any, help: str, **declared: Any) -> Any:
    """A dataclass field declared as an option (``Option``'s keywords)."""
    return field(default=default, metadata={"option": Option(help, **declared)})


def _shown(value: Any) -> str:
    """A default as the help says it: 60 for 60.0, a tuple's items joined by commas."""
    if isinstance(value, tuple):
        return ",".join(map(_shown, value))
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _fits(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind in (int, float):
        wanted = numbers.Integral if kind is int else numbers.Real
        return isinstance(value, wanted) and not isinstance(value, bool)
    if kind is Path:
        return isinstance(value, os.PathLike) or isinstance(value, str) and bool(value.strip())
    return isinstance(value, kind)


def check_declared(o: Option, value: Any, name: str, shown: str) -> Any:
    """``value`` if the declaration allows it (its choices, range, type), else one ``InputError``
    line: ``{shown}: choose one of ...``, ``{shown}: must be ...`` (``udcg.bounds``) or ``{name}: give
    an integer, got a str ('x')``. ``name`` is how the door names the option (``n_boot``,
    ``--n-boot``), ``shown`` the name with the value (``n_boot = 50``, ``--n-boot 50``)."""
    if value is None and o.default is None:
        return None
    if o.repeated and isinstance(value, (list, tuple)):
        return tuple(check_declared(replace(o, repeated=False), v, f"{name}[{i}]", f"{name}[{i}] = {bounds.short(v)}")
                     for i, v in enumerate(value))
    if o.choices is not None and not callable(o.choices):  # a registry's: checked by the class that declares it
        if not isinstance(value, str) or value not in o.choices:
            raise InputError(f"{shown}: choose one of {', '.join(o.choices)}")
        return value
    if o.bound is not None and (isinstance(value, numbers.Real) and not isinstance(value, bool)
                                or isinstance(value, str) and o.bound.words):  # C: a number or 'auto'
        return bounds.check(value, o.bound, shown)
    if o.kind is not None and not _fits(o.kind, value):
        words = "".join(f" or {word!r}" for word in (o.bound.words if o.bound else ()))
        expected = _EXPECTED[o.kind] + words + (" or None" if o.default is None else "")
        given = "" if value is None else f" ({bounds.short(value)})"
        raise InputError(f"{name}: give {expected}, got {bounds.kind(value)}{given}")
    return value


# The options a door has checked already, while it builds the object (``Options.from_args``); empty otherwise.
_CHECKED: ContextVar[frozenset[str]] = ContextVar("udcg_options_checked", default=frozenset())


@dataclass(frozen=True)
class Options:
    """The base of an operation's options (module doc); ``operation``: its entry in ``bounds.PARAMETERS``."""

    operation: ClassVar[str] = ""

    def __post_init__(self) -> None:
        done = _CHECKED.get()  # the options ``from_args`` has checked with their flags' labels (or a config's reader)
        for o in declared(type(self)):
            if o.name in done:
                continue
            value = getattr(self, o.name)
            checked = check_declared(o, value, o.name, f"{o.name} = {bounds.short(value)}")
            if checked is not value:
                object.__setattr__(self, o.name, checked)

    @classmethod
    def of(cls, caller: str, **keywords: Any):
        """The API's door: the options from keywords, an unknown one (or one of the command line's
        own) refused as Python refuses it, in one ``InputError`` line."""
        known = {o.name for o in declared(cls) if o.api}
        for name in keywords:
            if name not in known:
                raise InputError(f"{caller}(): got an unexpected keyword argument {name!r}")
        return cls(**keywords)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, helps: dict[str, str] | None = None,
                      group: str | None = None) -> None:
        """The command's flags, one per declared option (module doc); ``helps``: another command's
        words for an option (``{name: help}``), where the option means more there; ``group``: only the
        options of that group (``Option.group``), added to ``parser`` (that argument group), for a
        command whose options sit in several groups (it calls this once a group); None: every one."""
        for o in declared(cls):
            if group is not None and o.group != group:
                continue
            text = (helps or {}).get(o.name, o.help)
            kw: dict[str, Any] = {"default": None, "help": text.replace("{default}", _shown(o.default))}
            if o.switch:
                kw["action"] = "store_true"
            elif o.repeated:
                kw["action"] = "append"
            if o.convert is not None:
                kw["type"] = o.convert
            if o.parsed:
                kw["dest"] = o.parsed
            if o.choices is not None:
                kw["choices"] = o.choices() if callable(o.choices) else o.choices
            if o.metavar is not None:
                kw["metavar"] = o.metavar
            parser.add_argument(*filter(None, (o.short, o.flag)), **kw)
        parser.set_defaults(config_options=declared(cls), config_defaults={o.dest: o.default for o in declared(cls)})

    @classmethod
    def from_args(cls, args: argparse.Namespace, from_file: dict[str, Any] | None = None):
        """The command line's door: each option the flag given (checked with its label), else the
        config file's key (checked by its reader), else the default."""
        given, values, done = vars(args), {}, set()
        for o in declared(cls):
            value = given.get(o.dest)
            if value is not None:
                value = check_declared(o, value, o.flag, f"{o.flag} {bounds.short(value)}")
                done.add(o.name)
            elif from_file and from_file.get(o.dest) is not None:
                value = from_file[o.dest]
                done.add(o.name)
            else:
                value = o.default
            values[o.name] = tuple(value) if o.repeated else value
        token = _CHECKED.set(frozenset(done))  # checked once: __post_init__ leaves these alone
        try:
            return cls(**values)
        finally:
            _CHECKED.reset(token)

    @classmethod
    def door(cls, func: Callable) -> Callable:
        """``func(..., **options)`` given the signature of its keywords: its own parameters, then each
        API option of ``cls`` keyword-only with its default (what ``inspect.signature`` and ``help``
        show, and what ``udcg.api_args.checked`` binds: an unknown keyword is refused as Python
        refuses it)."""
        signature = inspect.signature(func)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        names = {p.name for p in own}
        func.__signature__ = signature.replace(parameters=[*own, *(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                                                                      default=o.default)
                                                                    for o in declared(cls) if o.api and o.name not in names)])
        func.declared_options = cls  # its options are checked by cls (``udcg.api_args.checked`` leaves them to it)
        return func

    def keywords(self, *names: str) -> dict[str, Any]:
        """``{name: value}`` of the named options (for a function that takes them as keywords)."""
        return {name: getattr(self, name) for name in names}


@cache
def declared(cls: type) -> tuple[Option, ...]:
    """The options of ``cls``, in field order, each with its name, default and bound."""
    out = []
    for f in fields(cls):
        o = f.metadata.get("option")
        if o is not None:
            out.append(replace(o, flag=o.flag or f"--{f.name.replace('_', '-')}", name=f.name, default=f.default,
                               bound=bounds.option_bound(cls.operation, f.name)))
    return tuple(out)
