"""Resident memory and wall time of `udcg annotate --corpus --run` on a large generated corpus, where
the run's top-depth covers a few thousand pairs: memory should follow the pairs, not the corpus.

    python scripts/bench_corpus.py                              # 2,000,000 documents, 2,000 pairs
    python scripts/bench_corpus.py --docs 200000 --udcg-root /tmp/udcg-before   # another checkout

It writes (seeded, reused when already there) a BEIR folder under ``--work``: ``corpus.jsonl`` of
``--docs`` passages of about 60 words (``_id``, ``title``, ``text``; ``--gz`` for corpus.jsonl.gz),
``queries.jsonl`` (with ``metadata.answers``), ``qrels/test.tsv`` (one relevant document per query)
(``--parquet``: the corpus also as ``corpus.parquet``, which is then the ``--corpus`` given) and ``run.trec`` (``--run-depth`` documents per query, so the top ``--depth`` of ``--queries``
queries is the pairs annotated). Then it starts ``scripts/instant_openai_server.py`` (answers at
once, with logprobs) and runs ``udcg annotate ... --model openai:bench --api-base ...`` in a child
process, a fresh output folder each time; ``--read-only`` runs only the collection read and the
run checks instead. The child's peak resident memory comes from ``os.wait4`` (its own rusage),
the scan rate from the command's ``corpus: ...`` line. ``--udcg-root`` runs another checkout's
udcg (e.g. a ``git worktree`` of the commit before) on the same files, for a before/after table.
The last line is ``result: {json}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from instant_openai_server import Process  # noqa: E402
SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "quel", "dri", "sen", "mar", "tu", "bel", "os", "ni", "gra", "fe"]
SCAN_LINE = re.compile(r"corpus: ([\d,]+) documents scanned, ([\d,]+) kept.*?([\d,.]+) MB in ([\d.]+) s \(([\d,]+) MB/s\)")


def vocabulary(rng: np.random.Generator, size: int = 20_000) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 5)))))
    return sorted(words)


def write_folder(folder: Path, n_docs: int, n_queries: int, run_depth: int, depth: int, seed: int, gz: bool) -> Path:
    """The BEIR folder and run of these parameters, written once (a stamp file marks it complete)."""
    stamp = folder / "stamp.json"
    params = {"docs": n_docs, "queries": n_queries, "run_depth": run_depth, "depth": depth, "seed": seed, "gz": gz}
    if stamp.is_file() and json.loads(stamp.read_text()) == params:
        return folder / "run.trec"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "qrels").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(rng))
    t0 = time.perf_counter()
    name = folder / ("corpus.jsonl.gz" if gz else "corpus.jsonl")
    with (gzip.open(name, "wt", encoding="utf-8", compresslevel=1) if gz else open(name, "w", encoding="utf-8")) as f:
        for start in range(0, n_docs, 10_000):
            n = min(10_000, n_docs - start)
            lengths = rng.integers(45, 76, size=n)
            picks = rng.integers(0, len(words), size=int(lengths.sum()))
            ends = np.cumsum(lengths)
            titles = rng.integers(0, len(words), size=(n, 2))
            f.write("".join(json.dumps({"_id": f"doc{start + i}", "title": f"{words[titles[i, 0]]} {words[titles[i, 1]]}",
                                        "text": " ".join(words[picks[ends[i] - lengths[i]:ends[i]]]) + "."}) + "\n"
                            for i in range(n)))
    queries, qrels, run = [], [], []
    for q in range(n_queries):
        docs = rng.choice(n_docs, size=run_depth, replace=False)
        answer = str(words[rng.integers(len(words))])
        queries.append(json.dumps({"_id": f"q{q}", "text": f"what is {answer} {q}?", "metadata": {"answers": [answer]}}))
        qrels.append(f"q{q}\tdoc{docs[int(rng.integers(depth))]}\t1")
        run += [f"q{q} Q0 doc{d} {r + 1} {run_depth - r} bench" for r, d in enumerate(docs)]
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    (folder / "run.trec").write_text("\n".join(run) + "\n")
    stamp.write_text(json.dumps(params))
    print(f"wrote {name} ({name.stat().st_size / 1e6:,.0f} MB, {n_docs:,} documents) in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return folder / "run.trec"


def to_parquet(folder: Path) -> Path:
    """corpus.jsonl as corpus.parquet, converted 100,000 lines at a time (written once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = folder / "corpus.parquet"
    if out.is_file():
        return out
    schema = pa.schema([("_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
    with open(folder / "corpus.jsonl", encoding="utf-8") as f, pq.ParquetWriter(out.with_suffix(".tmp"), schema) as w:
        while lines := [json.loads(line) for _, line in zip(range(100_000), f)]:
            w.write_table(pa.Table.from_pylist(lines, schema=schema))
    out.with_suffix(".tmp").rename(out)
    return out


READ_ONLY = """
import sys
from udcg.io.beir import check_run, read_collection
from udcg.io.trec import read_run
try:
    from udcg.flows.own_runs import run_docids
except ImportError:
    run_docids = None
corpus, queries, qrels, run_path, depth = sys.argv[1:4] + [sys.argv[4], int(sys.argv[5])]
run = read_run(run_path)
if run_docids is not None:
    c = read_collection(corpus, queries, qrels, docids=run_docids({"run": run}, depth))
    check_run(run, c, run_path, depth=depth)
    print(c.scan.line(), file=sys.stderr)
else:  # a udcg before docids: the whole corpus
    c = read_collection(corpus, queries, qrels)
    check_run(run, c, run_path)
print(f"{len(c.corpus)} documents held", file=sys.stderr)
"""


def measure(argv: list[str], env: dict, cwd: Path) -> dict:
    """Run one child; its wall time, peak resident memory (its own rusage) and stderr."""
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"the child failed ({child.returncode}):\n{err}")
    out = {"wall_s": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}  # ru_maxrss: KiB on Linux
    scan = SCAN_LINE.search(err)
    if scan:
        out.update(scanned=int(scan[1].replace(",", "")), kept=int(scan[2].replace(",", "")),
                   corpus_mb=float(scan[3].replace(",", "")), scan_s=float(scan[4]), scan_mb_s=float(scan[5].replace(",", "")))
    out["stderr_tail"] = err.strip().splitlines()[-4:]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=2_000_000, help="corpus documents (default 2,000,000)")
    p.add_argument("--queries", type=int, default=200, help="queries of the run (default 200)")
    p.add_argument("--depth", type=int, default=10, help="annotate --depth: pairs = queries x depth (default 10)")
    p.add_argument("--run-depth", type=int, default=100, help="documents per query in the run (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gz", action="store_true", help="write corpus.jsonl.gz")
    p.add_argument("--parquet", action="store_true", help="read the corpus as corpus.parquet (converted once)")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "udcg-bench-corpus",
                   help="folder for the generated files (reused when the parameters match)")
    p.add_argument("--read-only", action="store_true", help="measure the collection read and run checks only")
    p.add_argument("--udcg-root", type=Path, default=ROOT, help="the checkout whose udcg runs (default this one)")
    args = p.parse_args(argv)
    if args.depth > args.run_depth or args.docs < args.run_depth or (args.gz and args.parquet):
        p.error("--depth must be at most --run-depth, --docs at least --run-depth; --gz or --parquet, not both")
    folder = args.work.resolve() / f"beir-{args.docs}{'-gz' if args.gz else ''}"
    run = write_folder(folder, args.docs, args.queries, args.run_depth, args.depth, args.seed, args.gz)
    files = [str(to_parquet(folder) if args.parquet else folder), str(folder / "queries.jsonl"),
             str(folder / "qrels" / "test.tsv")]
    root = args.udcg_root.resolve()  # the child runs there, so that checkout's udcg is imported
    env = {**os.environ, "PYTHONPATH": str(root), "OPENAI_API_KEY": "bench"}
    out_dir = args.work.resolve() / "utilities"
    shutil.rmtree(out_dir, ignore_errors=True)
    if args.read_only:
        result = measure([sys.executable, "-c", READ_ONLY, *files, str(run), str(args.depth)], env, root)
    else:
        with Process() as server:
            result = measure([sys.executable, "-m", "udcg", "annotate", "--corpus", files[0], "--queries", files[1],
                              "--qrels", files[2], "--run", str(run),
                              "--depth", str(args.depth), "--model", "openai:bench", "--api-base",
                              server.url, "--concurrency", "64", "-o", str(out_dir), "--no-progress"], env, root)
    result = {"docs": args.docs, "pairs": args.queries * args.depth, "gz": args.gz, "parquet": args.parquet,
              "read_only": args.read_only,
              "udcg_root": str(args.udcg_root), **result}
    for line in result.pop("stderr_tail"):
        print(f"  child: {line}", file=sys.stderr)
    print(f"result: {json.dumps(result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
