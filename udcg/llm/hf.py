"""The transformers backend: local open-weight models, batched, on CPU or CUDA.

How a call is computed (results are always returned in input order):

1. Every chat is rendered with the model's chat template (generation prompt added) and tokenised
   once, the way the authors' code does (``tokenizer(apply_chat_template(..., tokenize=False))``,
   but never with a doubled BOS token).
2. The token prefix shared by every request of the call (the chat template's start and the reader
   instruction) is run once; its key/value cache is reused by every batch.
3. The rest of each request is sorted by length (longest first), left-padded, and run in batches
   with explicit position ids, so each row sees exactly the positions it would see alone.
4. The vocabulary projection is applied only at the positions whose next-token distribution is
   needed (``logits_to_keep``), never to the whole sequence; log-softmax runs in float32.

``generate`` decodes greedily or by seeded sampling. Each sampled answer draws from its own
random stream, seeded by (seed, the prompt's tokens, the answer's number), so the answers to a
chat do not depend on which other chats share its batch. Greedy decoding joins consecutive prompt
batches into one decoding batch (``_waves``). The model-free pieces live in ``udcg.llm.batching``
(the shared prefix, prompt batches, decoding waves) and ``udcg.llm.decoding`` (token draws, stop
strings, joining prompt-pass states).

Finding and loading the model (alias, folder or hub id; device, dtype, int8) is
``udcg.llm.hf_load``.

``read`` (the optional ``PromptReader`` capability) gives a chat's first-token log-probabilities,
its greedy answer and a continuation's log-probabilities from one prompt pass: the per-passage
work of ``udcg validate`` (p_abs, the eRAG answer, ANSWER_PROB) would otherwise run it three times.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from udcg.errors import InputError
from udcg.llm.base import CHUNK_SIZE, BaseBackend, Capabilities, Chat, GenerationParams, Reading, Servable
from udcg.llm.batching import decoding_waves, prompt_batches, shared_prefix
from udcg.llm.decoding import answer_seed, check_params, cut_at_stop, join_states, pick_tokens
from udcg.llm.chat_tokens import ChatTokens
from udcg.llm.hf_load import cache_argument, end_token_ids, load_model, pad_token_id
from udcg.progress import advance

log = logging.getLogger(__name__)

GPU_CHUNK_SIZE = 256  # a local model's unit of work on a GPU (HFBackend.chunk_size)
MIN_SHARED_PREFIX = 8  # shorter shared prefixes are not worth a separate forward pass


def _check_chat(chat: Any, i: int) -> None:
    if isinstance(chat, (str, bytes)) or not isinstance(chat, Sequence) or not chat:
        raise InputError(f"chat {i}: expected a non-empty list of {{role, content}} messages, got {type(chat).__name__}")
    for j, m in enumerate(chat):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise InputError(f"chat {i}, message {j}: needs string fields 'role' and 'content'")


def _attention_kernels(device: str) -> Any:
    """On CUDA, scaled-dot-product attention without the cuDNN kernel: cuDNN builds an execution
    plan for every new input shape (about 1.5 ms per layer call on an H100 with torch 2.11), and
    length-sorted batches bring a new shape nearly every call; flash and memory-efficient attention
    have no such cost. Elsewhere, torch's own choice."""
    if not device.startswith("cuda"):
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class HFBackend(BaseBackend, Servable):
    """A transformers causal LM behind the ``udcg.llm.base.Backend`` contract (open weights in this
    process: every capability, ``read`` included).

    ``model``: an offline alias (``udcg.llm.offline.ALIASES``), a local model folder or a hub id.
    ``batch_size``: rows per forward pass; ``None`` picks by a token budget (about 2,048 tokens
    per pass on CPU, 32,768 on CUDA) and keeps padding under 10% (CPU) / 25% (CUDA) of a batch.
    ``quantize="int8"``: dynamic int8 linear layers (CPU, float32): approximate, for exploration
    only (on Qwen2.5-Coder-0.5B it moved p_abs by up to 0.44). ``share_prefix``: reuse the
    key/value cache of the token prefix shared by all requests of a call.
    """

    capabilities = Capabilities(single_pass_read=True, serve=True, stream=True)

    def __init__(self, model: str, *, device: str = "auto", dtype: str = "auto", batch_size: int | None = None,
                 name: str | None = None, quantize: str | None = None, share_prefix: bool = True) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
            raise InputError(f"batch size must be a positive integer, got {batch_size!r}")
        loaded = load_model(model, device, dtype, quantize)
        self.device, self.dtype, self.name = loaded.device, loaded.dtype, name or loaded.name
        self.batch_size = batch_size
        self.share_prefix = share_prefix
        self.tokenizer, self.model = loaded.tokenizer, loaded.model
        self.chat_tokens = ChatTokens(self.tokenizer)
        self.max_positions = int(getattr(self.model.config.get_text_config(), "max_position_embeddings", 0) or 0) or None
        self.pad_id = pad_token_id(self.tokenizer)
        self.stop_ids = end_token_ids(self.model, self.tokenizer)
        self.cache_arg = cache_argument(self.model)  # "cache" (transformers >= 5.24) or "past_key_values"

    @property
    def chunk_size(self) -> int:
        """``GPU_CHUNK_SIZE`` on a GPU, where the unit is also the largest call the batcher sees (one
        H100, Qwen2.5-0.5B's shapes: 147 passages/s at 32 against 641 at 256,
        docs/results/gpu/README.md); on a CPU the base's."""
        return GPU_CHUNK_SIZE if str(self.device).startswith("cuda") else CHUNK_SIZE

    def _run(self, cache: Any, **inputs: Any) -> tuple[Any, Any]:
        """One forward pass with ``cache`` (a key/value cache, or None) passed under the keyword the
        installed transformers wants; returns the logits and the output's key/value cache."""
        with _attention_kernels(self.device):
            out = self.model(**inputs, **{self.cache_arg: cache})
        return out.logits, getattr(out, self.cache_arg, None)

    # ------------------------------------------------------------ tokens

    @property
    def system_role(self) -> bool:
        """Whether the chat template renders a system turn (else it is folded into the first user turn)."""
        return self.chat_tokens.system_role

    @system_role.setter
    def system_role(self, value: bool) -> None:
        self.chat_tokens.system_role = value

    def render(self, chat: Chat) -> str:
        """The prompt text of a chat, ending where the assistant's answer starts (``ChatTokens``)."""
        return self.chat_tokens.render(chat)

    def encode(self, chat: Chat) -> list[int]:
        """Token ids of the rendered chat, as ``tokenizer(text)`` gives them, minus a doubled BOS."""
        return self.chat_tokens.encode(chat)

    def _encode_all(self, chats: Sequence[Chat]) -> list[list[int]]:
        """``encode`` of every chat, tokenised in one call (the fast tokenizers' batch path runs on
        every core; the ids are those of one call per chat)."""
        for i, chat in enumerate(chats):
            _check_chat(chat, i)
        if not chats:
            return []
        seqs = []
        for i, ids in enumerate(self.chat_tokens.encode_many(chats)):
            if self.max_positions and len(ids) > self.max_positions:
                raise InputError(f"chat {i}: {len(ids)} tokens, more than the model's {self.max_positions} positions "
                                 f"(shorten the passages)")
            seqs.append(ids)
        return seqs

    def first_token(self, text: str) -> int:
        return self.chat_tokens.first_token(text)

    # ------------------------------------------------------------ batching

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        return prompt_batches(order, lengths, self.batch_size, self.device.startswith("cuda"))

    def _prefix(self, seqs: Sequence[Sequence[int]], n_last: Sequence[int]) -> tuple[int, Any]:
        """Length and key/value states of the prefix every request shares (0, None when not worth it)."""
        import torch

        if not self.share_prefix or len(seqs) < 2:
            return 0, None
        p = min(shared_prefix(seqs), min(len(s) - n for s, n in zip(seqs, n_last)))
        if p < MIN_SHARED_PREFIX:
            return 0, None
        ids = torch.tensor([list(seqs[0][:p])], device=self.device)
        _, cache = self._run(None, input_ids=ids, use_cache=True, logits_to_keep=1)
        return p, [(layer_k, layer_v) for layer_k, layer_v, *_ in cache]

    def _forward(self, rows: Sequence[Sequence[int]], p: int, prefix_kv: Any, keep: int, decode: bool = False) -> Any:
        """Run suffixes rows[i][p:] left-padded after the shared prefix; return (logits of the last
        ``keep`` positions, the key/value cache (None unless ``decode``), the attention mask, the last
        position ids)."""
        import torch
        from transformers import DynamicCache

        width = max(len(r) - p for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), p + width), dtype=torch.long)
        mask[:, :p] = 1
        for b, r in enumerate(rows):
            suffix = r[p:]
            ids[b, width - len(suffix):] = torch.tensor(suffix)
            mask[b, p + width - len(suffix):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, p:]
        cache = DynamicCache(config=self.model.config) if decode else None
        if prefix_kv is not None:
            n = len(rows)
            cache = DynamicCache([(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in prefix_kv],
                                 config=self.model.config)
        logits, _ = self._run(cache, input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                              position_ids=positions.to(self.device), use_cache=cache is not None, logits_to_keep=keep)
        return logits, (cache if decode else None), mask, positions[:, -1]

    def _score(self, seqs: list[list[int]], n_last: list[int], pick: Callable[[int, Any], Any],
               columns: Sequence[int] | None = None) -> list[Any]:
        """For each sequence, the float32 log-softmax at its last ``n_last[i]`` positions, handed to
        ``pick(i, logprobs[n_last[i], vocab])``; returns the picks in input order. ``columns``: only
        these token ids' log-probabilities leave the device (``pick`` then gets
        ``logprobs[n_last[i], len(columns)]``, in the order of ``columns``)."""
        import torch

        results: list[Any] = [None] * len(seqs)
        if not seqs:
            return results
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        index = None if columns is None else torch.tensor(list(columns), dtype=torch.long, device=self.device)
        with torch.inference_mode():
            p, prefix_kv = self._prefix(seqs, n_last)
            done = 0
            for batch in self._batches(order, [len(s) - p for s in seqs]):
                keep = max(n_last[i] for i in batch)
                logits, *_ = self._forward([seqs[i] for i in batch], p, prefix_kv, keep)
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                logprobs = (logprobs if columns is None else logprobs[..., index]).cpu()
                for b, i in enumerate(batch):
                    results[i] = pick(i, logprobs[b, keep - n_last[i]:])
                done += len(batch)
                advance(done, len(seqs))  # the step's progress within its chunk (udcg.progress)
        return results

    # ------------------------------------------------------------ the contract

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        if isinstance(candidates, str):
            raise InputError("candidates must be a list of strings, got one string (wrap it in a list)")
        token = {c: self.first_token(c) for c in candidates}
        seqs = self._encode_all(chats)
        ids = sorted(set(token.values()))
        column = {c: ids.index(t) for c, t in token.items()}
        return self._score(seqs, [1] * len(seqs), lambda i, lp: {c: float(lp[0, j]) for c, j in column.items()}, ids)

    def _continuation_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.chat_tokens.continuation(text, i) for i, text in enumerate(texts)]

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        prompts = self._encode_all([chat for chat, _ in requests])
        targets = self._continuation_ids([text for _, text in requests])
        seqs = [prompt + cont[:-1] for prompt, cont in zip(prompts, targets)]
        n_last = [max(1, len(t)) for t in targets]
        return self._score(seqs, n_last, lambda i, lp: [float(lp[j, t]) for j, t in enumerate(targets[i])])

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams(),
                 on_text: Callable[[int, int, str], None] | None = None) -> list[list[str]]:
        """``Backend.generate``. ``on_text(i, j, text)``, when given, is told answer j to chat i so far
        (decoded, not yet cut at a stop string nor stripped) after each of its tokens; a greedy
        decoding serves all n answers and is told as j = 0 (how ``udcg serve`` streams)."""
        check_params(params)
        return self._answers(self._encode_all(chats), params, on_text, strip=True)

    def complete(self, prompts: Sequence[Sequence[int]], params: GenerationParams = GenerationParams(),
                 on_text: Callable[[int, int, str], None] | None = None) -> list[list[str]]:
        """``params.n`` continuations of each prompt given as token ids (no chat template), decoded as
        ``generate`` does but with their whitespace kept: prompt text + continuation is what the
        model wrote (legacy text completions). ``on_text`` as in ``generate``."""
        check_params(params)
        seqs = [list(p) for p in prompts]
        for i, ids in enumerate(seqs):
            if not ids or (self.max_positions and len(ids) > self.max_positions):
                raise InputError(f"prompt {i}: {len(ids)} tokens (give 1 to {self.max_positions or 'any'} tokens)")
        return self._answers(seqs, params, on_text, strip=False)

    def _answers(self, seqs: list[list[int]], params: GenerationParams, on_text: Callable | None, strip: bool) -> list[list[str]]:
        if params.temperature == 0:  # greedy: every answer to a chat is the same
            tell = None if on_text is None else (lambda r, text: on_text(r, 0, text))
            return [[t] * params.n for t in self._generate_rows(seqs, [None] * len(seqs), params, tell=tell, strip=strip)]
        rows = [(i, j) for i in range(len(seqs)) for j in range(params.n)]
        seeds = [answer_seed(params.seed, seqs[i], j) for i, j in rows]
        tell = None if on_text is None else (lambda r, text: on_text(*rows[r], text))
        out: list[list[str]] = [[] for _ in seqs]
        for (i, _), text in zip(rows, self._generate_rows([seqs[i] for i, _ in rows], seeds, params, tell=tell, strip=strip)):
            out[i].append(text)
        return out

    def read(self, chats: Sequence[Chat], candidates: Sequence[str], continuations: Sequence[str],
             max_new_tokens: int = 32) -> list[Reading]:
        """``udcg.llm.base.PromptReader``: first-token log-probabilities, the greedy answer and the
        continuation's log-probabilities of each chat from one prompt pass. The continuation is run
        on the prompt's key/value cache, which is then cut back to the prompt for decoding."""
        import torch

        if isinstance(candidates, str):
            raise InputError("candidates must be a list of strings, got one string (wrap it in a list)")
        if len(continuations) != len(chats):
            raise InputError(f"{len(chats)} chats but {len(continuations)} continuations (give one per chat)")
        params = GenerationParams(max_new_tokens=max_new_tokens)
        check_params(params)
        token = {c: self.first_token(c) for c in candidates}
        seqs = self._encode_all(chats)
        targets = self._continuation_ids(continuations)
        scored: list[Any] = [None] * len(seqs)

        def on_prompt(rows: list[int], state: tuple) -> None:
            first = torch.log_softmax(state[0][:, -1].float(), dim=-1).cpu()
            conts = self._continue(state, first, [targets[i] for i in rows])
            for b, i in enumerate(rows):
                scored[i] = ({c: float(first[b, t]) for c, t in token.items()}, conts[b])

        answers = self._generate_rows(seqs, [None] * len(seqs), params, on_prompt)
        return [Reading(first, answer, cont) for (first, cont), answer in zip(scored, answers)]

    def _continue(self, state: tuple, first: Any, targets: list[list[int]]) -> list[list[float]]:
        """Teacher-forced log-probabilities of each row's target tokens after its prompt (``first``:
        the log-softmax at the prompt's last position). The targets run right-padded on the prompt
        pass's cache, which is cropped back to the prompt afterwards."""
        import torch

        out = [[float(first[b, t[0]])] if t else [] for b, t in enumerate(targets)]
        width = max(len(t) for t in targets) - 1
        if width < 1:
            return out
        _, cache, mask, last = state
        ids = torch.full((len(targets), width), self.pad_id, dtype=torch.long)
        extra = torch.zeros((len(targets), width), dtype=mask.dtype)
        for b, t in enumerate(targets):
            if len(t) > 1:
                ids[b, :len(t) - 1] = torch.tensor(t[:-1])
                extra[b, :len(t) - 1] = 1
        positions = last[:, None] + 1 + torch.arange(width)
        full_mask = torch.cat([mask, extra], dim=1)
        logits, _ = self._run(cache, input_ids=ids.to(self.device), attention_mask=full_mask.to(self.device),
                              position_ids=positions.to(self.device), use_cache=True, logits_to_keep=width)
        cache.crop(-width)  # a negative count removes that many positions (older transformers too)
        logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
        for b, t in enumerate(targets):
            out[b] += [float(logprobs[b, j, t[j + 1]]) for j in range(len(t) - 1)]
        return out

    # ------------------------------------------------------------ decoding

    def _generate_rows(self, seqs: list[list[int]], seeds: list[int | None], params: GenerationParams,
                       on_prompt: Callable[[list[int], tuple], None] | None = None,
                       tell: Callable[[int, str], None] | None = None, strip: bool = True) -> list[str]:
        """Answers to token sequences; ``on_prompt(rows, state)`` sees each decoding batch's prompt
        pass (the sequences' indices, then logits at the last position, cache, mask, positions)
        before decoding starts, and must leave the cache as it found it; ``tell(i, text)`` sees
        sequence i's text grow."""
        import torch

        texts = [""] * len(seqs)
        if not seqs:
            return texts
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        with torch.inference_mode():
            p, prefix_kv = self._prefix(seqs, [1] * len(seqs))
            lengths = [len(s) - p for s in seqs]
            batches = self._batches(order, lengths)
            waves = self._waves(batches, lengths) if params.temperature == 0 else [[b] for b in batches]
            done = 0
            for wave in waves:
                states = [self._forward([seqs[i] for i in batch], p, prefix_kv, keep=1, decode=True) for batch in wave]
                rows = [i for batch in wave for i in batch]
                state = states[0] if len(states) == 1 else join_states(states, p, self.model.config)
                if on_prompt is not None:
                    on_prompt(rows, state)
                told = None if tell is None else (lambda b, text, rows=rows: tell(rows[b], text))
                for i, text in zip(rows, self._decode(state, [seeds[i] for i in rows], params, told, strip)):
                    texts[i] = text
                done += len(rows)
                advance(done, len(seqs))
        return texts

    def _waves(self, batches: list[list[int]], lengths: list[int]) -> list[list[list[int]]]:
        return decoding_waves(batches, lengths, self.batch_size, self.device.startswith("cuda"))

    def _decode(self, state: tuple, seeds: list[int | None], params: GenerationParams,
                tell: Callable[[int, str], None] | None = None, strip: bool = True) -> list[str]:
        """Decode from a prompt pass's state (logits at the last position, cache, mask, positions)."""
        import torch

        logits, cache, mask, last = state
        gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]
        new: list[list[int]] = [[] for _ in seeds]
        active = list(range(len(seeds)))  # rows still decoding; logits/cache/mask follow this order
        for step in range(params.max_new_tokens):
            tokens = pick_tokens(logits[:, -1], [gens[a] for a in active], params)
            still = []
            for b, a in enumerate(active):
                if tokens[b] in self.stop_ids:
                    continue
                new[a].append(tokens[b])
                text = self.tokenizer.decode(new[a], skip_special_tokens=True) if params.stop or tell else ""
                if tell is not None:
                    tell(a, text)
                if params.stop and cut_at_stop(text, params.stop)[1]:
                    continue
                still.append(b)
            if not still or step == params.max_new_tokens - 1:
                break
            if len(still) < len(active):
                keep = torch.tensor(still)
                cache.batch_select_indices(keep.to(self.device))
                mask, last = mask[keep], last[keep]
            active = [active[b] for b in still]
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype)], dim=1)
            last = last + 1
            ids = torch.tensor([[new[a][-1]] for a in active], device=self.device)
            logits, _ = self._run(cache, input_ids=ids, attention_mask=mask.to(self.device),
                                  position_ids=last[:, None].to(self.device), use_cache=True, logits_to_keep=1)
        texts = [cut_at_stop(self.tokenizer.decode(ids, skip_special_tokens=True), params.stop)[0] for ids in new]
        return [t.strip() for t in texts] if strip else texts
