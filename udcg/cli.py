"""Command line: argument parsing and error display only. The work lives in the stages."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from udcg.bounds import check_options
from udcg.version import __version__
from udcg.errors import UdcgError
from udcg.llm.openai_target import split_urls
from udcg.redact import env_secrets, redact, url_secrets

# Command modules under udcg/commands, in the order `udcg --help` lists them.
COMMANDS = ("example", "annotate", "reader_check", "score", "compare", "answer", "judge", "fit_theta", "correlate", "validate", "report", "demo", "models",
            "serve")

EPILOG = """examples (your runs; see the README's quickstart):
  udcg annotate --corpus BEIR_DIR --run bm25.trec --run dense.trec --depth 5 --model qwen2.5-coder-0.5b -o utilities
  udcg reader-check utilities                         can this reader measure distraction? (no model time)
  udcg compare --run bm25.trec --run dense.trec --qrels qrels.tsv --utilities utilities --metrics UDCG@5,nDCG@5
  udcg answer --corpus BEIR_DIR --run bm25.trec --k 5 --model qwen2.5-coder-0.5b -o answers.jsonl
examples (files):
  udcg score data.json -o scored.json                 UDCG per item of the authors' format
  udcg score --run run.txt --qrels qrels.txt --metrics P@5,nDCG@10,RR -o per_query.tsv
  udcg fit-theta contexts.jsonl --k 5 -o theta.json   learn UDCG_theta's positional weights
  udcg correlate contexts.jsonl --metrics UDCG,nDCG@5  Spearman with answer outcomes
  udcg annotate data.json -o annotated.json --model qwen2.5-coder-0.5b
  udcg judge relevance data.json -o judged.jsonl --judge rules
  udcg validate configs/smoke.yaml                    the paper's end-to-end experiment
  udcg validate-demo                                  validate on the packaged PopQA sample, print Table 3
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="udcg",
        description="Utility- and distraction-aware retrieval evaluation for RAG.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"udcg {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"udcg.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"udcg.commands.{name}":
                continue  # command not built yet
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    secrets = env_secrets([n for n in (getattr(args, "api_key_env", None),) if n])
    secrets += [s for url in split_urls(str(getattr(args, "api_base", None) or "")) for s in url_secrets(url)]
    redacting = _Redacting(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)
    try:
        # every number in its range (udcg.bounds), before any work; a declared option is checked by its options object
        check_options(args.command, vars(args), declared=[o.name for o in getattr(args, "config_options", ())])
        _check_outputs(args)
        return int(args.func(args) or 0)
    except UdcgError as e:
        print(redact(f"udcg {args.command}: error: {e}", secrets), file=sys.stderr)
        return getattr(e, "exit_code", 1)
    except OSError as e:  # one the writers did not turn into a UdcgError (a figure, a folder): the machine's fault
        where = f"{e.filename}: " if e.filename else ""
        print(redact(f"udcg {args.command}: error: {where}{e.strerror or e} (an operating-system error, not your input; "
                     "finished work is kept: fix it and rerun the same command to resume)", secrets), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"udcg {args.command}: interrupted; finished work is kept, rerun the same command to resume", file=sys.stderr)
        return 130
    finally:
        for handler in logging.getLogger().handlers:
            handler.removeFilter(redacting)


# Output options of every command: (attribute, flag). -o is a folder for validate, demo, report and annotate --run.
OUTPUT_OPTIONS = (("output", "-o"), ("cache", "--cache"), ("write_authors", "--write-authors"))


def _check_outputs(args: argparse.Namespace) -> None:
    """Before any work: every output path is a regular file or a new path (a folder where the
    command writes a folder), no two outputs are one file, and none replaces an input
    (``udcg.io.writing.check_outputs``)."""
    from udcg.io.writing import check_outputs

    folder = args.command in ("validate", "demo", "report") or (args.command == "annotate" and bool(getattr(args, "run", None)))
    outputs = [(flag, value, folder and flag == "-o") for name, flag in OUTPUT_OPTIONS if (value := getattr(args, name, None))]
    check_outputs(outputs, _input_paths(args), in_place=args.command == "report")


def _input_paths(args: argparse.Namespace) -> list[tuple[str, object]]:
    """Every path-like value the command was given that is not one of its outputs (runs, qrels,
    corpus folders, utilities, input files, model folders ...), with the option that named it."""
    outputs = {name for name, _ in OUTPUT_OPTIONS}
    return [(f"--{name.replace('_', '-')}" if name not in ("input", "run_dir", "config") else name.upper(), item)
            for name, value in vars(args).items() if name not in outputs and name != "func"
            for item in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(item, (str, Path))]


class _Redacting(logging.Filter):
    """Masks secrets (API keys in any form, URL credentials) in every log line (udcg.redact)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return True


if __name__ == "__main__":
    sys.exit(main())
