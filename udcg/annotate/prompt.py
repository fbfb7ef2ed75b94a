"""The reader prompt (paper Fig. 4), as a chat: the instruction is the system turn, the document(s),
the question and ``Answer:`` the user turn. Backends whose chat template has no system role fold
the system turn into the user turn themselves (``udcg.llm.base.merge_system``).

Prompt versions (the version is written next to every annotation, so results stay comparable):

``udcg-code-v1`` (default)
    The layout of the authors' public code, so utilities are comparable with theirs. One passage::

        Document: {passage text}
        Question: {question}
        Answer:

    The passage title is not included (their code leaves it out).

``paper-fig4-v1``
    The layout printed in the paper's Fig. 4::

        Documents:
        {passage text}

        Question:
        {question}

        Answer:

With k > 1 passages (end-to-end answer generation) each passage gets its 1-based position in the
context, so the reader can tell where one ends and the next begins; passages are separated by a
blank line in ``paper-fig4-v1``, by a newline in ``udcg-code-v1``::

    udcg-code-v1:   Document [1]: {text 1}\\nDocument [2]: {text 2}\\nQuestion: {question}\\nAnswer:
    paper-fig4-v1:  Documents:\\n[1] {text 1}\\n\\n[2] {text 2}\\n\\nQuestion:\\n{question}\\n\\nAnswer:

With k = 1 both versions give exactly the single-passage layout above (no number).
"""

from __future__ import annotations

from collections.abc import Sequence

from udcg.errors import InputError
from udcg.llm.base import Message

ABSTAIN = "NO-RESPONSE"

INSTRUCTION = (
    "You are given a question and you must respond based on the provided documents. "
    "Respond directly without providing any premise or explanation. "
    f"If none of the documents contain the answer, please respond with {ABSTAIN}. "
    "Do not try to respond based on your own knowledge."
)

DEFAULT_VERSION = "udcg-code-v1"


def _code_v1(question: str, passages: Sequence[str]) -> str:
    if len(passages) == 1:
        documents = f"Document: {passages[0]}\n"
    else:
        documents = "".join(f"Document [{i}]: {text}\n" for i, text in enumerate(passages, start=1))
    return f"{documents}Question: {question}\nAnswer:"


def _fig4_v1(question: str, passages: Sequence[str]) -> str:
    if len(passages) == 1:
        documents = passages[0]
    else:
        documents = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(passages, start=1))
    return f"Documents:\n{documents}\n\nQuestion:\n{question}\n\nAnswer:"


_LAYOUTS = {DEFAULT_VERSION: _code_v1, "paper-fig4-v1": _fig4_v1}
PROMPT_VERSIONS: tuple[str, ...] = tuple(_LAYOUTS)


def check_version(version: str) -> str:
    if version not in _LAYOUTS:
        raise InputError(f"unknown prompt version {version!r} (choose one of: {', '.join(PROMPT_VERSIONS)})")
    return version


def reader_chat(question: str, passages: Sequence[str], version: str = DEFAULT_VERSION) -> list[Message]:
    """The reader chat for one question and its context (passages in prompt order)."""
    layout = _LAYOUTS[check_version(version)]
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"reader prompt: the question must be non-empty text, got {question!r}")
    if isinstance(passages, str):
        raise InputError("reader prompt: passages must be a list of texts, got one string (wrap it in a list)")
    passages = list(passages)
    if not passages:
        raise InputError("reader prompt: the context has no passage (give at least one passage text)")
    for i, text in enumerate(passages):
        if not isinstance(text, str):
            raise InputError(f"reader prompt: passage {i} must be text, got {type(text).__name__}")
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": layout(question, passages)}]
