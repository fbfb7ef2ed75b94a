"""Turn a model name into a ``Backend``.

- an offline alias (``smollm2-135m``, ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``), a local
  transformers model folder or a hub id: ``HFBackend`` (transformers, in-process);
- ``SCHEME:rest``: that scheme's factory, called with ``rest``. ``openai`` is built in (the
  OpenAI-compatible client); more can be added with ``register_scheme``.

Built-in schemes are imported lazily: ``_LAZY_SCHEMES`` names each one's module and factory, imported
on first use. The dependency runs one way: backend modules never import the registry. Nothing heavy
is imported until a backend is loaded.
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
# scheme -> (module, factory function in it), imported on first use
_LAZY_SCHEMES: dict[str, tuple[str, str]] = {"openai": ("udcg.llm.openai_backend", "from_registry")}


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
        module, factory = _LAZY_SCHEMES[head]
        try:
            register_scheme(head, getattr(importlib.import_module(module), factory))
        except ModuleNotFoundError as e:
            if e.name != module:
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


def is_api(name: str) -> bool:
    """Whether ``name`` is served through a scheme (``openai:MODEL``, a registered one), not loaded in-process."""
    return isinstance(name, str) and _scheme(name) is not None


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
