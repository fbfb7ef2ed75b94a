"""The OpenAI chat-completions wire format as pure functions: request payloads, response
parsing, Retry-After, backoff and per-chunk seeds. No I/O; ``udcg.llm.openai_backend`` sends them."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.llm.base import Chat, GenerationParams
from udcg.redact import redact



def chat_payload(model: str, chat: Chat, params: GenerationParams) -> dict:
    """The request body asking for ``params.n`` answers to one chat."""
    payload = {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in chat],
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "n": params.n,
        "seed": params.seed,
    }
    if params.stop:
        payload["stop"] = list(params.stop)
    return payload


def logprobs_payload(model: str, chat: Chat, top_logprobs: int) -> dict:
    """The request body asking for the top list of the first generated position."""
    return {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in chat],
        "temperature": 0.0,
        "max_tokens": 1,
        "n": 1,
        "logprobs": True,
        "top_logprobs": top_logprobs,
    }


def _malformed(field: str, problem: str, value: Any = None) -> BackendError:
    """The one-line error of a response that breaks the chat-completions schema, naming the field."""
    shown = "" if value is None else f" (got {json.dumps(value, default=str)[:120]})"
    return BackendError(f"malformed response: {field} {problem}{shown}; is this an OpenAI-compatible "
                        "chat-completions endpoint? (check the base URL and the server)")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _object(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise _malformed(field, f"is {_kind(value)}, not an object", value)
    return value


def checked_choices(body: Any) -> list[dict]:
    """``body["choices"]``, checked: a non-empty list of objects whose ``index`` values (where any
    is given) are the integers 0..len-1, once each; sorted by index. Every deviation is one error
    naming the field (the chat and the completions formats alike)."""
    choices = _object(body, "the body").get("choices")
    if not isinstance(choices, list) or not choices:
        raise _malformed("'choices'", "is missing or empty" if not choices else f"is {_kind(choices)}, not a list",
                         body if choices is None else choices)
    for i, c in enumerate(choices):
        _object(c, f"choices[{i}]")
    indices = [c.get("index") for c in choices]
    if all(x is None for x in indices):
        return choices
    for i, x in enumerate(indices):
        if isinstance(x, bool) or not isinstance(x, int):
            raise _malformed(f"choices[{i}].index", f"is {_kind(x)}, not an integer", x)
    if len(set(indices)) != len(indices):
        raise _malformed("choices[].index", "repeats a value", indices)
    if sorted(indices) != list(range(len(indices))):
        raise _malformed("choices[].index", f"is not 0..{len(indices) - 1} (one index per choice)", indices)
    return sorted(choices, key=lambda c: c["index"])


def parse_answers(body: Any, n: int) -> list[str]:
    """The ``n`` answers of a chat-completions response, in choice-index order."""
    return check_count(parse_choices(body), n)


def check_count(answers: list[str], n: int) -> list[str]:
    """``answers`` when there are ``n`` of them, else the error that says so."""
    if len(answers) != n:
        raise BackendError(f"the server returned {len(answers)} answers, asked for n={n} (does it support the 'n' parameter?)")
    return answers


def parse_choices(body: Any) -> list[str]:
    """Every answer of a chat-completions response, in choice-index order: each choice's
    ``message`` an object whose ``content`` is text (null reads as an empty answer, as some servers
    send it)."""
    answers = []
    for i, c in enumerate(checked_choices(body)):
        message = _object(c.get("message"), f"choices[{i}].message")
        content = message.get("content")
        if content is None:
            content = ""  # some servers send null content for an empty answer
        if not isinstance(content, str):
            raise _malformed(f"choices[{i}].message.content", f"is {_kind(content)}, not text", content)
        answers.append(content)
    return answers


def parse_first_top_logprobs(body: Any) -> dict[str, float]:
    """Token text -> logprob at the first generated position (``choices[0].logprobs.content[0]``)."""
    choice = checked_choices(body)[0]
    logprobs = choice.get("logprobs")
    content = None if logprobs is None else _object(logprobs, "choices[0].logprobs").get("content")
    if content is None or content == []:
        raise BackendError("the response has no logprobs.content: this server returns no chat log-probabilities "
                           "(use --estimator sampling, which needs only answers, or a server with logprobs, e.g. vLLM or SGLang)")
    if not isinstance(content, list):
        raise _malformed("choices[0].logprobs.content", f"is {_kind(content)}, not a list", content)
    first = _object(content[0], "choices[0].logprobs.content[0]")
    top = first.get("top_logprobs")
    if top is not None and not isinstance(top, list):
        raise _malformed("choices[0].logprobs.content[0].top_logprobs", f"is {_kind(top)}, not a list", top)
    out: dict[str, float] = {}
    for entry in [first, *(top or [])]:
        token = entry.get("token") if isinstance(entry, dict) else None
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        if not isinstance(token, str) or isinstance(lp, bool) or not isinstance(lp, (int, float)) or not lp <= 1e-6:
            raise BackendError(f"malformed logprobs entry {str(entry)[:120]!r} (expected token text and a logprob <= 0)")
        out.setdefault(token, min(float(lp), 0.0))  # rounding may give +1e-9; a token can be both sampled and listed
    return out


# The shortest first token a candidate can have: its leading run of letters (BPE pre-tokenizers keep
# one together, and every common vocabulary holds "NO": "NO-RESPONSE" starts with "NO"), else one character.
_LEADING_WORD = re.compile(r"\s?[^\W\d_]+")


def candidate_logprob(top: dict[str, float], candidate: str, first_token: str | None = None) -> tuple[float, str]:
    """(logprob, note) of a candidate's first token in a top list; -inf and a note when absent.

    Without ``first_token``, the candidate's first token is taken to be the longest token of the
    list that is a prefix of the candidate (BPE tokenizers take the longest match first) and at
    least as long as the candidate's leading run of letters: a shorter token ("N" for "NO-RESPONSE")
    starts another word ("Nobody", "New ..."), so a list holding it but not "NO" holds no NO-RESPONSE.
    """
    if first_token is not None:
        if first_token in top:
            return top[first_token], ""
    else:
        word = _LEADING_WORD.match(candidate)
        shortest = len(word.group()) if word else min(len(candidate), 1)
        prefixes = [t for t in top if t and len(t) >= shortest and candidate.startswith(t)]
        if prefixes:
            return top[max(prefixes, key=len)], ""
        shorter = [t for t in top if t and candidate.startswith(t)]
        if shorter:
            return -math.inf, (f"{candidate!r}: first token {candidate[:shortest]!r} absent from the top-{len(top)} list "
                               f"(it holds only the shorter {max(shorter, key=len)!r}, the start of other words), probability "
                               "censored (below the list's last probability)")
    shown = f"first token {first_token!r}" if first_token is not None else "first token"
    return -math.inf, f"{candidate!r}: {shown} absent from the top-{len(top)} list, probability censored (below the list's last probability)"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent/unparsable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def chunk_seed(seed: int, chunk: int) -> int:
    """The seed of the ``chunk``-th request of one chat's answers: ``seed`` itself for the first,
    a hash of (seed, chunk) for the others, so chunks never repeat each other's draws."""
    if chunk == 0:
        return seed
    digest = hashlib.sha256(f"udcg-chunk:{seed}:{chunk}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def backoff_delay(attempt: int, base: float, cap: float, u: float) -> float:
    """Exponential backoff with jitter: uniform in [1/2, 1] x min(cap, base * 2**attempt); u in [0, 1)."""
    return min(cap, base * 2.0**attempt) * (0.5 + 0.5 * u)


RETRY_STATUSES = frozenset({408, 409, 429})  # plus every 5xx


# What a URL's user information may hold as it is (RFC 3986: unreserved, sub-delims, ':', '%XX'; and
# '@', read to the host's last '@'); anything else must be percent-encoded
_USERINFO = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*")


def check_url(url: str) -> None:
    """A base URL is parsed before any request: an http:// or https:// scheme, user information a
    URL can carry, host, port (1-65535), no fragment. No message quotes the user information, whatever
    it holds (``udcg.redact.mask_url``)."""
    from urllib.parse import urlsplit

    from udcg.redact import mask_url, userinfo

    if not isinstance(url, str):
        raise InputError(f"base URL {url!r} is a {type(url).__name__}, not a string (e.g. http://127.0.0.1:8000/v1)")
    shown = mask_url(url)
    if not url.startswith(("http://", "https://")):
        raise InputError(f"base URL {shown!r} must be an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    rest = url.partition("://")[2]
    cut = re.search(r"[/?#]", rest)
    if cut and "@" in rest[cut.start():]:  # user:pa/ss@host: read as host 'user', the password in the path and in every message
        shown = redact(f"{url.partition('://')[0]}://***@{rest.rpartition('@')[2]}")  # all before the last '@' hidden
        raise InputError(f"base URL {shown!r}: an '@' after a '/', '?' or '#': a user or password holding '/', '?', "
                         "'#' or '@' must be percent-encoded (%2F, %3F, %23, %40), as must an '@' in the path or query")
    info = userinfo(url)
    if info is not None and not _USERINFO.fullmatch(info):
        raise InputError(f"base URL {shown!r}: the user or password holds a character a URL cannot carry as it is (a "
                         "space, tab or other control character, '\"', '<', '>', '\\', '^', '`', '{', '|', '}', '[', ']', "
                         "a non-ASCII letter, or a '%' without two hex digits): it must be percent-encoded (%20 for "
                         "a space, %22 for '\"', %5C for '\\' ...)")
    if not all(c.isprintable() and not c.isspace() for c in url):
        raise InputError(f"base URL {shown!r} holds a space, tab or other control character: remove it or "
                         "percent-encode it (%20 for a space)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise InputError(redact(f"base URL {shown!r}: {e} (write it as http://HOST:PORT/v1)", [info or ""])) from None
    if not parts.hostname:
        raise InputError(f"base URL {shown!r}: no host (write it as http://HOST:PORT/v1)")
    if port == 0:
        raise InputError(f"base URL {shown!r}: port 0 (give the server's port, 1-65535)")
    if parts.fragment:
        raise InputError(f"base URL {shown!r}: a '#' fragment is not sent to a server (remove it)")


def check_key(key: str, env: str) -> None:
    """An API key an HTTP header can carry (printable ASCII), else one line naming the variable and the
    character, never the key: it can never be sent, so no request is made or retried."""
    if key.isascii() and key.isprintable():
        return
    at, bad = next((i, c) for i, c in enumerate(key) if not (c.isascii() and c.isprintable()))
    what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(
        bad, "a non-ASCII character" if not bad.isascii() else f"the control character {ord(bad):#04x}")
    raise InputError(f"the API key in the environment variable {env} holds {what} (character {at + 1} of {len(key)}): "
                     "an HTTP header cannot carry it; set the variable to the key alone (no line end, quotes or spaces)")


_JSON = {"Content-Type": "application/json"}


def request_headers(key: str, env: str) -> dict[str, str]:
    """A request's headers: JSON, and the key (``check_key``) as a bearer token when there is one."""
    if not key:
        return _JSON
    check_key(key, env)
    return {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` + ``/path``, with a query string (``?key=...``, a form some providers use) kept
    after the path, where the server reads it."""
    head, sep, query = base_url.partition("?")
    return f"{head.rstrip('/')}/{path}{sep}{query}"


def retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


def hint(status: int, api_key_env: str) -> str:
    if status in (401, 403):
        return f" (check the API key in the environment variable {api_key_env})"
    if status == 404:
        return " (check the base URL, which should end in /v1, and the model name)"
    return ""


def error_text(response) -> str:
    """The server's message in an error response: the JSON's ``error.message`` (OpenAI), ``message``
    or ``detail``, else the start of the text, else the reason phrase."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    message = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(message, dict):
        message = message.get("message") or message.get("detail")
    if not isinstance(message, str) or not message.strip():
        message = response.text.strip() if body is None else ""
    return message[:300] if message else response.reason_phrase
