"""Library calls leave the process as they found it: ``gain_table`` pauses the garbage collector and
``LazyBackend(threads=N)`` sets torch's thread count only for the length of one call, and both are
back after the call, after a failing one too."""

from __future__ import annotations

import gc

import pytest

from tests.conftest import ScriptedBackend
from udcg.errors import InputError
from udcg.llm import registry
from udcg.llm.lazy import LazyBackend, torch_threads
from udcg.metrics import gains

RUN = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0}}
QRELS = {"q1": {"a": 1}, "q2": {"c": 0}}
CHAT = [{"role": "user", "content": "question?"}]


@pytest.fixture
def gc_state():
    """Runs the test with the collector enabled, then disabled; puts the process's setting back."""
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_gain_table_leaves_the_collector_as_it_was(enabled, gc_state):
    (gc.enable if enabled else gc.disable)()
    table = gains.gain_table(RUN, QRELS)
    assert table.qids == ("q1", "q2")
    assert gc.isenabled() is enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_gain_table_leaves_the_collector_as_it_was_after_an_error(enabled, gc_state):
    (gc.enable if enabled else gc.disable)()
    with pytest.raises(InputError):
        gains.gain_table({"q1": {"a": "not a number"}}, QRELS)
    assert gc.isenabled() is enabled


def test_the_collector_is_paused_during_the_walk_only(monkeypatch, gc_state):
    gc.enable()
    seen = []

    def walk(*args):
        seen.append(gc.isenabled())
        raise RuntimeError("interrupted")

    monkeypatch.setattr(gains, "_gain_table", walk)
    with pytest.raises(RuntimeError, match="interrupted"):
        gains.gain_table(RUN, QRELS)
    assert seen == [False]
    assert gc.isenabled()


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


def _lazy(monkeypatch, backend: ScriptedBackend, threads: int | None) -> LazyBackend:
    monkeypatch.setattr(registry, "load_backend", lambda model, **options: backend)
    return LazyBackend("scripted", threads=threads)


def test_lazy_backend_sets_torch_threads_for_its_calls_only(monkeypatch, torch):
    torch.set_num_threads(2)
    seen = []
    backend = ScriptedBackend(answer=lambda chat, params: seen.append(torch.get_num_threads()) or "Paris")
    lazy = _lazy(monkeypatch, backend, threads=1)
    assert lazy.generate([CHAT]) == [["Paris"]]
    assert seen == [1]
    assert torch.get_num_threads() == 2


def test_lazy_backend_restores_torch_threads_after_a_failing_call(monkeypatch, torch):
    torch.set_num_threads(2)
    lazy = _lazy(monkeypatch, ScriptedBackend(answer="x", fault=RuntimeError("model failed")), threads=1)
    with pytest.raises(RuntimeError, match="model failed"):
        lazy.generate([CHAT])
    assert torch.get_num_threads() == 2


def test_no_threads_changes_nothing(monkeypatch, torch):
    torch.set_num_threads(2)
    seen = []
    backend = ScriptedBackend(answer=lambda chat, params: seen.append(torch.get_num_threads()) or "x")
    _lazy(monkeypatch, backend, threads=None).generate([CHAT])
    with torch_threads(0):
        seen.append(torch.get_num_threads())
    assert seen == [2, 2]
    assert torch.get_num_threads() == 2
