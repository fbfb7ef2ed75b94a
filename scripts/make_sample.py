"""Regenerate the packaged PopQA sample (udcg/data/popqa-sample.jsonl) from ../shared/data.

    .venv/bin/python scripts/make_sample.py [--data-dir ../shared/data] [--n 12] [--out udcg/data/popqa-sample.jsonl]

The output is deterministic: the first N questions of the PopQA file, in file order, each with
its passages in retrieval order (empty-text passages dropped, as ``load_popqa`` does by default),
written in the authors' JSON-lines format with ``is_relevant`` set by answer containment and the
retriever ``score`` kept as an extra passage field (None for the passages without one).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from udcg.io.sources import default_data_dir, load_popqa  # noqa: E402
from udcg.io.authors import question_to_authors  # noqa: E402
from udcg.io.files import atomic_write_jsonl  # noqa: E402

POPQA_FILE = "popqa-contriever-100/popqa_longtail_w_gs_example.jsonl"


def sample_items(data_dir: Path, n: int) -> list[dict]:
    questions = load_popqa(data_dir / POPQA_FILE, label=True, limit=n)
    items = []
    for q in questions:
        item = question_to_authors(q)
        for d, p in zip(item["passages"], q.passages):
            d["score"] = p.score
        items.append(item)
    return items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), required=default_data_dir() is None,
                    help="the shared data folder (default: $UDCG_DATA_DIR)")
    ap.add_argument("--n", type=int, default=12, help="number of questions (default 12)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "udcg/data/popqa-sample.jsonl")
    args = ap.parse_args(argv)
    items = sample_items(args.data_dir, args.n)
    atomic_write_jsonl(args.out, items)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()[:16]
    n_passages = sum(len(i["passages"]) for i in items)
    sys.stdout.write(f"wrote {args.out} ({len(items)} questions, {n_passages} passages, "
                     f"{args.out.stat().st_size} bytes, sha256 {digest}…)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
