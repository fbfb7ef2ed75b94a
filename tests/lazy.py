"""Heavy libraries imported on first use, so that collecting the suite (``make test-unit`` too) does
not pay for them: ``importorskip`` is ``pytest.importorskip`` (the file skips when the library is not
installed) that imports only when a test reads an attribute (``torch.tensor``); ``LazyModule`` alone
is a plain ``import ranx`` deferred the same way."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pytest


class LazyModule:
    """A module imported on first attribute read (``torch.tensor`` ...)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_") or attr == "pytestmark":  # pytest probing a module's names at collection
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


def importorskip(name: str, reason: str | None = None) -> LazyModule:
    """Skip the module (at collection) when ``name`` is not installed; else the module, imported lazily."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(reason or f"could not import {name!r}: not installed", allow_module_level=True)
    return LazyModule(name)
