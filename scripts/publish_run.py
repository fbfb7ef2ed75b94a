"""Copy the shareable part of a ``udcg validate`` run folder (report, tables, figures, resolved
config, summary, timings, fitted UDCG_theta models, and ``data/``: the gzipped per-context and
per-passage data from which ``udcg report`` rebuilds every table and figure) to a folder meant for
the repository, leaving out the plain JSONL copies of the data. The model caches go along gzipped
(``cache/*.jsonl.gz``, fixed gzip headers), so the run can be grown later on another machine:
``scripts/grow_run.sh`` restores them into ``runs/<name>/cache/`` before its first chunk.

    python scripts/publish_run.py runs/popqa-qwen0.5b docs/results/popqa-qwen0.5b

The destination is replaced as a whole: it is built beside itself and renamed into place.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
from pathlib import Path

KEEP_FILES = ("report.md", "config.yaml", "summary.json", "run.json")
KEEP_DIRS = ("tables", "figures", "theta", "data")


def publish(run_dir: Path, dest: Path) -> list[Path]:
    if not (run_dir / "report.md").is_file():
        raise SystemExit(f"{run_dir}: no report.md (is this a finished udcg validate run folder?)")
    if not (run_dir / "data" / "contexts.jsonl.gz").is_file():
        raise SystemExit(f"{run_dir}: no data/contexts.jsonl.gz (a run from before data/ existed: rerun udcg validate "
                         "on it, its caches make that cheap, then publish)")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in KEEP_FILES:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, tmp / name)
    for name in KEEP_DIRS:
        if (run_dir / name).is_dir():
            shutil.copytree(run_dir / name, tmp / name)
    for cache in sorted((run_dir / "cache").glob("*")):
        if cache.name.startswith("pools."):  # the pools are rebuilt from the data in seconds (and are in data/)
            continue
        (tmp / "cache").mkdir(exist_ok=True)
        if cache.suffix == ".jsonl":
            (tmp / "cache" / (cache.name + ".gz")).write_bytes(gzip.compress(cache.read_bytes(), compresslevel=9, mtime=0))
        elif cache.suffix == ".json":
            shutil.copy2(cache, tmp / "cache" / cache.name)
    old = dest.with_name(dest.name + ".old")
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return sorted(p for p in dest.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("dest", type=Path)
    args = ap.parse_args()
    files = publish(args.run_dir, args.dest)
    print(f"{len(files)} files -> {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
