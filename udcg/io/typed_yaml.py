"""Typed YAML: a YAML mapping read safely (no aliases, size-capped, every parser failure one located
line) and turned into frozen dataclasses by their type hints, with ``--set key=value`` overrides.
What the values mean and which are allowed is the caller's (``udcg.experiment.config``)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any

from udcg.errors import InputError

MAX_CONFIG_BYTES = 1024**2  # a config is a few dozen lines
_UNIONS = (typing.Union, types.UnionType)  # Optional[X] and X | None


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return f"a list of {typing.get_args(hint)[0].__name__}"
    if origin in _UNIONS:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return f"{_type_name(args[0])} or null"
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string"}.get(hint, str(hint))


def _short(value: Any, limit: int = 80) -> str:
    """A value for a message, cut: a config value may be huge (never print it whole)."""
    import reprlib

    text = reprlib.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in _UNIONS:
        if value is None and type(None) in typing.get_args(hint):
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        for option in options[:-1]:  # e.g. float | str: a number, else a string
            with contextlib.suppress(InputError):
                return _coerce(value, option, where)
        hint = options[-1]
        origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if isinstance(value, (str, int)) and not isinstance(value, bool) and item in (str, int):
            value = [value]  # a single value stands for a one-element list
        if not isinstance(value, list):
            raise InputError(f"{where}: expected {_type_name(hint)}, got {_short(value)}")
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    ok = (isinstance(value, bool) if hint is bool else
          isinstance(value, int) and not isinstance(value, bool) if hint is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if hint is float else
          isinstance(value, str) if hint is str else False)
    if not ok:
        raise InputError(f"{where}: expected {_type_name(hint)}, got {_short(value)}")
    if hint is float and not math.isfinite(float(value)):  # .inf / .nan would fail only after the model work
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return float(value) if hint is float else value


def build_dataclass(cls: type, raw: Any, where: str, prefix: str = "") -> Any:
    """An instance of the dataclass ``cls`` (nested dataclasses too) from a raw mapping, every value
    coerced to its type hint; an unknown key or a wrong type is an ``InputError`` naming ``where``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: section {prefix.rstrip('.') or 'top level'!r} must be a mapping of keys, got {raw!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in known:
            raise InputError(f"{where}: unknown key '{prefix}{key}' (known keys{' of ' + prefix.rstrip('.') if prefix else ''}: "
                             f"{', '.join(known)})")
    values = {}
    for name in known:
        if name not in raw:
            continue
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = build_dataclass(hint, raw[name], where, f"{prefix}{name}.")
        else:
            values[name] = _coerce(raw[name], hint, f"{where}: {prefix}{name}")
    return cls(**values)


# ---------------------------------------------------------------- reading


def set_override(raw: dict, assignment: str) -> None:
    """Apply one ``--set section.key=value`` (the value read as YAML) to the raw mapping."""
    import yaml

    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise InputError(f"--set {assignment!r}: expected KEY=VALUE, e.g. --set contexts.k=3")
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise InputError(f"--set {assignment!r}: {part!r} is not a section")
    try:
        node[parts[-1]] = safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise InputError(f"--set {assignment!r}: the value is not valid YAML ({problem})") from None
    except ValueError as e:  # an integer too long to read
        raise InputError(f"--set {assignment[:80]!r}: {e} (give a value a config can hold)") from None


def safe_load(text: str):
    """yaml.safe_load without aliases (``*name``): a config needs none, and a few nested aliases
    expand to billions of values (an alias bomb). A refused alias is a YAMLError with its line."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.MarkedYAMLError(problem=f"alias *{event.anchor} (aliases are not allowed in a config; "
                                           "write the value out)", problem_mark=event.start_mark)
            return super().compose_node(parent, index)

    loader = NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such config file (give a YAML file, e.g. configs/smoke.yaml)")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InputError(f"{path}: {path.stat().st_size:,} bytes, too large for a config (at most {MAX_CONFIG_BYTES:,})")
    try:
        raw = safe_load(path.read_text(encoding="utf-8-sig"))  # a leading byte-order mark is dropped
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line, whatever the parser wrote
        raise InputError(f"{path}{line}: invalid YAML: {problem} (fix the syntax)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (re-save the config as UTF-8)") from None
    except (ValueError, RecursionError) as e:  # an integer too long to read, nesting too deep
        why = "an integer of more than 4,300 digits" if "digits" in str(e) else \
            "lists or mappings nested too deeply" if isinstance(e, RecursionError) else str(e)[:120]
        raise InputError(f"{path}: a value cannot be read: {why} (fix the value)") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e} (check the file's permissions)") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: the config must be a mapping of sections (data:, reader:, …), got {type(raw).__name__}")
    return raw
