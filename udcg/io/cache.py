"""One append-only, content-keyed JSONL cache of finished work: every model step resumes from it."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from pathlib import Path

from udcg.errors import InputError
from udcg.io.files import _parse_int, _reject_constant, check_output_path, dumps
from udcg.io.writing import write_error

log = logging.getLogger(__name__)
_HELD: dict[Path, int] = {}  # caches this process holds the lock of -> how many open handles
_HELD_LOCK = threading.Lock()


class AppendCache:
    """Append-only JSONL cache of finished work, keyed by a string. Survives kill -9.

    Each record is one line, flushed and fsynced as it completes. On open, a torn last line (the
    process died mid-write) is cut off; every complete line is kept.

    One writer process at a time: the cache is locked (``flock``) while open. A second process that
    opens it waits until the first closes it, then reads what the first finished, so two commands on
    one output folder never compute a record twice. Handles within one process share the lock.

    A write that fails (a full disk) is cut off the file again, so the cache holds exactly the
    records appended before it, and raises one line (``udcg.io.writing.write_error``).
    """

    def __init__(self, path: str | Path, key_field: str = "key") -> None:
        self.path = check_output_path(path, "cache")
        self.key_field = key_field
        self.done: dict[str, dict] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "ab", buffering=0)  # unbuffered: a failed write leaves nothing pending
            self._key = self._lock()
            self._load()
        except OSError as e:
            raise write_error(e, f"{self.path}: cannot open the cache", "nothing was written") from None

    def _lock(self) -> Path:
        key = self.path.resolve()
        with _HELD_LOCK:
            if _HELD.get(key):
                _HELD[key] += 1
                return key
            try:
                fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("%s: another udcg process is writing this cache; waiting for it to finish (its finished "
                            "work is reused, not computed again)", self.path)
                fcntl.flock(self._f.fileno(), fcntl.LOCK_EX)
            _HELD[key] = 1
            return key

    def _load(self) -> None:
        """Every complete line must be a JSON object with a string key: a bad one is named, never
        skipped (skipping would silently redo or lose work). Only a torn last line is cut off."""
        raw = self.path.read_bytes()
        if not raw:
            return
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
            os.ftruncate(self._f.fileno(), good)

    def line_of(self, key: str) -> int | None:
        """The line of the file that holds ``key``'s record (its last one), for a message; None if none."""
        found = None
        with open(self.path, "rb") as f:
            for line_no, line in enumerate(f, start=1):
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict) and obj.get(self.key_field) == key:
                    found = line_no
        return found

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def append(self, record: dict) -> None:
        self.append_many([record])

    def append_many(self, records: list[dict], sync: bool = True) -> None:
        """Append several records in one write and one fsync (a chunk of finished work). With
        ``sync=False`` the write is flushed to the operating system (it survives a kill -9 of this
        process) and fsynced by a later call with ``sync=True`` (an empty one syncs only)."""
        data = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
        start = None
        try:
            start = os.fstat(self._f.fileno()).st_size  # the end of the last whole record (the file is locked)
            view = memoryview(data)
            while view:
                view = view[self._f.write(view):]
            if sync:
                os.fsync(self._f.fileno())
        except OSError as e:
            self._cut_back(start)
            raise write_error(e, f"{self.path}: cannot append {len(records)} records to the cache",
                              f"the {len(self.done)} records finished before are kept in it") from None
        for r in records:
            self.done[r[self.key_field]] = r

    def _cut_back(self, size: int | None) -> None:
        """Cut what a failed write left after the last whole record (freeing its space), so a rerun
        reads the records written before it; if that fails too, the next open cuts a torn last line."""
        try:
            if size is None:
                return
            os.ftruncate(self._f.fileno(), size)
            os.fsync(self._f.fileno())
        except OSError:
            log.warning("%s: could not cut a failed write off the cache; it is cut when the cache is next opened", self.path)

    def close(self) -> None:
        if self._f.closed:
            return
        with _HELD_LOCK:
            _HELD[self._key] -= 1
            if not _HELD[self._key]:
                del _HELD[self._key]
                fcntl.flock(self._f.fileno(), fcntl.LOCK_UN)
        self._f.close()

    def __enter__(self) -> AppendCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
