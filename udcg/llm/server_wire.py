"""The chat-completions wire format of ``udcg serve``, as pure functions: request bodies are read
and checked (``parse_body``, ``parse_request``: anything malformed is a ``RequestError`` naming the
HTTP status and the parameter), responses laid out as OpenAI does (``completion_body``,
``error_body``). No I/O; ``udcg.llm.server`` speaks HTTP with them."""

from __future__ import annotations

import json
import math
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from udcg.llm.base import GenerationParams

MAX_INT_DIGITS = 40  # seeds and counts are at most 20 digits; a longer integer is a malformed request
MAX_TOKENS_CAP = 4096
MAX_N = 1024  # OpenAI caps n at 128; local sampling estimators ask for more in one call
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One answer token: its text, its log-probability, and the top-k alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


class RequestError(Exception):
    """A request the server refuses: HTTP status, message, offending parameter."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass(frozen=True, slots=True)
class ChatRequest:
    chat: tuple[dict[str, str], ...]
    params: GenerationParams
    logprobs: bool
    top_logprobs: int


def _content_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(400, f"messages[{i}].content: only text parts are supported", "messages")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(400, f"messages[{i}].content must be a string or a list of text parts", "messages")


def _number(body: dict, field: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(400, f"{field} must be a number, got {value!r}", field)
    if value > high or value < low or (low_open and value == low):
        raise RequestError(400, f"{field} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}", field)
    return float(value)


def _integer(body: dict, field: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(400, f"{field} must be an integer in [{low}, {high}], got {value!r}", field)
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def parse_body(raw: bytes) -> Any:
    """The JSON of a request body; anything malformed (bad UTF-8 or JSON, NaN, an integer of more
    than MAX_INT_DIGITS digits, nesting deeper than the interpreter's limit) is a 400."""
    try:
        return json.loads(raw.decode("utf-8"), parse_int=_parse_int, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise RequestError(400, "the body is nested too deeply") from None
    except ValueError as e:
        raise RequestError(400, f"the body is not accepted JSON: {e}") from None


def parse_request(body: Any, served_model: str) -> ChatRequest:
    """Check a chat-completions request body; raise ``RequestError`` naming the bad parameter."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise RequestError(404, f"model {model!r} is not served here (this server serves {served_model!r})", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    chat = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(400, f"messages[{i}].role must be one of {', '.join(ROLES)}", "messages")
        chat.append({"role": m["role"], "content": _content_text(m.get("content"), i)})
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise RequestError(400, "stop must be a string or a list of at most 4 non-empty strings", "stop")
    logprobs = body.get("logprobs") or False
    if not isinstance(logprobs, bool):
        raise RequestError(400, f"logprobs must be true or false, got {logprobs!r}", "logprobs")
    top_logprobs = _integer(body, "top_logprobs", 0, 0, 20)
    if top_logprobs and not logprobs:
        raise RequestError(400, "top_logprobs needs logprobs: true", "top_logprobs")
    seed = _integer(body, "seed", None, -(2**63), 2**64 - 1)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    params = GenerationParams(
        max_new_tokens=_integer({"max_tokens": max_tokens}, "max_tokens", 256, 1, MAX_TOKENS_CAP),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        n=_integer(body, "n", 1, 1, MAX_N),
        seed=secrets.randbits(31) if seed is None else seed % 2**32,  # no seed: fresh draws, as OpenAI
        stop=tuple(stop),
    )
    return ChatRequest(tuple(chat), params, logprobs, top_logprobs)


def _logprob_entry(token: str, logprob: float) -> dict:
    # JSON has no -inf: a probability that underflows is written as -9999.0, as OpenAI does.
    return {"token": token, "logprob": max(logprob, -9999.0), "bytes": list(token.encode("utf-8"))}


def completion_body(
    request: ChatRequest,
    model: str,
    answers: Sequence[str],
    logprobs: Sequence[Sequence[TokenLogprob]] | None = None,
    token_counts: tuple[int, Sequence[int]] | None = None,
    created: int | None = None,
) -> dict:
    """The chat-completions response for a request and its answers. ``logprobs``: the tokens of each
    answer; ``token_counts``: (prompt tokens, tokens of each answer), for ``usage`` and for
    ``finish_reason`` ("length" when an answer used all of max_tokens, else "stop")."""
    choices = []
    for i, answer in enumerate(answers):
        choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": answer}, "logprobs": None}
        if logprobs is not None:
            choice["logprobs"] = {
                "content": [
                    {**_logprob_entry(t.token, t.logprob),
                     "top_logprobs": [_logprob_entry(tok, lp) for tok, lp in t.top[: request.top_logprobs]]}
                    for t in logprobs[i]
                ]
            }
        full = token_counts is not None and token_counts[1][i] >= request.params.max_new_tokens
        choice["finish_reason"] = "length" if full else "stop"
        choices.append(choice)
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": choices,
    }
    if token_counts is not None:
        prompt, each = token_counts[0], sum(token_counts[1])
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": each, "total_tokens": prompt + each}
    return body


def error_body(status: int, message: str, param: str | None = None) -> dict:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
