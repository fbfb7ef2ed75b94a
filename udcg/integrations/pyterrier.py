"""udcg in PyTerrier (``udcg.pyterrier``, the ``ir`` extra): ``Utility``, a transformer adding each
retrieved passage's utility for a reader LLM, and the frames PyTerrier takes, read from what udcg
reads (``topics``, ``qrels``, ``results``: a BEIR folder or queries file, TREC or BEIR qrels, a
TREC run, dicts, ranx objects, or ``irds:NAME``).

``Utility(model=..., depth=..., output=...)`` annotates the top-``depth`` (qid, docno) pairs of the
frame it gets (its ``query`` and ``text`` columns; ``title`` if present; reference answers in an
``answers`` column where the unjudged are judged) into the utilities folder ``output``, the very
folder ``udcg annotate --run`` writes and reuses: a pair annotated before, by either, is not
annotated again. It returns the frame with a ``utility`` column (NaN below ``depth``), which
``udcg.ir_measure("UDCG@5")`` reads when it is given no utilities, so one ``pt.Experiment`` can
annotate and score a pipeline::

    pipeline = bm25 >> pt.text.get_text(dataset, "text") >> udcg.pyterrier.Utility(model="qwen2.5-coder-0.5b", depth=5)
    pt.Experiment([pipeline], topics, qrels, eval_metrics=[nDCG@5, udcg.ir_measure("UDCG@5")])
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.extras import need
from udcg.flows.annotate_options import AnnotateOptions

pt = need("pyterrier", "udcg.pyterrier")
pd = need("pandas", "udcg.pyterrier")

__all__ = ["Utility", "qrels", "results", "topics"]
NOT_HERE = ("queries", "answers", "limit")  # udcg annotate --run's files and queries: here the frame's


def topics(queries: str | Path) -> Any:
    """A topics frame (``qid``, ``query``) from a BEIR folder, a queries file or ``irds:NAME``."""
    from udcg.io.beir import read_queries

    questions = read_queries(queries)
    return _ids(pd.DataFrame({"qid": list(questions), "query": [q.text for q in questions.values()]}))


def qrels(judged: Any) -> Any:
    """A qrels frame (``qid``, ``docno``, ``label``) from a TREC or BEIR qrels file, ``irds:NAME``, a
    ``{qid: {docid: relevance}}`` dict or a ranx ``Qrels``."""
    from udcg.flows.run_scores import read_any_qrels

    table = read_any_qrels(judged)
    rows = [(q, d, rel) for q, docs in table.items() for d, rel in docs.items()]
    frame = _ids(pd.DataFrame(rows, columns=["qid", "docno", "label"]))
    whole = all(float(rel).is_integer() for _, _, rel in rows)  # graded labels as PyTerrier has them; else as read
    return frame.astype({"label": "int64"}) if whole else frame


def results(run: Any, name: str | None = None, utilities: Any = None) -> Any:
    """A results frame (``qid``, ``docno``, ``rank``, ``score``) from a TREC run file, a ``{qid: {docid:
    score}}`` dict or a ranx ``Run``, ranked as trec_eval ranks (score, then docid descending);
    ``name``: a ``name`` column; ``utilities`` (a ``udcg annotate`` folder, a utilities file or a
    dict): a ``utility`` column (NaN for a document without one), what ``udcg.ir_measure("UDCG@5")``
    reads when it is given no utilities."""
    from udcg.flows.run_scores import read_any_run, read_utilities
    from udcg.io.trec import ranked_docids

    table = read_any_run(run)
    rows = [(q, d, rank, docs[d]) for q, docs in table.items() for rank, d in enumerate(ranked_docids(docs))]
    frame = _ids(pd.DataFrame(rows, columns=["qid", "docno", "rank", "score"]))
    if utilities is not None:
        known = read_utilities(utilities)
        frame = frame.assign(utility=[known.get(q, {}).get(d, math.nan) for q, d, _, _ in rows])
    return frame if name is None else frame.assign(name=name)


def _ids(frame: Any) -> Any:
    """The frame with its id columns as Python strings in ``object`` columns, as PyTerrier makes
    them and ranx's ``from_df`` asserts (pandas 3 would give them its ``str`` dtype)."""
    return frame.astype({c: object for c in ("qid", "docno") if c in frame.columns})


def _column(frame: Any, name: str, why: str) -> Any:
    if name not in frame.columns:
        raise InputError(f"udcg.pyterrier.Utility: the frame has no {name!r} column ({why}; its columns: "
                         f"{', '.join(map(str, frame.columns))})")
    return frame[name]


class Utility(pt.Transformer):
    """Adds a ``utility`` column: u = R * (1 - p_abs) of each of a query's top-``depth`` passages
    for the reader ``model`` (see the module doc). ``output``: the utilities folder (shared with
    ``udcg annotate --run``); ``qrels``: the relevance R (a path, a dict, a frame; unjudged pairs
    follow ``unjudged``: ``irrelevant``, ``judge`` with ``judge``, or ``error``);
    ``reader_options``: those of ``udcg annotate`` (``api_base``, ``estimator``, ``batch_size`` …)."""

    def __init__(self, model: str, depth: int = AnnotateOptions.depth, output: str | Path = "utilities", *,
                 qrels: Any = None, unjudged: str = AnnotateOptions.unjudged, judge: str = AnnotateOptions.judge,
                 **reader_options: Any) -> None:
        from udcg.flows.annotate import reader
        from udcg.llm.registry import ModelChoice

        choice, options = ModelChoice.split(model, reader_options)  # its numbers checked: the bounds of annotate
        for name in NOT_HERE:
            if name in options:
                raise InputError(f"udcg.pyterrier.Utility(): got an unexpected keyword argument {name!r}")
        self.options = AnnotateOptions.of("udcg.pyterrier.Utility", depth=depth, unjudged=unjudged, judge=judge,
                                          **options)
        self.reader = reader(choice, self.options)
        self.model, self.depth, self.output = model, self.options.depth, Path(output)
        self.qrels, self.unjudged, self.judge = qrels, self.options.unjudged, self.options.judge
        self.report = None
        self._backend = None  # loaded on the first pair to annotate, then kept for later calls

    def _load(self):
        if self._backend is None:
            self._backend = self.reader.spec.load()
        return self._backend

    def __repr__(self) -> str:
        return f"Utility({self.model!r}, depth={self.depth})"

    def transform(self, frame: Any) -> Any:
        """The frame with a ``utility`` column; annotates the pairs ``output`` does not hold yet."""
        from udcg.annotate.utilities import load_utilities
        from udcg.flows.annotate import relevance_judge
        from udcg.flows.own_runs import RunHooks, annotate_run_pairs
        from udcg.flows.run_scores import read_any_qrels

        if len(frame) == 0:
            return frame.assign(utility=pd.Series(dtype="float64"))
        collection, run = self._collection(frame, read_any_qrels(self.qrels) or {})
        self.report = annotate_run_pairs(collection, {"pyterrier": run}, self.output, self.reader.spec.name,
                                    self.reader.config, self.options,
                                    RunHooks(self._load, judge=lambda: relevance_judge(self.judge)))
        table = load_utilities(self.output).as_dict()
        top = {(q, d) for q, docs in run.items() for d in _top(docs, self.depth)}
        values = [table[q][d] if (q, d) in top else math.nan
                  for q, d in zip(frame["qid"].astype(str).tolist(), frame["docno"].astype(str).tolist())]
        return frame.assign(utility=values)

    def _collection(self, frame: Any, judged: dict):
        from udcg.io.beir import Collection
        from udcg.io.frames import frame_to_dict
        from udcg.records import Passage, Question

        why = "the passages' text: add pt.text.get_text(...) before Utility"
        texts = _column(frame, "text", why).tolist()
        titles = frame["title"].fillna("").astype(str).tolist() if "title" in frame.columns else [""] * len(frame)
        ranked = frame if "score" in frame.columns else frame.assign(score=-_column(frame, "rank", "the ranking"))
        run = frame_to_dict(ranked, "score", "udcg.pyterrier.Utility's input")
        qids, docnos = frame["qid"].astype(str).tolist(), frame["docno"].astype(str).tolist()
        corpus = {d: Passage(docid=d, text=str(t), title=title) for d, t, title in zip(docnos, texts, titles)}
        answers = frame["answers"].tolist() if "answers" in frame.columns else [()] * len(frame)
        queries = {q: Question(qid=q, text=str(text), answers=tuple(a) if isinstance(a, (list, tuple)) else ())
                   for q, text, a in zip(qids, _column(frame, "query", "the query text").tolist(), answers)}
        return Collection(corpus=corpus, queries=queries, qrels=judged, source="pyterrier"), run


def _top(docs: dict, depth: int) -> list[str]:
    from udcg.io.trec import ranked_docids

    return ranked_docids(docs)[:depth]
