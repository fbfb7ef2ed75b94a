"""Progress in a log: when stderr is not a terminal, ``udcg.progress.bar`` prints a plain line
(done/total, rate, ETA) every UDCG_PROGRESS_INTERVAL seconds and one at the end; --no-progress and
UDCG_PROGRESS=0 silence it; a terminal (or UDCG_PROGRESS=1) keeps the tqdm bar. Updates may come
from several threads."""

from __future__ import annotations

import io
import re
import sys
import threading
import time
from pathlib import Path

import pytest

from udcg import progress
from udcg.progress import LogLines, bar

ROOT = Path(__file__).resolve().parents[1]

LINE = re.compile(r"^(?P<desc>.+): (?P<n>[\d,]+)/(?P<total>[\d,]+) \((?P<pct>\d+)%\)"
                  r"(, (?P<rate>[\d.,e+-]+) (?P<unit>\w+)/s)?(, (ETA (?P<eta>.+)|done in .+|stopped after .+))?$")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def no_terminal(monkeypatch):
    monkeypatch.delenv("UDCG_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)


def test_line_format_rate_and_eta():
    clock, out = Clock(), io.StringIO()
    lines = LogLines(5000, "annotate qwen", "passage", every=3600, stream=out, clock=clock)
    assert lines.line() == "annotate qwen: 0/5,000 (0%)"  # no rate before two updates
    lines.update(200)  # e.g. the cached part, reported at once: not part of the rate
    clock.t += 100
    lines.update(1000)  # 1,000 in 100 s after the first update
    assert lines.rate() == pytest.approx(10.0)
    assert lines.line() == "annotate qwen: 1,200/5,000 (24%), 10.0 passage/s, ETA 6m 20s"
    clock.t += 5
    lines.close()
    assert out.getvalue() == ("annotate qwen: 200/5,000 (4%)\n"  # the first update, written at once (issue #50)
                              "annotate qwen: 1,200/5,000 (24%), 10.0 passage/s, stopped after 1m 45s\n")


def test_the_first_line_after_real_work_has_a_rate_and_an_eta():
    """Issue #34: in a log the first lines had no rate or ETA (one update so far: the first chunk)."""
    clock = Clock()
    lines = LogLines(160, "annotate qwen", "pair", every=3600, stream=io.StringIO(), clock=clock)
    clock.t += 10
    lines.update(32)  # the first chunk, computed: 10 s after the start
    clock.t += 20
    assert lines.line() == "annotate qwen: 32/160 (20%), 3.2 pair/s, ETA 40s"
    cached = LogLines(160, "annotate qwen", "pair", every=3600, stream=io.StringIO(), clock=Clock())
    cached.update(128)  # found in the cache at once: no rate from it
    assert cached.line() == "annotate qwen: 128/160 (80%)"


def test_durations_and_rates():
    assert [progress.duration(s) for s in (0, 44.6, 60, 1226, 3600, 11100)] == \
        ["0s", "45s", "1m 00s", "20m 26s", "1h 00m", "3h 05m"]
    assert [progress._rate(r) for r in (3.14159, 0.0523, 12.34, 1234.5)] == ["3.1", "0.052", "12.3", "1,234"]


def test_lines_at_the_interval_and_one_at_the_end():
    out = io.StringIO()
    with LogLines(40, "judge grade", "item", every=0.05, stream=out) as lines:
        for _ in range(4):
            time.sleep(0.08)
            lines.update(10)
    text = out.getvalue().splitlines()
    assert len(text) >= 3, text  # lines every 0.05 s over ~0.3 s, then the final one
    assert all(LINE.match(t) for t in text), text
    assert text[-1].startswith("judge grade: 40/40 (100%)") and ", done in " in text[-1]
    assert sum("done in" in t for t in text) == 1


def test_reaching_the_total_ends_the_lines_before_close():
    out = io.StringIO()
    lines = LogLines(3, "judge relevance", "pair", every=0.02, stream=out)
    lines.update(3)
    ended = out.getvalue()
    time.sleep(0.1)  # the ticker stopped: nothing more is written, not even by close()
    lines.close()
    assert out.getvalue() == ended and ended.count("\n") == 1 and "done in" in ended
    assert not lines._thread.is_alive()


def test_a_count_that_stays_put_is_repeated_only_every_ten_intervals():
    """Issue #34: in a log every line was printed twice (a 30 s interval, slower chunks); now each
    count once, and a stalled one again after 10 intervals, saying how long nothing came in."""
    out = io.StringIO()
    with LogLines(10, "answer contexts", "prompt", every=0.01, stream=out) as lines:
        lines.update(4)
        time.sleep(0.6)
    text = out.getvalue().splitlines()
    assert text[0] == "answer contexts: 4/10 (40%)" and text.count("answer contexts: 4/10 (40%)") == 1
    stalled = [t for t in text if "no new work for" in t]
    assert 1 <= len(stalled) <= 7 and len(text) <= 9  # before: one line per interval, about 60
    assert text[-1].startswith("answer contexts: 4/10 (40%), stopped after")


@pytest.mark.parametrize("total", [0, 10])
def test_a_bar_never_updated_prints_nothing(total):
    out = io.StringIO()  # a step with nothing to do, or one opened but never used
    with LogLines(total, "judge relevance", "pair", every=0.01, stream=out):
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_updates_from_many_threads_are_all_counted(no_terminal, monkeypatch, capsys):
    monkeypatch.setenv("UDCG_PROGRESS_INTERVAL", "0.01")
    n_threads, per_thread = 8, 2000

    def hammer(b):
        def work():
            for _ in range(per_thread):
                b.update(1)
        threads = [threading.Thread(target=work) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    with bar(total=n_threads * per_thread * 2, desc="annotate", unit="passage") as b:
        assert isinstance(b, LogLines)
        hammer(b)
        assert b.n == n_threads * per_thread
    monkeypatch.setenv("UDCG_PROGRESS", "1")  # the tqdm bar, forced off a terminal
    with bar(total=n_threads * per_thread, desc="annotate", unit="passage") as b:
        hammer(b)
        assert b._bar.n == n_threads * per_thread
    capsys.readouterr()


def test_which_progress_where(no_terminal, monkeypatch, capsys):
    monkeypatch.setenv("UDCG_PROGRESS_INTERVAL", "60")
    with bar(2, "step", "item") as b:  # a log: lines
        assert isinstance(b, LogLines)
        b.update(2)
    assert capsys.readouterr().err.startswith("step: 2/2 (100%), done in ")
    with bar(2, "step", "item", enabled=False) as b:  # --no-progress
        b.update(2)
    monkeypatch.setenv("UDCG_PROGRESS", "0")
    with bar(2, "step", "item") as b:
        b.update(2)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("UDCG_PROGRESS", "1")
    with bar(2, "step", "item") as b:  # forced bars: tqdm, not lines
        assert type(b).__name__ == "_LockedBar"
        b.update(2)
    assert "step: 2/2 (100%)" not in capsys.readouterr().err
    monkeypatch.delenv("UDCG_PROGRESS")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert not progress.logged() and progress.shown()


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf"])
def test_a_bad_interval_falls_back_to_30s_with_a_note(monkeypatch, capsys, value):
    monkeypatch.setenv("UDCG_PROGRESS_INTERVAL", value)
    progress._bad_interval.cache_clear()
    assert progress.interval() == 30.0
    assert progress.interval() == 30.0
    err = capsys.readouterr().err
    assert err.count("UDCG_PROGRESS_INTERVAL") == 1 and "30s" in err
    monkeypatch.setenv("UDCG_PROGRESS_INTERVAL", "2.5")
    assert progress.interval() == 2.5


def test_annotate_in_a_log_prints_progress_lines(tmp_path, tiny_model_dir, monkeypatch, capsys, no_terminal):
    from udcg.cli import main

    monkeypatch.setenv("UDCG_PROGRESS_INTERVAL", "0.05")
    src = str(ROOT / "udcg/data/authors-sample.json")
    argv = ["annotate", src, "--limit", "2", "--model", str(tiny_model_dir), "--chunk-size", "2"]
    assert main([*argv, "-o", str(tmp_path / "a.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    done = [t for t in err if ", done in " in t]
    assert len(done) == 1 and re.match(r"^annotate .+: 10/10 \(100%\), [\d.,]+ passage/s, done in \d+s$", done[0]), err
    assert not any("\r" in t or "|" in t for t in err)  # no bar drawn
    assert main([*argv, "-o", str(tmp_path / "b.json"), "--no-progress"]) == 0
    assert not [t for t in capsys.readouterr().err.splitlines() if "10/10" in t]
