"""The test tiers: each test is marked by what it needs, and what needs nothing is the unit tier.

``mark_by_need`` (tests/conftest.py's ``pytest_collection_modifyitems``) reads the source of each
test, of the fixtures it requests (their whole closure) and of the functions and classes of tests/
they name, transitively, and marks the test with each need whose pattern it finds:

- ``model``: loads a model (the tiny random Llama, SmolLM2, Qwen) in the test's process;
- ``server``: starts a server (an HTTP server on 127.0.0.1, a fault proxy) or binds a socket;
- ``subprocess``: runs a child process (the CLI, a script, a notebook kernel);
- ``data``: reads the shared data sets beside the checkout (``$UDCG_DATA_DIR``);
- ``long``: pure, but many seconds of CPU (the ``LONG`` list, by node id);
- ``slow`` (written by hand on the test) is a real bundled model: it implies ``model``.

A test with none of these is marked ``unit``: pure functions on small inputs. ``guard_unit`` keeps the
split honest at run time: a ``unit`` test that starts a process, binds a socket or loads a model
fails, saying which mark to write on it (``@pytest.mark.server`` ...).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FunctionType

import pytest

NEEDS = {
    "model": re.compile(r"\bHFBackend\b|from_pretrained|\bload_backend\b|build_tiny_model|tiny_model_dir|"
                        r"tiny_backend|one_torch_thread|\bimport torch\b|\btorch\.|smollm2|qwen|transformers"),
    "server": re.compile(r"HTTPServer|ChatCompletionServer|serve_backend|start_in_thread|\bfree_port\b|"
                         r"\bsocket\b|FaultProxy|socketserver|_server\b"),
    "subprocess": re.compile(r"\bsubprocess\b|sys\.executable|\bPopen\b|os\.fork|multiprocessing|nbclient|"
                             r"ExecutePreprocessor|gdeval"),  # ir_measures' gdeval runs perl
    "data": re.compile(r"default_data_dir|UDCG_DATA_DIR|\bSHARED\b|shared/data"),
}
# Pure, but many seconds of CPU each (fuzzing, thousands of resamples, the published reports rebuilt):
# marked ``long`` by node id (a file, a test with all its parameters, or one parameter). Not a timing:
# the list is written by hand from ``--durations`` and a test left off it only makes the loop slower.
LONG = (
    "tests/test_reliability_fuzz.py",
    "tests/test_ir_ecosystem.py::test_compare_agrees_with_ranx_compare",
    "tests/test_ir_ecosystem.py::test_ranx_reads_udcgs_frames",  # ranx compiles its measures (numba)
    "tests/test_ir_ecosystem.py::test_tied_scores_are_where_ranx_and_trec_eval_differ",
    "tests/test_corpus_stream.py::test_filtered_table_reads_equal_the_full_read_restricted",
    "tests/test_published_results.py::test_udcg_report_rebuilds_the_published_run",
    "tests/test_published_results.py::test_the_paired_reader_comparison_rebuilds",
    "tests/test_input_order.py::test_every_output_is_the_same_whatever_the_order_of_the_input_lines",
    "tests/test_equivalence.py::test_one_sided_estimate_is_close_to_the_exact_p_beyond_the_exact_range",
    "tests/test_reproducible_p.py::test_random_regime_estimates_the_exact_p_within_its_standard_error_and_agrees_with_scipy",
    "tests/test_reproducible_p.py::test_the_same_differences_in_another_order_give_the_same_p[3000]",
    "tests/test_reproducible_p.py::test_exact_regime_reaches_24_queries_and_equals_the_counted_p",
    "tests/test_compare_families.py::test_permutation_p_equals_scipy_on_a_tied_discrete_measure",
    "tests/test_corpus_stream.py::test_memory_of_a_filtered_read_does_not_grow_with_the_corpus",
    "tests/test_paired.py::test_the_report_shows_the_power_of_table3_all_and_keeps_its_tables",
    "tests/test_reader_check_ties.py::test_the_published_table_rebuilds",
)
MARKERS = [*NEEDS, "long", "slow", "unit"]
ROOT = Path(__file__).resolve().parents[1]
OURS = [ROOT / "tests", ROOT / "scripts"]

_sources: dict[object, str] = {}


def _source(obj: object) -> str:
    """The source of a function or class (with its decorators), '' when it has none."""
    key = getattr(obj, "__code__", obj)
    if key not in _sources:
        try:
            _sources[key] = inspect.getsource(obj)
        except (OSError, TypeError):
            _sources[key] = ""
    return _sources[key]


def _file(obj: object) -> str:
    """The file a function or class was defined in ('' when unknown)."""
    if isinstance(obj, FunctionType):
        return obj.__code__.co_filename
    module = sys.modules.get(getattr(obj, "__module__", ""))
    files = [getattr(module, "__file__", None)] + [f.__code__.co_filename for f in _methods(obj)]
    return next((f for f in files if f), "")


def _methods(cls: type) -> list[FunctionType]:
    return [f for f in vars(cls).values() if isinstance(f, FunctionType)]


def _ours(obj: object) -> bool:
    """A function or class of tests/ or scripts/ (the scripts the tests load): its source is read too."""
    return isinstance(obj, (FunctionType, type)) and any(_file(obj).startswith(str(d)) for d in OURS)


def _names(code) -> set[str]:
    """The global names a code object and the functions nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _reached(start: list[object]) -> Iterator[object]:
    """The functions and classes of tests/ reached from ``start`` through the global names they read."""
    seen: set[int] = set()
    todo = list(start)
    while todo:
        obj = inspect.unwrap(obj) if callable(obj := todo.pop()) else obj
        if id(obj) in seen or not _ours(obj):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, type):  # its methods, each read as a function
            todo += _methods(obj)
            continue
        todo += [obj.__globals__[n] for n in _names(obj.__code__) if n in obj.__globals__]


def needs(item: pytest.Item) -> set[str]:
    """The needs (``NEEDS``' keys) found in the sources a test reaches."""
    start: list[object] = [getattr(item, "function", None)]
    for defs in getattr(item, "_fixtureinfo").name2fixturedefs.values():
        start += [d.func for d in defs]
    text = "\n".join(_source(obj) for obj in _reached([s for s in start if s is not None]))
    return {need for need, pattern in NEEDS.items() if pattern.search(text)}


def _listed(nodeid: str, entry: str) -> bool:
    """``entry`` names this test: its file, its function (every parameter) or itself."""
    return nodeid == entry or nodeid.startswith((entry + "::", entry + "["))


def mark_by_need(items: list[pytest.Item]) -> None:
    for item in items:
        found = needs(item) if hasattr(item, "_fixtureinfo") else {"subprocess"}
        if item.get_closest_marker("slow"):
            found.add("model")
        if any(_listed(item.nodeid, entry) for entry in LONG):
            found.add("long")
        found -= {m.name for m in item.iter_markers()}
        for need in sorted(found):
            item.add_marker(need)
        if not any(item.get_closest_marker(m) for m in MARKERS):
            item.add_marker("unit")


def _refuse(what: str, mark: str):
    def refused(*args, **kwargs):
        raise AssertionError(f"a unit test {what}: mark it @pytest.mark.{mark} (tests/tiers.py)")
    return refused


@contextlib.contextmanager
def guard_unit(item: pytest.Item) -> Iterator[None]:
    """While a ``unit`` test (and its fixtures) runs: no child process, no bound socket, no model."""
    if item.get_closest_marker("unit") is None:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", _refuse("starts a process", "subprocess"))
        mp.setattr(socket.socket, "bind", _refuse("binds a socket (a server)", "server"))
        if "udcg.llm.hf" in sys.modules:
            mp.setattr(sys.modules["udcg.llm.hf"].HFBackend, "__init__", _refuse("loads a model", "model"))
        yield
