"""The reader prompt: exact layouts (hand-written), versions, k documents, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.annotate.prompt import ABSTAIN, DEFAULT_VERSION, INSTRUCTION, PROMPT_VERSIONS, check_version, reader_chat
from udcg.errors import InputError

# The instruction of Fig. 4 / the authors' code, written out by hand.
FIG4_INSTRUCTION = (
    "You are given a question and you must respond based on the provided documents. Respond directly without "
    "providing any premise or explanation. If none of the documents contain the answer, please respond with "
    "NO-RESPONSE. Do not try to respond based on your own knowledge."
)


def test_instruction_is_the_papers():
    assert INSTRUCTION == FIG4_INSTRUCTION
    assert ABSTAIN == "NO-RESPONSE"


def test_versions():
    assert PROMPT_VERSIONS == ("udcg-code-v1", "paper-fig4-v1")
    assert DEFAULT_VERSION == "udcg-code-v1"
    with pytest.raises(InputError, match="unknown prompt version 'v2'.*udcg-code-v1"):
        check_version("v2")


def test_code_layout_one_passage():
    chat = reader_chat("who wrote Dune?", ["Dune is a novel by Frank Herbert."])
    assert chat == [
        {"role": "system", "content": FIG4_INSTRUCTION},
        {"role": "user", "content": "Document: Dune is a novel by Frank Herbert.\nQuestion: who wrote Dune?\nAnswer:"},
    ]


def test_fig4_layout_one_passage():
    chat = reader_chat("who wrote Dune?", ["Dune is a novel by Frank Herbert."], version="paper-fig4-v1")
    assert chat[0] == {"role": "system", "content": FIG4_INSTRUCTION}
    assert chat[1]["content"] == "Documents:\nDune is a novel by Frank Herbert.\n\nQuestion:\nwho wrote Dune?\n\nAnswer:"


def test_k_documents_are_numbered_in_order():
    code = reader_chat("q?", ["first", "second", "third"])[1]["content"]
    assert code == "Document [1]: first\nDocument [2]: second\nDocument [3]: third\nQuestion: q?\nAnswer:"
    fig = reader_chat("q?", ["first", "second"], version="paper-fig4-v1")[1]["content"]
    assert fig == "Documents:\n[1] first\n\n[2] second\n\nQuestion:\nq?\n\nAnswer:"


def test_passages_may_be_any_sequence_and_are_not_mutated():
    passages = ("a", "b")
    assert reader_chat("q", passages) == reader_chat("q", list(passages))
    assert passages == ("a", "b")


@pytest.mark.parametrize(
    "question, passages, match",
    [
        ("", ["p"], "question must be non-empty"),
        ("   ", ["p"], "question must be non-empty"),
        (None, ["p"], "question must be non-empty"),
        ("q", [], "no passage"),
        ("q", "one string", "one string"),
        ("q", ["ok", 3], "passage 1 must be text"),
    ],
)
def test_bad_input(question, passages, match):
    with pytest.raises(InputError, match=match):
        reader_chat(question, passages)


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(question=texts.filter(str.strip), passages=st.lists(texts, min_size=1, max_size=5),
       version=st.sampled_from(PROMPT_VERSIONS))
def test_every_passage_and_the_question_appear_in_order(question, passages, version):
    system, user = reader_chat(question, passages, version)
    assert system == {"role": "system", "content": INSTRUCTION}
    assert user["role"] == "user" and user["content"].endswith("Answer:")
    pos = 0
    for text in passages:
        found = user["content"].find(text, pos)
        assert found >= 0
        pos = found + len(text)
    assert user["content"].find(question, pos) >= 0
