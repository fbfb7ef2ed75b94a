"""Secrets: the API key is read from the environment, sent to the server, and never written into
outputs, caches, logs, configs saved beside results or error messages — even when the server
echoes the Authorization header back in its error bodies (the proxy's ``echo-auth`` fault).

Checked by grepping everything a run wrote (every file under its folder, stdout, stderr with
``-v`` logging) for the key; the annotator runs as a real process so its real stderr is read.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faultproxy import FaultProxy
from tests.test_reliability_api import write_passages

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"


def udcg(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run([sys.executable, "-m", "udcg", "-v", *argv], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=600)


def everything_written(folder: Path, *streams: str) -> dict[str, str]:
    found = {str(p.relative_to(folder)): p.read_bytes().decode("utf-8", "replace")
             for p in folder.rglob("*") if p.is_file()}
    found.update({f"<stream {i}>": s for i, s in enumerate(streams)})
    return found


def assert_no_key(key: str, written: dict[str, str]) -> None:
    leaks = [name for name, text in written.items() if key in text]
    assert not leaks, f"the API key leaked into: {leaks}"


@pytest.fixture
def key() -> str:
    return "sk-udcg-" + secrets.token_hex(16)


def test_annotate_never_writes_the_key(smollm2_server, key, tmp_path):
    src_dir, run_dir = tmp_path / "in", tmp_path / "run"
    src_dir.mkdir()
    run_dir.mkdir()
    src = src_dir / "popqa12.jsonl"
    write_passages(src, 12)
    # half the requests come back as a 500 that echoes the Authorization header; one passage always does
    doomed = json.loads(src.read_text().splitlines()[0])["passages"][5]["text"]

    def rule(body):
        return "echo-auth" if any(doomed in m.get("content", "") for m in body.get("messages", [])) else None

    argv = ["annotate", str(src), "-o", str(run_dir / "out.json"), "--model", MODEL, "--estimator", "api-logprobs",
            "--api-key-env", "UDCG_TEST_API_KEY", "--concurrency", "2", "--chunk-size", "4", "--max-retries", "2"]
    with FaultProxy(smollm2_server.url, rates={"echo-auth": 0.5}, rule=rule, seed=3) as proxy:
        failed = udcg([*argv, "--api-base", proxy.url], {"UDCG_TEST_API_KEY": key}, run_dir)
        seen = [e.authorization for e in proxy.events]
    assert failed.returncode == 1, failed.stderr
    assert "***" in failed.stderr  # the echoed key was there, and was scrubbed
    assert seen and all(a == f"Bearer {key}" for a in seen), "the key is read from the environment and sent"

    with FaultProxy(smollm2_server.url, rates={"echo-auth": 0.3}, seed=4) as proxy:  # the rerun completes
        done = udcg([*argv, "--api-base", proxy.url, "--max-retries", "8"], {"UDCG_TEST_API_KEY": key}, run_dir)
        echoed = sum(f == "echo-auth" for f in proxy.faults())
    assert done.returncode == 0, done.stderr
    assert echoed > 0 and "retry" in done.stderr  # retries were logged (with -v), scrubbed
    written = everything_written(run_dir, failed.stdout, failed.stderr, done.stdout, done.stderr)
    assert {"out.json", "out.json.cache.jsonl", "out.json.meta.json"} <= set(written)
    assert_no_key(key, written)
    assert_no_key(key, {"argv": " ".join(argv)})


def test_judge_through_the_api_never_writes_the_key(smollm2_server, key, tmp_path):
    src = tmp_path / "in.jsonl"
    write_passages(src, 3)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with FaultProxy(smollm2_server.url, script=["echo-auth", "503", "echo-auth"], seed=5) as proxy:
        env = {"OPENAI_API_KEY": key, "UDCG_OPENAI_BASE_URLS": proxy.url}
        proc = udcg(["judge", "relevance", str(src), "-o", str(run_dir / "judged.jsonl"), "--judge", f"openai:{MODEL}",
                     "--max-new-tokens", "16", "--retries", "0", "--no-progress"], env, run_dir)
        seen = [e.authorization for e in proxy.events]
    assert proc.returncode == 0, proc.stderr
    assert seen and all(a == f"Bearer {key}" for a in seen)
    written = everything_written(run_dir, proc.stdout, proc.stderr)
    assert "judged.jsonl" in written and "judged.jsonl.cache.jsonl" in written
    assert_no_key(key, written)


def test_a_rejected_key_is_named_by_its_variable_not_its_value(key, tmp_path):
    """A 401 names the environment variable to fix, never the key (the server here echoes it)."""
    src = tmp_path / "in.jsonl"
    write_passages(src, 2)

    import http.server
    import threading

    class Reject(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {self.headers.get('Authorization')}"}}).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reject)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = udcg(["annotate", str(src), "-o", str(tmp_path / "out.json"), "--model", "gpt-x", "--api-base",
                     f"http://127.0.0.1:{server.server_address[1]}/v1", "--api-key-env", "MY_KEY_VAR"],
                    {"MY_KEY_VAR": key}, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "HTTP 401" in last and "MY_KEY_VAR" in last
    assert_no_key(key, everything_written(tmp_path, proc.stdout, proc.stderr))
