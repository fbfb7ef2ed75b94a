"""Peak memory of ``udcg annotate --corpus irds:NAME`` on an ir_datasets dataset built from local files:
``--docs`` documents (default 1,000,000, the packaged example's passages cut to 300 characters and
numbered), ``--queries`` queries with ``--depth`` documents each in one run (default 400 x 5 = 2,000
pairs), the reader an API model on ``scripts/instant_openai_server.py`` (127.0.0.1), so what is
measured is udcg and the docstore, not a model.

    python scripts/bench_irds_memory.py [--docs 1000000] [--queries 400] [--depth 5] [--workdir /tmp/x]

The dataset (``ir_datasets.create_dataset(docs_tsv=..., queries_tsv=..., qrels_trec=...)``) is
registered by a module named in ``$UDCG_IRDS_MODULES``. ``annotate`` runs twice, each in a fresh
process into a fresh folder: the first builds the docstore on disk (ir_datasets reads the corpus
once), the second looks the documents up in it. For each: the peak resident memory of the process
(``wait4``), the wall time and the corpus line udcg printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from udcg.io.sources import example_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import instant_openai_server  # noqa: E402

REGISTER = """import ir_datasets
ir_datasets.registry.register("bench/irds-memory", ir_datasets.create_dataset(
    docs_tsv={d!r}, queries_tsv={q!r}, qrels_trec={r!r}))
"""


def build(folder: Path, n_docs: int, n_queries: int, depth: int) -> None:
    ex = example_path()
    texts = [json.loads(line)["text"].replace("\t", " ").replace("\n", " ")[:300] for line in (ex / "corpus.jsonl").open()]
    questions = [json.loads(line)["text"] for line in (ex / "queries.jsonl").open()]
    with open(folder / "docs.tsv", "w", encoding="utf-8") as f:
        for i in range(n_docs):
            f.write(f"d{i}\t{texts[i % len(texts)]} (copy {i})\n")
    rng = random.Random(0)
    with open(folder / "queries.tsv", "w") as q, open(folder / "qrels.trec", "w") as r, open(folder / "run.trec", "w") as run:
        for j in range(n_queries):
            q.write(f"q{j}\t{questions[j % len(questions)]} ({j})\n")
            docs = rng.sample(range(n_docs), depth)
            r.write(f"q{j} 0 d{docs[0]} 1\n")
            run.writelines(f"q{j} Q0 d{d} {rank + 1} {depth - rank} bench\n" for rank, d in enumerate(docs))
    (folder / "bench_irds_register.py").write_text(REGISTER.format(d=str(folder / "docs.tsv"),
                                                                   q=str(folder / "queries.tsv"),
                                                                   r=str(folder / "qrels.trec")))


def annotate(folder: Path, out: str, url: str, depth: int) -> tuple[float, float, list[str]]:
    """(peak RSS in MB of that process, from ``wait4``; seconds; udcg's lines) of one annotate process."""
    env = dict(os.environ, OPENAI_API_KEY="bench", UDCG_IRDS_MODULES="bench_irds_register",
               PYTHONPATH=os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    log = folder / f"{out}.log"
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "udcg", "annotate", "--corpus", "irds:bench/irds-memory", "--run",
                                 str(folder / "run.trec"), "--depth", str(depth), "--model", "bench", "--api-base", url,
                                 "-o", str(folder / out), "--no-progress"], stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(log.read_text())
    lines = [line for line in log.read_text().splitlines() if line.startswith(("corpus:", "pairs", "utility"))]
    return usage.ru_maxrss / 1024, seconds, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--workdir", help="where the dataset is built (default: a new temporary folder)")
    args = parser.parse_args()
    folder = Path(args.workdir or tempfile.mkdtemp(prefix="udcg-irds-"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    build(folder, args.docs, args.queries, args.depth)
    size = (folder / "docs.tsv").stat().st_size / 1e6
    print(f"dataset: {args.docs:,} documents ({size:,.0f} MB TSV), {args.queries} queries x {args.depth} = "
          f"{args.queries * args.depth:,} pairs; built in {time.perf_counter() - t0:.0f} s in {folder}")
    with instant_openai_server.Process(0.0) as server:
        for label, out in (("first run (builds the docstore)", "u1"), ("second run (docstore built)", "u2")):
            peak, seconds, lines = annotate(folder, out, server.url, args.depth)
            print(f"{label}: peak resident {peak:,.0f} MB; {seconds:.1f} s wall")
            for line in lines:
                print(f"  {line}")


if __name__ == "__main__":
    main()
