"""``udcg.io.files``: located JSON/JSONL errors, NaN/Infinity refused, gzip read with a size limit,
atomic writes (no temporary file left, 0666 & ~umask permissions, the umask never changed)."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys

import pytest

from udcg.errors import EnvironmentFault, InputError
from udcg.io import files
from udcg.io.files import (
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    check_output_path,
    iter_jsonl,
    checked_probability,
    read_json,
    read_records,
    read_text,
    require,
)

# ---------------------------------------------------------------- reading, with located errors


def test_invalid_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"a": 1,\n "b": }\n')
    with pytest.raises(InputError, match=r"bad.json:2: invalid JSON at column 7"):
        read_json(path)


def test_jsonl_errors_name_their_line_and_blank_lines_keep_the_count(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"qid": "q1"}\n\n{"qid": "q2"}\n')
    assert list(iter_jsonl(path)) == [(1, {"qid": "q1"}), (3, {"qid": "q2"})]
    path.write_text('{"qid": "q1"}\n\n{"qid": \n')
    with pytest.raises(InputError, match=r"rows.jsonl:3: invalid JSON"):
        list(iter_jsonl(path))
    path.write_text('{"qid": "q1"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"rows.jsonl:2: expected a JSON object, got list"):
        list(iter_jsonl(path))


def refused(reader, path, content: str | bytes, pattern: str) -> None:
    """Write ``content`` to ``path``; ``reader(path)`` must refuse it with an error matching ``pattern``."""
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(InputError, match=pattern):
        reader(path)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_with_line_and_field(tmp_path, constant):
    refused(read_records, tmp_path / "scores.jsonl",
            f'{{"qid": "q1", "p_abs": 0.5}}\n{{"qid": "q2", "note": "NaN, Infinity", "p_abs": {constant}}}\n',
            rf"scores.jsonl:2: field 'p_abs' = {constant} is not valid JSON")
    refused(read_json, tmp_path / "scores.json", f'{{\n  "qid": "q1",\n  "values": [1.0,\n    {constant}]\n}}\n',
            rf"scores.json:4: field 'values' = {constant} is not valid JSON")


def test_the_words_nan_and_infinity_inside_strings_are_text(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text('{"text": "NaN and -Infinity are words here", "n": 3}\n')
    assert read_records(path) == [(f"{path}:1", {"text": "NaN and -Infinity are words here", "n": 3})]


def test_an_over_long_integer_is_refused(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text('{"n": ' + "9" * 400 + "}\n")
    with pytest.raises(InputError, match="big.jsonl:1: field 'n' = an integer of 400 digits"):
        read_records(path)


def test_read_records_takes_a_json_list_one_object_or_jsonl(tmp_path):
    listed = tmp_path / "list.json"
    listed.write_text('[{"a": 1}, {"a": 2}]')
    assert read_records(listed) == [(f"{listed}: record 0", {"a": 1}), (f"{listed}: record 1", {"a": 2})]
    pretty = tmp_path / "one.json"
    pretty.write_text('{\n  "a": 1\n}\n')
    assert read_records(pretty) == [(f"{pretty}:1", {"a": 1})]
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": 1}\n{"a": 2}\n')
    assert [obj for _, obj in read_records(lines)] == [{"a": 1}, {"a": 2}]
    listed.write_text('[{"a": 1}, 2]')
    with pytest.raises(InputError, match="record 1: expected a JSON object, got int"):
        read_records(listed)
    listed.write_text("[]")
    with pytest.raises(InputError, match="the list is empty"):
        read_records(listed)
    lines.write_text("\n  \n")
    with pytest.raises(InputError, match="only blank lines"):
        read_records(lines)


def test_unreadable_inputs_are_named(tmp_path):
    with pytest.raises(InputError, match="missing.json: no such file"):
        read_text(tmp_path / "missing.json")
    with pytest.raises(InputError, match="is a directory, not a file"):
        read_text(tmp_path)
    refused(read_text, tmp_path / "empty.jsonl", b"", "empty.jsonl: the file is empty")
    refused(read_text, tmp_path / "latin.jsonl", b'{"a": "x"}\n{"a": "caf\xe9"}\n',
            r"latin.jsonl:2: bytes that are not UTF-8 at offset 21")


def test_gzip_files_read_as_their_plain_text(tmp_path):
    text = '{"qid": "q1", "text": "caf\u00e9"}\n{"qid": "q2"}\n'
    plain = tmp_path / "rows.jsonl"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert read_text(packed) == text
    assert [obj for _, obj in read_records(packed)] == [obj for _, obj in read_records(plain)]
    packed.write_text('{"qid": "q1", "p": NaN}\n')  # errors keep their location, gzip or not
    packed.write_bytes(gzip.compress(packed.read_bytes()))
    with pytest.raises(InputError, match=r"rows.jsonl.gz:1: field 'p' = NaN"):
        read_records(packed)


def test_a_damaged_gzip_and_one_over_the_limit_are_refused(tmp_path, monkeypatch):
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(gzip.compress(b'{"a": 1}\n' * 100)[:-12])
    with pytest.raises(InputError, match="damaged.jsonl.gz: cannot read as gzip"):
        read_text(damaged)
    big = tmp_path / "big.jsonl.gz"
    big.write_bytes(gzip.compress(b" " * 5000))
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1000)  # the limit is at most MAX_FILE_BYTES
    with pytest.raises(InputError, match="big.jsonl.gz: decompresses to more than 1,000 bytes"):
        read_text(big)


# ---------------------------------------------------------------- atomic writes


def test_atomic_writes_round_trip_and_leave_no_temporary_file(tmp_path):
    out = tmp_path / "sub" / "out.json"
    atomic_write_json(out, {"b": [1, 2.5], "a": "\u00e9"})
    assert json.loads(out.read_text(encoding="utf-8")) == {"b": [1, 2.5], "a": "\u00e9"}
    assert "\u00e9" in out.read_text(encoding="utf-8")  # UTF-8, not \\u escapes
    rows = tmp_path / "rows.jsonl"
    atomic_write_jsonl(rows, [{"i": 1}, {"i": 2}])
    assert rows.read_text() == '{"i": 1}\n{"i": 2}\n'
    atomic_write_text(rows, "replaced\n")
    assert rows.read_text() == "replaced\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out.json", "rows.jsonl", "sub"]


def test_nan_is_never_written(tmp_path):
    with pytest.raises(ValueError):
        atomic_write_json(tmp_path / "x.json", {"p": math.nan})
    with pytest.raises(ValueError):
        atomic_write_jsonl(tmp_path / "x.jsonl", [{"p": math.inf}])
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    def no_rename(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", no_rename)
    with pytest.raises(EnvironmentFault, match="out.txt: cannot write: No space left on device .ENOSPC.; the previous "
                       "out.txt is unchanged; free some space there, then rerun the same command"):
        atomic_write_text(out, "new\n")
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_temporary_file_left_by_a_killed_run_is_cleaned(tmp_path):
    stale = tmp_path / ".out.txt.0123456789ab.tmp"
    stale.write_text("half")
    atomic_write_text(tmp_path / "out.txt", "whole\n")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_only_regular_files_are_replaced(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match="is a directory, not a regular file"):
        atomic_write_text(tmp_path / "folder", "x")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_output_path(tmp_path / "file" / "out.json", "-o")
    os.symlink(tmp_path / "file", tmp_path / "link")
    with pytest.raises(InputError, match="-o .*link: is a symbolic link"):
        check_output_path(tmp_path / "link", "-o")


_PERMISSIONS = """
import os, stat, sys
os.umask(int(sys.argv[1], 8))
import udcg, udcg.io.files, udcg.cli
assert os.umask(0) == int(sys.argv[1], 8), "importing udcg changed the umask"
os.umask(int(sys.argv[1], 8))
udcg.io.files.atomic_write_text(sys.argv[2], "x")
print(oct(stat.S_IMODE(os.stat(sys.argv[2]).st_mode)))
print(oct(os.umask(0)))
"""


@pytest.mark.parametrize("umask, mode", [("022", "0o644"), ("027", "0o640"), ("002", "0o664"), ("077", "0o600")])
def test_written_files_get_0666_less_the_umask_which_stays_untouched(tmp_path, umask, mode):
    """Run in a child process: the umask is process-global and this one is not ours to change."""
    out = tmp_path / "out.txt"
    done = subprocess.run([sys.executable, "-c", _PERMISSIONS, umask, str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [mode, oct(int(umask, 8))]


# ---------------------------------------------------------------- field checks


def test_require_names_the_field_the_type_and_the_fix():
    assert require({"qid": "q1"}, "qid", str, "f.jsonl:3", "give an id") == "q1"
    with pytest.raises(InputError, match=r"f.jsonl:3: missing field 'qid' \(give an id\)"):
        require({"qid": None}, "qid", str, "f.jsonl:3", "give an id")
    with pytest.raises(InputError, match="field 'k' must be int, got bool"):
        require({"k": True}, "k", int, "f.jsonl:3", "give a count")
    with pytest.raises(InputError, match="field 'x' must be int or float, got str"):
        require({"x": "1"}, "x", (int, float), "here", "a number")


def test_probability_accepts_0_to_1_only():
    assert checked_probability(0, "w", "p") == 0.0 and checked_probability(1, "w", "p") == 1.0
    for bad in (1.01, -0.1, math.nan, math.inf, True, "0.5", None):
        with pytest.raises(InputError, match="w: field 'p'"):
            checked_probability(bad, "w", "p")
