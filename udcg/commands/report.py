"""udcg report RUN_DIR: rebuild a validate run's tables, figures and report from its data alone."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command

EXAMPLES = ["udcg report docs/results/popqa-qwen0.5b                  rebuild in place (git diff shows any change)",
            "udcg report runs/smoke -o /tmp/smoke-report              rebuild into another folder"]
NOTES = """Reads RUN_DIR/config.yaml, RUN_DIR/data/ (per-context and per-passage data, gzipped) and
RUN_DIR/theta/*.json; loads no model and needs no data set. udcg validate writes its report
through the same code, so the result is byte-identical to what the run wrote."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "report", help="rebuild a validate run's tables, figures and report.md from its data (no model)",
                description="""Regenerate every table (Markdown, CSV, JSON), figure, report.md and summary.json of
                a udcg validate run folder from its published data alone.""",
                examples=EXAMPLES, notes=NOTES)
    p.add_argument("run_dir", help="a udcg validate run folder (with config.yaml, data/ and theta/)")
    p.add_argument("-o", "--output", default=None, help="folder to write into (default: RUN_DIR itself)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from udcg.errors import InputError
    from udcg.experiment.reporting import report

    run_dir = Path(args.run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise InputError(f"{run_dir}: no config.yaml (give a udcg validate run folder, e.g. docs/results/popqa-qwen0.5b)")
    out = Path(args.output) if args.output else run_dir
    tables, _, _ = report(run_dir, out)
    print(f"udcg report: {len(tables)} tables -> {out}", file=sys.stderr)
    return 0
