"""Writing outputs: the output-path check, atomic writes (a temporary file locked while written,
fsync, rename) and compact JSON. Re-exported by ``udcg.io.files``."""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from udcg.errors import EnvironmentFault, InputError, UdcgError


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


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


def check_outputs(outputs: Iterable[tuple[str, str | Path, bool]], inputs: Iterable[tuple[str, str | Path]],
                  in_place: bool = False) -> None:
    """Before any work, for the (flag, path, is a folder) ``outputs`` of one command or API call:
    each path may be written (``check_output_path``), no two are one file, and none replaces one of
    the (option, path) ``inputs``: not an input file (after links), not an existing file inside an
    input folder, not an input folder itself (unless ``in_place``: ``report`` rebuilds its run
    folder on purpose), a folder output neither holds an input (``-o`` the folder of the runs) nor
    lies inside an input folder, existing or new (``-o`` a BEIR corpus' ``qrels/``). Inputs that do
    not exist, or are URLs, are left out."""
    given = [(flag, Path(path), folder) for flag, path, folder in outputs]
    existing = []
    for option, item in inputs:
        if not str(item) or str(item).startswith(("http://", "https://")):
            continue
        path = Path(item).expanduser()
        try:
            if path.exists():
                existing.append((option, path))
        except OSError:  # a name too long for a path, and the like: not a file given
            continue
    for flag, path, folder in given:  # first: an output naming an input gets that message, whatever its kind
        _check_not_an_input(flag, path, existing, in_place, folder)
    for flag, path, folder in given:
        check_output_path(path, flag, folder=folder)
    for flag, path, folder in given:  # then: a folder output, new or not, never lies in an input folder
        if folder and not in_place:
            _check_not_inside_an_input(flag, path, existing)
    seen: dict[Path, str] = {}
    for flag, path, _ in given:
        key = path.expanduser().resolve()
        if key in seen:
            raise InputError(f"{flag} {path}: the same file as {seen[key]} (give each output its own path)")
        seen[key] = flag


def _check_not_inside_an_input(flag: str, out: Path, inputs: list[tuple[str, Path]]) -> None:
    real = out.expanduser().resolve()
    for option, path in inputs:
        if path.is_dir() and real.is_relative_to(path.resolve()):
            where = "is" if real == path.resolve() else "lies inside"
            raise InputError(f"{flag} {out}: {where} the input folder {option} {path}, which this command reads; "
                             "write the output folder somewhere else (an output never goes into an input)")


def _check_not_an_input(flag: str, out: Path, inputs: list[tuple[str, Path]], in_place: bool, folder: bool) -> None:
    target = out.expanduser()
    if not target.exists():
        return
    real = target.resolve()
    for option, path in inputs:
        if os.path.samefile(target, path):
            if path.is_dir() and in_place:
                continue
            where = "is"
        elif path.is_dir() and real.is_file() and real.is_relative_to(path.resolve()):
            where = "lies inside"
        elif folder and not in_place and real.is_dir() and path.resolve().is_relative_to(real):
            where = "holds"  # deleting the output folder, as a message may advise, would delete the input
        else:
            continue
        raise InputError(f"{flag} {out}: {where} the input {option} {path}, which this command reads; write the "
                         "output somewhere else (an output never replaces an input)")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text (UTF-8, \\n line ends) to path via a temporary file in the same folder and an
    atomic rename. Refuses to replace anything but a regular file (``check_output_path``); an OS
    error is one line (``write_error``), the previous file left as it was."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """``atomic_write_text`` for bytes (e.g. a gzip file)."""
    path = check_output_path(path, "output")
    existed = path.exists()
    try:
        _atomic_write(path, data)
    except OSError as e:
        kept = f"the previous {path.name} is unchanged" if existed else "no file was written"
        raise write_error(e, f"{path}: cannot write", kept) from None


# A path the user chose that cannot be written: bad input (exit 2). Any other OSError while writing
# (a full disk, a quota, an I/O error) is a fault of the machine (exit 1).
_PATH_ERRNOS = frozenset((errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG,
                          errno.ELOOP, errno.ENOENT, errno.EEXIST))


def write_error(e: OSError, what: str, kept: str) -> UdcgError:
    """One line for an OSError while writing: ``what`` failed (with where), why, what was ``kept`` and
    how to go on. A path problem is an ``InputError``; a full disk or another fault of the machine an
    ``EnvironmentFault``."""
    why = e.strerror or str(e)
    code = errno.errorcode.get(e.errno or 0)
    if e.errno in _PATH_ERRNOS:
        return InputError(f"{what}: {why}; {kept} (check the folder and its permissions, or give another path)")
    fix = "free some space there" if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else "fix the disk or folder"
    return EnvironmentFault(f"{what}: {why}{f' ({code})' if code else ''}; {kept}; {fix}, then rerun the same "
                            "command: finished work is reused, not computed again")


def _atomic_write(path: Path, data: bytes) -> None:
    """Temporary file (locked while written), fsync, rename. Temporaries no process holds were left
    by a run killed mid-write and are removed; another process's write in progress is left alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        _remove_if_unheld(stale)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        # Mode 0666 filtered by the process umask (the usual permissions, without touching the umask).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:  # not removed by another process's cleanup before the lock
            break
        os.close(fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_if_unheld(tmp: Path) -> None:
    try:
        fd = os.open(tmp, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        tmp.unlink(missing_ok=True)
    except OSError:  # held: another process is writing it now
        pass
    finally:
        os.close(fd)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=2) + "\n")


def atomic_write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(dumps(r) + "\n" for r in rows))


