"""Files: JSON / JSONL reading with located errors, atomic writes, an append-only resumable cache,
and the authors' public JSON format (``GiovanniTRA/UDCG``).

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
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.records import Passage, Question

MAX_FILE_BYTES = 2 * 1024**3
MAX_GZIP_RATIO = 100  # text compresses 3-20x; a gzip that expands more is a bomb or not data
_UMASK = os.umask(0)
os.umask(_UMASK)
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
    """Write text to path via a temporary file in the same folder and an atomic rename. Refuses
    to replace anything but a regular file (``check_output_path``); an OS error is an InputError."""
    path = check_output_path(path, "output")
    try:
        _atomic_write(path, text)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e} (check the folder, its permissions and free space)") from None


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # left by a run killed mid-write
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
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


class AppendCache:
    """Append-only JSONL cache of finished work, keyed by a string. Survives kill -9.

    Each record is one line, flushed and fsynced as it completes. On open, a torn last line (the
    process died mid-write) is cut off; every complete line is kept.
    """

    def __init__(self, path: str | Path, key_field: str = "key") -> None:
        self.path = check_output_path(path, "cache")
        self.key_field = key_field
        self.done: dict[str, dict] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._load()
            self._f = open(self.path, "a", encoding="utf-8")
        except OSError as e:
            raise InputError(f"{self.path}: cannot open the cache: {e.strerror or e} (check the folder and its permissions)") from None

    def _load(self) -> None:
        """Every complete line must be a JSON object with a string key: a bad one is named, never
        skipped (skipping would silently redo or lose work). Only a torn last line is cut off."""
        raw = self.path.read_bytes()
        good = 0
        for line_no, line in enumerate(raw.splitlines(keepends=True), start=1):
            if not line.endswith(b"\n"):
                break  # the process died while writing this line
            try:
                obj = json.loads(line, parse_constant=_reject_constant, parse_int=_parse_int)
            except (ValueError, RecursionError):
                obj = None
            if not isinstance(obj, dict) or not isinstance(obj.get(self.key_field), str):
                what = "invalid JSON" if obj is None else f"not an object with a string {self.key_field!r}"
                raise InputError(f"{self.path}:{line_no}: cache line is {what} (the file was edited or damaged: delete "
                                 "this line to recompute it, or the cache file to start over)")
            self.done[obj[self.key_field]] = obj
            good += len(line)
        if good != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good)

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def append(self, record: dict) -> None:
        self._f.write(dumps(record) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.done[record[self.key_field]] = record

    def append_many(self, records: list[dict]) -> None:
        """Append several records in one write and one fsync (a chunk of finished work)."""
        self._f.write("".join(dumps(r) + "\n" for r in records))
        self._f.flush()
        os.fsync(self._f.fileno())
        for r in records:
            self.done[r[self.key_field]] = r

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> AppendCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


# ---------------------------------------------------------------- the authors' format


def question_from_authors(item: dict, where: str) -> Question:
    """One item of the authors' format: {example_id, question, passages:[{doc_id, text, is_relevant,
    models_info:{<model>:{no_res_prob}}}], answers?}."""
    qid = item.get("example_id", item.get("id"))
    if qid is None:
        raise InputError(f"{where}: missing field 'example_id' (every item needs an id)")
    qid = str(qid)
    text = require(item, "question", str, where, "every item needs the question text")
    raw_passages = require(item, "passages", list, where, "a list of {doc_id, text, is_relevant}")
    if not raw_passages:
        raise InputError(f"{where}: item {qid!r} has an empty 'passages' list (give at least one passage)")
    answers = item.get("answers", [])
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where}: item {qid!r}: 'answers' must be a list of strings")
    seen: set[str] = set()
    passages = []
    for j, p in enumerate(raw_passages):
        pw = f"{where}: passage {j}"
        if not isinstance(p, dict):
            raise InputError(f"{pw}: expected an object, got {type(p).__name__}")
        pid = str(p.get("doc_id", p.get("id", f"{qid}#{j}")))
        if pid in seen:
            raise InputError(f"{pw}: duplicate doc_id {pid!r} in item {qid!r} (ids must be unique within an item)")
        seen.add(pid)
        ptext = require(p, "text", str, pw, "every passage needs text")
        if len(ptext) > MAX_PASSAGE_CHARS:
            raise InputError(f"{pw}: field 'text' of passage {pid!r} holds {len(ptext):,} characters, over the "
                             f"{MAX_PASSAGE_CHARS:,} limit (split the document into passages of a few hundred words)")
        rel = p.get("is_relevant")
        if rel is not None and not isinstance(rel, bool):
            raise InputError(f"{pw}: field 'is_relevant' must be true/false, got {rel!r}")
        p_abs: dict[str, float] = {}
        info = p.get("models_info", {})
        if not isinstance(info, dict):
            raise InputError(f"{pw}: field 'models_info' must be an object {{model: {{no_res_prob}}}}")
        for model, entry in info.items():
            if not isinstance(entry, dict) or "no_res_prob" not in entry:
                raise InputError(f"{pw}: models_info[{model!r}] needs a 'no_res_prob' number")
            if entry["no_res_prob"] is not None:
                p_abs[model] = probability(entry["no_res_prob"], pw, f"models_info[{model!r}].no_res_prob")
        grade = p.get("grade")
        if grade is not None and (isinstance(grade, bool) or grade not in (1, 2, 3, 4, 5)):
            raise InputError(f"{pw}: field 'grade' = {grade!r} is not a utility grade (use an integer 1..5)")
        score = p.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)):
            raise InputError(f"{pw}: field 'score' = {score!r} must be a finite number (the retriever's score) or absent")
        passages.append(Passage(pid=pid, text=ptext, title=str(p.get("title", "")), relevant=rel,
                                grade=grade, score=None if score is None else float(score), p_abs=p_abs))
    return Question(qid=qid, text=text, answers=tuple(answers), passages=tuple(passages))


def read_authors(path: str | Path) -> tuple[list[dict], list[Question]]:
    """Read the authors' JSON (a list) or JSONL. Returns the raw items (to write back with added
    fields, keeping everything the user had) and the checked questions."""
    records = read_records(path)
    questions = [question_from_authors(obj, where) for where, obj in records]
    seen: dict[str, str] = {}
    for (where, _), q in zip(records, questions):
        if q.qid in seen:
            raise InputError(f"{where}: duplicate example_id {q.qid!r} (first at {seen[q.qid]}; ids must be unique)")
        seen[q.qid] = where
    return [obj for _, obj in records], questions


def question_to_authors(q: Question) -> dict:
    item: dict[str, Any] = {"example_id": q.qid, "question": q.text}
    if q.answers:
        item["answers"] = list(q.answers)
    passages = []
    for p in q.passages:
        d: dict[str, Any] = {"doc_id": p.pid, "text": p.text}
        if p.title:
            d["title"] = p.title
        if p.relevant is not None:
            d["is_relevant"] = p.relevant
        if p.grade is not None:
            d["grade"] = p.grade
        if p.score is not None:
            d["score"] = p.score
        if p.p_abs:
            d["models_info"] = {m: {"no_res_prob": v} for m, v in p.p_abs.items()}
        passages.append(d)
    item["passages"] = passages
    return item


def write_authors(path: str | Path, items: list[dict]) -> None:
    """Write a list of items as JSON (``.json``) or JSONL (any other suffix), atomically."""
    path = Path(path)
    if path.suffix == ".json":
        atomic_write_json(path, items)
    else:
        atomic_write_jsonl(path, items)
