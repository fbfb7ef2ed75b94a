"""Turn a model name into a ``Backend``.

- an offline alias (``smollm2-135m``, ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``), a local
  transformers model folder or a hub id: ``HFBackend`` (transformers, in-process);
- ``SCHEME:rest`` where SCHEME was registered with ``register_scheme`` (e.g. the OpenAI-compatible
  client registers ``openai``): that scheme's factory, called with ``rest``.

Schemes are looked up lazily: a scheme listed in ``_LAZY_SCHEMES`` imports its module on first use,
and that module calls ``register_scheme``. Nothing heavy is imported until a backend is loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from collections.abc import Callable
from typing import Any

from udcg.errors import InputError
from udcg.llm.base import Backend

BackendFactory = Callable[..., Backend]

_SCHEMES: dict[str, BackendFactory] = {}
# scheme -> module that registers it when imported
_LAZY_SCHEMES: dict[str, str] = {"openai": "udcg.llm.openai_backend"}


def register_scheme(scheme: str, factory: BackendFactory) -> None:
    """Make ``load_backend("SCHEME:rest", **kw)`` call ``factory(rest, **kw)``."""
    if not scheme.isidentifier():
        raise ValueError(f"scheme {scheme!r} must be an identifier (letters, digits, underscore)")
    _SCHEMES[scheme] = factory


def _scheme(name: str) -> tuple[str, str] | None:
    head, sep, rest = name.partition(":")
    if not sep or not head.isidentifier() or len(head) == 1:  # "C:\\models" is a Windows path, not a scheme
        return None
    if head not in _SCHEMES and head in _LAZY_SCHEMES:
        try:
            importlib.import_module(_LAZY_SCHEMES[head])
        except ModuleNotFoundError as e:
            if e.name != _LAZY_SCHEMES[head]:
                raise
    if head not in _SCHEMES:
        known = sorted(set(_SCHEMES) | set(_LAZY_SCHEMES))
        raise InputError(f"model {name!r}: unknown backend scheme {head!r} (known: {', '.join(known) or 'none'}; "
                         f"or give an offline alias, a model folder or a hub id)")
    return head, rest


def load_backend(name: str, **kw: Any) -> Backend:
    """The backend for ``name``. Keyword arguments go to the backend (for ``HFBackend``: device,
    dtype, batch_size, quantize, share_prefix, name)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"model name must be a non-empty string, got {name!r}")
    scheme = _scheme(name)
    if scheme is not None:
        head, rest = scheme
        return _SCHEMES[head](rest, **kw)
    from udcg.llm.hf import HFBackend

    return HFBackend(name, **kw)


def backend_name(name: str) -> str:
    """The name a backend loaded by ``load_backend(name)`` records next to its results, known
    without loading it: the alias, the folder's name, the hub id, or the model after ``scheme:``."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"model name must be a non-empty string, got {name!r}")
    scheme = _scheme(name)
    if scheme is not None:
        return scheme[1]
    path = Path(name).expanduser()
    return path.name if path.is_dir() else name


def describe() -> list[str]:
    """Human-readable list of what ``load_backend`` accepts."""
    from udcg.llm import offline

    lines = [f"{alias}: offline ({m.source})" for alias, m in offline.ALIASES.items()]
    lines.append("a local transformers model folder, or a hub id like 'org/name' (needs a model hub)")
    lines.extend(f"{s}:MODEL (registered backend)" for s in sorted(set(_SCHEMES) | set(_LAZY_SCHEMES)))
    return lines
