"""``udcg.io.cache.AppendCache``: appended records survive a reopen, a torn last line (kill -9
mid-write) is cut, a damaged complete line is named with file:line and never skipped."""

from __future__ import annotations

import json

import pytest

from udcg.errors import InputError
from udcg.io.cache import AppendCache


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_appended_records_are_found_after_a_reopen(tmp_path):
    path = tmp_path / "cache" / "work.jsonl"  # the folder is made
    with AppendCache(path) as cache:
        assert "a" not in cache and cache.get("a") is None
        cache.append({"key": "a", "value": 1})
        assert "a" in cache and cache.get("a") == {"key": "a", "value": 1}
    with AppendCache(path) as again:
        assert again.done == {"a": {"key": "a", "value": 1}}
        again.append({"key": "b", "value": 2})
    assert lines(path) == [{"key": "a", "value": 1}, {"key": "b", "value": 2}]


def test_each_record_is_on_disk_before_append_returns(tmp_path):
    path = tmp_path / "c.jsonl"
    cache = AppendCache(path)
    cache.append({"key": "a"})
    assert path.read_text() == '{"key": "a"}\n'  # readable by another process while still open
    cache.close()


def test_append_many_writes_a_chunk_and_the_last_record_of_a_key_wins(tmp_path):
    path = tmp_path / "c.jsonl"
    with AppendCache(path) as cache:
        cache.append_many([{"key": "a", "v": 1}, {"key": "b", "v": 2}])
        cache.append_many([])
        cache.append_many([{"key": "a", "v": 3}])
        assert cache.get("a") == {"key": "a", "v": 3}
    assert len(lines(path)) == 3
    with AppendCache(path) as again:
        assert again.done == {"a": {"key": "a", "v": 3}, "b": {"key": "b", "v": 2}}


def test_a_torn_last_line_is_cut_and_the_rest_kept(tmp_path):
    path = tmp_path / "c.jsonl"
    with AppendCache(path) as cache:
        cache.append_many([{"key": "a"}, {"key": "b"}])
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"key": "c", "va')  # the process died mid-write
    with AppendCache(path) as again:
        assert set(again.done) == {"a", "b"}
        assert path.read_bytes() == whole  # cut on open, before anything is appended
        again.append({"key": "c"})
    assert [r["key"] for r in lines(path)] == ["a", "b", "c"]


def test_a_torn_line_that_happens_to_be_valid_json_is_still_cut(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"key": "a"}\n{"key": "b"}')  # no newline: the write did not finish
    with AppendCache(path) as cache:
        assert set(cache.done) == {"a"}
    assert path.read_text() == '{"key": "a"}\n'


@pytest.mark.parametrize("bad, what", [
    ('{"key": "b", ', "invalid JSON"),
    ('{"key": "b", "p": NaN}', "invalid JSON"),
    ('["b"]', "not an object with a string 'key'"),
    ('{"key": 7}', "not an object with a string 'key'"),
    ('{"value": 1}', "not an object with a string 'key'"),
])
def test_a_damaged_complete_line_is_named_never_skipped(tmp_path, bad, what):
    path = tmp_path / "c.jsonl"
    path.write_text('{"key": "a"}\n' + bad + '\n{"key": "c"}\n')
    before = path.read_bytes()
    with pytest.raises(InputError, match=rf"c.jsonl:2: cache line is {what}.*delete this line"):
        AppendCache(path)
    assert path.read_bytes() == before  # nothing cut or rewritten


def test_another_key_field(tmp_path):
    path = tmp_path / "c.jsonl"
    with AppendCache(path, key_field="pid") as cache:
        cache.append({"pid": "p1", "label": "relevant"})
    with AppendCache(path, key_field="pid") as again:
        assert again.get("p1") == {"pid": "p1", "label": "relevant"}
    with pytest.raises(InputError, match="c.jsonl:1: cache line is not an object with a string 'key'"):
        AppendCache(path)


def test_a_folder_or_a_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="cache .*d: is a directory"):
        AppendCache(tmp_path / "d")
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        AppendCache(tmp_path / "f" / "c.jsonl")


def test_nan_is_never_appended(tmp_path):
    path = tmp_path / "c.jsonl"
    with AppendCache(path) as cache:
        with pytest.raises(ValueError):
            cache.append({"key": "a", "p": float("nan")})
        assert "a" not in cache
    assert path.read_text() == ""
