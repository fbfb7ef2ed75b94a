"""A small QA collection with answer-containment qrels from DPR records, for a trial (docs/trial-dpr.md).

From the five DPR ``biencoder-nq-dev`` records the shared data folder holds (``dpr-nq-dev-sample/
dpr_sample.json``): every passage of every record (``positive_ctxs``, ``hard_negative_ctxs``,
``negative_ctxs``; de-duplicated by DPR passage id) is the corpus, the questions the queries (with
their NQ answers in ``metadata.answers``), and the qrels are made the way users usually make them
for QA collections: a passage is relevant to a question when a normalised answer alias occurs in its
text (``udcg.io.loaders.ContainmentChecker``, over the whole corpus, not only the question's own
record). DPR's own ``positive_ctxs`` are not used as labels. Runs: BM25 and MiniLM, top 10
(``scripts/make_example.py``'s code).

    python scripts/make_dpr_trial.py DATA/dpr-nq-dev-sample --out dpr-trial
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_example import make_runs, write_collection  # noqa: E402

from udcg.io.loaders import ContainmentChecker  # noqa: E402
from udcg.records import Passage, Question  # noqa: E402
from udcg.text import normalized_aliases  # noqa: E402

CONTEXTS = ("positive_ctxs", "hard_negative_ctxs", "negative_ctxs")


def collection(path: Path) -> tuple[list[Question], list[Passage], dict[str, list[str]]]:
    """Queries, corpus (first occurrence of each passage id) and containment qrels (qid -> docids)."""
    records = json.loads(path.read_text(encoding="utf-8"))
    corpus: dict[str, Passage] = {}
    for record in records:
        for key in CONTEXTS:
            for ctx in record[key]:
                docid = f"dpr:{ctx['passage_id']}"
                corpus.setdefault(docid, Passage(docid=docid, text=ctx["text"], title=ctx["title"]))
    queries = [Question(qid=f"dpr{i}", text=r["question"], answers=tuple(r["answers"]), passages=())
               for i, r in enumerate(records)]
    checker = ContainmentChecker()
    qrels = {q.qid: [p.docid for p in corpus.values() if checker.contains(p.text, normalized_aliases(q.answers))]
             for q in queries}
    return queries, list(corpus.values()), qrels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="the dpr-nq-dev-sample folder (holding dpr_sample.json)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    queries, corpus, qrels = collection(args.source / "dpr_sample.json")
    runs = {name: run for name, run in make_runs(queries, corpus).items() if name != "hybrid"}
    write_collection(args.out, corpus, queries, qrels, runs)
    sys.stdout.write(f"{len(queries)} queries, {len(corpus)} passages -> {args.out}; relevant by containment: "
                     + ", ".join(f"{qid} {len(d)}" for qid, d in qrels.items()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
