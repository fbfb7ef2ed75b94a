"""Progress for the CLI, on stderr: a tqdm bar on a terminal; in a log (stderr not a terminal) a
plain line at a steady interval and one at the end, such as

    annotate qwen: 1,200/5,000 (24%), 3.1 passage/s, ETA 20m 26s

``--no-progress`` (``enabled=False``) or ``UDCG_PROGRESS=0`` turns both off; ``UDCG_PROGRESS=1``
draws bars even off a terminal; ``UDCG_PROGRESS_INTERVAL`` sets the seconds between lines (default
30). ``bar(...).update(n)`` may be called from several threads at once.

Within a long unit of work (a chunk of 32 pairs on a CPU takes minutes) a model backend says how far
its call has got (``advance(done, of)`` after each batch); the resumable runner turns that into
updates of the step's bar (``metered``), so a log shows the first pairs within seconds of the model
loading, which ``note`` announces (``loading qwen2.5-coder-0.5b ...``)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

DEFAULT_INTERVAL = 30.0


def shown(enabled: bool = True) -> bool:
    """Whether bars are drawn: not turned off by the command (--no-progress) or UDCG_PROGRESS=0, and
    stderr is a terminal (UDCG_PROGRESS=1 forces them on)."""
    force = os.environ.get("UDCG_PROGRESS")
    return enabled and force != "0" and (force == "1" or sys.stderr.isatty())


def logged(enabled: bool = True) -> bool:
    """Whether progress goes to the log as plain lines: not turned off, and no bars drawn."""
    return enabled and os.environ.get("UDCG_PROGRESS") != "0" and not shown(enabled)


def interval() -> float:
    """Seconds between two progress lines in a log: ``UDCG_PROGRESS_INTERVAL``, else 30 (also, with
    a note on stderr, when the variable is not a positive number: progress never stops a job)."""
    value = os.environ.get("UDCG_PROGRESS_INTERVAL", "").strip()
    if not value:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if 0 < seconds < float("inf"):
        return seconds
    _bad_interval(value)
    return DEFAULT_INTERVAL


@functools.cache
def _bad_interval(value: str) -> None:  # said once per value, not once per step
    sys.stderr.write(f"UDCG_PROGRESS_INTERVAL={value!r} is not a positive number of seconds: "
                     f"progress lines every {DEFAULT_INTERVAL:.0f}s\n")


def bar(total: int, desc: str, unit: str = "item", enabled: bool = True):
    """Progress of ``total`` units of work, used as a context manager (or closed with ``.close()``)
    and told ``.update(n)`` as work gets done: a tqdm bar on a terminal, lines in a log (see the
    module), nothing when ``enabled=False`` (a command's --no-progress) or UDCG_PROGRESS=0."""
    if shown(enabled):
        from tqdm import tqdm

        return _LockedBar(tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, smoothing=0.1))
    if logged(enabled):
        return LogLines(total, desc, unit, interval())
    return _Off()


class _Off:
    def update(self, n: int = 1) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> _Off: return self
    def __exit__(self, *exc: object) -> None: ...


class _LockedBar:
    """A tqdm bar whose updates may come from several threads (tqdm's own ``update`` is not atomic)."""

    def __init__(self, bar: Any) -> None:
        self._bar, self._lock = bar, threading.Lock()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self._bar.update(n)

    def close(self) -> None:
        with self._lock:
            self._bar.close()

    def __enter__(self) -> _LockedBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


WORKED_SECONDS = 1.0  # a first update later than this after the start reports work done, not cached
STALLED_LINES = 10  # intervals without new work between two repeats of the same count


class LogLines:
    """Progress as plain lines on stderr, once work has been reported: every ``every`` seconds from a
    background thread when the count moved since the last line (each line once), and once when the
    work is all done or the bar is closed. A count that stays put is repeated only every
    ``STALLED_LINES`` intervals (5 minutes by default), saying for how long no work came in: a slow
    or a stuck step. A bar never updated (a step with nothing to do, one that never started) prints
    nothing.

    The rate counts the work reported after the first update, over the time between the first and
    the last update: the first update is often work found done in a cache, reported at once. Until
    a second update there is no rate and no ETA."""

    def __init__(self, total: int, desc: str, unit: str = "item", every: float = DEFAULT_INTERVAL,
                 stream: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self._stream, self._clock = stream, clock  # stream None: sys.stderr at the time of writing
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._start = clock()
        self.n = 0
        self._first: tuple[float, int] | None = None  # (time, count) after the first update
        self._last: float | None = None  # time of the latest update
        self._longest = 0.0  # the longest wait between two updates (the start counts as one)
        self._written: int | None = None  # the count of the latest line
        self._ended = False
        self._thread = threading.Thread(target=self._tick, name=f"progress {desc}", daemon=True)
        if total:
            self._thread.start()

    def update(self, n: int = 1) -> None:
        with self._lock:
            if self._ended:
                return
            now = self._clock()
            self._longest = max(self._longest, now - (self._start if self._last is None else self._last))
            self.n += n
            first = self._first is None
            if first:
                self._first = (now, self.n)
            self._last = now
            finished = bool(self.total) and self.n >= self.total
        if finished:
            self._end()
        elif first:
            self._write_count()

    def close(self) -> None:
        self._end()

    def __enter__(self) -> LogLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rate(self) -> float | None:
        """Units per second after the first update. Until a second update: the first update's work
        over the time it took from the start, when it took at least ``WORKED_SECONDS`` (work done,
        not found in a cache; the start's model loading included, so the first ETA errs long);
        None when it came at once (a cache) or before any update."""
        if self._first is None or self._last is None:
            return None
        if self._last <= self._first[0] or self.n <= self._first[1]:
            took = self._first[0] - self._start
            return self._first[1] / took if took >= WORKED_SECONDS and self.n == self._first[1] else None
        return (self.n - self._first[1]) / (self._last - self._first[0])

    def line(self, final: bool = False) -> str:
        """The line for now: done/total (percent), rate and the ETA, or at the end the time taken."""
        with self._lock:
            n, total, rate, elapsed = self.n, self.total, self.rate(), self._clock() - self._start
        parts = [f"{n:,}/{total:,} ({100 * n // total}%)" if total else f"{n:,}"]  # 99.6% is not 100%
        if rate is not None:
            parts.append(f"{_rate(rate)} {self.unit}/s")
        if final:
            parts.append(("done in " if total and n >= total else "stopped after ") + duration(elapsed))
        elif rate is not None and total:
            parts.append(f"ETA {duration(max(total - n, 0) / rate)}")
        return f"{self.desc}: {', '.join(parts)}"

    def _write_count(self) -> bool:
        """Write the line for now unless the latest line had this count; whether it wrote."""
        with self._lock:
            if self.n == self._written or self._ended:
                return False
            self._written = self.n
        self._write(self.line())
        return True

    def _tick(self) -> None:
        quiet, said = 0, 0
        while not self._stop.wait(self.every):
            if self._first is None:
                continue
            if self._write_count():
                quiet, said = 0, 0
                continue
            quiet += 1
            waited = self._clock() - (self._last or self._start)
            if quiet - said >= STALLED_LINES and waited >= 2 * self._longest:
                said = quiet
                self._write(f"{self.line()}; no new work for {duration(waited)}")

    def _end(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._stop.set()
        if self.total:
            self._thread.join()
            if self._first is not None:
                self._write(self.line(final=True))

    def _write(self, text: str) -> None:
        stream = self._stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()


def _rate(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}" if rate >= 1 else f"{rate:.2g}"


def duration(seconds: float) -> str:
    """``45s``, ``20m 26s``, ``3h 05m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


_LIBRARIES = {"enabled": True}  # what the command said of progress (follow_libraries), for the libraries' bars


def library_bars() -> bool:
    """Whether a library's own bars (ir_datasets building a docstore) are drawn: as ours, with the
    command's word on progress (``follow_libraries``; on, where no command said)."""
    return shown(_LIBRARIES["enabled"])


def follow_libraries(enabled: bool = True) -> None:
    """Give the model and data libraries' own bars (transformers' "Loading weights", ir_datasets'
    docstore) the same on/off as ours. Call before a model loads; works whether or not transformers
    is imported yet."""
    _LIBRARIES["enabled"] = enabled
    if shown(enabled):
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when transformers is first imported
    if sys.modules.get("transformers") is not None:  # imported (None: known missing)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


# ---------------------------------------------------------------- within a unit of work

_METER: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar("udcg_meter", default=None)


@contextlib.contextmanager
def metered(share_done: Callable[[float], None] | None) -> Iterator[None]:
    """Within the block, ``advance`` calls (a backend's batches) reach ``share_done(fraction)``:
    the share of the current model call computed so far, in [0, 1] (``udcg.resumable.fill`` turns
    it into updates of its step's bar). In this thread only; None: nothing is metered."""
    token = _METER.set(share_done)
    try:
        yield
    finally:
        _METER.reset(token)


def advance(done: int, of: int) -> None:
    """A model backend's word that ``done`` of the ``of`` rows of its current call are computed (say
    it after each batch). Nothing happens outside a ``metered`` block."""
    share_done = _METER.get()
    if share_done is not None and of > 0:
        share_done(min(max(done / of, 0.0), 1.0))


def note(text: str) -> None:
    """One line of a long step's progress on stderr that no bar carries (a model loading), where
    progress is shown: as the command said (``follow_libraries``; on where no command said) and not
    silenced by UDCG_PROGRESS=0."""
    enabled = _LIBRARIES["enabled"]
    if shown(enabled) or logged(enabled):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
