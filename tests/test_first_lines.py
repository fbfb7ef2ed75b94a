"""Issue #50 item 5: no silent minutes in a log. When stderr is a file, `annotate` says at once what
it will compute and about how long it takes, that the model is loading and when it has loaded, and
shows the first pairs as the backend's batches finish, before the first chunk (32 pairs, minutes
on a CPU) is done; "no new work" is said only for a wait longer than twice the longest one so far.
No test here depends on timing to pass: each asserts an order of lines, or runs a clock of its own."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from udcg import progress, resumable
from udcg.io.cache import AppendCache
from udcg.progress import LogLines

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_chunk_reports_its_batches_and_its_last_request_once_saved(tmp_path):
    seen: list[int] = []

    def compute(payloads):  # a backend's two batches of four, then the chunk is saved
        progress.advance(4, 8)
        assert seen == [4]
        progress.advance(8, 8)
        assert seen == [4, 3]  # the chunk's last request waits for the save
        return [{"v": p} for p in payloads]

    with AppendCache(tmp_path / "c.jsonl") as cache:
        stats = resumable.fill(cache, [(str(i), i) for i in range(8)], compute, 8, progress=seen.append)
    assert seen == [4, 3, 1] and stats.computed == 8
    progress.advance(1, 2)  # outside a step: nothing is metered, nothing fails


def test_a_share_reported_twice_or_backwards_counts_once(tmp_path):
    seen: list[int] = []

    def compute(payloads):  # two model calls in one chunk (an estimator's rounds): the share restarts
        for done in (2, 4, 1, 3, 4):
            progress.advance(done, 4)
        return [{"v": p} for p in payloads]

    with AppendCache(tmp_path / "c.jsonl") as cache:
        resumable.fill(cache, [(str(i), i) for i in range(4)], compute, 4, progress=seen.append)
    assert seen == [2, 1, 1] and sum(seen) == 4


def test_the_first_update_is_written_at_once():
    out = io.StringIO()
    lines = LogLines(40, "annotate m", "pair", every=3600, stream=out, clock=Clock())
    lines.update(2)
    assert out.getvalue() == "annotate m: 2/40 (5%)\n"  # before: nothing until the first interval
    lines.update(2)
    assert out.getvalue().count("\n") == 1  # later counts wait for the interval
    lines.close()


def _wait_for(predicate, seconds: float = 20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_wait_as_long_as_the_step_s_usual_one_is_no_stall():
    """Issue #50: "no new work for 5m 00s" was printed during normal work (a chunk of 32 pairs takes
    longer than 5 minutes on a busy CPU). The clock is the test's: ticks run at once, time does not."""
    clock, out = Clock(), io.StringIO()
    lines = LogLines(10, "annotate m", "pair", every=0.001, stream=out, clock=clock)
    clock.t += 400  # the first chunk: 400 s after the start (the model loading included)
    lines.update(3)
    clock.t += 700  # a wait shorter than twice the longest (800 s): the step is working as usual
    time.sleep(0.3)  # hundreds of ticks, ten quiet ones are enough to have said it before
    assert "no new work" not in out.getvalue()
    clock.t += 200  # 900 s since the last update: more than twice the longest wait
    assert _wait_for(lambda: "no new work" in out.getvalue()), out.getvalue()
    lines.close()
    stalled = [t for t in out.getvalue().splitlines() if "no new work" in t]
    assert stalled[0] == "annotate m: 3/10 (30%), 0.0075 pair/s, ETA 15m 33s; no new work for 15m 00s"


@pytest.mark.slow
def test_a_log_shows_the_estimate_the_loading_and_the_first_pairs_before_the_first_chunk(tmp_path):
    """A real small model (smollm2-135m), stderr a file: the estimate, then the loading lines, then
    a first progress line whose count is below the chunk size (4): it came from the first batch (2
    pairs), before the first chunk was done (what is asserted is the order, not a time)."""
    from udcg.io.sources import example_path

    ex = example_path()
    log = tmp_path / "annotate.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("UDCG_PROGRESS", None)
    env.pop("UDCG_PROGRESS_INTERVAL", None)
    with open(log, "w") as err:
        done = subprocess.run([sys.executable, "-m", "udcg", "annotate", "--corpus", str(ex), "--run",
                               str(ex / "runs" / "bm25.trec"), "--depth", "2", "--limit", "3", "--model", "smollm2-135m",
                               "--chunk-size", "4", "--batch-size", "2", "-o", str(tmp_path / "u")],
                              stdout=subprocess.DEVNULL, stderr=err, env=env, timeout=1800)
    text = log.read_text().splitlines()
    assert done.returncode == 0, text
    estimate = next(i for i, t in enumerate(text) if t.startswith("annotate: 6 of the 6 pairs in the runs' top-2 "))
    loading = text.index("loading smollm2-135m ...")
    loaded = next(i for i, t in enumerate(text) if re.fullmatch(r"smollm2-135m loaded in [\d.]+ s on cpu", t))
    counts = [(i, int(m.group(1))) for i, t in enumerate(text) if (m := re.match(r"annotate smollm2-135m: (\d+)/6 ", t))]
    assert estimate < loading < loaded < counts[0][0], text
    assert counts[0][1] == 2 and counts[-1][1] == 6, text  # the first batch's 2 pairs, before the chunk of 4


def test_the_estimate_states_the_pairs_and_the_measured_rates():
    """Issue #50 item 4: the pair count (the union of the runs' top-depth, less those done) and a
    rough time from the offline registry's rates, said before the model loads; a server sets its own
    pace, and a model without a measured rate says so."""
    from udcg.flows.annotate import estimate_line, reader
    from udcg.llm import offline
    from udcg.llm.registry import ModelChoice

    busy, idle = offline.ALIASES["qwen2.5-coder-0.5b"].cpu_rate
    line = estimate_line(165, 165, 5, reader(ModelChoice("qwen2.5-coder-0.5b", device="cpu")))
    assert line.startswith("annotate: 165 of the 165 pairs in the runs' top-5 to compute (0 already annotated); "
                           f"on a CPU about {round(165 / idle / 60)} min to ")
    assert f"{idle:g} pairs/s idle, {busy:g} pairs/s with other jobs" in line and "rough estimate" in line
    assert "94 already annotated" in estimate_line(6, 100, 5, reader(ModelChoice("qwen2.5-coder-0.5b", device="cpu")))
    assert "no measured CPU rate" in estimate_line(10, 10, 5, reader(ModelChoice("smollm2-135m", device="cpu")))
    assert "the server sets the pace" in estimate_line(10, 10, 5, reader(ModelChoice("m", api_base="http://127.0.0.1:9/v1")))
