"""Tables read with Hugging Face ``datasets``: a Parquet file, a folder written by ``save_to_disk``
(a ``Dataset`` or a ``DatasetDict``), or a data set on the hub (``hf:NAME`` or ``hf:NAME:CONFIG``).

``datasets`` is imported inside each function (it is heavy), so ``import udcg`` stays fast. Every
failure to read becomes an ``InputError`` naming the source and the fix. Rows are located as
``<source>: row <i>`` (0-based, as ``datasets`` indexes them): a table has no lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from udcg.errors import InputError

HUB_PREFIX = "hf:"


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _errors() -> tuple[type[BaseException], ...]:
    from datasets.exceptions import DatasetsError

    return OSError, ValueError, DatasetsError


def is_saved_dataset(path: Path) -> bool:
    """True for a folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file())


def load(source: str | Path) -> Any:
    """The ``Dataset`` or ``DatasetDict`` behind ``source``: ``hf:NAME[:CONFIG]``, a Parquet file,
    or a ``save_to_disk`` folder."""
    import datasets

    text = str(source)
    if text.startswith(HUB_PREFIX):
        name, _, config = text[len(HUB_PREFIX):].partition(":")
        if not name:
            raise InputError(f"{text!r}: no data set name after 'hf:' (write hf:NAME or hf:NAME:CONFIG, "
                             "e.g. hf:BeIR/scifact:corpus)")
        try:
            return datasets.load_dataset(name, config or None)
        except _errors() as e:
            raise InputError(f"{text}: cannot load from the Hugging Face hub ({_reason(e)}) (check the name, "
                             "the config and the network; offline, save it with save_to_disk and give that "
                             "folder)") from None
    path = Path(source)
    try:
        if path.is_dir():
            return datasets.load_from_disk(str(path))
        return datasets.load_dataset("parquet", data_files=str(path), split="train")
    except _errors() as e:
        what = "a datasets save_to_disk folder" if path.is_dir() else "Parquet"
        raise InputError(f"{path}: cannot read as {what} ({_reason(e)}) (check the file, or write it again "
                         "with datasets' save_to_disk / to_parquet)") from None


def splits(data: Any) -> tuple[str, ...]:
    """The split names of a ``DatasetDict`` (empty for a single ``Dataset``)."""
    import datasets

    return tuple(data) if isinstance(data, datasets.DatasetDict) else ()


def pick(data: Any, role: str, source: str) -> Any:
    """A ``Dataset`` as is; from a ``DatasetDict`` the split named ``role``, else its only split."""
    names = splits(data)
    if not names:
        return data
    if role in names:
        return data[role]
    if len(names) == 1:
        return data[names[0]]
    raise InputError(f"{source}: splits {', '.join(names)}, none named {role!r} (name the {role} split "
                     f"{role!r}, or give the {role} as a file of its own)")


def rows(table: Any, source: str) -> Iterator[tuple[str, dict]]:
    """(location, row) for each row of a ``Dataset``."""
    for i, row in enumerate(table):
        yield f"{source}: row {i}", row
