"""Files: JSON / JSONL reading with located errors, atomic writes and field checks.

Every function that reads a file raises ``InputError`` naming file, line/record, field and fix. Every writer writes a
temporary file beside the target and renames it, so an interrupted run never leaves a half file.
"""

from __future__ import annotations

import codecs
import gzip
import json
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator, Set
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.io.writing import _file_kind
# The writers live in io/writing; io/files is where a reader of udcg's files finds them too (explicit re-exports).
from udcg.io.writing import atomic_write_bytes as atomic_write_bytes, atomic_write_json as atomic_write_json
from udcg.io.writing import atomic_write_jsonl as atomic_write_jsonl, atomic_write_text as atomic_write_text
from udcg.io.writing import check_output_path as check_output_path, dumps as dumps

MAX_FILE_BYTES = 2 * 1024**3
MAX_GZIP_RATIO = 100  # text compresses 3-20x; a gzip that expands more is a bomb or not data
# No reader's context holds more: a longer passage is a whole document pasted into one field.
MAX_PASSAGE_CHARS = 1_000_000
MAX_LINE_BYTES = 64 * 1024**2  # one line of a streamed file; a longer one is no record (nor MAX_PASSAGE_CHARS)


# ---------------------------------------------------------------- reading


def _check_readable(path: Path, whole: bool = True) -> os.stat_result:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (check the path)") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e} (check the path and its permissions)") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, not a file (give the path of a JSON/JSONL file)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: is {_file_kind(st.st_mode)}, not a regular file (save the data to a file and give its path)")
    if st.st_size == 0:
        raise InputError(f"{path}: the file is empty (expected JSON or JSONL records)")
    if whole and st.st_size > MAX_FILE_BYTES:
        raise InputError(f"{path}: {st.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit (split the file)")
    return st


def _read_gzip(path: Path, compressed_size: int) -> bytes:
    """Decompress, refusing more than MAX_GZIP_RATIO x the compressed size (at least 64 MiB) or
    MAX_FILE_BYTES before the bytes are held (a gzip bomb stops at the limit, not at its end)."""
    limit = min(MAX_FILE_BYTES, max(64 * 1024**2, MAX_GZIP_RATIO * compressed_size))
    chunks, total = [], 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1024**2):
                total += len(chunk)
                if total > limit:
                    raise InputError(f"{path}: decompresses to more than {limit:,} bytes ({compressed_size:,} compressed; "
                                     f"the limit is {MAX_GZIP_RATIO}x the compressed size, at least 64 MiB, at most "
                                     f"{MAX_FILE_BYTES:,}): not a data file, or split it into smaller files")
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: cannot read as gzip: {e} (compress the file again with gzip)") from None
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a regular file (``.gz``: decompressed, with a size limit), without a
    leading byte-order mark (``decode_utf8``)."""
    path = Path(path)
    st = _check_readable(path)
    try:
        data = _read_gzip(path, st.st_size) if path.suffix == ".gz" else path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e} (check the file's permissions)") from None
    if not data:
        raise InputError(f"{path}: the file is empty (expected JSON or JSONL records)")
    return decode_utf8(data, str(path))


_WIDE_BOMS = (codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # UTF-32 LE's begins as UTF-16 LE's
_WIDE_BOM_ERROR = "the file is UTF-16 or UTF-32 (it starts with that byte-order mark), not UTF-8 (re-save it as UTF-8)"


def decode_utf8(data: bytes, where: str) -> str:
    """UTF-8 text without its byte-order mark: a leading BOM (Windows editors write one) is dropped,
    never read as part of the first id; a UTF-16/32 file or bytes that are not UTF-8 are a located error."""
    if data.startswith(_WIDE_BOMS):
        raise InputError(f"{where}:1: {_WIDE_BOM_ERROR}")
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = skip + e.start
        line = data[:offset].count(b"\n") + 1
        raise InputError(f"{where}:{line}: bytes that are not UTF-8 at offset {offset} (re-save the file as UTF-8)") from None


def stream_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of a regular file read piece by piece (no MAX_FILE_BYTES limit); a ``.gz``
    decompressed as it is read, the gzip-bomb ratio (``_read_gzip``) bounding the stream. A UTF-8
    byte-order mark at the start of the file is dropped (as ``read_text`` does)."""
    path = Path(path)
    size = _check_readable(path, whole=False).st_size
    gz = path.suffix == ".gz"
    limit, total, line_no = max(64 * 1024**2, MAX_GZIP_RATIO * size) if gz else None, 0, 0
    try:
        with gzip.open(path, "rb") if gz else open(path, "rb") as f:
            while line := f.readline(MAX_LINE_BYTES + 1):
                line_no += 1
                total += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise InputError(f"{path}:{line_no}: a line of more than {MAX_LINE_BYTES:,} bytes (one record per "
                                     "line; split the document into passages of a few hundred words)")
                if limit is not None and total > limit:
                    raise InputError(f"{path}: decompresses to more than {limit:,} bytes ({size:,} compressed; the limit "
                                     f"is {MAX_GZIP_RATIO}x the compressed size, at least 64 MiB): not a data file")
                if line_no == 1 and line.startswith(_WIDE_BOMS):
                    raise InputError(f"{path}:1: {_WIDE_BOM_ERROR}")
                yield line_no, line[len(codecs.BOM_UTF8):] if line_no == 1 and line.startswith(codecs.BOM_UTF8) else line
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: cannot read as gzip: {e} (compress the file again with gzip)" if gz else
                         f"{path}: cannot read: {getattr(e, 'strerror', None) or e} (check its permissions)") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (write a finite number or null)")


MAX_INT_DIGITS = 300  # a larger integer is no count, id or grade, and overflows a float


def _parse_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS + 1:
        raise ValueError("integer too long")
    return int(text)


# A JSON string (skipped whole), a bare NaN / Infinity / -Infinity, or an over-long integer, outside strings.
_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)|(?<![\d.eE+-])(-?\d{%d,})(?![\d.eE])' % (MAX_INT_DIGITS + 1))
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')
# The value of an id key a scan can read without parsing: a plain string (group 1) or an integer (group 2).
_ID_VALUE = re.compile(rb'"([^"\\]*)"|(-?(?:0|[1-9][0-9]*))(?![0-9.eE])')


def _constant_error(text: str, where: str, first_line: int | None = None) -> InputError:
    """Name the line and field of the first NaN/Infinity or over-long integer in ``text`` (json gives no position)."""
    for m in _STRING_OR_CONSTANT.finditer(text):
        if m.group(1) or m.group(2):
            before = text[: m.start()]
            keys = _KEY.findall(before[-4000:])
            line = first_line if first_line is not None else before.count("\n") + 1
            field = f" field {keys[-1]!r} =" if keys else ""
            if m.group(2):
                return InputError(f"{where}:{line}:{field} an integer of {len(m.group(2).lstrip('-')):,} digits (at most "
                                  f"{MAX_INT_DIGITS} are read; write the value it stands for)")
            return InputError(f"{where}:{line}:{field} {m.group(1)} is not valid JSON (write a finite number, or null if unknown)")
    line = f":{first_line}" if first_line is not None else ""
    return InputError(f"{where}{line}: NaN or Infinity is not valid JSON (write a finite number, or null if unknown)")


def _loads(text: str, where: str, first_line: int | None = None) -> Any:
    """json.loads with located errors: no NaN/Infinity, no integer over MAX_INT_DIGITS digits, no
    nesting deeper than the interpreter's recursion limit."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        line = first_line if first_line is not None else e.lineno
        raise InputError(f"{where}:{line}: invalid JSON at column {e.colno}: {e.msg} (fix or remove this line)") from None
    except RecursionError:
        line = f":{first_line}" if first_line is not None else ""
        raise InputError(f"{where}{line}: JSON nested too deeply (lists or objects inside each other hundreds of levels "
                         "deep; records here are a few levels deep)") from None
    except ValueError:
        raise _constant_error(text, where, first_line) from None


def parse_json(text: str, where: str) -> Any:
    return _loads(text, where)


def read_json(path: str | Path) -> Any:
    path = Path(path)
    return parse_json(read_text(path), str(path))


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line; every line must be a JSON object."""
    path = Path(path)
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if line.strip():
            yield line_no, parse_record(line, str(path), line_no)


def parse_record(line: str, where: str, line_no: int) -> dict:
    """One JSONL line that must hold a JSON object, with ``where:line_no`` errors."""
    obj = _loads(line, where, line_no)
    if not isinstance(obj, dict):
        raise InputError(f"{where}:{line_no}: expected a JSON object, got {type(obj).__name__} (one object per line)")
    return obj


def read_records(path: str | Path) -> list[tuple[str, dict]]:
    """Read a JSON list of objects or a JSONL file. Returns (location, object) pairs."""
    path = Path(path)
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = parse_json(text, str(path))
        out = []
        for i, obj in enumerate(data):
            if not isinstance(obj, dict):
                raise InputError(f"{path}: record {i}: expected a JSON object, got {type(obj).__name__}")
            out.append((f"{path}: record {i}", obj))
        if not out:
            raise InputError(f"{path}: the list is empty (expected at least one record)")
        return out
    if stripped.startswith("{") and "\n" not in stripped.strip():
        return [(f"{path}:1", parse_json(text, str(path)))]
    if stripped.startswith("{") and not stripped.partition("\n")[0].rstrip().endswith("}"):
        try:  # one pretty-printed object, not JSONL
            obj = _loads(text, str(path))
        except InputError:
            obj = None
        if isinstance(obj, dict):
            return [(f"{path}:1", obj)]
    out = [(f"{path}:{n}", obj) for n, obj in iter_jsonl(path)]
    if not out:
        raise InputError(f"{path}: only blank lines (expected JSON or JSONL records)")
    return out


# ---------------------------------------------------------------- the wanted records of a large JSONL file


class JsonlScan:
    """The records of a streamed JSONL file whose id (first non-null of ``id_keys``, an integer as its
    string) is in ``keep``. A line whose id shows unparsed (a whole ``{...}``, one id key at top level,
    no ``{`` before it, a plain string or integer) is parsed only if kept; others are parsed, yielded if
    kept or without a readable id (the caller locates the error); one that is no JSON object is the
    error if it holds (or seems to) a kept id, else counted in ``skipped`` (``first_skipped``). After
    ``rows()``: ``scanned`` (records), ``nbytes`` (decompressed), ``seen`` (the ids of ``watch`` met)."""

    def __init__(self, path: str | Path, id_keys: tuple[str, ...], keep: Set[str], watch: Set[str] = frozenset()):
        self.path, self.id_keys, self.keep, self.watch = Path(path), id_keys, keep, watch
        self.scanned, self.nbytes, self.seen, self.skipped, self.first_skipped = 0, 0, set(), 0, ""
        names = b"|".join(re.escape(f.encode()) for f in id_keys)
        self._first = re.compile(rb'\s*\{\s*"(' + names + rb')"\s*:\s*')  # the usual line: the id key opens it
        self._key = re.compile(rb'"(' + names + rb')"\s*:\s*')
        self._loose = re.compile(rb'"(?:' + names + rb')"\s*:\s*"?([^"\\\s,}]+)')
        self._top, self._tail = id_keys[0].encode(), os.path.commonprefix([f[::-1] for f in id_keys])[::-1].encode() + b'"'

    def _fast_id(self, line: bytes) -> bytes | None:
        """The id, or None (parse it). A duplicate top-level ``id_keys[0]`` key is read by the first."""
        key = self._first.match(line)
        if key is None:
            key = self._key.search(line)
            if key is None or not line.lstrip().startswith(b"{") or line.find(b"{", line.find(b"{") + 1, key.start()) >= 0:
                return None
        value = _ID_VALUE.match(line, key.end())
        if value is None or not (line.endswith(b"}\n") or line.rstrip().endswith(b"}")) or (
                key.group(1) != self._top and line.find(self._tail, value.end()) >= 0 and self._key.search(line, value.end())):
            return None
        return value.group(1) if value.group(1) is not None else value.group(2)

    def rows(self) -> Iterator[tuple[str, dict]]:
        keep, watch, fast_id, nbytes, scanned = {d.encode() for d in self.keep}, {d.encode() for d in self.watch}, \
            self._fast_id, 0, 0
        for line_no, line in stream_lines(self.path):
            nbytes += len(line)
            if line.isspace():
                continue
            scanned += 1
            docid = fast_id(line)
            if docid is None:
                obj = self._parse(line, line_no, keep)
                yield from self.kept(f"{self.path}:{line_no}", obj) if obj is not None else ()
                continue
            if docid in watch:
                self.seen.add(docid.decode())
            if docid in keep:
                yield f"{self.path}:{line_no}", self._parse(line, line_no, None)
        self.nbytes, self.scanned = nbytes, scanned

    def kept(self, where: str, obj: dict) -> Iterator[tuple[str, dict]]:
        """``(where, obj)`` if its id is kept or unreadable (for records read otherwise, e.g. a JSON list)."""
        value = next((obj[f] for f in self.id_keys if obj.get(f) is not None), None)
        docid = value if isinstance(value, str) else str(value) if type(value) is int else None
        self.seen.update({docid} & self.watch)
        if docid is None or docid in self.keep:
            yield where, obj

    def _parse(self, line: bytes, line_no: int, keep: Set[bytes] | None) -> Any:
        """The line's object; unreadable: the error if ``keep`` is None or holds its id, else None, counted."""
        try:
            return parse_record(line.rstrip(b"\r\n").decode("utf-8"), str(self.path), line_no)
        except (InputError, UnicodeDecodeError) as e:
            e = InputError(f"{self.path}:{line_no}: bytes that are not UTF-8 at column {e.start + 1} (re-save "
                           "the file as UTF-8)") if isinstance(e, UnicodeDecodeError) else e
            guess = self._loose.search(line)
            if keep is None or (guess is not None and guess.group(1) in keep):
                raise e from None
            self.skipped += 1
            self.first_skipped = self.first_skipped or str(e)
            return None


# ---------------------------------------------------------------- field checks


def require(obj: dict, field: str, kind: type | tuple[type, ...], where: str, fix: str) -> Any:
    if field not in obj or obj[field] is None:
        raise InputError(f"{where}: missing field {field!r} ({fix})")
    value = obj[field]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"{where}: field {field!r} must be {name}, got {type(value).__name__} ({fix})")
    return value


def checked_probability(value: Any, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: field {field!r} must be a number in [0, 1], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise InputError(f"{where}: field {field!r} = {value!r} is not a probability (give a value in [0, 1])")
    return v
