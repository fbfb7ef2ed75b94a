"""Where an ``openai:`` model's requests go is settled once per command (``ModelSpec.settled``):
the first line naming the server and the backend that posts to it read one answer of
``openai_target.target``, against a real server on 127.0.0.1 (``scripts/instant_openai_server.py``)
named by the environment."""

from __future__ import annotations

import pytest

from tests.conftest import load_script
from udcg.cli import main
from udcg.io.sources import example_path
from udcg.llm import openai_backend, openai_target, registry


@pytest.fixture(scope="module")
def server():
    with load_script("instant_openai_server").Process(0.0) as s:
        yield s


@pytest.fixture
def asked(monkeypatch, server):
    """Every call of ``target`` (the real one, counted), with the server given by the environment."""
    monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", server.url)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    calls, real = [], openai_target.target

    def counted(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(openai_target, "target", counted)
    monkeypatch.setattr(openai_backend, "target", counted)
    return calls


def test_annotate_asks_where_the_server_is_once(asked, server, tmp_path, capsys):
    ex = example_path()
    assert main(["annotate", "--corpus", str(ex), "--run", str(ex / "runs" / "bm25.trec"), "--depth", "2", "--limit", "2",
                 "--model", "openai:bench", "-o", str(tmp_path / "u"), "--no-progress"]) == 0
    assert f"reader bench: requests go to {server.url} ($UDCG_OPENAI_BASE_URLS)" in capsys.readouterr().err
    assert len(asked) == 1  # the line and the backend: one answer (it was asked twice)


def test_answer_asks_where_the_server_is_once(asked, server, tmp_path, capsys):
    ex = example_path()
    assert main(["answer", "--corpus", str(ex), "--run", str(ex / "runs" / "bm25.trec"), "--k", "1", "--limit", "2",
                 "--model", "openai:bench", "-o", str(tmp_path / "contexts.jsonl"), "--no-progress"]) == 0
    assert f"requests go to {server.url} ($UDCG_OPENAI_BASE_URLS)" in capsys.readouterr().err
    assert len(asked) == 1


def test_a_settled_spec_loads_the_server_it_named(asked, server):
    spec = registry.resolve("openai:bench").settled()
    assert (list(spec.options["base_urls"]), spec.server) == ([server.url], "$UDCG_OPENAI_BASE_URLS")
    assert spec.settled() is spec and spec == registry.resolve("openai:bench", base_urls=[server.url])
    backend = spec.load()
    try:
        assert backend.base_urls == (server.url.rstrip("/"),) and len(asked) == 1
    finally:
        backend.close()
    local = registry.resolve("qwen2.5-coder-0.5b")
    assert local.settled() is local and len(asked) == 1  # only an openai: model has a server to settle
