"""The API client keeps its window full across pieces of work and its connections alive, against a
real server on 127.0.0.1 (``scripts/instant_openai_server.py`` with a fixed latency), and the
parallel runner keeps every finished record when a piece fails."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import load_script
from udcg import resumable
from udcg.errors import BackendError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def latency_server():
    with load_script("instant_openai_server").Process(0.05) as server:
        yield server.url


def _stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats") as r:
        return json.loads(r.read())


def test_the_window_stays_full_across_chunks_on_one_set_of_connections(latency_server, tmp_path):
    from udcg.annotate.runner import AnnotateConfig, annotate
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings
    from udcg.records import Passage, Question

    questions = [Question(qid=f"q{i}", text=f"question {i}?", answers=("a",),
                          passages=tuple(Passage(docid=f"d{j}", text=f"passage {i} {j}") for j in range(10)))
                 for i in range(30)]
    backend = OpenAIBackend("bench", ClientSettings(latency_server, max_concurrency=16))
    try:
        # chunks of 4: a runner with a barrier per chunk would never have more than 4 requests in flight
        done, stats = annotate(questions, backend, AnnotateConfig(estimator="api-logprobs", chunk_size=4),
                               tmp_path / "cache.jsonl")
    finally:
        backend.close()
    seen = _stats(latency_server)
    assert stats.n_computed == len(done) == 300 and seen["requests"] == 300
    assert seen["max_in_flight"] == 16, seen  # the whole window, not a chunk
    assert seen["connections"] - 1 <= 16, seen  # kept alive across pieces (the 1 is this /stats request)
    lines = (tmp_path / "cache.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["key"] for line in lines) == sorted(done)  # each record once


def test_a_parallel_run_computes_each_request_once_and_keeps_finished_work_on_failure(tmp_path):
    from udcg.io.cache import AppendCache

    calls, lock = [], threading.Lock()

    def compute(items: list[int]) -> list[dict]:
        with lock:
            calls.append(list(items))
        if 57 in items:
            raise BackendError("item 57 failed")
        return [{"value": i * i} for i in items]

    requests = [(f"k{i}", i) for i in range(200)] + [("k3", 3)]  # a key given twice is computed once
    with AppendCache(tmp_path / "c.jsonl") as cache:
        with pytest.raises(BackendError, match=r"item 57 failed; \d+ of 200 records are finished and kept"):
            resumable.fill(cache, requests, compute, chunk_size=10, parallel=8)
        kept = dict(cache.done)
    computed = [i for part in calls for i in part]
    assert len(computed) == len(set(computed))  # nothing twice
    assert "k57" not in kept and kept and all(kept[k]["value"] == int(k[1:]) ** 2 for k in kept)
    assert len(kept) < 200  # no new piece after the failure
    with AppendCache(tmp_path / "c.jsonl") as cache:  # resume: only what is missing, then all done
        calls.clear()
        stats = resumable.fill(cache, [(k, i) for k, i in requests if i != 57], compute, chunk_size=10, parallel=8)
        assert stats.computed == 199 - len(kept)
        assert sorted(i for part in calls for i in part) == sorted(int(k[1:]) for k in set(f"k{i}" for i in range(200))
                                                                    if k not in kept and k != "k57")


def test_two_annotate_processes_on_one_folder_compute_each_pair_once(latency_server, tmp_path):
    """The second process waits for the first (the cache is locked while open), then finds its work
    done: the server is asked once per pair, both commands succeed, and the outputs are identical."""
    make_data = load_script("bench_api").make_data
    data = tmp_path / "data"
    pairs = make_data(data, 40, 5)
    out = tmp_path / "utilities"
    cmd = [sys.executable, "-m", "udcg", "annotate", "--corpus", str(data), "--run", str(data / "run.trec"), "--depth",
           "5", "--model", "openai:bench", "--api-base", latency_server, "--concurrency", "4", "-o", str(out),
           "--no-progress"]
    first = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = 100
    while not (out / "annotations.jsonl").exists() and deadline:  # the first holds the lock, the second waits
        deadline -= 1
        __import__("time").sleep(0.05)
    second = subprocess.run(cmd, capture_output=True, text=True)
    first_err = first.communicate()[1]
    assert first.returncode == 0 and second.returncode == 0, (first_err, second.stderr)
    assert _stats(latency_server)["requests"] == pairs  # each pair computed once
    assert "another udcg process is writing" in second.stderr
    assert "new pairs annotated: 0" in second.stderr


def test_editing_one_passage_recomputes_exactly_that_pair(latency_server, tmp_path):
    """The cache is keyed by what the reader saw: after one corpus text is edited, a rerun asks the
    server for that one pair, says so, and writes its new utility; the others are reused."""
    make_data = load_script("bench_api").make_data
    data = tmp_path / "data"
    make_data(data, 10, 3)
    out = tmp_path / "utilities"
    cmd = [sys.executable, "-m", "udcg", "annotate", "--corpus", str(data), "--run", str(data / "run.trec"), "--depth",
           "3", "--model", "openai:bench", "--api-base", latency_server, "-o", str(out), "--no-progress"]
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    before = {(r["qid"], r["docid"]): r["p_abs"] for r in map(json.loads, (out / "utilities.jsonl").read_text().splitlines())}
    asked = _stats(latency_server)["requests"]
    lines = (data / "corpus.jsonl").read_text().splitlines()
    doc = json.loads(lines[4])
    doc["text"] = "an edited passage about something else entirely"
    lines[4] = json.dumps(doc)
    (data / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert _stats(latency_server)["requests"] == asked + 1
    assert "new pairs annotated: 1" in rerun.stderr and "recomputed 1 changed pairs" in rerun.stderr
    after = {(r["qid"], r["docid"]): r["p_abs"] for r in map(json.loads, (out / "utilities.jsonl").read_text().splitlines())}
    changed = {pair for pair in before if before[pair] != after[pair]}
    assert changed == {("q1", doc["_id"])}  # the server's p_abs depends on the prompt: the new text gives a new value
    again = subprocess.run(cmd, capture_output=True, text=True)  # and a third run computes nothing
    assert "new pairs annotated: 0" in again.stderr and _stats(latency_server)["requests"] == asked + 1


def test_ids_that_hold_the_key_separator_never_share_a_key():
    assert resumable.key("a\tb", "c") != resumable.key("a", "b\tc")
    for parts in [("a\tb", "c"), ("a", "b\tc"), ("x\\y", "z\\t"), ("q1", "d1")]:
        assert resumable.split_key(resumable.key(*parts)) == list(parts)
    assert resumable.key("q1", "d1") == "q1\td1"  # plain ids keep the key older caches hold
