"""The local backend calls transformers the way the installed version wants: the key/value cache
goes in under ``cache`` where the model's forward has that parameter (transformers 5.24 deprecates
``past_key_values``, to be removed in 5.40) and under ``past_key_values`` before. No call of
``HFBackend`` raises a FutureWarning or logs transformers' "deprecated" warning, and ``udcg
annotate`` prints neither."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import lazy

os.environ.setdefault("HF_HUB_OFFLINE", "1")
lazy.importorskip("torch")
lazy.importorskip("transformers")

from udcg.annotate.prompt import reader_chat
from udcg.llm.base import GenerationParams
from udcg.llm.hf_load import cache_argument

ROOT = Path(__file__).resolve().parents[1]
CHATS = [reader_chat(q, [p]) for q, p in (
    ("who wrote Dune?", "Dune is a 1965 novel by Frank Herbert."),
    ("capital of France?", "Paris is the capital and largest city of France, on the Seine."),
    ("largest planet?", "Jupiter"),
)]


@contextmanager
def strict_warnings():
    """FutureWarning and DeprecationWarning raise; transformers' logged warnings are collected (its
    once-only warnings forgotten first, so one already given in this process is given again)."""
    from transformers.utils import logging as hf_logging

    hf_logging.warning_once.cache_clear()
    logged: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    hf_logger = logging.getLogger("transformers")
    hf_logger.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            yield logged
    finally:
        hf_logger.removeHandler(handler)


def _every_call(backend) -> None:
    backend.next_token_logprobs(CHATS, ["NO", "The"])
    backend.continuation_logprobs([(c, t) for c, t in zip(CHATS, ["Frank Herbert", "Paris", ""])])
    backend.generate(CHATS, GenerationParams(max_new_tokens=4))
    backend.generate(CHATS[:2], GenerationParams(max_new_tokens=3, temperature=0.7, n=2, seed=1))
    backend.read(CHATS, ["NO"], ["Frank Herbert", "Paris", "Jupiter is"], max_new_tokens=3)
    backend.complete([backend.encode(CHATS[0])], GenerationParams(max_new_tokens=3))


def test_the_cache_keyword_follows_the_installed_transformers(tiny_backend):
    import inspect

    params = inspect.signature(tiny_backend.model.forward).parameters
    assert tiny_backend.cache_arg == ("cache" if "cache" in params else "past_key_values")

    class Old:  # a forward from before the rename
        def forward(self, input_ids=None, past_key_values=None, use_cache=None): ...

    class New:
        def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs): ...

    assert cache_argument(Old()) == "past_key_values"
    assert cache_argument(New()) == "cache"


def test_tiny_model_calls_give_no_deprecation_warning(tiny_backend):
    with strict_warnings() as logged:
        _every_call(tiny_backend)
    assert not [m for m in logged if "deprecated" in m], logged


@pytest.mark.slow
def test_smollm2_calls_give_no_deprecation_warning(smollm2_backend):
    with strict_warnings() as logged:
        _every_call(smollm2_backend)
    assert not [m for m in logged if "deprecated" in m], logged


def test_annotate_prints_no_future_warning(tmp_path, tiny_model_dir):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "default"}
    out = tmp_path / "annotated.json"
    proc = subprocess.run([sys.executable, "-m", "udcg", "annotate", str(ROOT / "udcg/data/authors-sample.json"),
                           "--limit", "1", "--model", str(tiny_model_dir), "-o", str(out), "--no-progress"],
                          env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    assert "FutureWarning" not in proc.stderr and "deprecated" not in proc.stderr, proc.stderr
