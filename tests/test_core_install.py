"""Round four (issue 36, item 19): a core install (``pip install udcg``, no extras). Every command
that needs a model says in one line, before any work, which extra to add (``pip install -e
'.[llm]'``, or ``'.[api]'`` for an API model), where it died with ``ModuleNotFoundError: torch`` (from
``flows/annotate.default_chunk_size``) or ``openai`` plus "Task was destroyed" noise after "20/20
(100%), done".

Real processes: a ``sitecustomize`` on ``PYTHONPATH`` swaps ``sys.path``'s finder for one blind to
the packages named in ``UDCG_TEST_MISSING``: to the process they are not installed (``import
torch`` raises ModuleNotFoundError, ``importlib.util.find_spec`` gives None)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from udcg.io.sources import example_path

REPO = Path(__file__).resolve().parents[1]
EX = example_path()
RUN = str(EX / "runs" / "bm25.trec")
LOCAL = ("torch", "transformers", "accelerate")
API = ("openai", "aiohttp")
EXTRA = {"torch and transformers": "pip install -e '.[llm]' in the udcg checkout",
         "openai": "pip install -e '.[api]' in the udcg checkout (openai and aiohttp, no torch)"}


SITECUSTOMIZE = """
import os, sys
from importlib.machinery import PathFinder

MISSING = set(filter(None, os.environ.get("UDCG_TEST_MISSING", "").split(",")))


class CoreInstall:
    \"\"\"sys.path's finder, blind to the packages of MISSING (as if they were not installed).\"\"\"

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] in MISSING else PathFinder.find_spec(name, path, target)

    @classmethod
    def invalidate_caches(cls):
        PathFinder.invalidate_caches()


sys.meta_path[:] = [CoreInstall if finder is PathFinder else finder for finder in sys.meta_path]
"""


@pytest.fixture(scope="module")
def core_install(tmp_path_factory):
    hook = tmp_path_factory.mktemp("core")
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return hook


def run_core(hook: Path, missing: tuple[str, ...], *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)]), "UDCG_TEST_MISSING": ",".join(missing),
           "OPENAI_API_KEY": "test-key", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "udcg", *argv], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def test_the_hook_makes_the_packages_missing(core_install, tmp_path):
    done = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('torch')); import torch"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(core_install), "UDCG_TEST_MISSING": "torch"})
    assert done.stdout.strip() == "None" and "ModuleNotFoundError" in done.stderr


CASES = {
    "annotate --run, local model": (LOCAL, ["annotate", "--corpus", str(EX), "--run", RUN, "--model", "smollm2-135m",
                                            "-o", "u", "--no-progress"], "torch and transformers"),
    "annotate --run, API model": (API, ["annotate", "--corpus", str(EX), "--run", RUN, "--model", "bench", "--api-base",
                                        "http://127.0.0.1:9/v1", "-o", "u", "--no-progress"], "openai"),
    "annotate --run, openai:MODEL": (API, ["annotate", "--corpus", str(EX), "--run", RUN, "--model", "openai:gpt-4o-mini",
                                           "-o", "u", "--no-progress"], "openai"),
    "annotate FILE, local model": (LOCAL, ["annotate", str(REPO / "tests" / "badinput" / "good_authors.json"), "--model",
                                           "smollm2-135m", "-o", "out.json", "--no-progress"], "torch and transformers"),
    "answer, local model": (LOCAL, ["answer", "--corpus", str(EX), "--run", RUN, "--model", "smollm2-135m", "-o",
                                    "a.jsonl", "--no-progress"], "torch and transformers"),
    "judge with a model": (LOCAL, ["judge", "relevance", str(REPO / "tests" / "badinput" / "good_authors.json"),
                                   "--judge", "smollm2-135m", "-o", "j.jsonl", "--no-progress"], "torch and transformers"),
    "annotate --unjudged judge --judge MODEL": (LOCAL, [
        "annotate", "--corpus", str(EX), "--run", RUN, "--model", "bench", "--api-base", "http://127.0.0.1:9/v1",
        "--unjudged", "judge", "--judge", "smollm2-135m", "-o", "u", "--no-progress"], "torch and transformers"),
    "serve": (LOCAL, ["serve", "--model", "smollm2-135m", "--port", "0"], "torch and transformers"),
    "validate": (LOCAL, ["validate", str(REPO / "configs" / "smoke.yaml"), "-o", "run"], "torch and transformers"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_command_that_needs_the_llm_extra_says_so_in_one_line(case, core_install, tmp_path):
    missing, argv, names = CASES[case]
    done = run_core(core_install, missing, *argv, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    if case == "validate":  # its header line first: "udcg validate: smoke -> run"
        lines = lines[1:]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert EXTRA[names] in lines[0] and names in lines[0] and "Traceback" not in done.stderr, lines[0]
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())  # before any work: nothing written


def test_scoring_and_compare_work_in_a_core_install(core_install, tmp_path):
    qrels = str(EX / "qrels" / "test.tsv")
    done = run_core(core_install, LOCAL + API, "compare", "--run", RUN, "--run", str(EX / "runs" / "dense.trec"),
                    "--qrels", qrels, "--metrics", "P@5,nDCG@5", "--n-boot", "100", cwd=tmp_path)
    assert done.returncode == 0 and "nDCG@5" in done.stdout, done.stderr
