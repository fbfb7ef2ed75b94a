"""The legacy text-completions wire format of ``udcg serve`` (``POST /v1/completions``), as pure
functions beside ``server_wire``'s chat format: a request is read and checked
(``parse_completion_request``), a response laid out as OpenAI does (``completions_body``,
``completion_logprobs``).

A prompt is text (continued as it is, no chat template) or token ids; ``prompt`` may list several,
and choice ``i * n + j`` is answer j to prompt i. ``logprobs: k`` lists, per token, its
log-probability and the top k alternatives (the token itself added when it is not among them, as
OpenAI does); ``echo: true`` puts the prompt before the answer, in the text and, with its tokens'
log-probabilities (the first token has none), in ``logprobs``. ``max_tokens: 0`` with ``echo``
scores a prompt without generating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from udcg.llm.base import GenerationParams
from udcg.llm.server_wire import (
    CHARS_PER_TOKEN,
    MAX_REQUEST_TOKENS,
    MAX_TOKENS_CAP,
    RequestError,
    TokenLogprob,
    check_budget,
    check_common,
    check_prompt_size,
    integer,
    parse_params,
    parse_stream,
    response_head,
    usage_body,
)

MAX_PROMPTS = 128
MAX_LOGPROBS = 20
UNUSED_VALUES: dict[str, tuple] = {
    "logit_bias": (None, {}), "frequency_penalty": (None, 0), "presence_penalty": (None, 0), "suffix": (None, ""),
}


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    prompts: tuple[str | tuple[int, ...], ...]  # text, or token ids
    params: GenerationParams  # params.max_new_tokens >= 1 even when max_tokens is 0
    max_tokens: int  # 0: echo the prompt only, nothing generated
    logprobs: int | None  # top-k per token; None: no logprobs
    echo: bool
    stream: bool = False
    include_usage: bool = False


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)


def _prompts(value: Any) -> tuple[str | tuple[int, ...], ...]:
    if isinstance(value, str):
        return (value,)
    if _is_ids(value):
        return (tuple(value),)
    if isinstance(value, list) and value and all(isinstance(p, str) or _is_ids(p) for p in value):
        if len(value) > MAX_PROMPTS:
            raise RequestError(400, f"prompt lists {len(value)} prompts, more than this server's {MAX_PROMPTS} per request "
                                    "(split the request)", "prompt")
        return tuple(p if isinstance(p, str) else tuple(p) for p in value)
    raise RequestError(400, "prompt must be a string, a non-empty list of strings, a list of token ids (integers >= 0) "
                            "or a list of such lists", "prompt")


def parse_completion_request(body: Any, served_model: str, max_request_tokens: int = MAX_REQUEST_TOKENS) -> CompletionRequest:
    """Check a completions request body; raise ``RequestError`` naming the bad parameter."""
    check_common(body, served_model, UNUSED_VALUES)
    if "prompt" not in body:
        raise RequestError(400, "prompt is required (text to continue)", "prompt")
    prompts = _prompts(body["prompt"])
    check_prompt_size(sum(len(p) if isinstance(p, str) else len(p) * CHARS_PER_TOKEN for p in prompts),
                      max_request_tokens, "prompt")
    echo = body.get("echo") or False
    if not isinstance(echo, bool):
        raise RequestError(400, f"echo must be true or false, got {echo!r}", "echo")
    logprobs = integer(body, "logprobs", None, 0, MAX_LOGPROBS)
    max_tokens = integer(body, "max_tokens", 16, 0, MAX_TOKENS_CAP)
    if max_tokens == 0 and not echo:
        raise RequestError(400, "max_tokens 0 generates nothing: give echo: true to score the prompt, or max_tokens >= 1", "max_tokens")
    params = parse_params(body, max(1, max_tokens))
    best_of = body.get("best_of")
    if best_of is not None and best_of != params.n:
        raise RequestError(400, f"best_of={best_of!r} is not supported (answers are not ranked here; leave best_of out)", "best_of")
    check_budget(params.n, max_tokens, len(prompts), max_request_tokens, "max_tokens" not in body)
    return CompletionRequest(prompts, params, max_tokens, logprobs, echo, *parse_stream(body))


def _clamp(logprob: float) -> float:
    return max(logprob, -9999.0)  # JSON has no -inf: an underflowed probability is written as -9999.0, as OpenAI does


def completion_logprobs(tokens: Sequence[TokenLogprob], k: int, offset: int, first: str | None = None) -> dict:
    """A choice's ``logprobs`` in the completions format. ``tokens``: the scored tokens in order;
    ``first``: an echoed prompt's first token (it has no log-probability); ``offset``: the
    character position of the first token in the choice's text."""
    listed = ([first] if first is not None else []) + [t.token for t in tokens]
    offsets, at = [], offset
    for token in listed:
        offsets.append(at)
        at += len(token)
    top = []
    for t in tokens:
        alternatives = {tok: _clamp(lp) for tok, lp in t.top[:k]}
        alternatives.setdefault(t.token, _clamp(t.logprob))
        top.append(alternatives)
    return {
        "tokens": listed,
        "token_logprobs": ([None] if first is not None else []) + [_clamp(t.logprob) for t in tokens],
        "top_logprobs": ([None] if first is not None else []) + top,
        "text_offset": offsets,
    }


def completions_body(model: str, texts: Sequence[str], finish: Sequence[str], logprobs: Sequence[dict] | None,
                     usage: tuple[int, int], created: int | None = None) -> dict:
    """The completions response: one choice per text (prompt i's answer j at ``i * n + j``)."""
    choices = [{"index": c, "text": text, "logprobs": None if logprobs is None else logprobs[c], "finish_reason": finish[c]}
               for c, text in enumerate(texts)]
    return {**response_head("text_completion", model, created), "choices": choices, "usage": usage_body(*usage)}
