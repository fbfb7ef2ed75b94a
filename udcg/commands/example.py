"""udcg example: copy the packaged BEIR-style example (NQ questions, a Wikipedia corpus, qrels and
three runs) into a folder, to try the own-data quickstart on."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "example", help="copy the packaged example collection (BEIR folder + 3 runs) to a folder",
                description="""Copy the packaged nq-example folder: corpus.jsonl (299 Wikipedia passages),
                queries.jsonl (20 NQ questions with answers), qrels/test.tsv and runs/{bm25,dense,hybrid}.trec.""",
                examples=["udcg example nq-example && ls nq-example/runs"])
    p.add_argument("folder", nargs="?", default="nq-example", help="where to copy it (default ./nq-example); "
                   "must not exist yet")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.example import copy_example

    target = copy_example(args.folder)
    print(f"copied the example collection to {target}/ (corpus.jsonl, queries.jsonl, qrels/test.tsv, "
          "runs/bm25.trec, runs/dense.trec, runs/hybrid.trec)", file=sys.stderr)
    return 0
