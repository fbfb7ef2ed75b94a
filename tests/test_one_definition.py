"""One name, one meaning (issue #52): no public (non-underscore) top-level function or class name is
defined in two modules of udcg/, so that a name read anywhere means one thing. The few that must
stay are listed with their modules and the reason."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"
COMMANDS = {p.relative_to(PACKAGE.parent).as_posix() for p in (PACKAGE / "commands").glob("*.py")
            if not p.name.startswith("_")}

# name -> (the modules allowed to define it, why)
ALLOWED: dict[str, tuple[set[str], str]] = {
    "main": (COMMANDS | {"udcg/cli.py"}, "the command protocol: cli.py finds each command module's main "
                                         "(and its own main is the console entry point)"),
    "add_parser": (COMMANDS, "the command protocol: cli.py asks each command module for its parser"),
    "ranked_docids": ({"udcg/io/trec.py", "udcg/metrics/gains.py"},
                      "one meaning (trec_eval order) kept in both rooms, as metrics import no I/O; "
                      "tests/test_trec.py checks the two agree"),
}


def top_level_names() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                where[node.name].append(path.relative_to(PACKAGE.parent).as_posix())
    return where


def test_no_public_name_is_defined_in_two_modules():
    twice = {name: modules for name, modules in top_level_names().items() if len(modules) > 1}
    wrong = [f"{name}: {', '.join(modules)}" for name, modules in sorted(twice.items())
             if not (name in ALLOWED and set(modules) <= ALLOWED[name][0])]
    assert not wrong, ("a public name defined in several modules (rename the internal ones so each name means "
                       "one thing, or list it in ALLOWED with the reason):\n" + "\n".join(wrong))


def test_the_allow_list_holds_only_names_still_defined_twice():
    names = top_level_names()
    stale = [name for name in ALLOWED if len(names.get(name, ())) < 2]
    assert not stale, f"no longer defined twice, drop from ALLOWED: {stale}"
