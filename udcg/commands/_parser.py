"""What the commands' parsers share: the subcommand with its description and examples."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def command(sub: argparse._SubParsersAction, name: str, help: str, description: str, examples: Sequence[str] = (),
            notes: str = "", formatter_class: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter,
            ) -> argparse.ArgumentParser:
    """The parser of ``udcg NAME``. ``description`` is one paragraph: its line breaks and indentation
    in the source fold to single spaces. The epilog lists ``examples`` one a line, indented by two
    spaces, under "example:" (one) or "examples:" (several), then ``notes`` after a blank line. The
    default formatter prints the description and the epilog as they are (the examples keep their lines)."""
    parts = []
    if examples:
        parts.append(("example:\n" if len(examples) == 1 else "examples:\n") + "\n".join(f"  {e}" for e in examples))
    if notes:
        parts.append(notes)
    return sub.add_parser(name, help=help, description=" ".join(description.split()), epilog="\n\n".join(parts) or None,
                          formatter_class=formatter_class)



def add_api_options(p: argparse.ArgumentParser, title: str = "API model (openai:MODEL, or a model name with --api-base)",
                    ) -> None:
    """The flags of an API model, the same in every command that runs one (annotate, answer, judge);
    a validate config has them as reader.api_base, reader.concurrency, ... (``udcg.llm.registry.api_options``)."""
    from udcg.flows.annotate import DEFAULT_CONCURRENCY

    g = p.add_argument_group(title)
    g.add_argument("--api-base", default=None, help="OpenAI-compatible base URL(s), comma-separated (round-robin); "
                   "without it, openai:MODEL uses $UDCG_OPENAI_BASE_URLS, else $OPENAI_BASE_URL, else OpenAI's API "
                   "(which needs the key)")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    g.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                   help=f"API requests in flight, over every base URL (default {DEFAULT_CONCURRENCY})")
    g.add_argument("--rpm", type=float, default=None, help="API requests-per-minute limit")
    g.add_argument("--timeout", type=float, default=60.0, help="API: seconds to wait for one response (default 60)")
    g.add_argument("--max-retries", type=int, default=5, help="API: retries per request after the first attempt, "
                   "with exponential backoff and Retry-After (default 5); then the run stops, keeping finished work")
    g.add_argument("--tokenizer", default=None, help="API: the served model's tokenizer (offline alias, folder or hub "
                   "id) for exact log-probabilities through /v1/completions (default: the served model's name)")
    g.add_argument("--scoring", default="auto", choices=("auto", "completions", "top-logprobs"),
                   help="API: exact log-probabilities through /v1/completions where the server scores text (auto, the "
                   "default), required (completions), or never: first tokens from the chat top list (top-logprobs)")


def api_settings(args: argparse.Namespace) -> dict:
    """The parsed API flags as ``udcg.llm.registry.api_options`` keywords."""
    return {"api_base": args.api_base, "api_key_env": args.api_key_env, "concurrency": args.concurrency, "rpm": args.rpm,
            "timeout": args.timeout, "max_retries": args.max_retries, "tokenizer": args.tokenizer,
            "scoring": args.scoring}
