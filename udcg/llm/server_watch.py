"""Bounds on one request's model work in ``udcg serve``, beside the token budget of ``server_wire``:
time and a client that went away.

``Watch.check()`` is called by ``server_model.ModelService`` before the model starts and after each
token a backend tells (``on_text``), streamed or not: it stops a request whose model work has run
past the server's time budget (a 400 naming the budget: n = 1000 x max_tokens = 32 fits the token
budget but ran for minutes on a CPU) and one whose client has closed its connection (``ClientGone``:
nobody is left to answer, and the next client would wait for it). The time runs from the moment the
request gets the model, not while it waits for the lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from udcg.llm.server_wire import RequestError

MAX_REQUEST_SECONDS = 60.0  # the default time budget; udcg's own client gives up after 60 s by default
CHECK_EVERY = 0.2  # seconds between two looks at the client's connection


class ClientGone(Exception):
    """The client closed its connection: the request's work stops, and no response is written."""


class Watch:
    """The time budget (``seconds``) and the client's presence (``gone()``: True once it left) of
    one request."""

    def __init__(self, seconds: float = MAX_REQUEST_SECONDS, gone: Callable[[], bool] | None = None):
        self.seconds, self.gone = seconds, gone
        self.deadline = float("inf")
        self._next_look = 0.0

    def start(self) -> None:
        """The request has the model: its time starts now (and a client that left while it waited stops it)."""
        self.deadline = time.monotonic() + self.seconds
        self._next_look = 0.0
        self.check()

    def check(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise RequestError(400, f"this request ran past this server's time budget of {self.seconds:g} s of model "
                                    "work and was stopped (ask for fewer answers or tokens, or split the request; the "
                                    "server's --max-request-seconds sets the budget)", "max_tokens")
        if self.gone is not None and now >= self._next_look:
            self._next_look = now + CHECK_EVERY
            if self.gone():
                raise ClientGone

    def on_text(self, told: Callable[[int, int, str], None] | None = None) -> Callable[[int, int, str], None]:
        """A backend's ``on_text``: check, then pass the text on to ``told`` (a stream) when given."""
        def on_text(i: int, j: int, text: str) -> None:
            self.check()
            if told is not None:
                told(i, j, text)

        return on_text
