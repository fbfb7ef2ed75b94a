"""The test tiers of tests/tiers.py (docs/testing.md): a unit test that reaches a child process or a
socket through code the patterns cannot see fails with the mark to write, and every test named in
``LONG`` still exists. This file's own tests need nothing: they are unit tests."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parents[1]


def test_these_tests_are_in_the_unit_tier(request):
    assert request.node.get_closest_marker("unit") is not None
    assert not any(request.node.get_closest_marker(m) for m in ["model", "long", "slow", *tiers.NEEDS])


def test_a_child_process_the_patterns_cannot_see_fails_with_its_mark():
    hidden = importlib.import_module("sub" "process")  # a name the patterns do not read
    with pytest.raises(AssertionError, match=r"a unit test starts a process: mark it @pytest\.mark\.sub" r"process"):
        hidden.run(["true"])


def test_a_bound_socket_fails_with_its_mark():
    net = importlib.import_module("sock" "et")
    said = r"binds a sock" r"et \(a server\): mark it @pytest\.mark\.server"
    with getattr(net, "sock" "et")() as s, pytest.raises(AssertionError, match=said):
        s.bind(("127.0.0.1", 0))


@pytest.mark.parametrize("entry", tiers.LONG)
def test_every_long_entry_names_a_test_that_exists(entry):
    path, _, name = entry.partition("::")
    assert (ROOT / path).is_file(), f"{entry}: no such test file (renamed? update tests/tiers.py LONG)"
    function = name.split("[")[0]
    assert not function or re.search(rf"^\s*def {function}\(", (ROOT / path).read_text(), re.M), (
        f"{entry}: no such test (renamed? update tests/tiers.py LONG)")


def test_every_mark_is_declared():
    declared = Path(ROOT / "pyproject.toml").read_text()
    for mark in tiers.MARKERS:
        assert f'"{mark}: ' in declared, f"{mark} is not declared in pyproject.toml's markers"
