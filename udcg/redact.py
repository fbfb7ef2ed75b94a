"""Secret redaction: one function for every message, log line and saved text that may quote an API
key or a URL with credentials (a server may echo the Authorization header, cut, URL-encoded or
base64-encoded).

``redact(text, secrets)`` replaces, for each secret of 8 characters or more: the secret verbatim,
URL-encoded (either hex case, ``+`` for space), JSON-escaped, base64 (standard and URL-safe, at any
byte alignment, as inside an HTTP Basic header), any prefix or suffix of 8 characters or more of
each of these forms (an echo cut at a length limit), and any fragment of 4 characters or more of
the secret as written (an echo cut at both ends) that holds a character beyond the key's public
type prefix and, under 8 characters, is no run of letters as a word is written (``serv`` of a
value holding "server" would garble "service" in every message) (``PUBLIC_PREFIXES``: ``sk-proj-``, ``gsk_``, ...; "proj" or "-pro" alone tell nothing
and would garble ``my-project`` and ``--no-progress`` in every message); a shorter secret (a
7-character key) wherever it stands as a whole word, verbatim, URL-encoded or JSON-escaped (a cut
of it would match ordinary text); and, whatever the secrets, the user information and the query
values of every URL (``http://user:pass@host/v1?key=abc`` -> ``http://***@host/v1?key=***``; a
password holding an unencoded ``/``, ``@`` or ``'`` is masked whole). ``userinfo(url)``, ``url_secrets(url)``
and ``mask_url(url)`` read the credentials of a string known to be one URL, whatever characters they
hold (a space or a quote, which in running text cannot be told from what follows a URL, so that
``udcg.llm.openai_wire.check_url`` refuses them in a base URL). ``env_secrets()`` collects the values of environment
variables whose names say they hold a secret. ``redact_echo(text, secrets)`` is ``redact`` for a
model's answer: text is changed only where a secret's form of 8 characters or more (or a short
secret as a word) is in it, a check of a few substring tests.
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
# The published type prefixes of API keys (OpenAI, Anthropic, OpenRouter, Groq, xAI, Perplexity,
# NVIDIA): the same for every key of its kind, so a fragment inside one is no secret. (A prefix
# under MIN_FRAGMENT characters, as sk- or hf_, holds no fragment: it needs no entry.)
PUBLIC_PREFIXES = ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-ant-api03-", "sk-ant-admin01-", "sk-or-v1-", "gsk_",
                   "xai-", "pplx-", "nvapi-")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
# scheme://userinfo@ : the userinfo runs to the last @ (or %40) before a space, '"', '<' or '>', so that an
# unencoded @ (or a ', a sub-delimiter a URL may hold) in a password is masked whole; one holding a slash
# is the userinfo when a colon comes before its first slash (user:pa/ss@host); a path with an @ in it
# (host/a@b) is not
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*(?:://|%3A%2F%2F))((?:[^/\s\"<>]*:[^\s\"<>]*|[^/\s\"<>]+))(@|%40)")
# the same read of a string known to be one URL, whatever its characters (a space, a quote, a tab)
_WHOLE_USERINFO = re.compile(r"(?is)([a-z][a-z0-9+.-]*://)((?:[^/]*:.*|[^/]+))@")
_WORD = r"(?<![A-Za-z0-9_\-]){}(?![A-Za-z0-9_\-])"  # a short secret as a whole word
# a short fragment that reads as (part of) a word: "serv" or "ults" of a value that holds English words
# would garble "service" and "results" in every message, and tells an attacker next to nothing
_WORDLIKE = re.compile(r"[A-Za-z][a-z]*")
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
        public = max((len(p) for p in PUBLIC_PREFIXES if secret.startswith(p) and len(secret) > len(p)), default=0)
        pieces.update(cut for i in range(len(secret))
                      for j in range(max(i + MIN_FRAGMENT, public + 1), len(secret) + 1)
                      if len(cut := secret[i:j]) >= MIN_CUT or not _WORDLIKE.fullmatch(cut))
    if not pieces:
        return None
    return re.compile("|".join(re.escape(p) for p in sorted(pieces, key=len, reverse=True)))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every form of every secret (see the module doc) and URL credentials masked."""
    if not isinstance(text, str):
        text = str(text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    text = _URL_QUERY.sub(lambda m: m.group(1) + _QUERY_VALUE.sub(lambda q: f"{q.group(1)}{q.group(2)}={MASK}", m.group(2)), text)
    secrets = [s for s in secrets if isinstance(s, str) and s.strip()]
    keys = tuple(sorted({s for s in secrets if len(s) >= MIN_CUT}))
    pattern = _pattern(keys) if keys else None
    text = pattern.sub(MASK, text) if pattern is not None else text
    for short in sorted({s for s in secrets if len(s) < MIN_CUT}, key=len, reverse=True):
        text = _short_pattern(short).sub(MASK, text)
    return text


@lru_cache(maxsize=64)
def _short_pattern(secret: str) -> re.Pattern:
    forms = sorted({secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}, key=len, reverse=True)
    return re.compile("|".join(_WORD.format(re.escape(f)) for f in forms))


def redact_echo(text: str, secrets: Iterable[str]) -> str:
    """``text`` (a model's answer) as it is, unless a secret is echoed in it: then ``redact``'s."""
    for s in secrets:
        if not isinstance(s, str) or not s.strip():
            continue
        if len(s) < MIN_CUT:
            if s in text and _short_pattern(s).search(text):
                return redact(text, secrets)
        elif any(f[:MIN_CUT] in text or f[-MIN_CUT:] in text for f in _forms(s)):
            return redact(text, secrets)
    return text


def userinfo(url: str) -> str | None:
    """The user information of one URL (``user:pass`` of ``http://user:pass@host/v1``), None when it
    has none, whatever characters it holds: the part of the host before its last ``@``, else (a
    password holding an unencoded ``/``, ``?`` or ``#``) as ``redact`` reads it in text, to the
    URL's last ``@`` when a colon comes before the first ``/``."""
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in netloc:
        return netloc.rpartition("@")[0]
    found = _WHOLE_USERINFO.match(url)
    return found.group(2) if found else None


def mask_url(url: str) -> str:
    """``url`` as a message may show it: its user information and query values masked (``redact``),
    whatever characters they hold."""
    info = userinfo(url)
    if info is not None:
        scheme, _, rest = url.strip().partition("://")
        url = f"{scheme}://{MASK}@{rest[len(info) + 1:]}"
    return redact(url)


def url_secrets(url: str) -> list[str]:
    """The credentials inside a URL (the password; the whole user information too when the password
    is short or absent, as a token written ``http://TOKEN@host``; long query values), to redact
    wherever they are echoed, whatever characters they hold (base64 of ``user:pass``, as in a Basic
    header, is among a long password's forms)."""
    info = userinfo(url)
    out = []
    if info:  # as the mask reads it: a password may hold an unencoded / or @; the user name alone is
        user, colon, password = info.partition(":")  # no secret (its fragments would garble "user" in messages)
        out += ([password] + ([info] if len(password) < MIN_CUT else [])) if colon and password else [info]
    if info is not None:  # the rest as a URL of its own: a '#' or '?' in a password starts nothing
        scheme, _, rest = url.strip().partition("://")
        url = f"{scheme}://{rest[len(info) + 1:]}"
    try:
        query = urlsplit(url).query
    except ValueError:
        query = url.partition("?")[2]
    out += [value for _, _, value in (pair.partition("=") for pair in query.split("&")) if len(value) >= MIN_CUT]
    return out


def _is_path(value: str) -> bool:
    """An absolute path to something that exists (``SSH_AUTH_SOCK``, ``XAUTHORITY``): a place, no secret."""
    return os.path.isabs(value) and os.path.exists(value)


def env_secrets(extra_names: Iterable[str] = ()) -> list[str]:
    """Values of the environment variables named in ``extra_names`` or whose name says key, token,
    secret, password, credential or auth (but not an existing absolute path, as ``SSH_AUTH_SOCK``);
    and credentials inside URL-valued variables."""
    named = set(extra_names)  # the API key: masked whatever its length
    names = named | {n for n in os.environ if SECRET_NAME.search(n)}
    out = [os.environ[n] for n in sorted(names) if os.environ.get(n) and
           (n in named or (len(os.environ[n]) >= MIN_CUT and not _is_path(os.environ[n])))]
    for value in os.environ.values():
        if "://" in value and "@" in value:
            out += url_secrets(value)
    return out
