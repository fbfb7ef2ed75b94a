"""``udcg compare --config FILE``: the command's options from a YAML file, one key per option.

The keys are the options themselves, not a second declaration of them: the command hands over its
parser's options (``Option``: a key, whether it repeats, is a switch, its type and choices), and a
key is an option's name with ``_`` for ``-`` (``n_boot`` for ``--n-boot``; ``runs`` for the
repeated ``--run``). Every value is checked as the command line checks it (type, choices, the
bounds of ``udcg.bounds``), an error naming the file, the key and the fix; a flag on the command
line overrides its key (the command's business: this module only reads the file)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from udcg.errors import InputError


@dataclass(frozen=True)
class Option:
    """One option of the command as a config key: ``dest`` (the parsed name), ``repeated`` (a list),
    ``switch`` (true/false), ``convert`` (the option's type, e.g. ``int``) and ``choices``."""

    dest: str
    repeated: bool = False
    switch: bool = False
    convert: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None

    @property
    def key(self) -> str:
        return f"{self.dest}s" if self.repeated else self.dest


def read_options(path: str, options: Sequence[Option], command: str = "compare") -> dict[str, Any]:
    """``{dest: value}`` of the keys the YAML file at ``path`` gives, each checked (module docstring)."""
    from udcg.bounds import PARAMETERS, check_option
    from udcg.io.typed_yaml import read_yaml

    by_key = {o.key: o for o in options}
    raw = read_yaml(path)
    out = {}
    for key, value in raw.items():
        option = by_key.get(key)
        if option is None:
            raise InputError(f"{path}: unknown key {key!r} (known keys: {', '.join(by_key)})")
        where = f"{path}: {key}"
        out[option.dest] = _value(option, value, where)
        bound = PARAMETERS.get(command, {}).get(option.dest)
        if bound is not None and out[option.dest] is not None:
            check_option(where, out[option.dest], bound)
    return out


def _value(option: Option, value: Any, where: str) -> Any:
    if value is None:
        return None
    if option.switch:
        if not isinstance(value, bool):
            raise InputError(f"{where}: expected true or false, got {value!r}")
        return value
    if option.repeated:
        items = value if isinstance(value, list) else [value]
        return [_scalar(option, item, f"{where}[{i}]") for i, item in enumerate(items)]
    if isinstance(value, list):  # a list of measures or margins: the flag's comma-separated text
        return _scalar(option, ",".join(str(_plain(item, where)) for item in value), where)
    return _scalar(option, value, where)


def _plain(value: Any, where: str) -> Any:
    if isinstance(value, (dict, list)) or isinstance(value, bool):
        raise InputError(f"{where}: expected a value as the command line takes it, got {value!r:.60}")
    return value


def _scalar(option: Option, value: Any, where: str) -> Any:
    text = str(_plain(value, where))
    try:
        out = option.convert(text) if option.convert is not None else text
    except (TypeError, ValueError):
        raise InputError(f"{where}: {text!r:.60} is not {getattr(option.convert, '__name__', 'a value')} "
                         "(give the value the command line takes)") from None
    if option.choices is not None and out not in option.choices:
        raise InputError(f"{where}: {text!r:.60}: choose one of {', '.join(map(str, option.choices))}")
    return out


def merged(given: Mapping[str, Any], from_file: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Each option's value: the command line's where given (not None), else the file's, else the
    option's default."""
    return {dest: given[dest] if given.get(dest) is not None else from_file.get(dest, default)
            for dest, default in defaults.items()}
