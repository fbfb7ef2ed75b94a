"""Round five of the reliability work (docs/reliability.md): declared capabilities instead of
probing at ``udcg serve``, a fleet member that answers garbage, a floor under every timeout."""

from __future__ import annotations

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.llm import registry
from udcg.llm.base import BaseBackend, Capabilities, GenerationParams, Servable
from udcg.llm.hf import HFBackend
from udcg.llm.schemes import register_scheme
from udcg.llm.server_model import ModelService
from tests.conftest import ScriptedBackend


class ChatOnly(BaseBackend):
    """A plugin backend that answers chats (with an ``encode`` and a ``tokenizer`` of its own, which
    the server used to take for an HF backend's) but does not declare that it can be served."""

    capabilities = Capabilities(logprobs=False)

    def __init__(self, model: str, **options: object) -> None:
        self.name, self.tokenizer = model, None

    def encode(self, chat) -> list[int]:
        return [1, 2, 3]

    def generate(self, chats, params=GenerationParams()):
        return [["an answer"] * params.n for _ in chats]


def test_serve_refuses_a_backend_that_does_not_declare_it_can_be_served(capsys):
    with registry.SCHEMES.scoped():
        register_scheme("chatonly", ChatOnly, api=False)
        assert main(["serve", "--model", "chatonly:m", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not declare that it can be served (capabilities.serve)" in err, err
    with pytest.raises(InputError, match="ChatOnly"):
        ModelService(ChatOnly("m"), "m")


def test_serve_reads_what_a_backend_declares_not_its_attributes():
    assert HFBackend.capabilities.serve and HFBackend.capabilities.stream and issubclass(HFBackend, Servable)
    chat_only = ModelService(ScriptedBackend(answer="hi"), "s")  # declares serve, is no Servable: chats only
    assert (chat_only.streams, chat_only.completes, chat_only.token_logprobs) == (False, False, None)
    assert ModelService(ScriptedBackend(answer="hi", streams=True), "s").streams

