"""The one narrow model interface every stage uses (annotator, grader, end-to-end experiment).

A backend takes a list of requests and returns results in the same order (lm-evaluation-harness
style); how it batches, sorts by length or talks to a server is its own business.

Chats are OpenAI-style message lists: ``[{"role": "system"|"user"|"assistant", "content": str}]``.
The answer position is the first token the assistant would write after the chat (generation
prompt added). A backend whose chat template has no system role merges the system turn into the
first user turn (``merge_system``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do, declared by its class (``BaseBackend.capabilities``) so that no caller
    probes for methods. ``logprobs``: ``next_token_logprobs`` gives a candidate's log-probability
    (a top list counts: -inf outside it); ``continuation``: ``continuation_logprobs`` works
    (teacher forcing: open weights, or a server that scores text); ``sampling``: ``generate``
    honours temperature and seed; ``n``: several answers per chat in one request; ``open_weights``:
    the weights run in this process; ``batching``: one call runs many chats together (``batch_size``
    means something); ``single_pass_read``: ``read`` gives the three per-passage values of a chat
    from one pass (``PromptReader``; ``can_read`` may still say no for a server that cannot score);
    ``api``: served through an API (no device, dtype or batch size of ours; requests run in
    parallel), which also says how ``udcg.llm.registry.resolve`` treats an entry point's scheme;
    ``top_list``: first tokens come from a server's top list as well (``first_token_logprobs``: the
    list, a token outside it censored; ``first_token_scores``: exact where the server scores text,
    else the list), so the estimators read those and never take -inf for a probability of 0;
    ``serve``: ``udcg serve`` may serve it (chat completions from ``generate``; the token extras of a
    ``Servable``); ``stream``: ``generate`` takes ``on_text`` and tells each answer as it grows."""

    api: bool = False
    top_list: bool = False
    logprobs: bool = True
    continuation: bool = False
    sampling: bool = True
    n: bool = False
    open_weights: bool = False
    batching: bool = False
    single_pass_read: bool = False
    serve: bool = False
    stream: bool = False


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
