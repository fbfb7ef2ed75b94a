"""udcg validate-demo (``udcg demo``, its older name): ``udcg validate`` on the demo config shipped
inside the package (the packaged PopQA sample with Qwen2.5-Coder-0.5B, about 5 minutes on an idle 2-core CPU), printing the Table 3."""

from __future__ import annotations

import argparse

from udcg.commands._parser import command


def add_parser(sub: argparse._SubParsersAction) -> None:
    from udcg.commands.validate import add_run_options

    p = command(sub, "validate-demo", aliases=("demo",),
                help="the paper's validation on the packaged PopQA sample (was `udcg demo`; about 5 minutes on an "
                "idle 2-core CPU); the quickstart on your own runs is `make demo`",
                description="""Run `udcg validate` on the packaged demo config (udcg/data/demo.yaml): 6 PopQA
                questions, pools of 10, contexts of k = 3, Qwen2.5-Coder-0.5B. Prints the Table 3; the report
                lands in ./runs/demo (or --output). Rerun to resume. `udcg demo` is its older name and still
                works; `make demo` is another thing, the README's quickstart (annotate and compare runs).""",
                examples=["udcg validate-demo", "udcg validate-demo -o /tmp/demo --set reader.model=smollm2-135m"])
    add_run_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.commands.validate import execute
    from udcg.experiment.config import demo_config_path

    return execute(demo_config_path(), args)
