"""Exact log-probabilities of given text through a server that scores text: ``POST /v1/completions``
with the prompt as token ids, ``echo: true``, ``logprobs: 1`` and ``max_tokens: 1`` (vLLM, SGLang and
``udcg serve`` answer it; lm-evaluation-harness scores through local completions the same way).

The ids are those the local model would score (``udcg.llm.chat_tokens``: the chat template of a
tokenizer loaded here, no weights), so ``NO-RESPONSE``'s first token, the whole ``NO-RESPONSE`` and a
reference answer get the probabilities the local ``first-token``/``sequence`` paths compute, up to
float noise, wherever they rank: no top-k list is involved. One request per chat scores all its
continuations (p_abs and the answer likelihood together).

A chat-only server (OpenAI's API) cannot: ``CompletionsScorer.check`` finds that out once, with one
small request, and says why; the backend then reads first tokens from the chat top list instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from udcg.errors import BackendError
from udcg.llm.base import Chat

SCORE_PATH = "completions"
UNREACHABLE = ("connection failed", "timed out")  # a dead or stuck server, not one that cannot score
PROBE_CHAT = ({"role": "user", "content": "Answer with one word: is the sky blue?"},)


def score_payload(model: str, prompts: Sequence[Sequence[int]]) -> dict:
    """One request scoring every prompt (token ids) teacher-forced; the one generated token is ignored."""
    return {"model": model, "prompt": [list(p) for p in prompts], "max_tokens": 1, "echo": True, "logprobs": 1,
            "temperature": 0.0, "n": 1}


def parse_scores(body: Any, spans: Sequence[tuple[int, int]]) -> list[list[float]]:
    """Per prompt ``(start, end)``: the echoed log-probabilities of its tokens ``start..end-1``
    (choice i answers prompt i). A missing, null or positive value is a ``BackendError``."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != len(spans):
        raise BackendError(f"completions scoring: expected {len(spans)} choices, got "
                           f"{len(choices) if isinstance(choices, list) else repr(str(body)[:200])}")
    ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
    out = []
    for i, (choice, (start, end)) in enumerate(zip(ordered, spans, strict=True)):
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if not isinstance(values, list) or len(values) < end:
            raise BackendError(f"completions scoring: prompt {i}: no echoed token_logprobs for its {end} tokens "
                               "(the server must support echo with logprobs)")
        picked = values[start:end]
        for v in picked:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v > 1e-4:
                raise BackendError(f"completions scoring: prompt {i}: {v!r} is not a log-probability")
        out.append([float(v) for v in picked])
    return out


class CompletionsScorer:
    """Scores continuations of chats through one ``OpenAIBackend``'s window of requests.
    ``backend``: gives ``model``, ``_post(payload, path)`` and ``_run_jobs``; ``tokens``: a
    ``ChatTokens`` of the served model's tokenizer."""

    def __init__(self, backend: Any, tokens: Any) -> None:
        self.backend, self.tokens = backend, tokens

    def score_each(self, items: Sequence[tuple[Chat, Sequence[str]]], on_result=None) -> list[Any]:
        """Per (chat, continuations): one list of token log-probabilities per continuation (its
        tokens alone, as ``continuation_logprobs``), or the ``BackendError`` of that chat."""
        prompts = self.tokens.encode_many([chat for chat, _ in items])

        async def one(prompt: list[int], texts: Sequence[str]) -> list[list[float]]:
            conts = [self.tokens.continuation(t, i) for i, t in enumerate(texts)]
            spans = [(len(prompt), len(prompt) + len(c)) for c in conts]
            asked = [(i, prompt + c) for i, c in enumerate(conts) if c]
            if not asked:
                return [[] for _ in conts]
            body = await self.backend._post(score_payload(self.backend.model, [ids for _, ids in asked]), SCORE_PATH)
            got = dict(zip((i for i, _ in asked), parse_scores(body, [spans[i] for i, _ in asked]), strict=True))
            return [got.get(i, []) for i in range(len(conts))]

        jobs = [(lambda p=p, texts=texts: one(p, texts)) for p, (_, texts) in zip(prompts, items, strict=True)]
        return self.backend._run_jobs(jobs, on_result)

    def check(self) -> str:
        """"" when the server scores text; else why not (one small request). A server that cannot be
        reached, or does not answer in time, raises its ``BackendError``: nothing else would work."""
        try:
            [result] = self.score_each([(list(PROBE_CHAT), ["No"])])
        except BackendError as e:
            result = e
        if isinstance(result, BackendError):
            if any(s in str(result) for s in UNREACHABLE):
                raise result
            return str(result)
        return ""
