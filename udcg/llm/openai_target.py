"""Where an ``openai:`` model's requests go (``target``), and the one sentence every message about
a missing or unreachable server ends with (``SERVER_SOURCES``): the flag, the config key and the
environment variables that set it. No silent remote default: OpenAI's own API is the target only
when nothing names a server, and then only with a key."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from udcg.errors import InputError

OPENAI_URL = "https://api.openai.com/v1"
SCORING = ("auto", "completions", "top-logprobs")  # exact scoring through /v1/completions: try / require / never
SERVER_SOURCES = ("--api-base (udcg annotate, answer, judge), reader.api_base (a udcg validate config), "
                  "or $UDCG_OPENAI_BASE_URLS / $OPENAI_BASE_URL")


def split_urls(text: str) -> list[str]:
    """Base URLs written as one comma-separated string (``--api-base``, ``reader.api_base``,
    ``$UDCG_OPENAI_BASE_URLS``): split only at a comma that starts another URL (``,http://``), so that
    a comma inside a password or a query stays where it is."""
    pieces = (u.strip().strip(",").strip() for u in re.split(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)", text))
    return [u for u in pieces if u]


def target(base_urls: str | Sequence[str] | None, api_key_env: str = "OPENAI_API_KEY") -> tuple[list[str], str]:
    """Where an ``openai:`` model's requests go and what set it: the given URLs, else the
    comma-separated ``UDCG_OPENAI_BASE_URLS``, else ``OPENAI_BASE_URL``, else OpenAI's own API,
    which is refused without a key (``InputError`` naming every way to give a server)."""
    if base_urls:
        return [base_urls] if isinstance(base_urls, str) else list(base_urls), "given"
    for var in ("UDCG_OPENAI_BASE_URLS", "OPENAI_BASE_URL"):
        env = os.environ.get(var)
        if env and env.strip(" ,"):
            return split_urls(env), f"${var}"
    if not os.environ.get(api_key_env):
        raise InputError(f"no server given, so the model would go to OpenAI's API ({OPENAI_URL}), and ${api_key_env} "
                         f"holds no key: give the server with {SERVER_SOURCES}, or set ${api_key_env} to use OpenAI")
    return [OPENAI_URL], f"OpenAI's API (no server given by {SERVER_SOURCES})"
