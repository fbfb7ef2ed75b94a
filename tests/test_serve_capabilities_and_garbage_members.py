"""Round five of the reliability work (docs/reliability.md): declared capabilities instead of
probing at ``udcg serve``, and a fleet member that answers garbage (the timeout floor is in
test_bounds_doors.py, ir_datasets kept quiet in test_irds.py)."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ScriptedBackend
from tests.test_api_client_faults import one_error_line
from tests.test_fleet_flapping import _answer as fleet_answer
from tests.test_fleet_flapping import annotate as fleet_annotate
from tests.test_fleet_flapping import values as fleet_values
from udcg.cli import main
from udcg.errors import InputError
from udcg.llm import registry
from udcg.llm.base import BaseBackend, Capabilities, GenerationParams, Servable
from udcg.llm.hf import HFBackend
from udcg.llm.schemes import register_scheme
from udcg.llm.server_model import ModelService

GREEDY = GenerationParams()


class ChatOnly(BaseBackend):
    """A plugin backend that answers chats (with an ``encode`` and a ``tokenizer`` of its own, which
    the server used to take for an HF backend's) but does not declare that it can be served."""

    capabilities = Capabilities()  # serve=False: not declared servable

    def __init__(self, model: str, **options: object) -> None:
        self.name, self.tokenizer = model, None

    def encode(self, chat) -> list[int]:
        return [1, 2, 3]

    def generate(self, chats, params=GREEDY):
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


# ---------------------------------------------------------------- a fleet member that answers garbage

GARBAGE = {"not-json": b'{"choices": [{"index": 0, "mess', "schema": json.dumps({"choices": ["NO-RESPONSE", "Paris"]}).encode()}


@contextlib.contextmanager
def raw_member(mode: str):
    """A server on 127.0.0.1 that answers every request well (``ok``: round four's deterministic
    answers) or with ``GARBAGE[mode]`` under HTTP 200."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            data = json.dumps(fleet_answer(body)).encode() if mode == "ok" else GARBAGE[mode]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.request_queue_size = 64
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("estimator", ["api-logprobs", "sampling"])
@pytest.mark.parametrize("mode", sorted(GARBAGE))
def test_a_member_that_answers_garbage_is_passed_over_not_fatal(mode, estimator, tmp_path, capsys):
    """A reply that broke the OpenAI schema, from one member, stopped the whole run (a body that was
    no JSON did too without retries); now that member leaves the request's turn and the next answers."""
    no_retry = ("--max-retries", "0", "--timeout", "60")  # a slow reply under load is not the fault tested here
    with raw_member("ok") as good, raw_member(mode) as bad:
        rc, _ = fleet_annotate(tmp_path, [good], "reference", *no_retry, questions=8, estimator=estimator)
        assert rc == 0, capsys.readouterr().err
        rc, name = fleet_annotate(tmp_path, [bad, good], "mixed", *no_retry, questions=8, estimator=estimator)
        err = capsys.readouterr().err
        assert rc == 0, err
        assert fleet_values(tmp_path, name) == fleet_values(tmp_path, "reference")
        assert f"during the run: {bad}" in err, err  # the run says which member was faulty
        rc, _ = fleet_annotate(tmp_path, [bad, bad + "/"], "all-bad", *no_retry, questions=2, estimator=estimator)
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert rc == 1 and "every fleet member failed this request" in line and line.count(bad) == 2, line
    assert not (tmp_path / "all-bad.json").exists()
