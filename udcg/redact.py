"""Secret redaction: one function for every message, log line and saved text that may quote an API
key or a URL with credentials (a server may echo the Authorization header, cut, URL-encoded or
base64-encoded).

``redact(text, secrets)`` replaces, for each secret of 8 characters or more: the secret verbatim,
URL-encoded (either hex case, ``+`` for space), JSON-escaped, base64 (standard and URL-safe, at any
byte alignment, as inside an HTTP Basic header), any prefix or suffix of 8 characters or more of
each of these forms (an echo cut at a length limit), and any fragment of 4 characters or more of
the secret as written (an echo cut at both ends); and, whatever the secrets, the user information
and the query values of every URL (``http://user:pass@host/v1?key=abc`` ->
``http://***@host/v1?key=***``). ``env_secrets()`` collects the values of environment variables
whose names say they hold a secret.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, quote_plus, urlsplit

MASK = "***"
MIN_CUT = 8  # a shorter cut of an encoded form is not a usable secret, and matches too much ordinary text
MIN_FRAGMENT = 4  # fragments of the key as written, from either end or the middle
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
# scheme://userinfo@ : the userinfo is everything up to @ without a slash, space or quote
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*(?:://|%3A%2F%2F))([^/\s@'\"<>]+?)(@|%40)")
# the query string of a URL: each name=value keeps its name
_URL_QUERY = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s?#'\"<>]*\?)([^\s#'\"<>]*)")
_QUERY_VALUE = re.compile(r"(^|&)([^=&]*)=([^&]*)")


def _b64_forms(raw: bytes) -> set[str]:
    """Base64 of the secret at each of the 3 byte alignments, kept to the characters that depend
    on the secret alone (an embedded secret, as in base64("user:" + key), shifts its alignment)."""
    out = set()
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw).decode()
        whole_groups = (shift + len(raw)) // 3  # 3 bytes -> 4 characters; a partial last group depends on what follows
        core = enc[4 if shift else 0: whole_groups * 4]
        for form in (core, core.replace("+", "-").replace("/", "_")):
            if len(form) >= MIN_CUT:
                out.add(form)
    return out


@lru_cache(maxsize=64)
def _forms(secret: str) -> tuple[str, ...]:
    raw = secret.encode("utf-8")
    forms = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1], secret.replace("/", "\\/")}
    forms |= {f.replace(m, m.lower()) for f in list(forms) for m in re.findall(r"%[0-9A-F]{2}", f)} | \
             {re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), f) for f in list(forms)}
    forms |= _b64_forms(raw)
    return tuple(sorted((f for f in forms if len(f) >= MIN_CUT), key=len, reverse=True))


@lru_cache(maxsize=64)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern | None:
    """Every form, and every prefix and suffix of each form of MIN_CUT characters or more, longest first."""
    pieces: set[str] = set()
    for secret in secrets:
        for form in _forms(secret):
            pieces.update(form[:n] for n in range(MIN_CUT, len(form) + 1))
            pieces.update(form[-n:] for n in range(MIN_CUT, len(form) + 1))
        pieces.update(secret[i:j] for i in range(len(secret)) for j in range(i + MIN_FRAGMENT, len(secret) + 1))
    if not pieces:
        return None
    return re.compile("|".join(re.escape(p) for p in sorted(pieces, key=len, reverse=True)))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every form of every secret (see the module doc) and URL credentials masked."""
    if not isinstance(text, str):
        text = str(text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    text = _URL_QUERY.sub(lambda m: m.group(1) + _QUERY_VALUE.sub(lambda q: f"{q.group(1)}{q.group(2)}={MASK}", m.group(2)), text)
    keys = tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_CUT}))
    pattern = _pattern(keys) if keys else None
    return pattern.sub(MASK, text) if pattern is not None else text


def url_secrets(url: str) -> list[str]:
    """The credentials inside a URL (``user:pass``, ``pass``), to redact wherever they are echoed."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = []
    if parts.password:
        out += [parts.password, f"{parts.username or ''}:{parts.password}"]
    elif parts.username:
        out.append(parts.username)
    out += [value for _, _, value in (pair.partition("=") for pair in parts.query.split("&")) if len(value) >= MIN_CUT]
    return out


def env_secrets(extra_names: Iterable[str] = ()) -> list[str]:
    """Values of the environment variables named in ``extra_names`` or whose name says key, token,
    secret, password, credential or auth; and credentials inside URL-valued variables."""
    names = set(extra_names) | {n for n in os.environ if _SECRET_NAME.search(n)}
    out = [os.environ[n] for n in sorted(names) if os.environ.get(n)]
    for value in os.environ.values():
        if "://" in value and "@" in value:
            out += url_secrets(value)
    return out
