"""The members of an API backend's fleet (its base URLs) and what is known of each: which member a
request's next attempt goes to, and which members are down.

Each request takes its own turn: its first attempt goes to the next member in a round-robin over
requests, and each later attempt to the member after the one that failed it (never a counter
shared by every request in flight, which let a request's retries all land on one dead member).
A member that could not be reached (connection refused or dropped, a timeout) is down for
``DOWN_SECONDS``: new requests and retries go to the members that are up, and when that time has
passed, the next request tries it again (a member that comes back is used again; one that flaps
is left again). The backend passes a request that met an unreachable member at once to the next
member not yet tried in that round; only a round that ends without an answer counts as a retry.
Everything here runs on the transport's event loop (one thread): no locks.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence

from udcg.redact import redact

log = logging.getLogger(__name__)

DOWN_SECONDS = 5.0  # how long an unreachable member is left alone before a request tries it again


class Fleet:
    """Members (base URLs) in a fixed order; ``first()`` and ``after(i)`` choose, ``failed`` / ``answered`` learn."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = tuple(urls)
        self._turn = itertools.count()
        self._down_until = [0.0] * len(self.urls)
        self.failures = [0] * len(self.urls)  # attempts that found the member unreachable
        self._last: dict[int, str] = {}  # member -> the last way it could not be reached

    def _up(self, i: int, now: float) -> bool:
        return now >= self._down_until[i]

    def first(self) -> int:
        """The member of a new request's first attempt: the next in turn that is up (any, if none is)."""
        return self._next_up(next(self._turn) % len(self.urls))

    def after(self, i: int) -> int:
        """The member of a request's next attempt after one on member ``i``: the next one that is up."""
        return self._next_up((i + 1) % len(self.urls))

    def _next_up(self, start: int) -> int:
        now, n = time.monotonic(), len(self.urls)
        for step in range(n):
            j = (start + step) % n
            if self._up(j, now):
                return j
        return start

    def failed(self, i: int, problem: str) -> None:
        """Member ``i`` could not be reached: down for ``DOWN_SECONDS`` (a warning when it goes down)."""
        now = time.monotonic()
        was_up = self._up(i, now)
        self._down_until[i] = now + DOWN_SECONDS
        self.failures[i] += 1
        self._last[i] = problem
        if was_up and len(self.urls) > 1:
            others = any(self._up(j, now) for j in range(len(self.urls)) if j != i)
            then = ("its requests go to the other members" if others else
                    "no member is up now: requests back off and try them in turn")
            log.warning("%s", redact(f"fleet member {self.urls[i]} is down ({problem}); {then}, and it is tried "
                                     f"again in {DOWN_SECONDS:g}s"))

    def answered(self, i: int) -> None:
        """Member ``i`` answered: up again (a note when it had been down)."""
        if self._down_until[i]:
            self._down_until[i] = 0.0
            log.info("%s", redact(f"fleet member {self.urls[i]} answers again"))

    def note(self) -> str | None:
        """A line naming the members that were down during the run, or None."""
        if len(self.urls) < 2 or not any(self.failures):
            return None
        down = [f"{self.urls[i]} ({self.failures[i]} attempts failed; last: {self._last[i]})"
                for i in range(len(self.urls)) if self.failures[i]]
        return redact(f"fleet member{'s' if len(down) > 1 else ''} down during the run: {'; '.join(down)}; "
                      "their requests were retried on the other members")
