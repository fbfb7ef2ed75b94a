"""Exact log-probabilities of given text through a server that scores text: ``POST /v1/completions``
with the prompt as token ids, ``echo: true``, ``logprobs: 1`` and ``max_tokens: 1`` (vLLM, SGLang and
``udcg serve`` answer it; lm-evaluation-harness scores through local completions the same way).

The ids are those the local model would score (``udcg.llm.chat_tokens``: the chat template of a
tokenizer loaded here, no weights), so ``NO-RESPONSE``'s first token, the whole ``NO-RESPONSE`` and a
reference answer get the probabilities the local ``first-token``/``sequence`` paths compute, up to
float noise, wherever they rank: no top-k list is involved. One request per chat scores all its
continuations (p_abs and the answer likelihood together).

A chat-only server (OpenAI's API) cannot: ``CompletionsScorer.check`` finds that out once, with one
small request, and says why; the backend then reads first tokens from the chat top list instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import logging

from udcg.errors import BackendError, InputError
from udcg.llm.base import BaseBackend, Capabilities, Chat, GenerationParams, Reading
from udcg.llm.openai_echo import aligned_values, check_scored, check_values
from udcg.llm.openai_results import ApiLogprobs, raise_on_errors
from udcg.llm.openai_wire import checked_choices

log = logging.getLogger(__name__)

SCORE_PATH = "completions"
UNREACHABLE = ("connection failed", "timed out")  # a dead or stuck server, not one that cannot score
PROBE_CHAT = ({"role": "user", "content": "Answer with one word: is the sky blue?"},)


def score_payload(model: str, prompts: Sequence[Sequence[int]]) -> dict:
    """One request scoring every prompt (token ids) teacher-forced; the one generated token is ignored."""
    return {"model": model, "prompt": [list(p) for p in prompts], "max_tokens": 1, "echo": True, "logprobs": 1,
            "temperature": 0.0, "n": 1}


def parse_scores(body: Any, prompts: Sequence[Sequence[int]], spans: Sequence[tuple[int, int]],
                 text_of: Callable[[int], str], special: Callable[[int], bool] = lambda token_id: False) -> list[list[float]]:
    """Per prompt (token ids) and its ``(start, end)``: the echoed log-probabilities of its tokens
    ``start..end-1`` (choice i answers prompt i), once the echo is matched to the prompt's tokens
    (``udcg.llm.openai_echo``; ``text_of``: a token id's text; ``special``: whether it is a special
    token). An echo that cannot be matched, or a
    missing, null, non-finite or positive value, is a ``BackendError``."""
    ordered = checked_choices(body)
    if len(ordered) != len(spans):
        raise BackendError(f"completions scoring: expected {len(spans)} choices (one per prompt), got {len(ordered)}")
    out = []
    for i, (choice, prompt, (start, end)) in enumerate(zip(ordered, prompts, spans, strict=True)):
        values = aligned_values(choice.get("logprobs"), prompt, text_of, i, special)
        check_scored(values, i)
        out.append(check_values(values[start:end], i))
    return out


class CompletionsScorer:
    """Scores continuations of chats through one ``OpenAIBackend``'s window of requests.
    ``backend``: gives ``model``, ``_post(payload, path)`` and ``_run_jobs``; ``tokens``: a
    ``ChatTokens`` of the served model's tokenizer."""

    def __init__(self, backend: Any, tokens: Any) -> None:
        self.backend, self.tokens = backend, tokens

    def score_each(self, items: Sequence[tuple[Chat, Sequence[str]]], on_result=None) -> list[Any]:
        """Per (chat, continuations): one list of token log-probabilities per continuation (its
        tokens alone, as ``continuation_logprobs``), or the ``BackendError`` of that chat."""
        prompts = self.tokens.encode_many([chat for chat, _ in items])

        async def one(prompt: list[int], texts: Sequence[str]) -> list[list[float]]:
            conts = [self.tokens.continuation(t, i) for i, t in enumerate(texts)]
            spans = [(len(prompt), len(prompt) + len(c)) for c in conts]
            asked = [(i, prompt + c) for i, c in enumerate(conts) if c]
            if not asked:
                return [[] for _ in conts]
            sent = [ids for _, ids in asked]
            parse = lambda body: parse_scores(body, sent, [spans[i] for i, _ in asked], self.tokens.text_of,  # noqa: E731
                                              self.tokens.is_special)
            scores = await self.backend._post(score_payload(self.backend.model, sent), SCORE_PATH, parse)
            got = dict(zip((i for i, _ in asked), scores, strict=True))
            return [got.get(i, []) for i in range(len(conts))]

        jobs = [(lambda p=p, texts=texts: one(p, texts)) for p, (_, texts) in zip(prompts, items, strict=True)]
        return self.backend._run_jobs(jobs, on_result)

    def check(self) -> str:
        """"" when the server scores text; else why not (one small request). A server that cannot be
        reached, or does not answer in time, raises its ``BackendError``: nothing else would work."""
        try:
            [result] = self.score_each([(list(PROBE_CHAT), ["No"])])
        except BackendError as e:
            result = e
        if isinstance(result, BackendError):
            if any(s in str(result) for s in UNREACHABLE):
                raise result
            return str(result)
        return ""


class ExactScoring(BaseBackend):
    """What ``OpenAIBackend`` does with a ``CompletionsScorer``: first tokens, continuations and a
    ``PromptReader``'s reading, exact where its server scores text (found out once, ``scorer``);
    else first tokens from the chat top list. Uses the backend's ``model``, ``name``, ``notes``,
    ``tokenizer`` (a name), ``scoring`` (``SCORING``), ``first_token_logprobs`` and ``generate``.
    Its capabilities: continuations and ``read`` where the server scores text (``can_read``)."""

    capabilities = Capabilities(api=True, top_list=True, single_pass_read=True)

    def first_token_scores(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list:
        """Each candidate's first-token log-probability per chat: exact through ``/v1/completions``
        where the server scores text (``exact``), else from the chat top list (-inf outside it)."""
        scorer = self.scorer()
        if scorer is None:
            return self.first_token_logprobs(chats, candidates)
        rows = raise_on_errors(scorer.score_each([(chat, list(candidates)) for chat in chats]), "first_token_scores")
        return [ApiLogprobs({c: lps[0] for c, lps in zip(candidates, row, strict=True)}, exact=True) for row in rows]

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        scorer = self.scorer()
        if scorer is None:
            raise BackendError(f"backend {self.name!r}: teacher-forced log-probabilities of given text need a server that "
                               f"scores text (/v1/completions with echo and logprobs: vLLM, SGLang, udcg serve); "
                               f"{self.notes.get('scoring', 'scoring is off')}")
        rows = raise_on_errors(scorer.score_each([(chat, [text]) for chat, text in requests]), "continuation_logprobs")
        return [row[0] for row in rows]

    # ------------------------------------------------------------ exact scoring (/v1/completions)

    def scorer(self):
        """The ``CompletionsScorer`` when the server scores text and the served model's tokenizer
        loads here; None otherwise (``notes["scoring"]`` says why). Found out once, on first use."""
        with self._scorer_lock:
            if self._scorer_state is None:
                self._scorer_state = self._find_scorer()
                if self._scorer_state[1]:
                    self.notes["scoring"] = self._scorer_state[1]
                    log.warning("%s: %s", self.name, self._scorer_state[1])
            return self._scorer_state[0]

    def _find_scorer(self) -> tuple[Any, str]:
        from udcg.llm.chat_tokens import load_chat_tokens

        if self.scoring == "top-logprobs":
            return None, "exact scoring off (scoring: top-logprobs): first tokens read from the chat top list"
        fallback = "; first tokens are read from the chat top list (censored outside it)"
        try:
            tokens = load_chat_tokens(self.tokenizer)
        except (BackendError, InputError) as e:
            why = (f"no exact scoring: {e} (give the served model's tokenizer: --tokenizer, reader.tokenizer; "
                   "an offline alias, a model folder or a hub id)")
            if self.scoring == "completions":
                raise BackendError(why) from None
            return None, why + fallback
        scorer = CompletionsScorer(self, tokens)
        problem = scorer.check()
        if problem:
            why = f"no exact scoring: the server does not score text through /v1/completions with echo and logprobs ({problem})"
            if self.scoring == "completions":
                raise BackendError(why)
            return None, why + fallback
        return scorer, ""

    def can_read(self) -> bool:
        """Whether ``read`` can give exact first-token and continuation log-probabilities here."""
        return self.scorer() is not None

    def read(self, chats: Sequence[Chat], candidates: Sequence[str], continuations: Sequence[str],
             max_new_tokens: int = 32) -> list[Reading]:
        """``udcg.llm.base.PromptReader`` for a server that scores text: per chat one scoring request
        (the candidates' first tokens and the continuation together) and one greedy answer: two
        requests where three calls would send three."""
        scorer = self.scorer()
        if scorer is None:
            raise BackendError(f"backend {self.name!r} cannot read prompts exactly: {self.notes.get('scoring', '')}")
        items = [(chat, [*candidates, cont]) for chat, cont in zip(chats, continuations, strict=True)]
        scored = raise_on_errors(scorer.score_each(items), "read")
        answers = self.generate(chats, GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0, n=1))
        return [Reading({c: lps[0] for c, lps in zip(candidates, row)}, a[0], row[-1])
                for row, a in zip(scored, answers, strict=True)]

