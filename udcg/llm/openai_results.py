"""What an API backend's calls give per item: first-token log-probabilities (``ApiLogprobs``), and
a batch whose failed requests are kept beside the finished ones (``BatchError``, ``raise_on_errors``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from udcg.errors import BackendError


@dataclass(frozen=True, slots=True)
class ApiLogprobs:
    """First-token log-probabilities of the candidates for one chat, from the API's top list."""

    logprobs: dict[str, float]  # candidate -> logprob (-inf when absent from the top list)
    note: str = ""  # non-empty when a candidate was absent (its probability is censored: below the list's last)
    top: dict[str, float] | None = None  # the raw top list, token text -> logprob
    exact: bool = False  # scored exactly through /v1/completions (no top list involved)


class BatchError(BackendError):
    """Some requests of a batch failed after their retries. ``results`` holds, in input order, the
    value of every finished request and the ``BackendError`` of every failed one."""

    def __init__(self, message: str, results: list[Any]):
        super().__init__(message)
        self.results = results


def raise_on_errors(results: list[Any], what: str) -> list[Any]:
    failed = [i for i, r in enumerate(results) if isinstance(r, BackendError)]
    if failed:
        first = results[failed[0]]
        raise BatchError(f"{what}: {len(failed)} of {len(results)} requests failed; first (item {failed[0]}): {first}", results)
    return results
