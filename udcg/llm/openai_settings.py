"""The settings of an OpenAI-compatible backend (``udcg.llm.openai_backend.OpenAIBackend``), two
frozen values each checked once, when made: ``ClientSettings``, the HTTP client's (where requests
go, how many at once, their pace, timeout and retries), and ``ReadSettings``, how answers and
log-probabilities are asked for and read. ``from_options`` makes both from a ``ModelSpec``'s flat
options (``udcg.llm.registry``: ``--api-base``, ``--concurrency`` ... of every command)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from udcg import bounds
from udcg.errors import InputError
from udcg.llm.openai_target import SCORING
from udcg.llm.openai_wire import check_url


def _check(name: str, value: Any, bound: bounds.Bound) -> None:
    bounds.check_value(name, value, bound, "OpenAI backend")


@dataclass(frozen=True)
class ClientSettings:
    """The HTTP client's settings. ``base_urls``: one URL or several (a fleet), each ending where the
    OpenAI client's ``base_url`` ends (e.g. ``http://127.0.0.1:8000/v1``), kept as a tuple without
    a trailing slash. ``api_key_env``: the environment variable holding the key (unset: no
    Authorization header, fine for local servers). ``max_concurrency``: requests in flight.
    ``requests_per_minute``: request starts are spaced by 60/rpm seconds, retries included (None: no
    pace). ``timeout``: seconds a whole request may take. ``max_retries``: retries per request after
    the first attempt, with exponential backoff from ``backoff_base`` up to ``backoff_max`` seconds,
    jittered by a generator seeded with ``jitter_seed``. ``max_retry_after``: the longest
    ``Retry-After`` honoured; a server asking for a longer wait fails the request."""

    base_urls: str | Sequence[str] = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = bounds.DEFAULT_CONCURRENCY
    requests_per_minute: float | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0
    jitter_seed: int = 0

    def __post_init__(self) -> None:
        given = self.base_urls
        urls = [given] if isinstance(given, str) else list(given) if isinstance(given, Sequence) else None
        if not urls:
            raise InputError(f"OpenAI backend: base_urls must be one or more http:// or https:// URLs (e.g. "
                             f"http://127.0.0.1:8000/v1), got {'a ' + type(given).__name__ if urls is None else 'none'}")
        for url in urls:
            check_url(url)  # its scheme, host, port and user information, in one line that never quotes a password
        _check("max_concurrency", self.max_concurrency, bounds.CONCURRENCY)
        _check("timeout", self.timeout, bounds.SECONDS)
        if self.requests_per_minute is not None:  # None: no pace
            _check("requests_per_minute", self.requests_per_minute, bounds.RATE)
        _check("max_retries", self.max_retries, bounds.RETRIES)
        object.__setattr__(self, "base_urls", tuple(u.rstrip("/") for u in urls))


@dataclass(frozen=True)
class ReadSettings:
    """How answers and log-probabilities are asked for and read. ``top_logprobs``: the length of the
    chat top list asked for (20: the API's limit). ``max_n_per_request``: the server's cap on ``n``
    (OpenAI: 128); more answers per chat are asked for in several requests. ``candidate_tokens``:
    the first token of a candidate as the API's tokenizer writes it (e.g. ``{"NO-RESPONSE": "NO"}``);
    without it, the longest top-list token that is a prefix of the candidate is taken.
    ``tokenizer``: the served model's (None: the model's name); ``scoring``: the route of exact
    log-probabilities (``udcg.llm.openai_scoring``; ``SCORING``)."""

    top_logprobs: int = 20
    max_n_per_request: int = 128
    candidate_tokens: Mapping[str, str] | None = None
    tokenizer: str | None = None
    scoring: str = "auto"

    def __post_init__(self) -> None:
        _check("max_n_per_request", self.max_n_per_request, bounds.Bound(1, 10**6))
        _check("top_logprobs", self.top_logprobs, bounds.Bound(1, 20))
        if self.scoring not in SCORING:
            raise InputError(f"OpenAI backend: scoring must be one of {', '.join(SCORING)}, got {self.scoring!r}")


def from_options(options: Mapping[str, Any]) -> tuple[ClientSettings, ReadSettings, dict[str, Any]]:
    """(the client's settings, the reading's, what is left: ``name``) from flat options, each to its
    settings by name (``{"base_urls": ..., "timeout": 5, "scoring": "auto", "name": ...}``)."""
    client = {f.name for f in fields(ClientSettings)}
    read = {f.name for f in fields(ReadSettings)}
    rest = {k: v for k, v in options.items() if k not in client | read}
    return (ClientSettings(**{k: v for k, v in options.items() if k in client}),
            ReadSettings(**{k: v for k, v in options.items() if k in read}), rest)
