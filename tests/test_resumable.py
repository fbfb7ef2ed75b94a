"""The one resumable runner (``udcg.resumable``): real cache files, a tiny real computation (squares,
with the batch each value was computed in), no model."""

from __future__ import annotations

import json

import pytest

from udcg import resumable
from udcg.errors import BackendError, InputError
from udcg.io.cache import AppendCache

REQUESTS = [(resumable.key("q", str(i)), i) for i in range(10)]  # 10 requests, chunks of 4: [0-3] [4-7] [8-9]


class Squares:
    """Squares each number and records the batch it came in; stops (KeyboardInterrupt, as a kill
    would) at call ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.stop_at = stop_at

    def __call__(self, numbers: list[int]) -> list[dict]:
        if self.stop_at is not None and len(self.batches) == self.stop_at:
            raise KeyboardInterrupt
        self.batches.append(list(numbers))
        return [{"square": n * n, "batch": list(numbers), "model": "m"} for n in numbers]


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fill_all(path, compute, requests=REQUESTS, **kw) -> resumable.StepStats:
    with resumable.open_cache(path, {"model": "m"}) as cache:
        return resumable.fill(cache, requests, compute, 4, **kw)


def test_keys_are_tab_joined_parts():
    assert resumable.key("q1", "d1") == "q1\td1" and resumable.key("q1", "d1", "d2") == "q1\td1\td2"
    assert resumable.split_key("q1\td1\td2") == ["q1", "d1", "d2"] and resumable.shown_key("q1\td1") == "q1 / d1"


def test_an_uninterrupted_run_appends_one_chunk_at_a_time(tmp_path):
    seen: list[int] = []
    path = tmp_path / "c.jsonl"

    def compute(numbers):  # the cache file as this chunk starts: every earlier chunk, whole
        seen.append(len(path.read_text().splitlines()))
        return Squares()(numbers)

    stats = fill_all(path, compute)
    assert seen == [0, 4, 8]
    assert [r["key"] for r in lines(path)] == [k for k, _ in REQUESTS]
    assert lines(path)[0] == {"key": "q\t0", "square": 0, "batch": [0, 1, 2, 3], "model": "m"}  # key first
    assert (stats.requests, stats.computed) == (10, 10) and stats.summary()["requests"] == 10


def test_resume_after_a_torn_chunk_computes_only_what_is_missing(tmp_path):
    reference = tmp_path / "ref.jsonl"
    fill_all(reference, Squares())
    path = tmp_path / "c.jsonl"
    with pytest.raises(KeyboardInterrupt):
        fill_all(path, Squares(stop_at=1))  # the first chunk finished, then the "kill"
    with open(path, "a") as f:  # the second chunk torn mid-line, as after kill -9
        f.write('{"key": "q\\t4", "squ')
    again = Squares()
    done = []
    stats = fill_all(path, again, progress=done.append)
    assert again.batches == [[4, 5, 6, 7], [8, 9]]  # the same batch mates as the uninterrupted run
    assert stats.computed == 6 and done == [4, 4, 2]
    assert sorted(map(json.dumps, lines(path))) == sorted(map(json.dumps, lines(reference)))
    assert fill_all(path, Squares(stop_at=0)).computed == 0  # all cached: nothing computed


def test_chunks_come_from_the_request_list_not_from_the_cache(tmp_path):
    """Whatever is cached, a computed batch lies inside one chunk of the whole request list."""
    path = tmp_path / "c.jsonl"
    with AppendCache(path) as cache:  # 1, 2 and 9 done before: chunks [0 3] [4-7] [8] are missing
        cache.append_many([{"key": resumable.key("q", str(i)), "square": i * i, "batch": [], "model": "m"} for i in (1, 2, 9)])
    squares = Squares()
    stats = fill_all(path, squares)
    assert squares.batches == [[0, 3], [4, 5, 6, 7], [8]]
    assert stats.computed == 7 and len(lines(path)) == 10  # only the missing records appended
    assert {r["key"]: r["square"] for r in lines(path)} == {k: i * i for k, i in REQUESTS}


def test_a_cache_made_with_other_settings_is_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    fill_all(path, Squares())
    with pytest.raises(InputError, match=r"c\.jsonl: cache made with model='m', this run uses model='other'.*delete"):
        resumable.open_cache(path, {"model": "other"})
    with resumable.open_cache(path) as cache:  # no expectation: opened as it is
        assert len(cache.done) == 10


def test_duplicate_keys_are_computed_once_and_redo_recomputes(tmp_path):
    path = tmp_path / "c.jsonl"
    squares = Squares()
    stats = fill_all(path, squares, requests=REQUESTS[:3] + REQUESTS[:2])
    assert stats.requests == 3 and squares.batches == [[0, 1, 2]]
    redo = Squares()
    fill_all(path, redo, requests=REQUESTS[:3], redo=lambda rec: rec["square"] == 1)
    assert redo.batches == [[1]] and len(lines(path)) == 4  # the new record replaces the old one on load


def test_an_unfinished_chunk_keeps_its_finished_records_and_stops(tmp_path):
    path = tmp_path / "c.jsonl"

    def half(numbers):
        if 5 in numbers:
            raise resumable.Unfinished([None if n % 2 else {"square": n * n, "model": "m"} for n in numbers],
                                  BackendError("HTTP 503"))
        return [{"square": n * n, "model": "m"} for n in numbers]

    with pytest.raises(BackendError, match=r"HTTP 503; 6 of 10 records are finished and kept in .*rerun"):
        fill_all(path, half)
    squares = Squares()
    fill_all(path, squares)
    assert squares.batches == [[5, 7], [8, 9]]


def test_bad_chunk_size_and_wrong_result_count(tmp_path):
    with pytest.raises(InputError, match="chunk size 0"):
        with resumable.open_cache(tmp_path / "a.jsonl") as cache:
            resumable.fill(cache, REQUESTS, Squares(), 0)
    with pytest.raises(BackendError, match="3 results for 4 requests"):
        fill_all(tmp_path / "b.jsonl", lambda numbers: Squares()(numbers)[:3])
