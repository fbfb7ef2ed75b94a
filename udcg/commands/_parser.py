"""What the commands' parsers share: the subcommand with its description and examples."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def command(sub: argparse._SubParsersAction, name: str, help: str, description: str, examples: Sequence[str] = (),
            notes: str = "", formatter_class: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter,
            aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser of ``udcg NAME``. ``description`` is one paragraph: its line breaks and indentation
    in the source fold to single spaces. The epilog lists ``examples`` one a line, indented by two
    spaces, under "example:" (one) or "examples:" (several), then ``notes`` after a blank line. The
    default formatter prints the description and the epilog as they are (the examples keep their lines).
    ``aliases``: older names of the command that still work."""
    parts = []
    if examples:
        parts.append(("example:\n" if len(examples) == 1 else "examples:\n") + "\n".join(f"  {e}" for e in examples))
    if notes:
        parts.append(notes)
    return sub.add_parser(name, help=help, description=" ".join(description.split()), epilog="\n\n".join(parts) or None,
                          formatter_class=formatter_class, aliases=list(aliases))


class Deprecated(argparse.Action):
    """An option's old spelling (``add_argument("--old", dest="new", action=Deprecated, new="--new")``):
    it still works, stores its value as the new option does, and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs) -> None:
        self.new = new
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"udcg: {option_string} is deprecated: use {self.new} (the same option, renamed)", file=sys.stderr)
        setattr(namespace, self.dest, values)


LOCAL_HELP = {"device": "a local model's device: cpu, cuda, cuda:N or auto (default auto)",
              "dtype": "a local model's dtype: auto, float32, bfloat16 or float16 (default float32; judge and serve: auto)",
              "batch_size": "prompts per forward pass of a local model (default: by a token budget)"}


def add_model_options(p: argparse.ArgumentParser, flag: str = "--model", *, help: str, default: str | None = None,
                      role: str = "model", api: bool = True) -> None:
    """The model flag and its options, the same in every command that runs a model (annotate,
    answer, judge, serve): ``flag`` (required unless ``default``), a local model's ``--device``,
    ``--dtype`` and ``--batch-size``, and with ``api`` an API model's (``add_api_options``). A
    validate config has the same options under ``reader:``. ``model_choice`` reads them back as one
    ``udcg.api.ModelChoice``. ``role``: what the model is (reader, judge), in the groups' titles."""
    p.add_argument(flag, required=default is None, default=default, help=help)
    g = p.add_argument_group(f"local {role} (an offline alias, a model folder or a hub id)")
    g.add_argument("--device", default=None, help=LOCAL_HELP["device"])  # None: not given, and an API model refuses it
    g.add_argument("--dtype", default=None, help=LOCAL_HELP["dtype"])
    g.add_argument("--batch-size", type=int, default=None, metavar="N", help=LOCAL_HELP["batch_size"])
    if api:
        add_api_options(p, f"API {role} (openai:MODEL, or a model name with --api-base)")
    p.set_defaults(model_flag=flag.lstrip("-").replace("-", "_"), model_api=api)


def model_choice(args: argparse.Namespace, model: str | None = None):
    """The parsed model flag and its options (``add_model_options``) as one ``udcg.api.ModelChoice``;
    ``model``: another model name with the same options."""
    from udcg.api import ModelChoice

    api = {k: getattr(args, k) for k in ("api_base", "api_key_env", "concurrency", "rpm", "timeout", "max_retries",
                                         "tokenizer", "scoring")} if args.model_api else {}
    return ModelChoice(model or getattr(args, args.model_flag), device=args.device, dtype=args.dtype,
                       batch_size=args.batch_size, **api)


def add_api_options(p: argparse.ArgumentParser, title: str = "API model (openai:MODEL, or a model name with --api-base)",
                    ) -> None:
    """The flags of an API model, the same in every command that runs one (annotate, answer, judge);
    a validate config has them as reader.api_base, reader.concurrency, ... (``ModelChoice``)."""
    from udcg.bounds import DEFAULT_CONCURRENCY

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

