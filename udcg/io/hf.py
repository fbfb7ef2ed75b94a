"""Tables read with Hugging Face ``datasets``: a Parquet file, a folder written by ``save_to_disk``
(a ``Dataset`` or a ``DatasetDict``), or a data set on the hub (``hf:NAME`` or ``hf:NAME:CONFIG``).

``datasets`` is imported inside each function (it is heavy), so ``import udcg`` stays fast. Every
failure to read becomes an ``InputError`` naming the source and the fix. Rows are located as
``<source>: row <i>`` (0-based, as ``datasets`` indexes them): a table has no lines.

A Parquet file is read with ``pyarrow`` in record batches (nothing is written into the Hugging Face
cache). ``TableScan`` reads a table batch by batch and keeps only the rows whose id is wanted, so a
corpus of millions of rows is never held whole: a Parquet file through ``pyarrow``, a
``save_to_disk`` folder (or a hub data set) through its Arrow files, read as streams rather than
memory-mapped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Set
from pathlib import Path
from typing import Any

from udcg.errors import InputError

HUB_PREFIX = "hf:"
BATCH_ROWS = 8192


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
    """The ``Dataset`` or ``DatasetDict`` behind ``source``: ``hf:NAME[:CONFIG]`` or a ``save_to_disk``
    folder (a Parquet file: ``TableScan``)."""
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
    _check_dataset_dict(path)
    try:
        return datasets.load_from_disk(str(path))
    except (*_errors(), TypeError, KeyError, AttributeError) as e:  # the last three: metadata of the wrong shape
        raise InputError(f"{path}: cannot read as a datasets save_to_disk folder ({_reason(e)}) (check the folder, "
                         "or write it again with datasets' save_to_disk)") from None


def _check_dataset_dict(folder: Path) -> None:
    """A ``DatasetDict`` folder's ``dataset_dict.json`` must be ``{"splits": [names of its sub-folders]}``."""
    from udcg.io.files import read_json

    meta = folder / "dataset_dict.json"
    if not meta.is_file():
        return
    data = read_json(meta)
    splits = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) and s for s in splits):
        got = str(splits if isinstance(data, dict) else data)[:80]
        raise InputError(f"{meta}: field 'splits' must be a non-empty list of split names, got {got} "
                         "(write the data set again with datasets' save_to_disk)")
    for name in splits:
        if Path(name).name != name or not (folder / name).is_dir():
            raise InputError(f"{meta}: split {name[:80]!r} has no folder {folder / name[:80]} (write the data set again "
                             "with datasets' save_to_disk)")


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


# ---------------------------------------------------------------- tables read batch by batch


def _parquet_batches(path: Path) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)  # column chunks read 1 MiB at a time
        for group in range(table.num_row_groups):  # an iterator per row group: one over all of them grows as it reads
            yield from table.iter_batches(batch_size=BATCH_ROWS, row_groups=[group])
    except (OSError, ValueError, pa.ArrowException) as e:
        raise InputError(f"{path}: cannot read as Parquet ({_reason(e)}) (check the file, or write it again with "
                         "pyarrow or datasets' to_parquet)") from None


def _dataset_batches(table: Any) -> Iterator[Any]:
    """A ``Dataset``'s record batches: its Arrow files read as streams (``save_to_disk`` writes them
    without an indices mapping), else its in-memory table."""
    import pyarrow as pa

    files = [f["filename"] for f in table.cache_files]
    if not files or getattr(table, "_indices", None) is not None:
        yield from table.with_format("arrow").iter(batch_size=BATCH_ROWS)
        return
    for name in files:
        try:
            with pa.OSFile(name, "rb") as f:
                yield from pa.ipc.open_stream(f)
        except (OSError, ValueError, pa.ArrowException) as e:
            raise InputError(f"{name}: cannot read as an Arrow file ({_reason(e)}) (write the data set again with "
                             "datasets' save_to_disk)") from None


def _ids(batch: Any, id_columns: Sequence[str]) -> Any:
    """Each row's id as a string: its first non-null of ``id_columns``; null where none is, or where
    that one holds no string or integer (the caller reads those rows and locates the error)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def readable(t: Any) -> bool:
        return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or (
            pa.types.is_dictionary(t) and readable(t.value_type))

    unreadable, null = pa.scalar("\0", pa.string()), pa.scalar(None, pa.string())
    columns = [pc.cast(col, pa.string()) if readable(col.type) else pc.if_else(pc.is_valid(col), unreadable, null)
               for col in (batch.column(n) for n in id_columns if n in batch.schema.names)]
    if not columns:
        return pa.nulls(batch.num_rows, pa.string())
    ids = pc.coalesce(*columns) if len(columns) > 1 else columns[0]
    return pc.if_else(pc.equal(ids, unreadable), null, ids)


class TableScan:
    """The rows of a table (a Parquet file, a ``save_to_disk`` folder, ``hf:NAME``) read batch by
    batch. With ``keep``, only rows whose id (``_ids``) is in ``keep``, plus rows without a readable
    id (the caller's checks locate their error). Memory holds one batch and the kept rows. After
    ``rows()``: ``scanned`` (rows read), ``nbytes`` (bytes of the files read) and ``seen`` (the ids
    of ``watch`` met)."""

    def __init__(self, source: str | Path, role: str, id_columns: Sequence[str] = (),
                 keep: Set[str] | None = None, watch: Set[str] = frozenset()):
        self.source, self.role, self.id_columns = source, role, tuple(id_columns)
        self.keep, self.watch = keep, watch
        self.scanned, self.nbytes, self.seen = 0, 0, set()

    def _batches(self) -> Iterator[Any]:
        text = str(self.source)
        path = Path(self.source)
        if not text.startswith(HUB_PREFIX) and not path.is_dir():
            self.nbytes = path.stat().st_size
            return _parquet_batches(path)
        table = pick(load(self.source), self.role, text)
        self.nbytes = sum(Path(f["filename"]).stat().st_size for f in table.cache_files)
        return _dataset_batches(table)

    def rows(self) -> Iterator[tuple[str, dict]]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        keep = None if self.keep is None else pa.array(sorted(self.keep), pa.string())
        watch = pa.array(sorted(self.watch), pa.string())
        for batch in self._batches():
            start, self.scanned = self.scanned, self.scanned + batch.num_rows
            if keep is None:
                chosen = np.arange(batch.num_rows)
            else:
                ids = _ids(batch, self.id_columns)
                if len(watch):
                    self.seen.update(pc.filter(ids, pc.is_in(ids, value_set=watch)).to_pylist())
                mask = pc.or_(pc.is_in(ids, value_set=keep), pc.is_null(ids))
                chosen = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
            for i, row in zip(chosen, batch.take(pa.array(chosen, pa.int64())).to_pylist(), strict=True):
                yield f"{self.source}: row {start + int(i)}", row
