"""A chat as token ids, the one way every udcg path makes them: the local transformers backend
(``udcg.llm.hf``) and the exact scoring of an API reader through ``/v1/completions``
(``udcg.llm.openai_scoring``), so a served model scores the very ids the local model scores.

The chat is rendered with the tokenizer's chat template (generation prompt added; a template
without a system role gets the system turn folded into the first user turn; a base model without
a template gets plain text turns), tokenised as ``tokenizer(text)`` does, minus a doubled BOS. A
continuation (``NO-RESPONSE``, a reference answer) is tokenised alone, without special tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.llm.base import Chat, merge_system
from udcg.llm.hf_load import has_system_role


class ChatTokens:
    """Render and tokenise chats and continuations with one tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.system_role = has_system_role(tokenizer)
        self._texts: dict[int, str] = {}
        self._special = frozenset(getattr(tokenizer, "all_special_ids", None) or ())

    def text_of(self, token_id: int) -> str:
        """A token's text decoded alone (as ``udcg serve`` and vLLM echo it); cached per id."""
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self.tokenizer.decode([token_id])
        return text

    def is_special(self, token_id: int) -> bool:
        """Whether a token is one of the tokenizer's special tokens (BOS, the chat template's markers)."""
        return token_id in self._special

    def render(self, chat: Chat) -> str:
        """The prompt text of a chat, ending where the assistant's answer starts."""
        messages = list(chat) if self.system_role else merge_system(chat)
        if not getattr(self.tokenizer, "chat_template", None):  # a base model: plain text turns
            return "\n\n".join(m["content"] for m in merge_system(chat)) + "\n"
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def without_double_bos(self, ids: Sequence[int]) -> list[int]:
        bos = self.tokenizer.bos_token_id
        ids = list(ids)
        return ids[1:] if bos is not None and len(ids) > 1 and ids[0] == ids[1] == bos else ids

    def encode(self, chat: Chat) -> list[int]:
        """Token ids of the rendered chat, as ``tokenizer(text)`` gives them, minus a doubled BOS."""
        return self.without_double_bos(self.tokenizer(self.render(chat))["input_ids"])

    def encode_many(self, chats: Sequence[Chat]) -> list[list[int]]:
        """``encode`` of every chat in one tokenizer call (the ids of one call per chat)."""
        if not chats:
            return []
        return [self.without_double_bos(raw) for raw in self.tokenizer([self.render(c) for c in chats])["input_ids"]]

    def continuation(self, text: str, i: int = 0) -> list[int]:
        """The tokens of a continuation alone ([] for "")."""
        if not isinstance(text, str):
            raise InputError(f"request {i}: the continuation must be a string, got {type(text).__name__}")
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def first_token(self, text: str) -> int:
        ids = self.continuation(text)
        if not ids:
            raise InputError(f"candidate {text!r} has no tokens (give a non-empty string)")
        return ids[0]


def load_chat_tokens(model: str) -> ChatTokens:
    """The tokenizer of an offline alias, a model folder or a hub id (no weights loaded). Raises
    ``BackendError`` when it cannot be found (a hub id needs the hub or its local cache)."""
    from udcg.llm.hf_load import locate

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    source, _, local_only = locate(model)
    from transformers import AutoTokenizer

    try:
        return ChatTokens(AutoTokenizer.from_pretrained(source, local_files_only=local_only))
    except (OSError, ValueError) as e:
        raise BackendError(f"no tokenizer for {model!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
