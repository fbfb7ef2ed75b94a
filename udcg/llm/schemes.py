"""The backend schemes: which factory builds the backend of a ``SCHEME:rest`` model, and whether
the scheme's models are served through an API or run locally.

Three sources, one registry (``SCHEMES``, a ``Schemes``):

- built-in entries, lazy: ``module:object`` strings imported when a model of that scheme is loaded
  (``openai``), so nothing heavy is imported to resolve a name;
- the ``udcg.backends`` entry-point group of the installed distributions: ``NAME = module:Class``
  with ``Class`` a ``udcg.llm.base.BaseBackend`` subclass whose ``capabilities.api`` says API or
  local. Read once, only when a scheme the registry does not know is asked for, or when every
  scheme is listed (``udcg models``); the module is imported when its scheme is used;
- ``register_scheme`` (in-process: a notebook, a test), which wins over both.

So a third-party package adds a backend with one module and one entry point, without a udcg
release. Backend modules never import this one: the dependency runs one way.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from importlib import metadata

from udcg.errors import InputError
from udcg.llm.base import BaseBackend, Capabilities
from udcg.redact import env_secrets, redact

BackendFactory = Callable[..., BaseBackend]
GROUP = "udcg.backends"


@dataclass(frozen=True, slots=True)
class Scheme:
    """One scheme: its factory (None until imported), where to import it from (``module:object``),
    whether it is an API scheme (None: read from the class's ``capabilities`` when imported) and
    where it came from (``built in``, ``entry point DIST``, ``register_scheme``)."""

    name: str
    api: bool | None
    target: str = ""
    factory: BackendFactory | None = None
    origin: str = "built in"


class Schemes:
    """The scheme registry. ``get(name)`` answers one scheme (reading the entry points only for a
    name it does not know); ``factory(name, model)`` imports a lazy one; ``scoped()`` undoes every
    registration made inside it (for tests)."""

    def __init__(self, built_in: dict[str, tuple[str, bool]], group: str = GROUP) -> None:
        self._entries = {n: Scheme(n, api, target) for n, (target, api) in built_in.items()}
        self._group, self._plugins_read = group, False

    def register(self, scheme: str, factory: BackendFactory, *, api: bool, origin: str = "register_scheme") -> None:
        if not scheme.isidentifier():
            raise ValueError(f"scheme {scheme!r} must be an identifier (letters, digits, underscore)")
        if not isinstance(api, bool):
            raise TypeError(f"scheme {scheme!r}: api must be True (an API scheme) or False (a local one), got {api!r}")
        self._entries[scheme] = Scheme(scheme, api, factory=factory, origin=origin)

    def get(self, scheme: str) -> Scheme | None:
        if scheme not in self._entries:
            self._read_plugins()
        return self._entries.get(scheme)

    def names(self) -> list[str]:
        """Every scheme, the entry points' included."""
        self._read_plugins()
        return sorted(self._entries)

    def is_api(self, scheme: str, model: str) -> bool:
        entry = self._entries[scheme]
        if entry.api is None:  # an entry point: its class says (imported now, as its model is about to load)
            self.factory(scheme, model)
            entry = self._entries[scheme]
        return bool(entry.api)

    def factory(self, scheme: str, model: str) -> BackendFactory:
        """The factory of ``scheme``, imported on first use (``InputError`` when it cannot be)."""
        entry = self._entries[scheme]
        if entry.factory is not None:
            return entry.factory
        module, _, name = entry.target.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in name.split("."):
                obj = getattr(obj, part)
        except ModuleNotFoundError as e:
            missing = "" if e.name == module else f" needs {e.name}, which"
            raise InputError(f"model {model!r}: the {scheme!r} backend ({module}){missing} is not installed") from None
        except (ImportError, AttributeError) as e:
            raise InputError(redact(f"model {model!r}: the {scheme!r} backend ({entry.origin}: {entry.target}) does not load: "
                                    f"{e}", env_secrets())) from None
        except (Exception, SystemExit) as e:  # a third party's module raising on import (a SyntaxError, sys.exit): one line
            raise InputError(redact(f"model {model!r}: the {scheme!r} backend ({entry.origin}: {entry.target}) raised "
                                    f"{type(e).__name__} on import: {e} (a fault of that package: fix, update or uninstall "
                                    "it)", env_secrets())) from None
        api = entry.api
        if api is None:
            if not (isinstance(obj, type) and issubclass(obj, BaseBackend)):
                raise InputError(f"model {model!r}: {entry.origin} names {entry.target}, which is no subclass of "
                                 "udcg.llm.base.BaseBackend (an entry point of the udcg.backends group names one)")
            api = getattr(obj, "capabilities", None)
            api = api.api if isinstance(api, Capabilities) else None
            if not isinstance(api, bool):
                raise InputError(f"model {model!r}: {entry.origin} names {entry.target}, whose capabilities are no "
                                 "udcg.llm.base.Capabilities with api True or False (declare capabilities = "
                                 "Capabilities(api=...) on the class)")
        self._entries[scheme] = replace(entry, factory=obj, api=api)
        return obj

    def _read_plugins(self) -> None:
        """The entry points of the ``udcg.backends`` group, read once; a built-in or registered
        scheme of the same name wins."""
        if self._plugins_read:
            return
        self._plugins_read = True
        for ep in metadata.entry_points(group=self._group):
            if ep.name.isidentifier() and ep.name not in self._entries:
                dist = ep.dist.name if ep.dist is not None else "?"
                self._entries[ep.name] = Scheme(ep.name, None, ep.value, origin=f"entry point of {dist}")

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Schemes]:
        """Registrations made inside the block are gone after it (and the entry points are read again)."""
        entries = dict(self._entries)
        try:
            yield self
        finally:  # the entry points are read again when next needed: the path may have changed
            self._entries, self._plugins_read = entries, False


SCHEMES = Schemes({"openai": ("udcg.llm.openai_backend:from_registry", True)})


def register_scheme(scheme: str, factory: BackendFactory, *, api: bool) -> None:
    """Make ``SCHEME:rest`` models load through ``factory(rest, **options)`` (in this process).
    ``api``: whether the scheme's models are served through an API (they refuse the local options
    ``registry.LOCAL_ONLY``, take the ``API_ONLY`` ones, and an annotation defaults to the
    api-logprobs estimator) or run locally (the reverse). Its backend, a
    ``udcg.llm.base.BaseBackend``, should record ``rest`` as its ``name``, the name ``resolve`` gives.
    A package that should not need this call declares an entry point in the ``udcg.backends`` group."""
    SCHEMES.register(scheme, factory, api=api)
