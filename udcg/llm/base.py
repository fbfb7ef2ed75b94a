"""The one narrow model interface every stage uses (annotator, grader, end-to-end experiment).

A backend takes a list of requests and returns results in the same order (lm-evaluation-harness
style); how it batches, sorts by length or talks to a server is its own business.

Chats are OpenAI-style message lists: ``[{"role": "system"|"user"|"assistant", "content": str}]``.
The answer position is the first token the assistant would write after the chat (generation
prompt added). A backend whose chat template has no system role merges the system turn into the
first user turn (``merge_system``).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

from udcg.errors import BackendError

Message = dict[str, str]
Chat = Sequence[Message]


@dataclass(frozen=True, slots=True)
class GenerationParams:
    max_new_tokens: int = 32
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    n: int = 1  # answers per chat
    seed: int = 0
    stop: tuple[str, ...] = ()


@runtime_checkable
class Backend(Protocol):
    """What every model backend provides. Results are in input order."""

    name: str  # model name written next to every result (e.g. "qwen2.5-coder-0.5b")

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        """Log-probability, at the answer position, of the first token of each candidate string
        (tokenised alone, without special tokens). One dict {candidate: logprob} per chat.
        Backends that only see a top-k list return -inf for a candidate outside it."""
        ...

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        """Teacher-forced log-probabilities of every token of the continuation after the answer
        position, one list per (chat, continuation). Needs open weights; API backends raise
        ``BackendError``."""
        ...

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams()) -> list[list[str]]:
        """``params.n`` answers per chat (greedy when temperature == 0), seeded, deterministic."""
        ...


@dataclass(frozen=True, slots=True)
class Reading:
    """What one prompt pass gives for a chat: the three per-passage values of an experiment."""

    first: dict[str, float]  # as next_token_logprobs: {candidate: log-probability of its first token}
    answer: str  # as generate, greedy, n = 1
    continuation: list[float]  # as continuation_logprobs for this chat's continuation ([] for "")


@runtime_checkable
class PromptReader(Protocol):
    """An optional capability of open-weight backends: ``next_token_logprobs``, greedy ``generate``
    and ``continuation_logprobs`` of each chat from a single pass over its prompt (the three calls
    would run that pass three times). Results equal the three calls up to float rounding."""

    def read(self, chats: Sequence[Chat], candidates: Sequence[str], continuations: Sequence[str],
             max_new_tokens: int = 32) -> list[Reading]:
        ...


RETIRED_CAPABILITIES = ("logprobs", "continuation", "sampling", "n", "open_weights", "batching")
CHUNK_SIZE = 32  # requests per cached, fsynced unit of work where neither the user nor the backend says more


@dataclass(frozen=True, slots=True, init=False)
class Capabilities:
    """What a backend can do, declared by its class (``BaseBackend.capabilities``) so that no caller
    probes for methods; only what some caller asks (a test holds every flag read in ``udcg/``).
    ``api``: served through an API (no device, dtype or batch size of ours; requests run in
    parallel), which also says how ``udcg.llm.registry.resolve`` treats an entry point's scheme;
    ``top_list``: first tokens come from a server's top list as well (``first_token_logprobs``: the
    list, a token outside it censored; ``first_token_scores``: exact where the server scores text,
    else the list), so the estimators read those and never take -inf for a probability of 0;
    ``single_pass_read``: ``read`` gives the three per-passage values of a chat from one pass
    (``PromptReader``; ``can_read`` may still say no for a server that cannot score); ``serve``:
    ``udcg serve`` may serve it (chat completions from ``generate``; the token extras of a
    ``Servable``); ``stream``: ``generate`` takes ``on_text`` and tells each answer as it grows.

    The flags of earlier releases that nothing read (``RETIRED_CAPABILITIES``: logprobs,
    continuation, sampling, n, open_weights, batching) are still accepted, with a
    ``DeprecationWarning``, and ignored: what a backend offers is the calls it implements."""

    api: bool = False
    top_list: bool = False
    single_pass_read: bool = False
    serve: bool = False
    stream: bool = False

    def __init__(self, **declared: bool) -> None:
        retired = sorted(declared.keys() & set(RETIRED_CAPABILITIES))
        if retired:
            warnings.warn(f"Capabilities({', '.join(f'{k}=...' for k in retired)}): no longer declared (nothing reads "
                          "it; drop it: a backend offers the calls it implements)", DeprecationWarning, stacklevel=2)
        names = {f.name: f.default for f in fields(Capabilities)}
        unknown = sorted(declared.keys() - names.keys() - set(RETIRED_CAPABILITIES))
        if unknown:
            raise TypeError(f"Capabilities() got an unexpected keyword argument {unknown[0]!r} (the capabilities: "
                            f"{', '.join(names)})")
        for name, default in names.items():
            object.__setattr__(self, name, declared.get(name, default))


class BaseBackend:
    """The base class every backend derives from: the ``Backend`` calls, its declared
    ``capabilities``, and the few questions callers ask of any backend (``concurrent_requests``,
    ``notes``, ``can_read``), answered here by default so nobody asks with ``getattr``. A backend
    module defines one subclass and registers its factory (``udcg.llm.registry``: an entry point in
    the ``udcg.backends`` group, or ``register_scheme``)."""

    name: str = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    notes: Mapping[str, str] = MappingProxyType({})  # what was found out about a server (API backends)

    @property
    def api(self) -> bool:
        """Whether it is served through an API (``capabilities.api``; a lazy backend knows it unloaded)."""
        return self.capabilities.api

    @property
    def chunk_size(self) -> int:
        """Requests per cached, fsynced unit of work where the user gives none (``--chunk-size``): the
        backend's own declaration, as a GPU model wants larger units (``HFBackend``); a class may set
        ``chunk_size = N`` instead. Read only when there is work to chunk (``udcg.resumable.fill``)."""
        return CHUNK_SIZE

    @property
    def concurrent_requests(self) -> int:
        """Requests this backend keeps in flight (``udcg.resumable.parallelism``): 1 for a model computed
        here one batch at a time; an API backend its window."""
        return 1

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        raise BackendError(f"{self.name}: this backend gives no next-token log-probabilities")

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        raise BackendError(f"{self.name}: this backend cannot score a continuation (it needs open weights or a "
                           "server that scores text)")

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams()) -> list[list[str]]:
        raise BackendError(f"{self.name}: this backend does not generate answers")

    def first_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list:
        """With ``top_list``: per chat, the server's top list and each candidate's log-probability
        read from it (``udcg.llm.openai_results.ApiLogprobs``)."""
        raise BackendError(f"{self.name}: this backend has no top list of first tokens (capabilities.top_list)")

    def first_token_scores(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list:
        """With ``top_list``: as ``first_token_logprobs``, exact where the server scores text."""
        return self.first_token_logprobs(chats, candidates)

    def can_read(self) -> bool:
        """Whether ``read`` works here (the class declares ``single_pass_read``)."""
        return self.capabilities.single_pass_read

    def read(self, chats: Sequence[Chat], candidates: Sequence[str], continuations: Sequence[str],
             max_new_tokens: int = 32) -> list[Reading]:
        raise BackendError(f"{self.name}: this backend has no single-pass read (ask can_read() first)")


class Servable(ABC):
    """An optional base of a served open-weights backend (``HFBackend``): what ``udcg serve`` reads
    for token counts (``usage``, the work budget), token log-probabilities and raw-text completions
    (``/v1/completions``). A backend declaring ``capabilities.serve`` without it is served chat
    completions only; nothing here is asked of other backends."""

    tokenizer: Any  # a transformers tokenizer: text to ids and back
    model: Any  # a transformers causal LM, for the teacher-forced log-probabilities

    @abstractmethod
    def encode(self, chat: Chat) -> list[int]:
        """The token ids of a chat up to the answer position, as the backend scores them."""

    @abstractmethod
    def complete(self, prompts: Sequence[Sequence[int]], params: GenerationParams = GenerationParams(),
                 on_text: Any = None) -> list[list[str]]:
        """``params.n`` continuations of each raw token prompt."""


def merge_system(chat: Chat) -> list[Message]:
    """Fold a leading system turn into the first user turn, for templates without a system role."""
    msgs = [dict(m) for m in chat]
    if msgs and msgs[0]["role"] == "system":
        system = msgs.pop(0)["content"]
        if msgs and msgs[0]["role"] == "user":
            msgs[0]["content"] = f"{system}\n\n{msgs[0]['content']}"
        else:
            msgs.insert(0, {"role": "user", "content": system})
    return msgs
