"""The model side of ``udcg serve``: ``ModelService`` answers checked chat and text-completion
requests with one backend, whole or streamed, one model call at a time, within a work budget.

It serves only a backend that declares it can be served (``capabilities.serve``; any other is
refused in one line), and reads what else it offers from what the backend declares, never by
probing its attributes:

- Streaming: ``capabilities.stream``: ``generate`` takes ``on_text`` and tells each answer as it
  grows; others are streamed one whole answer per choice.
- Token log-probabilities, token counts (``usage``, ``finish_reason``, the work budget) and text
  completions: a ``udcg.llm.base.Servable`` backend (open weights: ``HFBackend``), read by one
  teacher-forced forward pass (``hf_token_logprobs``, ``sequence_logprobs``). As vLLM does by
  default, they are the model's raw distribution (temperature 1), whatever temperature the answer
  was sampled at, over the answer text as the tokenizer re-tokenises it alone (as
  ``continuation_logprobs`` does); an empty chat answer lists the end token. No other backend can
  continue raw text (a chat API has no raw prompt).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from udcg.errors import InputError
from udcg.llm.base import BaseBackend, Chat, Servable
from udcg.llm.server_completions import (
    CompletionRequest,
    completion_logprobs,
    completions_body,
)
from udcg.llm.server_stream import (
    DONE,
    DeltaStream,
    chat_chunk,
    chunk_head,
    sse,
    text_chunk,
    usage_chunk,
)
from udcg.llm.server_watch import Watch
from udcg.llm.server_wire import (
    MAX_REQUEST_TOKENS,
    ChatRequest,
    RequestError,
    TokenLogprob,
    chat_logprobs,
    check_work,
    completion_body,
    finish_reason,
    response_head,
    usage_body,
)

Emit = Callable[[bytes], None]  # sends one server-sent event
LOGSOFTMAX_ROWS = 256  # positions per float32 log-softmax block (a long echoed prompt x a large vocabulary)


def sequence_logprobs(backend: Any, ids: Sequence[int], start: int, k: int) -> list[TokenLogprob]:
    """Each token of ``ids`` from position ``start`` on (start >= 1), scored given the tokens before
    it, with the top k (k >= 1) of its position: one forward pass of an HF backend's model."""
    import torch

    tok, model = backend.tokenizer, backend.model
    if start >= len(ids):
        return []
    with torch.inference_mode():
        logits = model(torch.tensor([list(ids)], device=model.device), use_cache=False,
                       logits_to_keep=len(ids) - start + 1).logits[0, :-1]
    rows = []
    for block in range(0, logits.shape[0], LOGSOFTMAX_ROWS):
        logp = torch.log_softmax(logits[block : block + LOGSOFTMAX_ROWS].float(), dim=-1)
        top_lp, top_ids = logp.topk(max(1, k), dim=-1)
        for pos in range(logp.shape[0]):
            token_id = int(ids[start + block + pos])
            top = tuple((tok.decode([int(t)]), float(lp)) for t, lp in zip(top_ids[pos], top_lp[pos], strict=True))
            rows.append(TokenLogprob(tok.decode([token_id]), float(logp[pos, token_id]), top))
    return rows


def answer_ids(backend: Any, text: str) -> list[int]:
    """An answer's tokens as the backend's tokenizer gives them for the text alone."""
    return list(backend.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def hf_token_logprobs(backend: Any, requests: Sequence[tuple[Chat, str]], k: int) -> list[list[TokenLogprob]]:
    """Token log-probabilities for a ``Servable`` backend, from its ``model``, ``tokenizer`` and ``encode(chat)``
    (the token ids up to the answer position, exactly as the backend scores them)."""
    out = []
    for chat, answer in requests:
        prompt, ids = list(backend.encode(chat)), answer_ids(backend, answer)
        end = backend.tokenizer.eos_token_id
        if not ids and end is not None:
            ids = [end]
        out.append(sequence_logprobs(backend, prompt + ids, len(prompt), k))
    return out


def token_logprobs_of(backend: BaseBackend) -> Callable | None:
    """The token-logprobs function of a backend, or None if it cannot provide one (not ``Servable``)."""
    if isinstance(backend, Servable):
        return lambda requests, k: hf_token_logprobs(backend, requests, k)
    return None


def token_counts(backend: BaseBackend, chat: Chat, answers: Sequence[str]) -> tuple[int, list[int]] | None:
    """(prompt tokens, tokens of each answer), or None when the backend has no tokenizer (not ``Servable``)."""
    if not isinstance(backend, Servable):
        return None
    return len(backend.encode(chat)), [len(answer_ids(backend, a)) for a in answers]


def check_servable(backend: BaseBackend) -> None:
    """An InputError, in one line, for a backend that does not declare ``capabilities.serve``."""
    if not backend.capabilities.serve:
        raise InputError(f"model {backend.name!r}: its backend ({type(backend).__name__}) does not declare that it can be "
                         "served (capabilities.serve); udcg serve serves a local transformers model (an offline alias, "
                         "a model folder or a hub id)")


def prompt_ids(backend: Servable, prompt: str | Sequence[int], i: int) -> list[int]:
    """A completions prompt as token ids: text is tokenised as the tokenizer does by default (its
    start token included, no chat template); ids are checked against the vocabulary."""
    tok = backend.tokenizer
    if isinstance(prompt, str):
        ids = list(tok(prompt)["input_ids"])
        if not ids:
            raise RequestError(400, f"prompt {i} has no tokens (this tokenizer adds no start token to an empty text)", "prompt")
        return ids
    size = len(tok)
    if max(prompt) >= size:
        raise RequestError(400, f"prompt {i}: token id {max(prompt)} is outside this model's vocabulary of {size}", "prompt")
    return list(prompt)


# ---------------------------------------------------------------- answering requests


class ModelService:
    """One backend answering checked requests (``server_wire.ChatRequest``,
    ``server_completions.CompletionRequest``), one model call at a time (``lock``): the response
    body, or with ``emit`` the server-sent events of its stream (``server_stream``)."""

    def __init__(self, backend: BaseBackend, name: str, max_request_tokens: int = MAX_REQUEST_TOKENS):
        check_servable(backend)
        self.backend, self.name, self.max_request_tokens = backend, name, max_request_tokens
        self.lock = threading.Lock()
        self.token_logprobs = token_logprobs_of(backend)
        self.streams, self.completes = backend.capabilities.stream, isinstance(backend, Servable)

    def chat(self, request: ChatRequest, emit: Emit | None, watch: Watch | None = None) -> dict | None:
        """A chat completion: the response body, or with ``emit`` every event of its stream.
        ``watch``: stops the model work past the time budget or once the client left (``server_watch``)."""
        params, n = request.params, request.params.n
        watch = watch or Watch()
        greedy = params.temperature == 0
        if request.logprobs and self.token_logprobs is None:
            raise RequestError(400, f"backend {self.name!r} cannot list token log-probabilities (logprobs needs an "
                                    "open-weights backend)", "logprobs")
        head = chunk_head("chat.completion.chunk", response_head("chat.completion", self.name), request.include_usage)
        with self.lock:
            watch.start()
            if isinstance(self.backend, Servable):
                scored = (1 if greedy else n) if request.logprobs else 0
                check_work(len(self.backend.encode(request.chat)) * (1 + scored), n * params.max_new_tokens,
                           self.max_request_tokens, bool(scored))
            if emit is None:
                told = {"on_text": watch.on_text()} if self.streams else {}
                answers = self.backend.generate([request.chat], params, **told)[0]
            else:
                def opening() -> None:  # each choice's role first
                    for c in range(n):
                        emit(sse(chat_chunk(head, c, {"role": "assistant", "content": ""})))

                def send(c: int, piece: str) -> None:
                    emit(sse(chat_chunk(head, c, {"content": piece})))

                stream = DeltaStream(n, greedy, params.stop, True, send, opening)
                told = {"on_text": watch.on_text(stream.on_text)} if self.streams else {}
                answers = self.backend.generate([request.chat], params, **told)[0]
                stream.finish([answers])
            logprobs = None
            if request.logprobs:
                distinct = list(dict.fromkeys(answers))  # greedy: n equal answers, scored once
                by_answer = {}
                for a in distinct:  # one at a time, watched
                    watch.check()
                    by_answer[a] = self.token_logprobs([(request.chat, a)], max(1, request.top_logprobs))[0]
                logprobs = [by_answer[a] for a in answers]
            counts = token_counts(self.backend, request.chat, answers)
        if emit is None:
            return completion_body(request, self.name, answers, logprobs, counts)
        for c in range(n):
            tokens = None if logprobs is None else chat_logprobs(logprobs[c], request.top_logprobs)
            emit(sse(chat_chunk(head, c, {}, finish_reason(counts and counts[1][c], params.max_new_tokens), tokens)))
        if request.include_usage and counts is not None:
            emit(sse(usage_chunk(head, usage_body(counts[0], sum(counts[1])))))
        emit(DONE)
        return None

    def text(self, request: CompletionRequest, emit: Emit | None, watch: Watch | None = None) -> dict | None:
        """A text completion (``/v1/completions``): the response body, or with ``emit`` its stream;
        ``watch`` as in ``chat``."""
        watch = watch or Watch()
        if not self.completes:
            raise RequestError(400, f"backend {self.name!r} cannot continue raw text: /v1/completions needs an open-weights "
                                    "(transformers) backend; use /v1/chat/completions", "prompt")
        params, n, k = request.params, request.params.n, request.logprobs
        greedy = params.temperature == 0
        tok = self.backend.tokenizer
        head = chunk_head("text_completion", response_head("text_completion", self.name), request.include_usage)
        with self.lock:
            watch.start()
            prompts = [prompt_ids(self.backend, p, i) for i, p in enumerate(request.prompts)]
            scored = 0 if k is None else (1 if greedy else n)
            check_work(sum(map(len, prompts)) * (1 + scored), len(prompts) * n * request.max_tokens, self.max_request_tokens,
                       bool(scored))
            shown = [p if isinstance(p, str) else tok.decode(ids) for p, ids in zip(request.prompts, prompts)]
            echoed = [shown[c // n] if request.echo else "" for c in range(len(prompts) * n)]
            stream = None
            if emit is not None:
                def send(c: int, piece: str) -> None:
                    emit(sse(text_chunk(head, c, piece)))

                def opening() -> None:  # the echoed prompts first
                    for c, text in enumerate(echoed):
                        if text:
                            send(c, text)

                stream = DeltaStream(n, greedy, params.stop, False, send, opening)
            if request.max_tokens == 0:  # the prompt scored, nothing generated
                answers = [[""] * n for _ in prompts]
            else:
                answers = self.backend.complete(prompts, params, on_text=watch.on_text(stream.on_text if stream else None))
            if stream is not None:
                stream.finish(answers)
            texts = [answers[c // n][c % n] for c in range(len(prompts) * n)]
            lengths = [len(answer_ids(self.backend, t)) for t in texts]
            logprobs = None if k is None else self._text_logprobs(request, prompts, shown, texts, watch)
        finish = [finish_reason(m, request.max_tokens) for m in lengths]
        usage = (sum(map(len, prompts)), sum(lengths))
        if emit is None:
            return completions_body(self.name, [e + t for e, t in zip(echoed, texts)], finish, logprobs, usage)
        for c in range(len(texts)):
            emit(sse(text_chunk(head, c, "", finish[c], None if logprobs is None else logprobs[c])))
        if request.include_usage:
            emit(sse(usage_chunk(head, usage_body(*usage))))
        emit(DONE)
        return None

    def _text_logprobs(self, request: CompletionRequest, prompts: list[list[int]], shown: list[str],
                       texts: list[str], watch: Watch) -> list[dict]:
        """Per choice, the completions ``logprobs`` of its tokens (the prompt's first, when echoed)."""
        n, k, out, done = request.params.n, request.logprobs or 0, [], {}
        for c, text in enumerate(texts):
            i = c // n
            if (i, text) not in done:  # greedy: n equal answers, scored once
                watch.check()
                ids = prompts[i] + answer_ids(self.backend, text)
                start = 1 if request.echo else len(prompts[i])
                tokens = sequence_logprobs(self.backend, ids, start, k)
                first = self.backend.tokenizer.decode([prompts[i][0]]) if request.echo else None
                done[(i, text)] = completion_logprobs(tokens, k, 0 if request.echo else len(shown[i]), first)
            out.append(done[(i, text)])
        return out
