"""Crash safety: ``kill -9`` the annotator, the LLM judge and ``udcg validate`` at random moments
(several seeds), restart, and check that

- the killed process left no partial output (the output is absent, or complete and final),
- the cache holds only complete records (a torn last line at most),
- the restart finishes, recomputes no finished item (model calls counted on the restart), and
- its output is byte-identical to an uninterrupted run.

The killed runs are real processes (``python -m udcg``); the uninterrupted reference and the
restarts run in-process through ``udcg.cli.main`` with the backend wrapped to count its calls. Both
use one torch thread, so the numbers do not depend on the thread count. Model: SmolLM2-135M, inputs:
the first 3 questions of the packaged PopQA sample, 3 passages each.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from udcg.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
N_QUESTIONS, N_PASSAGES, CHUNK = 3, 3, 2
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO), "UDCG_PROGRESS": "0"}


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def small_input(tmp_path_factory) -> Path:
    rows = [json.loads(line) for line in (resources.files("udcg") / "data" / "popqa-sample.jsonl").read_text().splitlines()]
    rows = rows[:N_QUESTIONS]
    for r in rows:
        r["passages"] = r["passages"][:N_PASSAGES]
    path = tmp_path_factory.mktemp("input") / "popqa3.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Counting:
    """A backend wrapper that counts the chats of every model call and forwards everything else."""

    def __init__(self, backend):
        self._backend = backend
        self.calls: Counter = Counter()

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def next_token_logprobs(self, chats, candidates):
        self.calls["next_token_logprobs"] += len(chats)
        return self._backend.next_token_logprobs(chats, candidates)

    def continuation_logprobs(self, requests):
        self.calls["continuation_logprobs"] += len(requests)
        return self._backend.continuation_logprobs(requests)

    def generate(self, chats, params=None):
        self.calls["generate"] += len(chats)
        return self._backend.generate(chats, params) if params is not None else self._backend.generate(chats)

    def read(self, chats, candidates, continuations, max_new_tokens=32):  # one pass, up to three cache records
        self.calls["read"] += len(chats)
        return self._backend.read(chats, candidates, continuations, max_new_tokens)

    @property
    def n_calls(self) -> int:
        return sum(self.calls.values())


_LOADED: dict[str, object] = {}


def patch_loader(mp: pytest.MonkeyPatch) -> list[Counting]:
    """Wrap every backend the CLI loads in-process; the real model is loaded once per session."""
    from udcg.llm import registry

    real = registry.load_backend
    made: list[Counting] = []

    def load(name, **kw):
        key = f"{name}|{sorted(kw.items())}"
        if key not in _LOADED:
            _LOADED[key] = real(name, **kw)
        made.append(Counting(_LOADED[key]))
        return made[-1]

    mp.setattr(registry, "load_backend", load)
    return made


@pytest.fixture
def counted(monkeypatch) -> list[Counting]:
    return patch_loader(monkeypatch)


@pytest.fixture(scope="module")
def module_counted():
    mp = pytest.MonkeyPatch()
    yield lambda: patch_loader(mp)
    mp.undo()


def complete_records(path: Path) -> list[dict]:
    """The complete JSON lines of a cache; only the last line may be torn (cut by the kill)."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    out = []
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            assert i == len(lines) - 1, f"{path}: a broken line before the end (line {i + 1})"
    return out


def n_lines(paths: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in paths if p.exists())


def kill_at_random(argv: list[str], cwd: Path, watch, total: int, seed: int) -> dict:
    """Start ``udcg ARGV`` as a process and SIGKILL it once the watched caches hold a random number
    of lines (0 .. total-1), after a random extra delay. Returns what happened."""
    rng = random.Random(seed)
    target, jitter = rng.randrange(total), rng.uniform(0.0, 0.6)
    with open(cwd / f"killed-{seed}.stderr", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "udcg", *argv], cwd=cwd, env=ENV,
                                stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if n_lines(watch()) >= target:
                time.sleep(jitter)
                break
            time.sleep(0.02)
        finished = proc.poll() is not None
        if not finished:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    return {"target": target, "killed": not finished and proc.returncode == -signal.SIGKILL, "rc": proc.returncode}


def leftovers(folder: Path, expected: set[str]) -> list[str]:
    """Files beside the expected ones. The hidden temporary file of an atomic write cut by the kill
    is allowed (it is never read, and the next write of that output removes it)."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name not in expected
                  and not p.name.startswith("killed-") and not (p.name.startswith(".") and p.name.endswith(".tmp")))


# ---------------------------------------------------------------- annotate


@pytest.fixture(scope="module")
def annotate_reference(small_input, tmp_path_factory, module_counted) -> tuple[bytes, int]:
    out = tmp_path_factory.mktemp("annotate-ref") / "ref.json"
    made = module_counted()
    assert main(["annotate", str(small_input), "-o", str(out), "--model", MODEL, "--chunk-size", str(CHUNK)]) == 0
    n = N_QUESTIONS * N_PASSAGES
    assert made[0].calls == {"next_token_logprobs": n}
    return out.read_bytes(), n


def _expected_recompute(keys: list[str], cached: set[str], chunk: int) -> int:
    chunks = [keys[i:i + chunk] for i in range(0, len(keys), chunk)]
    return sum(len(c) for c in chunks if not all(k in cached for k in c))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_annotate_survives_kill_9(seed, small_input, annotate_reference, counted, tmp_path, capsys):
    reference, n = annotate_reference
    out = tmp_path / "out.json"
    cache = tmp_path / "out.json.cache.jsonl"
    argv = ["annotate", str(small_input), "-o", str(out), "--model", MODEL, "--chunk-size", str(CHUNK)]
    event = kill_at_random(argv, tmp_path, lambda: [cache], n, seed)
    if event["killed"]:  # no output yet, or (killed on its way out) the complete final one
        assert not out.exists() or out.read_bytes() == reference, "a killed run left a partial output"
        assert leftovers(tmp_path, {cache.name, out.name, out.name + ".meta.json"}) == []
    cached = complete_records(cache)
    keys_before = [r["key"] for r in cached]
    assert len(keys_before) == len(set(keys_before))
    all_keys = [f"{json.loads(line)['example_id']}\t{p['doc_id']}"
                for line in small_input.read_text().splitlines() for p in json.loads(line)["passages"]]

    assert main(argv) == 0  # the restart
    capsys.readouterr()
    expected = _expected_recompute(all_keys, set(keys_before), CHUNK)
    assert counted[-1].calls.get("next_token_logprobs", 0) == expected, (event, len(keys_before))
    final_keys = [r["key"] for r in complete_records(cache)]
    assert len(final_keys) == len(keys_before) + expected and set(final_keys) == set(all_keys)
    assert out.read_bytes() == reference, "the resumed output must be byte-identical to an uninterrupted run"
    print(f"annotate seed={seed}: {event}, cached at kill={len(keys_before)}/{n}, recomputed={expected}")
    meta = json.loads((tmp_path / "out.json.meta.json").read_text())
    assert meta["n_computed_this_run"] == expected
    assert not list(tmp_path.glob(".*.tmp")), "a stale temporary file survived the restart"


# ---------------------------------------------------------------- judge (LLM)


JUDGE_BATCH = 3
JUDGE_ARGS = ["--judge", MODEL, "--batch-size", str(JUDGE_BATCH), "--max-new-tokens", "8", "--retries", "0", "--no-progress"]


@pytest.fixture(scope="module")
def judge_reference(small_input, tmp_path_factory, module_counted) -> bytes:
    out = tmp_path_factory.mktemp("judge-ref") / "ref.jsonl"
    module_counted()
    assert main(["judge", "relevance", str(small_input), "-o", str(out), *JUDGE_ARGS]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("seed", [4, 5])
def test_judge_survives_kill_9(seed, small_input, judge_reference, counted, tmp_path, capsys):
    n = N_QUESTIONS * N_PASSAGES
    out = tmp_path / "judged.jsonl"
    cache = tmp_path / "judged.jsonl.cache.jsonl"
    argv = ["judge", "relevance", str(small_input), "-o", str(out), *JUDGE_ARGS]
    event = kill_at_random(argv, tmp_path, lambda: [cache], n, seed)
    if event["killed"]:
        assert not out.exists() or out.read_bytes() == judge_reference, "a killed run left a partial output"
        assert leftovers(tmp_path, {cache.name, out.name}) == []
    cached = {r["key"] for r in complete_records(cache)}
    all_keys = [f"{json.loads(line)['example_id']}\t{p['doc_id']}"
                for line in small_input.read_text().splitlines() for p in json.loads(line)["passages"]]

    assert main(argv) == 0
    capsys.readouterr()
    expected = _expected_recompute(all_keys, cached, JUDGE_BATCH)
    assert counted[-1].calls == ({"generate": expected} if expected else {}), event
    final = complete_records(cache)
    assert len(final) == len(cached) + expected and {r["key"] for r in final} == set(all_keys)
    assert out.read_bytes() == judge_reference
    print(f"judge seed={seed}: {event}, cached at kill={len(cached)}/{n}, recomputed={expected}")


# ---------------------------------------------------------------- validate


VALIDATE_CONFIG = """name: crash
seed: 0
data: {questions: popqa-sample, limit: 2}
pool: {source: dataset, size: 4}
reader: {model: smollm2-135m, device: cpu, max_new_tokens: 4, chunk_size: 3}
contexts: {k: 2, n_contexts: 2}
metrics: {names: [UDCG, nDCG, P], n_boot: 100}
studies: {k_values: [2], positions: false, oracle: false, oracle_k: 2}
"""
# Files whose bytes must match the uninterrupted run (run.json, report.md, summary.json and
# config.yaml hold timings or the run folder's path).
VOLATILE = {"run.json", "report.md", "summary.json", "config.yaml"}


def _run_files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.parts[len(run.parts)] not in ("cache", "figures") and p.name not in VOLATILE}


def _model_caches(run: Path) -> list[Path]:
    return [p for p in (run / "cache").glob("*.jsonl") if p.name != "pools.jsonl"] if (run / "cache").exists() else []


@pytest.fixture(scope="module")
def validate_reference(tmp_path_factory, module_counted) -> tuple[dict[str, bytes], int, int]:
    folder = tmp_path_factory.mktemp("validate-ref")
    (folder / "crash.yaml").write_text(VALIDATE_CONFIG)
    made = module_counted()
    assert main(["validate", str(folder / "crash.yaml"), "-o", str(folder / "run"), "--no-progress"]) == 0
    calls = sum(b.n_calls for b in made)
    return _run_files(folder / "run"), calls, n_lines(_model_caches(folder / "run"))


@pytest.mark.parametrize("seed", [6, 7])
def test_validate_survives_kill_9(seed, validate_reference, counted, tmp_path, capsys):
    reference, ref_calls, ref_lines = validate_reference
    assert ref_calls == ref_lines > 0  # every model request is one cache record
    (tmp_path / "crash.yaml").write_text(VALIDATE_CONFIG)
    run = tmp_path / "run"
    argv = ["validate", str(tmp_path / "crash.yaml"), "-o", str(run), "--no-progress"]
    event = kill_at_random(argv, tmp_path, lambda: _model_caches(run), ref_lines, seed)
    if event["killed"] and run.exists():
        partial = _run_files(run)
        for name, data in partial.items():  # what a killed run left is complete and final, never half-written
            assert data == reference[name], f"{name} differs after the kill"
        assert not [p for p in run.rglob("*.tmp")], "temporary files of an atomic write were left behind"
    cached = sum(len({r["key"] for r in complete_records(p)}) for p in _model_caches(run))

    assert main(argv) == 0
    capsys.readouterr()
    assert sum(b.n_calls for b in counted) == ref_calls - cached, event
    assert n_lines(_model_caches(run)) == ref_lines  # no record written twice
    assert _run_files(run) == reference
    print(f"validate seed={seed}: {event}, cached at kill={cached}/{ref_lines}, model calls on restart={ref_calls - cached}")
