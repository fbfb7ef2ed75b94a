"""Files: JSON / JSONL reading with located errors, atomic writes and field checks.

Every reader raises ``InputError`` naming file, line/record, field and fix. Every writer writes a
temporary file beside the target and renames it, so an interrupted run never leaves a half file.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import re
import secrets
import stat
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from udcg.errors import InputError

MAX_FILE_BYTES = 2 * 1024**3
MAX_GZIP_RATIO = 100  # text compresses 3-20x; a gzip that expands more is a bomb or not data
# No reader's context holds more: a longer passage is a whole document pasted into one field.
MAX_PASSAGE_CHARS = 1_000_000


# ---------------------------------------------------------------- reading


def _check_readable(path: Path) -> os.stat_result:
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
    if st.st_size > MAX_FILE_BYTES:
        raise InputError(f"{path}: {st.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit (split the file)")
    return st


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


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
    """The UTF-8 text of a regular file (``.gz``: decompressed, with a size limit)."""
    path = Path(path)
    st = _check_readable(path)
    try:
        data = _read_gzip(path, st.st_size) if path.suffix == ".gz" else path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e} (check the file's permissions)") from None
    if not data:
        raise InputError(f"{path}: the file is empty (expected JSON or JSONL records)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: bytes that are not UTF-8 at offset {e.start} (re-save the file as UTF-8)") from None


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
        if not line.strip():
            continue
        obj = _loads(line, str(path), line_no)
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__} (one object per line)")
        yield line_no, obj


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


# ---------------------------------------------------------------- writing


def check_output_path(path: str | Path, flag: str = "-o", folder: bool = False) -> Path:
    """Refuse, before any work, an output path udcg must not replace: anything that exists and is
    not a regular file (a directory, symbolic link, device, FIFO, socket; with ``folder``: anything
    but a directory), a path under a file, or a folder that cannot be written."""
    path = Path(path)
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot use this output path: {e.strerror or e}") from None
    if st is not None:
        if folder and not stat.S_ISDIR(st.st_mode):
            raise InputError(f"{flag} {path}: is {_file_kind(st.st_mode)}, not a folder (give a new or existing folder)")
        if not folder and not stat.S_ISREG(st.st_mode):
            fix = "give a file path inside it, e.g. " + str(path / "out.jsonl") if stat.S_ISDIR(st.st_mode) else \
                "udcg replaces its outputs, so it writes only to regular files or new paths; give another path"
            raise InputError(f"{flag} {path}: is {_file_kind(st.st_mode)}, not a regular file ({fix})")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        if parent.is_symlink():
            raise InputError(f"{flag} {path}: folder {parent} is a broken symbolic link (fix the link or give another path)")
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: {parent} is a file, not a folder (give a path inside a folder)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot write into folder {parent} (permission denied; give a writable folder)")
    return path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text (UTF-8, \\n line ends) to path via a temporary file in the same folder and an
    atomic rename. Refuses to replace anything but a regular file (``check_output_path``); an OS
    error is an InputError."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """``atomic_write_text`` for bytes (e.g. a gzip file)."""
    path = check_output_path(path, "output")
    try:
        _atomic_write(path, data)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e} (check the folder, its permissions and free space)") from None


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # left by a run killed mid-write
        stale.unlink(missing_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    # Mode 0666 filtered by the process umask (the usual permissions, without touching the umask).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=2) + "\n")


def atomic_write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(dumps(r) + "\n" for r in rows))


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


def probability(value: Any, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: field {field!r} must be a number in [0, 1], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise InputError(f"{where}: field {field!r} = {value!r} is not a probability (give a value in [0, 1])")
    return v
