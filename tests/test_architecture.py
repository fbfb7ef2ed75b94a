"""The package's shape: imports run one way through seven floors, metrics stay pure, modules stay small.

Floors, from the bottom (a module may import only from floors below its own, or from its own unit;
a unit, a "room" in docs/architecture.md, is a top-level module or package of udcg; 1b and 1c are
sublevels of floor 1, so FLOORS has nine entries for seven floors):

1. base: records, errors, text, progress, redact, version
1b. bounds (the allowed range of every numeric option and config value; raises errors' InputError) and
    extras (the optional IR libraries, imported on use; a missing one is an InputError naming the extra)
1c. options (an operation's options declared once, the flags and the API's keywords made from them;
    their ranges are bounds')
2. io/ (files and data sets) and llm/ (the model backends), which do not import each other
3. resumable (the one resumable, cached runner every model step uses)
4. annotate/, grade/, metrics/ (metrics import only errors, besides numpy/scipy/scikit-learn/pandas;
   annotate and grade may use metrics, the pure one of the three, not each other)
5. flows/ (the everyday flows: annotate, answer, judge, score, compare, fit-theta, correlate)
6. experiment/ (the paper's validation only)
7. the interface: udcg (package), __main__, api, api_args, cli, commands/, integrations/ (udcg inside
   PyTerrier and ir_measures; which may call each other downward: cli -> commands -> udcg -> integrations
   -> api -> api_args, the API's argument checks)

Commands parse, call and print: they import the flows, the API, errors, progress and each other;
``models`` and ``serve`` may reach ``llm`` (they install and serve models), and ``validate``,
``report`` and ``demo`` the paper's validation (``experiment``).

No import cycle between units, nor between the modules of one unit; an import under ``if
TYPE_CHECKING:`` (a type named for an annotation, never run) counts as any other: a circle closed
only by a type is still a circle.

scripts/ (and the Python they hand to a child process in a string) use udcg's public names only:
no private name (``_x``) of a udcg module, imported or reached as an attribute, and from
``udcg.experiment`` only the entry points in ``SCRIPT_EXPERIMENT`` (the paper's experiment is
otherwise internal; scripts use ``udcg``/``udcg.api``, the runner ``udcg.resumable`` and the public
functions of the floors below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"
FLOORS = [
    {"udcg.records", "udcg.errors", "udcg.text", "udcg.progress", "udcg.redact", "udcg.version"},
    {"udcg.bounds", "udcg.extras"},
    {"udcg.options"},
    {"udcg.io", "udcg.llm"},
    {"udcg.resumable"},
    {"udcg.annotate", "udcg.grade", "udcg.metrics"},
    {"udcg.flows"},
    {"udcg.experiment"},
    {"udcg", "udcg.__main__", "udcg.api", "udcg.api_args", "udcg.cli", "udcg.commands", "udcg.integrations"},
]
FLOOR_NUMBERS = ["1", "1b", "1c", "2", "3", "4", "5", "6", "7"]  # of FLOORS, in order: seven floors, 1b and 1c sublevels of 1
INTERFACE_ORDER = ["udcg.__main__", "udcg.cli", "udcg.commands", "udcg", "udcg.integrations", "udcg.api", "udcg.api_args"]  # may import rightwards
DOMAIN_SHARED = {"udcg.metrics"}  # on the domain floor, the pure metrics serve annotate and grade
MAX_LINES = 400
SCRIPTS = PACKAGE.parent / "scripts"
# The entry points of udcg.experiment a script may use (ALL: a module whose public names all are):
# a published run's data, config, Table 3 layout and paired statistics (theta_transfer,
# results_table, refit_theta), the retrieval the packaged example is built with (make_example).
# The everyday flows (udcg.flows) are public to scripts.
ALL = frozenset({"*"})
SCRIPT_EXPERIMENT = {
    "udcg.experiment.config": {"read_run_config"},
    "udcg.experiment.paired": ALL,
    "udcg.experiment.pools": {"MiniLMEncoder", "bm25_scores", "build_corpus"},
    "udcg.experiment.reporting": {"finite", "question_order", "read_groups", "read_per_question", "write_jsonl_gz"},
    "udcg.experiment.validate": {"refit_theta"},
}
# Benchmarks that time an internal choice against its alternative swap that internal (A/B arms).
SCRIPT_AB_SWITCHES = {("bench_generate.py", "_waves"), ("bench_metrics.py", "_walk")}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The udcg modules that ``module`` imports, at any depth of the file (lazy imports and those
    under ``if TYPE_CHECKING:`` included)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("udcg"):
                found.add(name)
    return found


def _floor(unit: str) -> int:
    for i, units in enumerate(FLOORS):
        if unit in units:
            return i
    raise AssertionError(f"{unit} belongs to no floor: place it in FLOORS (tests/test_architecture.py)")


MODULES = _modules()
EDGES = {m: _imports(m, p, MODULES) for m, p in MODULES.items()}


def test_every_module_has_a_floor():
    for module in MODULES:
        _floor(_unit(module))


def test_imports_run_downwards():
    wrong = []
    for module, targets in EDGES.items():
        src = _unit(module)
        for target in targets:
            dst = _unit(target)
            if dst == src:
                continue
            fs, fd = _floor(src), _floor(dst)
            if fs == fd == len(FLOORS) - 1:
                if INTERFACE_ORDER.index(dst) > INTERFACE_ORDER.index(src):
                    continue
            elif fs == fd and dst in DOMAIN_SHARED:
                continue
            elif fd < fs:
                continue
            wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the direction:\n" + "\n".join(sorted(wrong))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its nodes in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        trail.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return trail[trail.index(v):] + [v]
            if v not in state and (found := visit(v)):
                return found
        state[u] = 2
        trail.pop()
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_no_cycle_between_units():
    graph: dict[str, set[str]] = {}
    for module, targets in EDGES.items():
        graph.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) != _unit(module))
    cycle = _cycle(graph)
    assert cycle is None, "import cycle between units: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("unit", sorted({_unit(m) for m in MODULES}))
def test_no_cycle_inside_a_unit(unit):
    graph = {m: {t for t in targets if _unit(t) == unit and t != m} for m, targets in EDGES.items()
             if _unit(m) == unit}
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle inside {unit}: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_cycle_check_counts_type_only_imports(tmp_path):
    """A circle closed only by an ``if TYPE_CHECKING:`` import is a circle (issue #39)."""
    path = tmp_path / "signals.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from udcg.metrics.registry import score\n")
    edges = {"udcg.metrics.signals": _imports("udcg.metrics.signals", path, MODULES),
             "udcg.metrics.registry": {"udcg.metrics.signals"}}
    assert edges["udcg.metrics.signals"] == {"udcg.metrics.registry"}
    assert _cycle(edges) == ["udcg.metrics.registry", "udcg.metrics.signals", "udcg.metrics.registry"]


def test_metrics_import_only_errors():
    wrong = [f"{m} -> {t}" for m, ts in EDGES.items() if _unit(m) == "udcg.metrics"
             for t in ts if _unit(t) not in ("udcg.metrics", "udcg.errors")]
    assert not wrong, "metrics must import only udcg.errors:\n" + "\n".join(sorted(wrong))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(PACKAGE.parent)}: {lines} lines > {MAX_LINES}; split it by job"


# ---------------------------------------------------------------- scripts/


def _script_trees(path: Path) -> list[ast.AST]:
    """The script's syntax tree, and that of each string in it that is Python importing udcg (the
    code a benchmark hands to a child process)."""
    tree = ast.parse(path.read_text())
    trees = [tree]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "udcg" in node.value and "import" in node.value:
            try:
                trees.append(ast.parse(node.value))
            except SyntaxError:
                continue
    return trees


def _script_violations(name: str, trees: list[ast.AST]) -> list[str]:
    """Each import of a private or internal udcg name, and each private attribute reached (but the
    script's own ``self._x`` and the A/B switches), as ``script:line: name (why)``."""
    wrong = []
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wrong += [m for alias in node.names if alias.name.split(".")[0] == "udcg"
                          for m in _script_module(name, node.lineno, alias.name, None)]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "udcg":
                wrong += [m for alias in node.names for m in _script_module(name, node.lineno, node.module, alias.name)]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and (name, node.attr) not in SCRIPT_AB_SWITCHES
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                wrong.append(f"{name}:{node.lineno}: {ast.unparse(node)} (a private name)")
    return wrong


def _script_module(script: str, line: int, module: str, name: str | None) -> list[str]:
    """What is wrong with ``from module import name`` (``import module`` when name is None) in a script."""
    where = f"{script}:{line}: {module}" + (f".{name}" if name else "")
    target = f"{module}.{name}" if name and f"{module}.{name}" in MODULES else module
    if any(part.startswith("_") and not part.startswith("__") for part in target.split(".")) or (
            name and name.startswith("_")):
        return [f"{where} (a private name)"]
    if target not in MODULES:
        return [f"{where} (no such udcg module)"]
    if _unit(target) != "udcg.experiment":
        return []
    if SCRIPT_EXPERIMENT.get(target) is ALL:
        return []
    if name is None or target != module or name not in SCRIPT_EXPERIMENT.get(module, set()):
        return [(f"{where} (udcg.experiment is internal: use udcg.api, udcg.resumable or a lower floor, "
                 "or add the entry point to SCRIPT_EXPERIMENT)")]
    return []


SCRIPT_FILES = sorted(SCRIPTS.glob("*.py"))


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=[p.name for p in SCRIPT_FILES])
def test_scripts_use_public_names_only(path):
    wrong = _script_violations(path.name, _script_trees(path))
    assert not wrong, "scripts/ reach into udcg's internals:\n" + "\n".join(wrong)


def test_the_script_check_sees_private_and_internal_names():
    code = """
from udcg.llm.hf import _helper
from udcg.experiment.studies import correlate
from udcg.experiment import reporting
import udcg.metrics._walk
backend._batches([1], [2])
self._own = 1
"""
    wrong = _script_violations("x.py", [ast.parse(code)])
    assert [w.split(" (")[0] for w in wrong] == ["x.py:2: udcg.llm.hf._helper", "x.py:3: udcg.experiment.studies.correlate",
                                                 "x.py:4: udcg.experiment.reporting", "x.py:5: udcg.metrics._walk",
                                                 "x.py:6: backend._batches"]
    fine = "from udcg.flows.theta import load_theta\nfrom udcg.experiment import paired\nfrom udcg import resumable\n"
    assert _script_violations("x.py", [ast.parse(fine)]) == []


def test_script_experiment_names_exist():
    import importlib

    missing = [f"{m}.{n}" for m, names in SCRIPT_EXPERIMENT.items() for n in names - ALL
               if not hasattr(importlib.import_module(m), n)]
    missing += [m for m in SCRIPT_EXPERIMENT if m not in MODULES]
    assert not missing, "SCRIPT_EXPERIMENT names what does not exist: " + ", ".join(missing)


def _script_imported_names(trees: list[ast.AST]) -> set[tuple[int, str, str]]:
    """(line, module, name) of each ``from udcg... import name`` in a script, at any depth."""
    return {(node.lineno, node.module, alias.name) for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "udcg"
            for alias in node.names}


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=[p.name for p in SCRIPT_FILES])
def test_every_name_a_script_imports_exists(path):
    """A rename in udcg breaks a script's lazy import only when that branch runs (bench_annotate's
    --random-init on a GPU lost ``hf_load.resolve`` this way): each imported name must exist."""
    import importlib

    missing = [f"{path.name}:{line}: {module}.{name}" for line, module, name in sorted(_script_imported_names(
        _script_trees(path))) if f"{module}.{name}" not in MODULES
        and not hasattr(importlib.import_module(module), name)]
    assert not missing, "scripts/ import names udcg no longer has:\n" + "\n".join(missing)


COMMAND_IMPORTS = {"udcg.commands", "udcg.flows", "udcg.api", "udcg.errors", "udcg.progress"}
COMMAND_EXTRA = {"models": {"udcg.llm"}, "serve": {"udcg.llm"}, "validate": {"udcg.experiment"},
                 "report": {"udcg.experiment"}, "demo": {"udcg.experiment"}}


def test_commands_parse_call_print():
    wrong = []
    for module, targets in EDGES.items():
        if _unit(module) != "udcg.commands":
            continue
        allowed = COMMAND_IMPORTS | COMMAND_EXTRA.get(module.rpartition(".")[2], set())
        wrong += [f"{module} -> {t}" for t in targets if _unit(t) not in allowed and t not in allowed]
    assert not wrong, ("commands import only the flows, the API, errors and progress (models/serve: llm; "
                       "validate/report/demo: experiment):\n" + "\n".join(sorted(wrong)))


def test_the_architecture_doc_lists_the_floors_of_this_test():
    """docs/architecture.md's floor table names, bottom to top, the packages of FLOORS."""
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = [line for line in doc.splitlines() if re.match(r"\| \d+[bc]? [a-z]", line)]
    listed = []
    for row in reversed(rows):  # the table lists the top floor first
        cell = row.split("|")[2]
        names = re.findall(r"`([a-z_]+(?:\.py|/)?)`", cell)
        listed.append({"udcg" if n == "udcg" else "udcg." + n.removesuffix(".py").removesuffix("/") for n in names})
    assert listed == FLOORS
    assert [re.match(r"\| (\d+[bc]?) ", row).group(1) for row in reversed(rows)] == FLOOR_NUMBERS
    rooms, floors = len({_unit(m) for m in MODULES}), len({n.rstrip("bc") for n in FLOOR_NUMBERS})
    assert rooms == sum(map(len, FLOORS)), "a room on no floor, or on two"
    assert f"{rooms} rooms on {floors} floors" in doc, f"docs/architecture.md must say: {rooms} rooms on {floors} floors"


def test_every_module_and_name_the_architecture_doc_names_exists():
    """Each `path/module.name` and `path/module.py` of docs/architecture.md is a module of the package
    with that name in it (so a move or a rename cannot leave the walks behind)."""
    import importlib
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    missing = []
    for path, name in re.findall(r"`([a-z_]+/[a-z_]+)(?:\.py)?(?:\.([A-Za-z_]+))?", doc):
        if path.split("/")[0] in ("tests", "scripts", "docs"):
            continue
        module = "udcg." + path.replace("/", ".")
        if module not in MODULES:
            missing.append(f"{path} (no module {module})")
        elif name and not hasattr(importlib.import_module(module), name):
            missing.append(f"{path}.{name}")
    assert not missing, "docs/architecture.md names what the code does not have: " + ", ".join(sorted(set(missing)))
