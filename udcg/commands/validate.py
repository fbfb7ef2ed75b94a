"""udcg validate CONFIG: the paper's end-to-end experiment (pools -> utilities -> contexts -> answers
-> outcomes -> metrics -> Table 3), resumable, writing a report into the run folder."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command

EXAMPLES = ["udcg validate configs/smoke.yaml                         tiny run (SmolLM2-135M), under two minutes on CPU",
            "udcg validate configs/popqa-qwen0.5b.yaml -o runs/popqa  the shared PopQA set with Qwen2.5-Coder-0.5B",
            "udcg validate configs/nq-qwen0.5b.yaml --set data.limit=20 --set studies.k_values=[1,5]"]
NOTES = """A killed run resumes when the same command is run again: finished model work is read from
RUN/cache/ and not recomputed. reader.batch_size is the prompts per forward pass; reader.chunk_size
the requests per cached, fsynced unit of every model step of the run (the reader's and the LLM
judges'). Every key of the config can be overridden with --set SECTION.KEY=VALUE
(YAML value). See udcg/experiment/config.py for the schema and defaults.

An API reader (vLLM, SGLang, udcg serve, OpenAI): reader.model: openai:NAME (or NAME with
reader.api_base), reader.api_base (comma-separated URLs; else $UDCG_OPENAI_BASE_URLS, else
$OPENAI_BASE_URL, else OpenAI's API, which needs the key), reader.api_key_env, reader.concurrency,
reader.timeout, reader.rpm, reader.max_retries, reader.tokenizer and reader.scoring (exact p_abs and
ANSWER_PROB through /v1/completions where the server scores text). The first line says where the
reader's requests go."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "validate", help="the paper's end-to-end experiment from a YAML config (resumable)",
                description="""Build candidate pools, annotate utilities, sample balanced contexts, generate and
                grade answers, score every metric and report which one follows answer accuracy (the paper's Tables
                2-4 and Figs. 1-2).""",
                examples=EXAMPLES, notes=NOTES)
    p.add_argument("config", help="YAML config (e.g. configs/smoke.yaml)")
    add_run_options(p)
    p.set_defaults(func=main)


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default=None, help="run folder (default: the config's output, else runs/<name>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set contexts.k=3 (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def execute(config_path, args: argparse.Namespace) -> int:
    from udcg.experiment.config import load_config
    from udcg.experiment.validate import reader_line, reader_spec, run_validation
    from udcg.progress import bar, follow_libraries

    cfg = load_config(config_path, args.overrides, args.output)
    reader = reader_spec(cfg)  # resolved once, here
    where = reader_line(reader)  # an API reader without a server or key is refused here
    print(f"udcg validate: {cfg.name} -> {cfg.output}; {where}", file=sys.stderr)
    quiet = args.no_progress
    follow_libraries(not quiet)
    result = run_validation(cfg, progress=None if quiet else bar, reader=reader)
    print(result.table3.markdown(3))
    t = result.timings
    steps = ", ".join(f"{name} {s['seconds']:.1f}s" for name, s in t["steps"].items())
    print(f"done in {t['total_seconds']:.1f}s ({steps}); report: {result.run_dir / 'report.md'}", file=sys.stderr)
    return 0


def main(args: argparse.Namespace) -> int:
    return execute(args.config, args)
