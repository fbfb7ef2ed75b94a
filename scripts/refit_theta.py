"""Refit UDCG_theta in published ``udcg validate`` run folders with the current code, from their
data alone (no model, no data set, no cache), and rebuild their reports:

    python scripts/refit_theta.py docs/results/nq-qwen0.5b docs/results/popqa-qwen0.5b ...

Per run (``udcg.experiment.validate.refit_theta``): UDCG_theta refitted on the train questions
(``theta/*.json``), every context rescored (``data/contexts.jsonl.gz``), ``data/notes.json`` and
``data/per-question.jsonl.gz`` rewritten, every table, figure, ``report.md`` and ``summary.json``
rebuilt as ``udcg report`` does. Deterministic: the same data and code give the same bytes (with
the rule the runs were fitted by, it rewrites their data unchanged). ``git diff`` shows the change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udcg.experiment.validate import refit_theta  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="udcg validate run folders (with config.yaml, data/, theta/)")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run / "config.yaml").is_file():
            raise SystemExit(f"{run}: no config.yaml (give a udcg validate run folder, e.g. docs/results/nq-qwen0.5b)")
    for run in args.runs:
        result = refit_theta(run)
        chosen = ", ".join(f"{name} C = {C:g}" for name, C in result.notes.get("theta_C", {}).items())
        print(f"{run}: UDCG_theta refitted ({chosen or 'no model'}); report rebuilt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
