"""Backends as plugins, and the two executed examples of docs/architecture.md: the ``--model``
walk, and the backend recipe (one module, one registration) run from the page's own code blocks.

A backend outside the package: the test writes the recipe's module and a distribution's
``*.dist-info`` (METADATA and the ``entry_points.txt`` pip writes from the recipe's
``pyproject.toml``) to a folder on ``PYTHONPATH``, and ``udcg annotate --model overlap:words`` runs
as a subprocess on the packaged example. Its utilities must be the recipe's rule applied to the
very chats udcg sends (a real computation: they differ pair by pair)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from udcg.annotate.prompt import reader_chat
from udcg.annotate.utilities import load_utilities as read_utilities
from udcg.cli import main
from udcg.errors import InputError
from udcg.llm import registry
from udcg.llm.base import BaseBackend, Capabilities
from udcg.llm.schemes import Schemes

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
EXAMPLE = resources.files("udcg") / "data" / "nq-example"


def _section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end != -1 else len(DOC)]


def _blocks(title: str) -> dict[str, str]:
    """The code blocks of a section by their marker (``<!-- file: NAME -->`` or ``<!-- NAME -->``)."""
    found = re.findall(r"<!-- (?:file: )?(\S+) -->\n```\w*\n(.*?)```", _section(title), flags=re.DOTALL)
    return dict(found)


def _plugin_dir(root: Path) -> Path:
    """The recipe installed as pip would: its module, and a dist-info with the entry points of its
    pyproject.toml."""
    blocks = _blocks("Adding a backend")
    root.mkdir()
    (root / "overlap_backend.py").write_text(blocks["overlap_backend.py"])
    project = tomllib.loads(blocks["pyproject.toml"])["project"]
    info = root / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
        for group, entries in groups.items()))
    return root


def _expected_p_abs(module_path: Path) -> dict[tuple[str, str], float]:
    """The recipe's rule on the chat annotate sends for every (query, document) of the example."""
    namespace: dict = {}
    exec(compile(module_path.read_text(), str(module_path), "exec"), namespace)
    reader = namespace["OverlapReader"]("words")
    queries = {q["_id"]: q["text"] for q in map(json.loads, (EXAMPLE / "queries.jsonl").read_text().splitlines())}
    docs = {d["_id"]: d["text"] for d in map(json.loads, (EXAMPLE / "corpus.jsonl").read_text().splitlines())}
    return {(q, d): reader.p_abstain(reader_chat(queries[q], [docs[d]])) for q in queries for d in docs}


def test_the_model_walk_of_the_architecture_page_runs():
    exec(compile(_blocks("The --model walk")["walk"], "docs/architecture.md (walk)", "exec"), {})


def test_a_backend_outside_the_package_is_used_by_annotate_through_its_entry_point(tmp_path):
    plugins = _plugin_dir(tmp_path / "site")
    out = tmp_path / "utilities"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "udcg", "annotate", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "bm25.trec"),
           "--depth", "3", "--limit", "6", "--model", "overlap:words", "-o", str(out), "--no-progress"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = read_utilities(out)
    expected = _expected_p_abs(plugins / "overlap_backend.py")
    assert got.model == "words" and len(got) == 18
    for (qid, docid), rec in got.records.items():
        assert rec.model == "words" and rec.estimator == "first-token"
        assert rec.p_abs == pytest.approx(expected[qid, docid], abs=1e-9), (qid, docid)
    assert len({round(r.p_abs, 6) for r in got.records.values()}) > 3  # the rule's values, pair by pair
    models = subprocess.run([sys.executable, "-m", "udcg", "models", "list"], env=env, capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert "overlap:MODEL (a backend, entry point of udcg-overlap)" in models.stdout, models.stdout  # not imported


def test_register_scheme_of_the_recipe_runs_in_process(tmp_path, monkeypatch, capsys):
    plugins = _plugin_dir(tmp_path / "site")
    monkeypatch.syspath_prepend(str(plugins))
    out = tmp_path / "utilities"
    with registry.SCHEMES.scoped():
        exec(compile(_blocks("Adding a backend")["register"], "docs/architecture.md (register)", "exec"), {})
        assert registry.SCHEMES.get("overlap").origin == "register_scheme"
        spec = registry.resolve("overlap:words")
        assert (spec.scheme, spec.api, spec.name) == ("overlap", False, "words")
        with pytest.raises(InputError, match="--api-base: 'overlap:words' is a local model"):
            registry.resolve("overlap:words", base_urls=["http://127.0.0.1:9/v1"])
        assert main(["annotate", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "dense.trec"), "--depth", "2",
                     "--limit", "3", "--model", "overlap:words", "--device", "cpu", "-o", str(out), "--no-progress"]) == 0
    expected = _expected_p_abs(plugins / "overlap_backend.py")
    got = read_utilities(out)
    assert len(got) == 6 and all(r.p_abs == pytest.approx(expected[k], abs=1e-9) for k, r in got.records.items())
    with registry.SCHEMES.scoped():  # the registration is gone with its block: the entry point serves the scheme
        assert registry.SCHEMES.get("overlap").origin == "entry point of udcg-overlap"
    monkeypatch.undo()
    with registry.SCHEMES.scoped(), pytest.raises(InputError, match="unknown backend scheme 'overlap'"):
        registry.resolve("overlap:words")  # and without the package on the path, no scheme


class _Served(BaseBackend):
    capabilities = Capabilities(api=True)

    def __init__(self, model: str, **options: object) -> None:
        self.name, self.options = model, options


def test_entry_points_are_read_lazily_and_checked(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "served_pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: served-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[udcg.tests]\nserved = tests.test_backend_plugins:_Served\n"
                                           "broken = tests.test_backend_plugins:nothing_here\nnotone = json:dumps\n"
                                           "needs = udcg_no_such_module_xyz.backend:B\n")
    monkeypatch.syspath_prepend(str(site))
    schemes = Schemes({}, group="udcg.tests")
    assert schemes._plugins_read is False  # nothing read for a name the registry knows or before one is asked
    assert schemes.get("served") is not None and schemes._plugins_read
    assert schemes.is_api("served", "served:m") is True  # the class's capabilities say API
    assert schemes.factory("served", "served:m") is _Served
    with pytest.raises(InputError, match="does not load"):
        schemes.factory("broken", "broken:m")
    with pytest.raises(InputError, match="no subclass of udcg.llm.base.BaseBackend"):
        schemes.factory("notone", "notone:m")
    with pytest.raises(InputError, match=r"the 'needs' backend \(udcg_no_such_module_xyz.backend\) needs "
                                         "udcg_no_such_module_xyz, which is not installed"):
        schemes.factory("needs", "needs:m")
    assert schemes.names() == ["broken", "needs", "notone", "served"]
