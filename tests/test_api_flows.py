"""The model flows in Python (udcg.annotate_runs / answer_runs / judge / fit_theta / correlate) are the commands'
flows: on the packaged example, against a real OpenAI-compatible server on 127.0.0.1
(``scripts/instant_openai_server.py``: deterministic log-probabilities and answers), every file the API
writes is byte for byte the file the command writes, and each function returns its one type."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import udcg
from tests.conftest import load_script
from udcg.errors import InputError
from udcg.io.sources import example_path
from udcg.io.tables import Table


@pytest.fixture(scope="module")
def server():
    with load_script("instant_openai_server").Process(0.0) as s:
        yield s


def _cli(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "udcg", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_api_flows_write_what_the_commands_write(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # where openai:bench is served, for the API and the commands
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    ex = tmp_path / "nq-example"
    shutil.copytree(example_path(), ex)
    runs = [ex / "runs" / "bm25.trec", ex / "runs" / "dense.trec"]
    api, cli = tmp_path / "api", tmp_path / "cli"
    api.mkdir(), cli.mkdir()
    model = ["--model", "bench", "--api-base", server.url]

    report = udcg.annotate_runs(ex, runs, api / "utilities", "bench", depth=10, api_base=server.url, show_progress=False)
    _cli("annotate", "--corpus", str(ex), *[a for r in runs for a in ("--run", str(r))], "--depth", "10", *model,
         "-o", str(cli / "utilities"), "--no-progress")
    assert report.computed == report.total > 0 and report.reused == 0
    for name in ("utilities.qrels", "utilities.jsonl"):
        assert (api / "utilities" / name).read_bytes() == (cli / "utilities" / name).read_bytes()

    result = udcg.answer_runs(ex, runs, api / "answers.jsonl", "openai:bench", k=5, samples=2, depth=10,
                         utilities=str(api / "utilities"), show_progress=False)
    _cli("answer", "--corpus", str(ex), *[a for r in runs for a in ("--run", str(r))], "--k", "5", "--samples", "2",
         "--depth", "10", "--model", "openai:bench", "--utilities", str(cli / "utilities"),
         "-o", str(cli / "answers.jsonl"), "--no-progress")
    assert result.contexts == len((api / "answers.jsonl").read_text().splitlines()) == 20 * 4
    assert (api / "answers.jsonl").read_bytes() == (cli / "answers.jsonl").read_bytes()

    judged = udcg.judge("answer", api / "answers.jsonl", api / "judged.jsonl", show_progress=False)
    _cli("judge", "answer", str(cli / "answers.jsonl"), "-o", str(cli / "judged.jsonl"), "--no-progress")
    assert (api / "judged.jsonl").read_bytes() == (cli / "judged.jsonl").read_bytes()
    assert judged.summary["n"] == 80 and judged.summary["unparseable"] == 0
    lines = [json.loads(line) for line in (api / "judged.jsonl").read_text().splitlines()]
    assert {line["outcome"] for line in lines} <= {"correct", "abstained", "wrong"}
    assert all(line["question"] and line["model"] == "bench" for line in lines)  # the answer step's fields kept

    theta = udcg.fit_theta(api / "judged.jsonl", api / "theta.json", k=5)
    _cli("fit-theta", str(cli / "judged.jsonl"), "--k", "5", "-o", str(cli / "theta.json"))
    assert theta.k_ == 5 and (api / "theta.json").read_bytes() == (cli / "theta.json").read_bytes()

    table = udcg.correlate(api / "judged.jsonl", metrics="UDCG,nDCG,P", baseline="UDCG", n_boot=200)
    _cli("correlate", str(cli / "judged.jsonl"), "--metrics", "UDCG,nDCG,P", "--baseline", "UDCG", "--n-boot", "200",
         "-o", str(cli / "table.json"))
    table.write(api / "table.json")
    assert isinstance(table, Table) and (api / "table.json").read_bytes() == (cli / "table.json").read_bytes()
    assert {r["metric"] for r in table.rows} == {"UDCG", "nDCG", "P"}


def test_no_api_name_is_hidden_by_a_subpackage():
    """``udcg.NAME`` is the API function even after ``udcg.NAME`` the package was imported (an API
    function named like a subpackage, e.g. ``annotate``, would turn into the package)."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(udcg.__path__):
        if info.name != "__main__":  # that one runs the command line
            importlib.import_module(f"udcg.{info.name}")
    assert all(callable(getattr(udcg, name)) for name in udcg.__all__ if name != "__version__")


def test_an_api_output_never_replaces_an_input(tmp_path):
    """As on the command line: before any work, an output that is an input file, lies inside an
    input folder, or is a second output's file is refused, and the inputs stay as they were."""
    from udcg.errors import InputError

    ex = tmp_path / "nq-example"
    shutil.copytree(example_path(), ex)
    run = shutil.copy(ex / "runs" / "bm25.trec", tmp_path / "bm25.trec")  # outside the corpus folder
    before = run.read_bytes()
    with pytest.raises(InputError, match=r"output .*bm25.trec: is the input runs"):
        udcg.answer_runs(ex, [run], run, "openai:bench")
    with pytest.raises(InputError, match=r"output .*corpus.jsonl: lies inside the input corpus"):
        udcg.answer_runs(ex, [run], ex / "corpus.jsonl", "openai:bench")
    with pytest.raises(InputError, match="the same file as output"):
        udcg.answer_runs(ex, [run], tmp_path / "a.jsonl", "openai:bench", cache=tmp_path / "a.jsonl")
    contexts = tmp_path / "judged.jsonl"
    contexts.write_text('{"qid": "q", "cid": "c", "relevant": [true], "utilities": [0.5], "outcome": "correct"}\n')
    with pytest.raises(InputError, match="is the input contexts"):
        udcg.fit_theta(contexts, contexts)
    with pytest.raises(InputError, match="is the input path"):
        udcg.judge("answer", contexts, tmp_path / "out.jsonl", write_authors=contexts)
    assert run.read_bytes() == before and contexts.read_text().startswith('{"qid": "q"')


def test_an_unset_chunk_is_left_to_the_backend_and_a_given_one_kept(tmp_path):
    from udcg.flows.annotate import reader
    from udcg.flows.annotate_options import AnnotateOptions

    assert reader("qwen2.5-coder-0.5b").config.chunk_size is None  # the backend's chunk_size (test_backend_declarations)
    assert reader(udcg.ModelChoice("served-model", api_base="http://127.0.0.1:9/v1")).config.chunk_size is None
    assert reader("qwen2.5-coder-0.5b", AnnotateOptions(chunk_size=7)).config.chunk_size == 7
    ex = example_path()  # a chunk of 0 is refused at the API's door (udcg.bounds), before any model loads
    with pytest.raises(InputError, match=r"^chunk_size = 0: must be an integer >= 1 "):
        udcg.annotate_runs(ex, [ex / "runs" / "bm25.trec"], tmp_path / "u", "qwen2.5-coder-0.5b", chunk_size=0)
