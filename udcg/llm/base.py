"""The one narrow model interface every stage uses (annotator, grader, end-to-end experiment).

A backend takes a list of requests and returns results in the same order (lm-evaluation-harness
style); how it batches, sorts by length or talks to a server is its own business.

Chats are OpenAI-style message lists: ``[{"role": "system"|"user"|"assistant", "content": str}]``.
The answer position is the first token the assistant would write after the chat (generation
prompt added). A backend whose chat template has no system role merges the system turn into the
first user turn (``merge_system``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

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
