"""A third party's backend (an entry point of the ``udcg.backends`` group, or ``register_scheme``)
behind the checks a server's reply gets: its code is a boundary, like a server.

``build(factory, rest, options, scheme, origin)`` calls the plugin's factory; a factory that raises
(a constructor that takes none of the options udcg passes included) or makes no ``BaseBackend`` is
one ``InputError`` naming the plugin (exit 2: the installed package is the user's setup).
``Checked`` forwards every call to the plugin's backend and checks what comes back: a list of one
result per request, log-probabilities that are numbers <= 0 (``-inf`` for a candidate outside a
list) for every candidate asked, ``n`` answers that are strings per chat. A result that breaks the
contract, or an exception the plugin raises, is one ``BackendError`` naming the plugin, the call,
the item and the field, as a malformed server reply is. Every message is masked (``udcg.redact``:
the API key and the other secrets of the environment), whatever the plugin put in it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

from udcg.errors import BackendError, InputError, UdcgError
from udcg.llm.base import BaseBackend, Capabilities, GenerationParams, Reading, Servable
from udcg.redact import env_secrets, redact

log = logging.getLogger(__name__)


def _masked(text: str, secrets: Sequence[str] = ()) -> str:
    return redact(text, [*env_secrets(), *secrets])


def build(factory: Callable[..., Any], rest: str, options: Mapping[str, Any], scheme: str, origin: str) -> BaseBackend:
    """The plugin's backend of ``scheme:rest``, made by ``factory(rest, **options)`` and checked."""
    where = f"model '{scheme}:{rest}': the {scheme!r} backend ({origin})"
    try:
        backend = factory(rest, **options)
    except UdcgError as e:  # the plugin's own located error: kept, masked
        raise type(e)(_masked(str(e))) from None
    except TypeError as e:
        log.debug("%s: constructor failed", where, exc_info=True)
        given = ", ".join(sorted(options)) or "none"
        raise InputError(_masked(f"{where} cannot be built with the options udcg passes ({given}): {e} (its constructor "
                                 "must take the model name and these keywords: def __init__(self, model, **options))")) from None
    except Exception as e:  # noqa: BLE001 (a third party's code: any fault is one line)
        log.debug("%s: constructor failed", where, exc_info=True)
        raise InputError(_masked(f"{where} raised {type(e).__name__} when built: {e} (a fault of that package or of "
                                 "its settings)")) from None
    if not isinstance(backend, BaseBackend):
        raise InputError(f"{where} made a {type(backend).__name__}, not a udcg.llm.base.BaseBackend (derive the "
                         "backend class from it)")
    if not isinstance(backend.name, str) or not backend.name.strip():
        raise InputError(f"{where} made a backend whose name is {backend.name!r}, not a non-empty string (set "
                         "self.name to the model name results record, e.g. the model after the colon)")
    if not isinstance(backend.capabilities, Capabilities):
        raise InputError(f"{where} made a backend whose capabilities are a {type(backend.capabilities).__name__}, not "
                         "a udcg.llm.base.Capabilities (declare capabilities = Capabilities(...) on the class)")
    if isinstance(backend, Servable):  # udcg serve reads its tokenizer and model: the class itself is the contract
        return backend
    return Checked(backend, f"the {scheme!r} backend ({origin})")


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _fault(what: str, value: Any) -> str:
    shown = repr(value)
    return f"{what} is {'a ' + type(value).__name__ + ' ' if not _number(value) else ''}{shown[:80]}"


class Checked(BaseBackend):
    """``backend`` (a plugin's) with every result checked and every fault one masked ``BackendError``."""

    def __init__(self, backend: BaseBackend, where: str) -> None:
        self.inner, self.where = backend, where
        self.name = backend.name

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return self.inner.capabilities

    @property
    def notes(self) -> Mapping[str, str]:  # type: ignore[override]
        notes = self._call("notes", lambda: self.inner.notes)
        if not isinstance(notes, Mapping) or not all(isinstance(v, str) for v in notes.values()):
            self._broken("notes", _fault("notes", notes), "a mapping of strings")
        return notes

    @property
    def concurrent_requests(self) -> int:
        return self._count("concurrent_requests", 100_000)

    @property
    def chunk_size(self) -> int:
        return self._count("chunk_size", 1_000_000)

    def _count(self, attr: str, high: int) -> int:
        """The plugin's ``attr``: an int in [1, ``high``], else one ``BackendError``."""
        n = self._call(attr, lambda: getattr(self.inner, attr))
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= high:
            self._broken(attr, _fault(attr, n), f"an int in [1, {high}]")
        return n

    def __getattr__(self, attr: str) -> Any:  # anything else the plugin offers (its own settings)
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    # ------------------------------------------------------------ the calls, checked

    def _call(self, method: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except UdcgError as e:
            if _masked(str(e)) == str(e):
                raise
            raise type(e)(_masked(str(e))) from None
        except Exception as e:  # noqa: BLE001
            log.debug("%s: %s failed", self.where, method, exc_info=True)
            said = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise BackendError(_masked(f"{self.name}: {self.where}: {method} raised {said} (a fault of that package or "
                                       "of the server it uses)")) from None

    def _broken(self, method: str, problem: str, wanted: str) -> None:
        raise BackendError(_masked(f"{self.name}: {self.where}: {method}: {problem}, not {wanted} (the backend breaks "
                                   "udcg.llm.base.Backend's contract: fix or update that package)"))

    def _rows(self, method: str, rows: Any, n: int) -> list:
        if not isinstance(rows, (list, tuple)):
            self._broken(method, _fault("the result", rows), f"a list of {n} results, one per request")
        if len(rows) != n:
            self._broken(method, f"{len(rows)} results for {n} requests", "one result per request, in order")
        return list(rows)

    def _logprob(self, method: str, where: str, value: Any) -> None:
        if not _number(value) or math.isnan(value) or value > 1e-4:
            self._broken(method, _fault(where, value), "a log-probability (a number <= 0; -inf for a candidate "
                                                       "outside a top list)")

    def _candidates(self, method: str, i: int, row: Any, candidates: Sequence[str]) -> None:
        if not isinstance(row, Mapping):
            self._broken(method, _fault(f"result[{i}]", row), "a mapping {candidate: log-probability}")
        for c in candidates:
            if c not in row:
                self._broken(method, f"result[{i}] has no {c!r}", "a log-probability for every candidate asked")
            self._logprob(method, f"result[{i}][{c!r}]", row[c])

    def next_token_logprobs(self, chats, candidates):
        rows = self._rows("next_token_logprobs", self._call("next_token_logprobs",
                                                            lambda: self.inner.next_token_logprobs(chats, candidates)), len(chats))
        for i, row in enumerate(rows):
            self._candidates("next_token_logprobs", i, row, candidates)
        return rows

    def _api_rows(self, method: str, chats, candidates) -> list:
        rows = self._rows(method, self._call(method, lambda: getattr(self.inner, method)(chats, candidates)), len(chats))
        for i, row in enumerate(rows):
            if isinstance(row, BackendError):  # a failed request kept beside the finished ones
                continue
            if not isinstance(getattr(row, "logprobs", None), Mapping):
                self._broken(method, _fault(f"result[{i}]", row), "an ApiLogprobs (udcg.llm.openai_results)")
            self._candidates(method, i, row.logprobs, candidates)
            top = getattr(row, "top", None)
            if top is not None and not (isinstance(top, Mapping) and all(_number(v) for v in top.values())):
                self._broken(method, _fault(f"result[{i}].top", top), "None or a mapping {token: log-probability}")
        return rows

    def first_token_logprobs(self, chats, candidates):
        return self._api_rows("first_token_logprobs", chats, candidates)

    def first_token_scores(self, chats, candidates):
        return self._api_rows("first_token_scores", chats, candidates)

    def continuation_logprobs(self, requests):
        rows = self._rows("continuation_logprobs", self._call("continuation_logprobs",
                                                              lambda: self.inner.continuation_logprobs(requests)), len(requests))
        for i, row in enumerate(rows):
            if not isinstance(row, (list, tuple)):
                self._broken("continuation_logprobs", _fault(f"result[{i}]", row), "a list of token log-probabilities")
            for j, value in enumerate(row):
                self._logprob("continuation_logprobs", f"result[{i}][{j}]", value)
        return rows

    def _answers(self, method: str, i: int, answers: Any, n: int) -> None:
        if not isinstance(answers, (list, tuple)) or len(answers) != n:
            self._broken(method, _fault(f"result[{i}]", answers), f"a list of {n} answer strings (params.n)")
        for j, a in enumerate(answers):
            if not isinstance(a, str):
                self._broken(method, _fault(f"result[{i}][{j}]", a), "an answer string")

    def generate(self, chats, params: GenerationParams = GenerationParams(), **kw):
        rows = self._rows("generate", self._call("generate", lambda: self.inner.generate(chats, params, **kw)), len(chats))
        for i, answers in enumerate(rows):
            self._answers("generate", i, answers, params.n)
        return rows

    def can_read(self) -> bool:
        return bool(self._call("can_read", self.inner.can_read))

    def read(self, chats, candidates, continuations, max_new_tokens=32):
        rows = self._rows("read", self._call("read", lambda: self.inner.read(chats, candidates, continuations,
                                                                             max_new_tokens)), len(chats))
        for i, row in enumerate(rows):
            if not isinstance(row, Reading):
                self._broken("read", _fault(f"result[{i}]", row), "a udcg.llm.base.Reading")
            self._candidates("read", i, row.first, candidates)
            self._answers("read", i, [row.answer], 1)
            if not isinstance(row.continuation, (list, tuple)) or not all(_number(v) and v <= 1e-4 for v in row.continuation):
                self._broken("read", _fault(f"result[{i}].continuation", row.continuation), "a list of log-probabilities")
        return rows

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            self._call("close", close)
