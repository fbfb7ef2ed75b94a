"""``pytest.importorskip`` that defers the import: a test file that needs torch or transformers skips
when they are not installed, as with ``importorskip``, but imports them only when one of its tests
reads an attribute, so collecting the suite (``make test-unit`` too) does not pay for them."""

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
        return getattr(importlib.import_module(self._name), attr)


def importorskip(name: str) -> LazyModule:
    """Skip the module (at collection) when ``name`` is not installed; else the module, imported lazily."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"could not import {name!r}: not installed", allow_module_level=True)
    return LazyModule(name)
