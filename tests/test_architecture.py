"""The package's shape: imports run one way through seven floors, metrics stay pure, modules stay small.

Floors, from the bottom (a module may import only from floors below its own, or from its own unit):

1. base: records, errors, text, progress, redact, version
1b. bounds (the allowed range of every numeric option and config value; raises errors' InputError)
2. io/ (files and data sets) and llm/ (the model backends), which do not import each other
3. runs (the one resumable, cached runner every model step uses)
4. annotate/, grade/, metrics/ (metrics import only errors, besides numpy/scipy/scikit-learn/pandas;
   annotate and grade may use metrics, the pure one of the three, not each other)
5. experiment/
6. the interface: udcg (package), __main__, api, cli, commands/ (which may call each other downward:
   cli -> commands -> api)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"
FLOORS = [
    {"udcg.records", "udcg.errors", "udcg.text", "udcg.progress", "udcg.redact", "udcg.version"},
    {"udcg.bounds"},
    {"udcg.io", "udcg.llm"},
    {"udcg.runs"},
    {"udcg.annotate", "udcg.grade", "udcg.metrics"},
    {"udcg.experiment"},
    {"udcg", "udcg.__main__", "udcg.api", "udcg.cli", "udcg.commands"},
]
INTERFACE_ORDER = ["udcg.__main__", "udcg.cli", "udcg.commands", "udcg", "udcg.api"]  # may import rightwards
DOMAIN_SHARED = {"udcg.metrics"}  # on the domain floor, the pure metrics serve annotate and grade
MAX_LINES = 400


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
    """The udcg modules that ``module`` imports, at any depth of the file (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
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


def test_no_cycle_between_units():
    graph: dict[str, set[str]] = {}
    for module, targets in EDGES.items():
        graph.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) != _unit(module))
    state: dict[str, int] = {}

    def visit(u: str, trail: list[str]) -> None:
        state[u] = 1
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail[trail.index(v):] + [v]) if v in trail else v)
            if v not in state:
                visit(v, trail + [v])
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            visit(u, [u])


def test_metrics_import_only_errors():
    wrong = [f"{m} -> {t}" for m, ts in EDGES.items() if _unit(m) == "udcg.metrics"
             for t in ts if _unit(t) not in ("udcg.metrics", "udcg.errors")]
    assert not wrong, "metrics must import only udcg.errors:\n" + "\n".join(sorted(wrong))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(PACKAGE.parent)}: {lines} lines > {MAX_LINES}; split it by job"
