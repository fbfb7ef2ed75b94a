"""udcg against a real third-party OpenAI-compatible server: ``transformers serve`` over the offline
smollm2-135m model, started here on 127.0.0.1. That server ignores ``n`` and returns no logprobs:

- the sampling estimator finds out at its first answer that ``n`` is ignored, asks for every answer
  in its own request, records it in the output, and its p_abs interval holds the exact local p_abs
  of the same prompts (the model in-process, softmax of the first token);
- the api-logprobs estimator stops at once with a one-line error that names the estimator that works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def transformers_server():
    for module in ("fastapi", "uvicorn"):
        pytest.importorskip(module, reason="transformers serve needs its serving extras (pip install 'transformers[serving]')")
    from udcg.llm import offline

    model = offline.local_dir("smollm2-135m")
    port = free_port()
    cli = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen([str(cli), "serve", str(model), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited: {proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("transformers serve did not start in 120 s")
        yield f"{url}/v1", str(model)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _input(tmp_path: Path, passages: int) -> tuple[Path, dict]:
    row = json.loads((ROOT / "udcg" / "data" / "popqa-sample.jsonl").read_text().splitlines()[0])
    row["passages"] = row["passages"][:passages]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(row) + "\n")
    return src, row


def test_sampling_through_a_server_that_ignores_n(transformers_server, tmp_path, capsys):
    from udcg.annotate.estimators import abstention_estimates
    from udcg.annotate.prompt import reader_chat
    from udcg.cli import main
    from udcg.llm.registry import load_backend

    url, model = transformers_server
    src, row = _input(tmp_path, 2)
    out = tmp_path / "out.jsonl"
    rc = main(["annotate", str(src), "-o", str(out), "--model", model, "--api-base", url, "--estimator", "sampling",
               "--samples", "6", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "ignores 'n'" in err  # found out once, said once
    local = load_backend("smollm2-135m")
    exact = abstention_estimates(local, [reader_chat(row["question"], [p["text"]], "udcg-code-v1")
                                         for p in row["passages"]], "first-token")
    annotated = json.loads(out.read_text().splitlines()[0])["passages"]
    for passage, truth in zip(annotated, exact, strict=True):
        rec = next(iter(passage["models_info"].values()))["udcg"]
        assert rec["estimator"] == "sampling" and rec["n_samples"] == 6
        assert rec["ci_low"] <= truth.p_abs <= rec["ci_high"], (rec, truth.p_abs)


def test_api_logprobs_on_a_server_without_logprobs_names_the_estimator_that_works(transformers_server, tmp_path, capsys):
    from udcg.cli import main

    url, model = transformers_server
    src, _ = _input(tmp_path, 1)
    rc = main(["annotate", str(src), "-o", str(tmp_path / "out.jsonl"), "--model", model, "--api-base", url,
               "--estimator", "api-logprobs", "--max-retries", "0", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert err[-1].startswith("udcg annotate: error: ") and "--estimator sampling" in err[-1]
    assert not (tmp_path / "out.jsonl").exists()
