"""The optional libraries of the ``ir`` extra (python-terrier, ir_datasets, ranx, ir_measures),
imported only where a user asks for them; a missing one is one line naming the extra. ``after_import``
runs a hook once one of them is imported, without importing it (how ``import udcg`` names UDCG in
ir_measures' registry)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import logging
import sys
from types import ModuleType

from udcg.errors import InputError

IR_EXTRA = "pip install -e '.[ir]' in the udcg checkout"
_PACKAGES = {"pyterrier": "python-terrier", "ir_datasets": "ir_datasets", "ranx": "ranx",
             "ir_measures": "ir_measures", "pandas": "pandas"}


def need(module: str, what: str) -> ModuleType:
    """``module`` imported, or an ``InputError`` saying that ``what`` needs it and the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = _PACKAGES.get(module, module)
        raise InputError(f"{what} needs {package}, which is not installed: {IR_EXTRA}") from None


def after_import(module: str, target: str) -> None:
    """Call ``target`` (``"package.module:function"``) once ``module`` is imported: now if it is, else
    right after its first import (a one-shot finder at the front of ``sys.meta_path`` wraps its
    loader). A failing hook is logged, never breaks the import."""
    if sys.modules.get(module) is not None:
        _call(target)
    elif not any(isinstance(f, _AfterImport) and f.module == module for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(module, target))


def _call(target: str) -> None:
    name, _, function = target.partition(":")
    try:
        getattr(importlib.import_module(name), function)()
    except Exception as e:  # noqa: BLE001 - a hook must not break the user's import
        logging.getLogger(__name__).warning("%s failed: %s", target, e)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, module: str, target: str) -> None:
        self.module, self.target = module, target

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the finders that would have found it
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self.target)
        return spec


class _ThenCall(importlib.abc.Loader):
    """A module's own loader, then the hook."""

    def __init__(self, loader, target: str) -> None:
        self.loader, self.target = loader, target

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _call(self.target)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)
