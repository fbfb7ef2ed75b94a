"""What a backend declares, and that the code reads it: every ``Capabilities`` flag is asked by some
caller in ``udcg/``; the flags of earlier releases that nothing read are accepted with a
``DeprecationWarning`` and ignored (a plugin written for them keeps working); the unit of cached
work (``chunk_size``) is the backend's own declaration, asked only when there is work, not a
guess from the kind of model."""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import fields
from pathlib import Path

import pytest

from udcg.annotate.runner import AnnotateConfig, annotate
from udcg.errors import BackendError
from udcg.llm import registry
from udcg.llm.base import CHUNK_SIZE, RETIRED_CAPABILITIES, BaseBackend, Capabilities
from udcg.llm.lazy import LazyBackend
from udcg.records import Passage, Question

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"


def _capability_reads() -> set[str]:
    """Every ``X.capabilities.FLAG`` read in udcg/ (an attribute of an attribute named capabilities)."""
    read = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "capabilities" and isinstance(node.ctx, ast.Load)):
                read.add(node.attr)
    return read


def test_every_declared_capability_is_read_somewhere_in_udcg():
    declared = {f.name for f in fields(Capabilities)}
    unread = declared - _capability_reads()
    assert not unread, f"Capabilities flags nothing in udcg/ reads (drop them or read them): {sorted(unread)}"
    assert declared.isdisjoint(RETIRED_CAPABILITIES)


def test_the_retired_flags_are_accepted_with_a_warning_and_ignored():
    with pytest.warns(DeprecationWarning, match=r"Capabilities\(logprobs=\.\.\., sampling=\.\.\.\): no longer declared"):
        old = Capabilities(api=True, logprobs=True, sampling=False)
    assert old == Capabilities(api=True) and old.api and not old.serve
    with pytest.warns(DeprecationWarning) as caught:
        Capabilities(**dict.fromkeys(RETIRED_CAPABILITIES, True))
    assert caught[0].filename == __file__  # the warning names the plugin's line, not udcg's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Capabilities(serve=True, stream=True).stream  # the flags of today warn of nothing
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'severe' \(the capabilities: api, top_list"):
        Capabilities(severe=True)


class Overlap(BaseBackend):
    """A reader that abstains as much as the passage misses the question's words, logging the size of
    every call it gets."""

    capabilities = Capabilities(api=False)
    made: list = []  # every backend built (a scheme's are built by the registry)

    def __init__(self, model: str, **options) -> None:
        self.name, self.calls = model, []
        self.made.append(self)

    def next_token_logprobs(self, chats, candidates):
        self.calls.append(len(chats))
        out = []
        for chat in chats:
            text = chat[-1]["content"].lower()
            p = min(0.95, max(0.05, 1 - sum(w in text for w in ("river", "bridge", "stone")) / 3))
            out.append({c: math.log(p if c.startswith("NO") else 1 - p) for c in candidates})
        return out


class Wide(Overlap):
    chunk_size = 5  # a GPU plugin would say 256: the declaration, not the kind of model, sets the unit


def _questions(n: int) -> list[Question]:
    words = ["the river", "a bridge of stone", "nothing here", "stone river bridge", "a stone"]
    return [Question("q1", "Which river runs under the stone bridge?", ("Avon",),
                     tuple(Passage(f"d{i}", f"passage {i}: {words[i % len(words)]}") for i in range(n)))]


def _sizes(backend_class, tmp_path, cfg=AnnotateConfig(), n=12) -> list[int]:
    backend = backend_class("m")
    done, _ = annotate(_questions(n), backend, cfg, tmp_path / f"{backend_class.__name__}-{cfg.chunk_size}.jsonl")
    assert len(done) == n
    return backend.calls


def test_the_unit_of_work_is_the_backends_declaration(tmp_path):
    assert _sizes(Overlap, tmp_path, n=40) == [CHUNK_SIZE, 40 - CHUNK_SIZE]  # the base's 32
    assert _sizes(Wide, tmp_path) == [5, 5, 2]  # a scheme's own (the kind of model gave every scheme 32)
    assert _sizes(Wide, tmp_path, AnnotateConfig(chunk_size=4)) == [4, 4, 4]  # --chunk-size wins


def test_a_plugin_scheme_declares_its_chunk_and_a_cached_rerun_loads_no_model(tmp_path):
    with registry.SCHEMES.scoped():
        registry.register_scheme("wide", Wide, api=False)
        Wide.made.clear()
        lazy = LazyBackend(registry.resolve("wide:m"))
        done, stats = annotate(_questions(12), lazy, AnnotateConfig(), tmp_path / "cache.jsonl")
        assert stats.n_computed == 12 and lazy.chunk_size == 5 and [w.calls for w in Wide.made] == [[5, 5, 2]]
        again = LazyBackend(registry.resolve("wide:m"))
        redone, stats = annotate(_questions(12), again, AnnotateConfig(), tmp_path / "cache.jsonl")
        assert stats.n_computed == 0 and len(Wide.made) == 1  # all cached: its chunk_size was never asked
        assert redone == done


@pytest.mark.parametrize("size", [0, True, "256", 10**7])
def test_a_plugins_chunk_that_is_no_positive_int_is_one_backend_error(tmp_path, size):
    class Odd(Overlap):
        chunk_size = size

    with registry.SCHEMES.scoped():
        registry.register_scheme("odd", Odd, api=False)
        backend = registry.resolve("odd:m").load()
        with pytest.raises(BackendError, match=r"the 'odd' backend \(register_scheme\).*chunk_size.*an int in \[1, "):
            annotate(_questions(3), backend, AnnotateConfig(), tmp_path / "odd.jsonl")


OLD_RECIPE = '''
import math
from udcg.llm.base import BaseBackend, Capabilities


class OverlapReader(BaseBackend):
    capabilities = Capabilities(api=False, logprobs=True, sampling=False)

    def __init__(self, model: str, **options):
        self.name = model

    def next_token_logprobs(self, chats, candidates):
        return [{c: math.log(0.3 if c.startswith("NO") else 0.7) for c in candidates} for _ in chats]
'''


def test_a_plugin_written_against_the_old_capabilities_still_annotates(tmp_path, monkeypatch):
    (tmp_path / "old_overlap.py").write_text(OLD_RECIPE)  # the recipe of docs/architecture.md before 0.x
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(DeprecationWarning, match="logprobs"):
        import old_overlap
    with registry.SCHEMES.scoped():
        registry.register_scheme("old", old_overlap.OverlapReader, api=False)
        backend = registry.resolve("old:words").load()
        assert backend.capabilities == Capabilities() and backend.chunk_size == CHUNK_SIZE
        done, stats = annotate(_questions(3), backend, AnnotateConfig(), tmp_path / "old.jsonl")
    assert stats.n_computed == 3 and len({a.p_abs for a in done.values()}) == 1


def test_a_local_model_declares_its_unit_by_the_device_it_runs_on(tiny_model_dir, tiny_backend):
    import torch

    from udcg.llm.hf import GPU_CHUNK_SIZE, HFBackend

    assert str(tiny_backend.device) == "cpu" and tiny_backend.chunk_size == CHUNK_SIZE
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the GPU half runs where one is")
    assert HFBackend(str(tiny_model_dir), device="cuda").chunk_size == GPU_CHUNK_SIZE == 256
