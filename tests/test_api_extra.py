"""Issue #50 item 6: an API reader needs the ``api`` extra only (openai, aiohttp), not torch. In a
real process where torch, transformers and accelerate are not installed (the import hook of
``test_core_install``), ``annotate --run`` and ``answer`` with an API model run to
the end against a real server on 127.0.0.1, and neither loads torch nor transformers."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import load_script
from tests.test_core_install import LOCAL, SITECUSTOMIZE

from udcg.io.sources import example_path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import sys
from udcg.cli import main

ex, url, out = sys.argv[1:4]
run = ex + "/runs/bm25.trec"
assert main(["annotate", "--corpus", ex, "--run", run, "--depth", "2", "--model", "m", "--api-base", url,
             "-o", out + "/u", "--no-progress"]) == 0
assert main(["answer", "--corpus", ex, "--run", run, "--k", "2", "--limit", "3", "--model", "m", "--api-base", url,
             "--utilities", out + "/u", "-o", out + "/a.jsonl", "--no-progress"]) == 0
print("loaded:", sorted(m for m in ("torch", "transformers", "accelerate") if m in sys.modules))
"""


def test_the_api_extra_holds_what_an_api_reader_needs():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].split("[")[0] for req in extras["api"]}
    assert names == {"openai", "aiohttp"} and not names & {"torch", "transformers"}


def test_an_api_reader_runs_without_torch(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    # the packages' metadata stays readable (httpx2, under openai, reads its own version at import)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE + "CoreInstall.find_distributions = PathFinder.find_distributions\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)]), "UDCG_TEST_MISSING": ",".join(LOCAL),
           "OPENAI_API_KEY": "test-key"}
    with load_script("instant_openai_server").Process(0.0) as server:
        done = subprocess.run([sys.executable, "-c", CHILD, str(example_path()), server.url, str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded: []", done.stdout
    assert "new pairs annotated: 40" in done.stderr and (tmp_path / "a.jsonl").is_file()
