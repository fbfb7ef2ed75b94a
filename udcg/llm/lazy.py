"""A backend loaded on first use, so a rerun whose model work is all cached loads no model."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from udcg.llm.base import BaseBackend, Capabilities, GenerationParams
from udcg.llm.registry import ModelChoice, ModelSpec


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's CPU thread count set to ``n`` for the ``with`` block, then set back to what it was,
    also when the block raises. With ``n`` None or 0 nothing changes (and torch is not imported)."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LazyBackend(BaseBackend):
    """Forwards the ``udcg.llm.base.Backend`` calls (and ``read``) to the backend of ``model`` (a
    ``ModelSpec``, or a model string or ``ModelChoice`` resolved with ``options``),
    loaded by ``spec.load()`` on the first call. ``name`` is the spec's recorded name, the same
    before and after the load. ``threads``: torch's thread count during each call, the load
    included (``torch_threads``: for a machine shared with other jobs; the process's own setting is
    back when the call returns); ``load_seconds`` is how long the load took (0 until then)."""

    def __init__(self, model: str | ModelChoice | ModelSpec, threads: int | None = None, **options: object) -> None:
        self.spec = model if isinstance(model, ModelSpec) else ModelChoice.of(model, **options).spec()
        self.spec.check_installed()  # now, before the work that comes before the first call
        self.name, self._backend, self.threads = self.spec.name, None, threads
        self.load_seconds = 0.0

    def _get(self):
        if self._backend is None:
            t0 = time.perf_counter()
            with torch_threads(self.threads):
                self._backend = self.spec.load()
            self.load_seconds = time.perf_counter() - t0
        return self._backend

    def _call(self, method: str, *args: object):
        backend = self._get()
        with torch_threads(self.threads):
            return getattr(backend, method)(*args)

    @property
    def concurrent_requests(self) -> int:
        """Requests the backend keeps in flight (``udcg.resumable.parallelism``): an API backend's window
        (loading one costs nothing), 1 for a local model, which is not loaded to say so."""
        if self._backend is None and not self.spec.api:
            return 1
        return self._get().concurrent_requests

    @property
    def api(self) -> bool:
        return self.spec.api

    @property
    def chunk_size(self) -> int:  # the loaded backend's (asked only when there is work: it loads the model)
        return self._get().chunk_size

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]  (the loaded backend's)
        return self._get().capabilities

    @property
    def notes(self):  # type: ignore[override]
        """The API backend's notes (a local model is not loaded to say it has none)."""
        return self._get().notes if self.spec.api else {}

    def next_token_logprobs(self, chats, candidates):
        return self._call("next_token_logprobs", chats, candidates)

    def first_token_logprobs(self, chats, candidates):
        return self._call("first_token_logprobs", chats, candidates)

    def first_token_scores(self, chats, candidates):
        return self._call("first_token_scores", chats, candidates)

    def continuation_logprobs(self, requests):
        return self._call("continuation_logprobs", requests)

    def generate(self, chats, params=GenerationParams()):
        return self._call("generate", chats, params)

    def can_read(self) -> bool:
        """Whether the model (loaded now) reads a chat in one pass (``BaseBackend.can_read``: an API
        backend, where its server scores text)."""
        return self._get().can_read()

    def read(self, chats, candidates, continuations, max_new_tokens=32):
        return self._call("read", chats, candidates, continuations, max_new_tokens)
