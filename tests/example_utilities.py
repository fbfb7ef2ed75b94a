"""The packaged example's utilities from a real reader without loading it: smollm2-135m's
annotation of the three runs' top 5, kept as its resume cache (tests/data/nq-example-smollm2),
from which ``udcg annotate`` rebuilds the folder (tests of the figures and the per-query views)."""

from __future__ import annotations

import shutil
from pathlib import Path

from udcg.cli import main
from udcg.io.sources import example_path

CACHE = Path(__file__).parent / "data" / "nq-example-smollm2" / "annotations.jsonl"
EXAMPLE = example_path()
RUNS = {name: EXAMPLE / "runs" / f"{name}.trec" for name in ("bm25", "dense", "hybrid")}
QRELS = EXAMPLE / "qrels" / "test.tsv"


def smollm2_utilities(out: Path) -> Path:
    """``out`` made the utilities folder of the three runs' top 5 (no model loaded)."""
    out.mkdir()
    shutil.copy(CACHE, out / "annotations.jsonl")
    argv = ["annotate", "--corpus", str(EXAMPLE), "--depth", "5", "--model", "smollm2-135m", "-o", str(out),
            "--no-progress", *[a for run in RUNS.values() for a in ("--run", str(run))]]
    assert main(argv) == 0
    return out
