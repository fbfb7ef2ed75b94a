"""No value climbs a floor to be read: a module imports a udcg name because it uses it; the few
deliberate re-exports are spelled as such (``from udcg.io.writing import dumps as dumps``) and stay
in their room; no ``# noqa: F401`` hides a shim (the concurrency default once went from ``llm/``
through ``flows/annotate`` so that a command's parser could read it). And each default the model
options share is declared once, where its meaning lives, and read by every door."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"
# The one shim left, in files another change reshapes (the compare and score commands' notes):
# flows/run_scores imports metrics.measures.alias_notes for commands/compare.py and commands/score.py.
PENDING: set[tuple[str, str]] = set()


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unused_imports(path: Path) -> list[tuple[ast.ImportFrom, ast.alias]]:
    """The ``from udcg... import`` names of a module that it never uses (nor lists in ``__all__``)."""
    tree = ast.parse(path.read_text(), str(path))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            used |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return [(node, alias) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("udcg")
            for alias in node.names if (alias.asname or alias.name) not in used]


def test_no_module_passes_on_a_name_it_does_not_use_except_as_an_explicit_reexport_of_its_room():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for node, alias in _unused_imports(path):
            if (where, alias.name) in PENDING:
                continue
            explicit = alias.asname == alias.name
            if not explicit or _room(node.module) != _room(_module(path)):
                wrong.append(f"{where}:{node.lineno}: {alias.name} from {node.module}")
    assert not wrong, ("names imported only to be imported from here (import them where they are declared; a "
                       "deliberate re-export of the same room is written `name as name`):\n" + "\n".join(wrong))


def test_no_noqa_hides_an_unused_import():
    hidden = [f"{path.relative_to(PACKAGE.parent)}:{i}" for path in sorted(PACKAGE.rglob("*.py"))
              for i, line in enumerate(path.read_text().splitlines(), 1) if "noqa: F401" in line
              and not any(path.relative_to(PACKAGE.parent).as_posix() == p and name in line for p, name in PENDING)]
    assert not hidden, "a `noqa: F401` hides a shim:\n" + "\n".join(hidden)


def test_the_pending_shims_are_still_there_to_be_removed():
    """When a PENDING shim goes, it leaves PENDING (the list only shrinks)."""
    for where, name in PENDING:
        assert any(alias.name == name for _, alias in _unused_imports(PACKAGE.parent / where)), (where, name)


def test_the_concurrency_default_is_declared_once_and_read_by_every_door():
    from udcg import bounds
    from udcg.cli import build_parser
    from udcg.experiment.config import ReaderConfig
    from udcg.llm import openai_wire
    from udcg.llm.openai_settings import ClientSettings

    parsed = build_parser().parse_args(["annotate", "data.json", "-o", "out.json", "--model", "openai:m"])
    backend = ClientSettings.max_concurrency  # the HTTP client's settings of OpenAIBackend
    assert parsed.concurrency == backend == ReaderConfig().concurrency == bounds.DEFAULT_CONCURRENCY == 64
    assert bounds.CONCURRENCY.low <= bounds.DEFAULT_CONCURRENCY <= bounds.CONCURRENCY.high
    assert not hasattr(openai_wire, "DEFAULT_CONCURRENCY")  # not declared a second time below
    flows_annotate = (PACKAGE / "flows" / "annotate.py").read_text()
    assert "DEFAULT_CONCURRENCY" not in flows_annotate  # nor passed on through a flow
