"""A small retrieval collection from SQuAD v1.1 for a new user's trial (docs/trial-squad.md).

From the official SQuAD v1.1 dev set as the shared data folder holds it (``squad-v1.1-dev/
test-v1.1.last24articles.json``): the paragraphs of the first ``--articles`` articles are the corpus,
the first ``--per-article`` questions of each article the queries (answers: the annotators' spans),
and a question's own paragraph its one relevant document; the other paragraphs of its article are
natural hard distractors. Runs: BM25 and MiniLM, top 10 (``scripts/make_example.py``'s code).

    python scripts/make_trial_collection.py --data-dir DATA --out squad-trial
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_example import make_runs  # noqa: E402

from udcg.io.trec import write_run  # noqa: E402
from udcg.records import Passage, Question  # noqa: E402


def collection(path: Path, articles: int, per_article: int) -> tuple[list[Question], list[Passage]]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"][:articles]
    corpus, queries = [], []
    for a, article in enumerate(data):
        title = article["title"].replace("_", " ")
        for p, paragraph in enumerate(article["paragraphs"]):
            corpus.append(Passage(docid=f"squad:{a}:{p}", text=paragraph["context"], title=title))
        asked = [(p, qa) for p, paragraph in enumerate(article["paragraphs"]) for qa in paragraph["qas"]]
        for p, qa in asked[:per_article]:
            answers = tuple(dict.fromkeys(x["text"] for x in qa["answers"]))
            queries.append(Question(qid=qa["id"], text=qa["question"], answers=answers,
                                    passages=(Passage(docid=f"squad:{a}:{p}", text="", relevant=True),)))
    return queries, corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, help="the folder holding squad-v1.1-dev/")
    ap.add_argument("--out", required=True)
    ap.add_argument("--articles", type=int, default=3)
    ap.add_argument("--per-article", type=int, default=4)
    args = ap.parse_args(argv)
    queries, corpus = collection(Path(args.data_dir) / "squad-v1.1-dev" / "test-v1.1.last24articles.json",
                                 args.articles, args.per_article)
    out = Path(args.out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    (out / "corpus.jsonl").write_text("".join(json.dumps({"_id": p.docid, "title": p.title, "text": p.text}) + "\n"
                                              for p in corpus), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps({"_id": q.qid, "text": q.text,
                                                           "metadata": {"answers": list(q.answers)}}) + "\n"
                                               for q in queries), encoding="utf-8")
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q.qid}\t{q.passages[0].docid}\t1\n" for q in queries), encoding="utf-8")
    for name, run in make_runs(queries, corpus).items():
        if name != "hybrid":
            write_run(out / "runs" / f"{name}.trec", run, tag=name)
    print(f"{len(queries)} queries, {len(corpus)} passages -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
