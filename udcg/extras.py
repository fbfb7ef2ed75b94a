"""The optional libraries of the ``ir`` extra (python-terrier, ir_datasets, ranx, ir_measures),
imported only where a user asks for them; a missing one is one line naming the extra."""

from __future__ import annotations

import importlib
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
