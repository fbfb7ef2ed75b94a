"""Streaming for ``udcg serve``, model-free: server-sent events in the OpenAI format, and the text
pieces to send while a backend decodes.

A backend that streams (``HFBackend.generate``/``complete`` with ``on_text``) tells the text of an
answer so far after each token. Not all of it can be sent yet: the final answer is cut at the first
stop string and (chat answers) stripped of surrounding whitespace, and a token may end inside a
character. ``releasable`` gives the part that no later token can change; ``DeltaStream`` sends
what is new in it for each answer, and at the end the rest of the final answer, so the pieces of
an answer put together are exactly the answer a request without ``stream`` gets.

The events: ``data: <chunk JSON>`` lines, each followed by a blank line, and ``data: [DONE]``
last (``sse``, ``DONE``). A chat stream sends each choice's role first, then content deltas, then a
chunk with its ``finish_reason`` (and its logprobs, when asked); a usage chunk with no choices
comes last when ``stream_options.include_usage`` is set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from udcg.llm.decoding import cut_at_stop

DONE = b"data: [DONE]\n\n"
_UNSETTLED_END = re.compile(r"[\s\ufffd]+$")  # trailing whitespace (may be stripped) or a half character


def sse(obj: Any) -> bytes:
    """One server-sent event carrying ``obj`` as JSON."""
    return b"data: " + json.dumps(obj, allow_nan=False, ensure_ascii=False).encode("utf-8") + b"\n\n"


def releasable(text: str, stop: Sequence[str], strip: bool) -> str:
    """The part of a growing answer that no later token can change: cut at the first stop string,
    without leading whitespace when the answer will be stripped, and without a tail that may still
    change (whitespace, an incomplete character, the start of a stop string)."""
    text, _ = cut_at_stop(text, stop)
    if strip:
        text = text.lstrip()
    for s in stop:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                text = text[:-k]
                break
    return _UNSETTLED_END.sub("", text)


class DeltaStream:
    """The pieces of each answer to send, as a backend tells how the answers grow.

    Answers are told as (i, j): answer j to prompt i; choice ``i * n + j`` of the response. A greedy
    decoding is one answer told as j = 0 and sent to all n choices of its prompt. ``send(choice,
    piece)`` sends a content piece, after ``opening()`` (when given) before the first; ``finish(answers)``
    sends what is left of each final answer."""

    def __init__(self, n: int, greedy: bool, stop: Sequence[str], strip: bool, send: Callable[[int, str], None],
                 opening: Callable[[], None] | None = None):
        self.n, self.greedy, self.stop, self.strip = n, greedy, tuple(stop), strip
        self._send_piece, self._opening = send, opening
        self.sent: dict[tuple[int, int], str] = {}

    def _send(self, choice: int, piece: str) -> None:
        if self._opening is not None:
            opening, self._opening = self._opening, None
            opening()
        self._send_piece(choice, piece)

    def _choices(self, i: int, j: int) -> range:
        return range(i * self.n, (i + 1) * self.n) if self.greedy else range(i * self.n + j, i * self.n + j + 1)

    def on_text(self, i: int, j: int, text: str) -> None:
        """A backend's ``on_text``: send what is new and settled in answer (i, j)."""
        before = self.sent.get((i, j), "")
        now = releasable(text, self.stop, self.strip)
        if len(now) > len(before) and now.startswith(before):  # a decoding that rewrote earlier text waits for the end
            self.sent[(i, j)] = now
            for choice in self._choices(i, j):
                self._send(choice, now[len(before):])

    def finish(self, answers: Sequence[Sequence[str]]) -> list[bool]:
        """Send the rest of every final answer (``answers[i][j]``); per choice, whether its pieces
        put together equal its answer (False only if the decoding rewrote text already sent)."""
        whole = []
        for i, texts in enumerate(answers):
            for j, answer in enumerate(texts):
                before = self.sent.get((i, 0 if self.greedy else j), "")
                if answer.startswith(before) and (len(answer) > len(before) or not before):  # at least one piece
                    self._send(i * self.n + j, answer[len(before):])
                whole.append(answer.startswith(before))
        return whole


def chunk_head(kind: str, head: dict, include_usage: bool) -> dict:
    """The fields every chunk of a stream repeats (``head``: from ``server_wire.response_head``);
    with ``include_usage``, ``usage: null`` until the last chunk, as OpenAI sends it."""
    return {**head, "object": kind, **({"usage": None} if include_usage else {})}


def chat_chunk(head: dict, index: int, delta: dict, finish: str | None = None, logprobs: dict | None = None) -> dict:
    return {**head, "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}


def text_chunk(head: dict, index: int, text: str, finish: str | None = None, logprobs: dict | None = None) -> dict:
    return {**head, "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}]}


def usage_chunk(head: dict, usage: dict) -> dict:
    return {**head, "choices": [], "usage": usage}
