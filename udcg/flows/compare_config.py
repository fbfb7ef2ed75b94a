"""``udcg compare --config FILE``: the command's options from a YAML file, one key per option.

The keys are the options themselves, not a second declaration of them: the command hands over its
declared options (``udcg.options.Option``: a key, whether it repeats, is a switch, its type, choices
and bound), and a key is an option's flag with ``_`` for ``-`` (``n_boot`` for ``--n-boot``; ``runs``
for the repeated ``--run``). Every value is checked as the command line checks it (type, choices,
the bounds of ``udcg.bounds``), an error naming the file, the key and the fix; a flag on the command
line overrides its key (``Options.from_args``: this module only reads the file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from udcg.errors import InputError
from udcg.options import Option


def read_options(path: str, options: Sequence[Option]) -> dict[str, Any]:
    """``{dest: value}`` of the keys the YAML file at ``path`` gives, each checked (module docstring)."""
    from udcg.bounds import check_option
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
        if option.bound is not None and out[option.dest] is not None:
            check_option(where, out[option.dest], option.bound)
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
