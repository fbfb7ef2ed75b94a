"""TREC run files read column by column (pyarrow's CSV parser), for runs of millions of lines.

``read_run_columns(path)`` returns the same run as ``udcg.io.trec.read_run`` as columns: the
query of each line (an index into the run's qids, in order of first appearance), its docid and its
score, lines in file order. It is the fast path of ``udcg score --run`` and ``udcg compare``.

The fast path takes a file only when pyarrow splits it exactly as ``str.split()`` does: one
delimiter (single spaces, or single tabs: the first line decides), no other whitespace (a ``\\r``
only in ``\\r\\n``), no empty field, six fields per line, UTF-8 without a BOM, finite scores and no
(qid, docid) twice. The checks read the file 4 MiB at a time (a ``.gz`` is decompressed first, with
``read_text``'s limits); pyarrow then parses it itself, 16 MiB at a time. Anything else (a file
with two spaces somewhere, a bad line, ...) is read by ``read_run``, line by line: a valid file
gives the same run, a bad one the same located error (file:line, field, fix).

Duplicates are found with a 64-bit hash of (query, docid) per line; two equal hashes send the file
to ``read_run``, which decides exactly.
"""

from __future__ import annotations

import codecs
import logging
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from udcg.errors import InputError
from udcg.io.files import MAX_FILE_BYTES, read_text
from udcg.io.trec import read_run

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

COLUMNS = ("qid", "Q0", "docid", "rank", "score", "tag")
BLOCK_BYTES = 1 << 24  # pyarrow parses the file in blocks of this size (one arrow chunk each)
SCAN_BYTES = 1 << 22  # the checks before it read the file in blocks of this size
# Non-ASCII whitespace or line breaks (str.split / str.splitlines), or a byte-order mark (read_run refuses one inside the file)
_UNICODE_SPACE = re.compile(r"[^\S\t\n\r ]|\ufeff")


@dataclass(frozen=True, eq=False)
class RunColumns:
    """A run as columns: line ``i`` ranks ``docids[i]`` with ``scores[i]`` for query
    ``qids[query[i]]``. ``qids`` are in order of first appearance; lines in file order."""

    qids: tuple[str, ...]
    query: np.ndarray  # int32 per line
    docids: pa.ChunkedArray  # arrow strings, one per line
    scores: np.ndarray  # float64 per line

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def from_run(cls, run: Mapping[str, Mapping[str, float]]) -> RunColumns:
        """The columns of a ``{qid: {docid: score}}`` dict (queries and documents in dict order)."""
        import pyarrow as pa

        lengths = np.fromiter(map(len, run.values()), np.int64, len(run))
        query = np.repeat(np.arange(len(run), dtype=np.int32), lengths)
        docids = pa.chunked_array([pa.array([d for docs in run.values() for d in docs], pa.string())])
        scores = np.fromiter((s for docs in run.values() for s in docs.values()), np.float64, int(lengths.sum()))
        return cls(tuple(run), query, docids, scores)

    def to_run(self) -> dict[str, dict[str, float]]:
        """Back to ``{qid: {docid: score}}`` (slow: one Python object per line; for tests and small runs)."""
        run: dict[str, dict[str, float]] = {qid: {} for qid in self.qids}
        for q, docid, score in zip(self.query.tolist(), self.docids.to_pylist(), self.scores.tolist()):
            run[self.qids[q]][docid] = score
        return run


def read_run_columns(path: str | Path) -> RunColumns:
    """The run of ``path`` as columns: pyarrow's CSV parser when the file is plain (module doc),
    else ``read_run`` (same run, or the same located error)."""
    try:
        columns = _fast_columns(Path(path))
    except ImportError:  # pyarrow missing: the line-by-line parser does it all
        columns = None
    return columns if columns is not None else RunColumns.from_run(read_run(path))


def _fast_columns(path: Path) -> RunColumns | None:
    source = _source(path)
    if source is None:
        return None
    try:
        delimiter = _plain(_blocks(source))
    except OSError:
        return None
    if delimiter is None:
        log.debug("%s: not a plain single-delimiter file; read line by line", path)
        return None
    table = _parse(source, delimiter)
    if table is None or table.num_rows == 0:
        return None
    columns = _columns(table, path)
    del table
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # the parser's buffers and the qid column, back to the system
    return columns


def _source(path: Path) -> Path | bytes | None:
    """A plain regular file under the size limit (its path: pyarrow reads it itself, a block at a
    time); a ``.gz``, decompressed; None when ``read_run`` should look at the file (it then names
    the problem)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or not 0 < st.st_size <= MAX_FILE_BYTES:
            return None
        return read_text(path).encode("utf-8") if path.suffix == ".gz" else path
    except (OSError, InputError):
        return None


def _blocks(source: Path | bytes) -> Iterator[bytes]:
    if isinstance(source, bytes):
        yield from (source[i: i + SCAN_BYTES] for i in range(0, len(source), SCAN_BYTES))
        return
    with open(source, "rb") as f:
        while block := f.read(SCAN_BYTES):
            yield block


def _plain(blocks: Iterator[bytes]) -> bytes | None:
    """The delimiter (b" " or b"\\t", as on the first line) when pyarrow splits the file as
    ``str.split()`` would, else None: below byte 32 only "\\n", the delimiter, "\\r\\n" and NUL; no
    empty field (a delimiter at the start or end of a line, or two in a row); UTF-8 without a BOM
    or other whitespace. Read a block at a time; the bytes are counted with numpy."""
    head, first = b"", []
    for block in blocks:  # up to the end of the first line (64 KiB at most)
        first.append(block)
        head += block
        if b"\n" in head.lstrip(b"\r\n") or len(head) > 1 << 16:
            break
    if not head or head.startswith(codecs.BOM_UTF8):
        return None
    delimiter = 9 if b"\t" in head.lstrip(b"\r\n").partition(b"\n")[0] else 32
    previous, carriage, decoder = 10, False, None
    for block in chain(first, blocks):
        arr = np.frombuffer(block, np.uint8)
        ok, carriage = _plain_block(arr, delimiter, previous, carriage)
        if not ok:
            return None
        previous = int(arr[-1])
        if not block.isascii():
            decoder = decoder or codecs.getincrementaldecoder("utf-8")()
            try:
                if _UNICODE_SPACE.search(decoder.decode(block)):
                    return None
            except UnicodeDecodeError:
                return None
    if carriage or previous == delimiter:
        return None
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return None
    return bytes([delimiter])


def _plain_block(arr: np.ndarray, delimiter: int, previous: int, carriage: bool) -> tuple[bool, bool]:
    """(whether the block passes, whether it ends with "\\r"), given the byte before it
    (``previous``: 10 at the start of the file) and whether that byte was a "\\r"."""
    newline, split = arr == 10, arr == delimiter
    allowed = np.count_nonzero(newline) + (np.count_nonzero(split) if delimiter == 9 else 0)
    if delimiter == 9 and np.count_nonzero(arr == 32):
        return False, False
    control = np.count_nonzero(arr < 32)
    ends = newline
    if control != allowed:  # "\r" or NUL (not whitespace), or another control byte
        cr = arr == 13
        if control != allowed + np.count_nonzero(cr) + np.count_nonzero(arr == 0):
            return False, False
        if (cr[:-1] & ~newline[1:]).any():  # a lone "\r" ends a line for Python
            return False, False
        ends = newline | cr
    if carriage and not newline[0]:
        return False, False
    # an empty field: a delimiter after a line break or a delimiter, or before a line break
    if split[0] and previous in (delimiter, 10, 13) or ends[0] and previous == delimiter:
        return False, False
    if (split[:-1] & (split[1:] | ends[1:])).any() or (ends[:-1] & split[1:]).any():
        return False, False
    return True, bool(ends is not newline and arr[-1] == 13)


def _parse(source: Path | bytes, delimiter: bytes) -> Any:
    """qid, docid and score (float64) as arrow columns, or None when a line does not have six fields."""
    import pyarrow as pa
    import pyarrow.csv as csv

    options = dict(
        read_options=csv.ReadOptions(column_names=list(COLUMNS), block_size=BLOCK_BYTES),
        parse_options=csv.ParseOptions(delimiter=delimiter.decode(), quote_char=False, double_quote=False,
                                       escape_char=False, newlines_in_values=False, ignore_empty_lines=True),
        convert_options=csv.ConvertOptions(
            include_columns=["qid", "docid", "score"],
            column_types={"qid": pa.string(), "docid": pa.string(), "score": pa.float64()},
            null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False))
    try:
        if isinstance(source, bytes):
            return csv.read_csv(pa.py_buffer(source), **options)
        with pa.OSFile(str(source)) as f:  # no decompression by extension: the bytes as read_run reads them
            return csv.read_csv(f, **options)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowIndexError) as e:
        log.debug("pyarrow cannot read the run (%s); read line by line", str(e).splitlines()[0] if str(e) else e)
        return None


def _columns(table: Any, path: Path) -> RunColumns | None:
    import pyarrow.compute as pc

    scores = table.column("score").to_numpy()
    if not np.isfinite(scores).all():
        return None
    encoded = pc.dictionary_encode(table.column("qid")).combine_chunks()
    query = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    docids = table.column("docid")
    if _has_twice(query, docids):
        log.debug("%s: a (qid, docid) pair may appear twice; read line by line", path)
        return None
    return RunColumns(tuple(encoded.dictionary.to_pylist()), query, docids, scores)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ODD = np.uint64(0xBF58476D1CE4E5B9)  # multiplying by an odd number is a bijection of 64-bit words
_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(8)] + [2**64 - 1], dtype=np.uint64)


def string_hashes(chunk: Any, seed: np.ndarray) -> np.ndarray:
    """A 64-bit hash of (seed, string) for each string of an arrow string array, read 8 bytes at a
    time: equal seeds and strings, equal hashes (distinct ones rarely: a collision only sends the
    file to the line-by-line parser)."""
    import pyarrow as pa

    _, offsets_buf, data_buf = chunk.buffers()
    wide = pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)
    offsets = np.frombuffer(offsets_buf, np.int64 if wide else np.int32)[chunk.offset: chunk.offset + len(chunk) + 1]
    raw = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    padded = np.zeros(raw.size + 8, np.uint8)
    padded[: raw.size] = raw
    words = np.ndarray(shape=(raw.size + 1,), dtype=np.uint64, buffer=padded, strides=(1,))  # a word at every byte
    starts, lengths = offsets[:-1], np.diff(offsets)
    h = seed.astype(np.uint64) * _GOLDEN + lengths.astype(np.uint64)
    for k in range(0, int(lengths.max()) if lengths.size else 0, 8):
        rows = slice(None) if k == 0 and lengths.min() > 0 else np.flatnonzero(lengths > k)
        word = words[starts[rows] + k] & _MASKS[np.minimum(lengths[rows] - k, 8)]
        h[rows] = (h[rows] ^ word) * _ODD
    return h


def _has_twice(query: np.ndarray, docids: Any) -> bool:
    """Whether two lines may hold the same (query, docid): equal 64-bit hashes."""
    bounds = np.cumsum([0] + [len(c) for c in docids.chunks])
    key = np.concatenate([string_hashes(c, query[bounds[i]: bounds[i + 1]]) for i, c in enumerate(docids.chunks)])
    key.sort()
    return bool((key[1:] == key[:-1]).any())
