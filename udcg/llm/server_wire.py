"""The chat-completions wire format of ``udcg serve``, as pure functions: request bodies are read
and checked (``parse_body``, ``parse_request``: anything malformed is a ``RequestError`` naming the
HTTP status and the parameter), responses laid out as OpenAI does (``completion_body``,
``error_body``). No I/O; ``udcg.llm.server`` speaks HTTP with them.

A request is refused (400, saying why) rather than half served: a field whose value would change
the answer but is not implemented (tools, a JSON response format, penalties, logit biases), and a
request whose work exceeds the server's budget (``n`` x ``max_tokens`` tokens to generate, over
every prompt, at most ``max_request_tokens``), so that one client cannot hold the model for
minutes."""

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
MAX_REQUEST_TOKENS = 32768  # n x max_tokens (x prompts): the default work budget of one request
# A prompt of more characters than this per token of the budget is refused as it is read, before it is
# tokenised under the model lock (a 2 MB prompt held the lock 9.6 s); no tokenizer packs 16 characters
# into each token of a whole prompt.
CHARS_PER_TOKEN = 16
# Fields the server does not implement, with the values that mean "not used"; any other value is a 400.
UNUSED_VALUES: dict[str, tuple] = {
    "tools": (None, []), "functions": (None, []), "tool_choice": (None, "none", "auto"),
    "function_call": (None, "none", "auto"), "logit_bias": (None, {}), "frequency_penalty": (None, 0),
    "presence_penalty": (None, 0), "response_format": (None, {"type": "text"}), "modalities": (None, ["text"]),
    "audio": (None,), "prediction": (None,),
}
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
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with usage


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


def number(body: dict, field: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(400, f"{field} must be a number, got {value!r}", field)
    if value > high or value < low or (low_open and value == low):
        raise RequestError(400, f"{field} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}", field)
    return float(value)


def integer(body: dict, field: str, default: int | None, low: int, high: int) -> int | None:
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


def check_common(body: Any, served_model: str, unused: dict[str, tuple] = UNUSED_VALUES) -> None:
    """What every endpoint checks first: a JSON object, the served model, no unimplemented feature."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise RequestError(404, f"model {model!r} is not served here (this server serves {served_model!r})", "model")
    for field, values in unused.items():
        if field in body and body[field] not in values:
            raise RequestError(400, f"{field}={body[field]!r} is not supported by this server (it generates plain text; "
                                    f"leave {field} out)", field)


def parse_stream(body: dict) -> tuple[bool, bool]:
    """(stream, include_usage) from ``stream`` and ``stream_options``."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestError(400, f"stream must be true or false, got {stream!r}", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    if not stream:
        raise RequestError(400, "stream_options is only allowed with stream: true", "stream_options")
    if not isinstance(options, dict) or set(options) - {"include_usage"} or not isinstance(options.get("include_usage", False), bool):
        raise RequestError(400, f"stream_options must be {{\"include_usage\": true|false}}, got {options!r}", "stream_options")
    return True, options.get("include_usage", False)


def check_budget(n: int, max_tokens: int, prompts: int, limit: int, defaulted: bool) -> None:
    """Refuse a request that asks for more than ``limit`` generated tokens (n x max_tokens x prompts)."""
    work = n * max_tokens * prompts
    if work > limit:
        times = f" x {prompts} prompts" if prompts > 1 else ""
        default = " (the default when max_tokens is not given)" if defaulted else ""
        raise RequestError(400, f"n={n} x max_tokens={max_tokens}{default}{times} = {work:,} tokens to generate, more than "
                                f"this server's {limit:,} per request (ask for fewer answers or tokens, or split the request)", "n")


def check_prompt_size(chars: int, limit: int, param: str) -> None:
    """Refuse a prompt too long for the budget by its length alone (``CHARS_PER_TOKEN``), before tokenising."""
    if chars > limit * CHARS_PER_TOKEN:
        raise RequestError(400, f"the prompt has {chars:,} characters, more than this server reads for a request "
                                f"({limit:,} tokens of work, at most {CHARS_PER_TOKEN} characters per token); shorten "
                                "the prompt or split the request", param)


def check_work(prompt_tokens: int, generated: int, limit: int, scored: bool) -> None:
    """Refuse a request whose model work (prompt tokens read, plus tokens to generate) exceeds ``limit``."""
    if prompt_tokens + generated > limit:
        again = ", read again for each answer scored for logprobs" if scored else ""
        raise RequestError(400, f"this request needs {prompt_tokens + generated:,} tokens of model work ({prompt_tokens:,} "
                                f"prompt tokens{again}; {generated:,} to generate), more than this server's {limit:,} per "
                                "request (shorten the prompts, ask for fewer answers or tokens, or split the request)", "prompt")


def parse_request(body: Any, served_model: str, max_request_tokens: int = MAX_REQUEST_TOKENS) -> ChatRequest:
    """Check a chat-completions request body; raise ``RequestError`` naming the bad parameter."""
    check_common(body, served_model)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    chat = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(400, f"messages[{i}].role must be one of {', '.join(ROLES)}", "messages")
        chat.append({"role": m["role"], "content": _content_text(m.get("content"), i)})
    check_prompt_size(sum(len(m["content"]) for m in chat), max_request_tokens, "messages")
    logprobs = body.get("logprobs") or False
    if not isinstance(logprobs, bool):
        raise RequestError(400, f"logprobs must be true or false, got {logprobs!r}", "logprobs")
    top_logprobs = integer(body, "top_logprobs", 0, 0, 20)
    if top_logprobs and not logprobs:
        raise RequestError(400, "top_logprobs needs logprobs: true", "top_logprobs")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    params = parse_params(body, integer({"max_tokens": max_tokens}, "max_tokens", 256, 1, MAX_TOKENS_CAP))
    check_budget(params.n, params.max_new_tokens, 1, max_request_tokens, max_tokens is None)
    return ChatRequest(tuple(chat), params, logprobs, top_logprobs, *parse_stream(body))


def parse_params(body: dict, max_tokens: int) -> GenerationParams:
    """The sampling parameters both endpoints share: temperature, top_p, n, seed and stop."""
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise RequestError(400, "stop must be a string or a list of at most 4 non-empty strings", "stop")
    seed = integer(body, "seed", None, -(2**63), 2**64 - 1)
    return GenerationParams(
        max_new_tokens=max_tokens,
        temperature=number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        n=integer(body, "n", 1, 1, MAX_N),
        seed=secrets.randbits(31) if seed is None else seed % 2**32,  # no seed: fresh draws, as OpenAI
        stop=tuple(stop),
    )


def _logprob_entry(token: str, logprob: float) -> dict:
    # JSON has no -inf: a probability that underflows is written as -9999.0, as OpenAI does.
    return {"token": token, "logprob": max(logprob, -9999.0), "bytes": list(token.encode("utf-8"))}


def chat_logprobs(tokens: Sequence[TokenLogprob], top_logprobs: int) -> dict:
    """A choice's ``logprobs`` in the chat format: each token with its top ``top_logprobs``."""
    return {"content": [{**_logprob_entry(t.token, t.logprob),
                         "top_logprobs": [_logprob_entry(tok, lp) for tok, lp in t.top[:top_logprobs]]}
                        for t in tokens]}


def finish_reason(n_tokens: int | None, max_tokens: int) -> str:
    """"length" when an answer used all of max_tokens (as far as its token count is known), else "stop"."""
    return "length" if n_tokens is not None and n_tokens >= max_tokens else "stop"


def usage_body(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def response_head(kind: str, model: str, created: int | None = None) -> dict:
    """id, object, created and model of a response (``kind``: its "object"), shared by a stream's chunks."""
    prefix = "cmpl" if kind == "text_completion" else "chatcmpl"
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind,
            "created": int(time.time()) if created is None else created, "model": model}


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
    ``finish_reason``."""
    choices = []
    for i, answer in enumerate(answers):
        choices.append({
            "index": i,
            "message": {"role": "assistant", "content": answer},
            "logprobs": None if logprobs is None else chat_logprobs(logprobs[i], request.top_logprobs),
            "finish_reason": finish_reason(None if token_counts is None else token_counts[1][i], request.params.max_new_tokens),
        })
    body: dict[str, Any] = {**response_head("chat.completion", model, created), "choices": choices}
    if token_counts is not None:
        body["usage"] = usage_body(token_counts[0], sum(token_counts[1]))
    return body


def error_body(status: int, message: str, param: str | None = None) -> dict:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
