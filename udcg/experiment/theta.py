"""UDCG_theta models as files: the fitted model's ``to_dict`` as JSON, read back with every field checked."""

from __future__ import annotations

from pathlib import Path

from udcg.io.files import atomic_write_json, read_json
from udcg.metrics.udcg import UDCGTheta


def save_theta(model: UDCGTheta, path: str | Path) -> None:
    """Write a fitted model atomically (temporary file + rename)."""
    atomic_write_json(path, model.to_dict())


def load_theta(path: str | Path) -> UDCGTheta:
    """A saved model; a missing or malformed field is an ``InputError`` naming the file and field."""
    return UDCGTheta.from_dict(read_json(path), str(path))
