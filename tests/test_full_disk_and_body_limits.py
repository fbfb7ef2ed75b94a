"""Round three (issue 26), the environment side: a full disk while writing (a real 200 KiB tmpfs
where this process may mount one, else a write that fails with ENOSPC), and HTTP response bodies
of the API backend bounded in size (a fake OpenAI-compatible server on 127.0.0.1), with the API
top-list rule seen through the estimator."""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from udcg.cli import main
from udcg.errors import BackendError, EnvironmentFault, InputError
from udcg.io.cache import AppendCache

CORPUS = Path(__file__).parent / "badinput"
AUTHORS = CORPUS / "good_authors.json"
CONTEXTS = CORPUS / "contexts_k3.jsonl"


def one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("WARNING")]
    assert len(lines) == 1 and lines[0].startswith(f"udcg {command}: error: "), err
    return lines[0]


# ---------------------------------------------------------------- a full disk


@pytest.fixture
def full_disk(tmp_path):
    """A 200 KiB tmpfs, filled up by ``fill`` (a file of zeros as large as it goes); ``free()``
    removes the filler. Skipped where this process cannot mount (not root, or no tmpfs)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()[:100]}")

    class Disk:
        path = mount
        filler = mount / "filler"

        def fill(self) -> None:
            with open(self.filler, "ab", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError as e:
                    assert e.errno == errno.ENOSPC

        def free(self) -> None:
            self.filler.unlink()

    try:
        yield Disk()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_under_an_atomic_write_is_one_line_exit_1(full_disk, capsys):
    out = full_disk.path / "scored.jsonl"
    full_disk.fill()
    assert main(["score", str(CONTEXTS), "-o", str(out), "--metrics", "UDCG,P"]) == 1
    line = one_error_line(capsys.readouterr().err, "score")
    for words in (f"{out}: cannot write: No space left on device (ENOSPC)", "no file was written",
                  "free some space there, then rerun the same command"):
        assert words in line, line
    assert sorted(p.name for p in full_disk.path.iterdir()) == ["filler"]  # no temporary file left
    full_disk.free()
    assert main(["score", str(CONTEXTS), "-o", str(out), "--metrics", "UDCG,P"]) == 0
    assert out.read_text().count("\n") == CONTEXTS.read_text().count("\n")


def test_a_full_disk_keeps_the_old_output_whole(full_disk, capsys):
    out = full_disk.path / "scored.jsonl"
    assert main(["score", str(CONTEXTS), "-o", str(out), "--metrics", "UDCG"]) == 0
    before = out.read_bytes()
    full_disk.fill()
    assert main(["score", str(CONTEXTS), "-o", str(out), "--metrics", "UDCG,P,nDCG,RR,AP"]) == 1
    assert "the previous scored.jsonl is unchanged" in one_error_line(capsys.readouterr().err, "score")
    assert out.read_bytes() == before


def test_the_cache_on_a_full_disk_keeps_every_record_written_before(full_disk):
    path = full_disk.path / "cache.jsonl"
    full_disk.fill()
    full_disk.filler.write_bytes(full_disk.filler.read_bytes()[: -8 * 4096])  # room for a few records
    cache = AppendCache(path)
    written, n = [], 0
    with pytest.raises(EnvironmentFault) as e:
        while True:
            record = {"key": f"k{n}", "text": uuid.uuid4().hex * 20}
            cache.append_many([record, {**record, "key": f"k{n}b"}])
            written += [record["key"], f"k{n}b"]
            n += 1
    message = str(e.value)
    assert f"{path}: cannot append 2 records to the cache: No space left on device" in message
    assert f"the {len(written)} records finished before are kept in it" in message and "rerun the same command" in message
    cache.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert [json.loads(line)["key"] for line in lines] == written and all(line.endswith(b"\n") for line in lines)
    full_disk.free()
    with AppendCache(path) as again:  # resumes from exactly those records, and appends again
        assert list(again.done) == written
        again.append({"key": "after", "text": "x"})
    assert json.loads(path.read_bytes().splitlines()[-1])["key"] == "after"


def test_an_fsync_failure_is_cut_off_the_cache(tmp_path, monkeypatch):
    """Without a tmpfs (any user): a failing fsync (EIO) cuts the chunk off again; exit code 1."""
    path = tmp_path / "cache.jsonl"
    with AppendCache(path) as cache:
        cache.append({"key": "a", "v": 1})
        real = os.fsync

        def broken(fd):
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken)
        with pytest.raises(EnvironmentFault, match=r"cannot append 1 records to the cache: Input/output error \(EIO\); "
                                                   r"the 1 records finished before are kept"):
            cache.append({"key": "b", "v": 2})
        monkeypatch.setattr(os, "fsync", real)
        assert "b" not in cache
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["a"]


def test_a_path_problem_is_still_bad_input(tmp_path):
    """Permission denied while writing stays exit code 2 (the user chose the path); ENOSPC is 1."""
    from udcg.io.writing import write_error

    assert isinstance(write_error(PermissionError(errno.EACCES, "Permission denied"), "x: cannot write", "kept"), InputError)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        err = write_error(OSError(code, os.strerror(code)), "x: cannot write", "kept")
        assert isinstance(err, EnvironmentFault) and err.exit_code == 1 and not isinstance(err, InputError)


def test_annotate_stopped_by_a_full_disk_resumes_to_the_same_output(tmp_path, monkeypatch, capsys):
    """ENOSPC on the third chunk's append (a mock of the disk: a real one cannot fail on cue): exit 1,
    one line; the two chunks before are kept; the rerun computes only the rest, and its output is
    byte-identical to an uninterrupted run."""
    from tests.conftest import ScriptedBackend
    from udcg.io import cache as cache_module
    from udcg.llm import registry

    backend = ScriptedBackend(first=lambda chat, candidates: {c: -1.0 - len(chat[-1]["content"]) % 7 for c in candidates},
                              name="fixed")
    monkeypatch.setattr(registry, "load_backend", lambda *a, **kw: backend)
    sample = Path(__file__).resolve().parents[1] / "udcg" / "data" / "authors-sample.json"  # 15 passages
    argv = [str(sample), "--model", "fixed", "--chunk-size", "2", "--no-progress"]
    assert main(["annotate", "-o", str(tmp_path / "clean.json"), *argv]) == 0
    total = backend.n_chats("next_token_logprobs")
    assert total == 15
    capsys.readouterr()

    real, calls = os.fsync, []

    def full(fd):  # the cache's third fsync fails (the other files' writes go through)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".cache.jsonl"):
            calls.append(fd)
            if len(calls) == 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(cache_module.os, "fsync", full)
    out = tmp_path / "out.json"
    assert main(["annotate", "-o", str(out), *argv]) == 1
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "cannot append 2 records to the cache: No space left on device (ENOSPC)" in line
    assert "records finished before are kept" in line and "rerun the same command" in line
    assert not out.exists()
    monkeypatch.setattr(cache_module.os, "fsync", real)
    before = backend.n_chats("next_token_logprobs")
    assert main(["annotate", "-o", str(out), *argv]) == 0
    assert backend.n_chats("next_token_logprobs") - before == total - 4  # two chunks of two were kept
    assert out.read_bytes() == (tmp_path / "clean.json").read_bytes()


def test_another_os_error_outside_the_writers_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    """An OSError no writer turned into a UdcgError (e.g. saving a figure): one line, exit 1."""
    import udcg.commands.score as score

    def broken(args):
        raise OSError(errno.EIO, "Input/output error", str(tmp_path / "figure.png"))

    monkeypatch.setattr(score, "main", broken)  # the parser binds score.main when cli.main builds it
    assert main(["score", str(CONTEXTS), "-o", str(tmp_path / "o.jsonl")]) == 1
    line = one_error_line(capsys.readouterr().err, "score")
    assert f"{tmp_path / 'figure.png'}: Input/output error (an operating-system error, not your input" in line


# ---------------------------------------------------------------- HTTP bodies of the API backend

OK_BODY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "NO"},
                        "logprobs": {"content": [{"token": "N", "logprob": -0.01,
                                                  "top_logprobs": [{"token": "N", "logprob": -0.01},
                                                                   {"token": "The", "logprob": -4.6}]}]}}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind = self.path.strip("/").split("/")[0]
        if kind == "declared":  # claims 3 GiB, sends a few bytes
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(3 * 1024**3))
            self.end_headers()
            self.wfile.write(b'{"choices": [')
            self.close_connection = True
            return
        if kind in ("stream", "error-stream"):  # no length: chunked, 4 MiB
            self.send_response(200 if kind == "stream" else 500)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            block = b" " * 65536
            try:
                for _ in range(64):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        body = json.dumps(OK_BODY).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if kind == "gzip":  # 4 MiB of spaces before the JSON, sent gzipped (a few KiB)
            body = gzip.compress(b" " * 4 * 1024**2 + body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _backend(base: str):
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings, ReadSettings

    return OpenAIBackend("m", ClientSettings(f"{base}/v1", max_retries=1, timeout=20, backoff_base=0.01,
                                             api_key_env="UDCG_NO_SUCH_KEY"))


CHAT = [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("kind, words", [("declared", "declares 3,221,225,472 bytes, over the 1,048,576-byte limit"),
                                         ("stream", "runs past 1,048,576 bytes"),
                                         ("error-stream", "HTTP 500, the response body runs past 1,048,576 bytes"),
                                         ("gzip", "runs past 1,048,576 bytes")])
def test_a_response_body_over_the_limit_fails_clearly(kind, words, http_server, monkeypatch):
    """A 2 GiB body was read whole (6.5 GB resident); now the body stops at the limit (64 MiB; 1 MiB
    here), decompressed bytes counted, and the request fails at once, not retried."""
    from udcg.llm import openai_transport
    from udcg.llm.base import GenerationParams

    monkeypatch.setattr(openai_transport, "MAX_BODY_BYTES", 1024**2)
    backend = _backend(f"{http_server}/{kind}")
    try:
        with pytest.raises(BackendError) as e:
            backend.generate([CHAT], GenerationParams(n=1))
    finally:
        backend.close()
    assert words in str(e.value) and "check the base URL" in str(e.value), str(e.value)
    assert "gave up after" not in str(e.value)  # no retry


def test_a_body_under_the_limit_reads_as_before(http_server):
    from udcg.llm.base import GenerationParams

    backend = _backend(f"{http_server}/ok")
    try:
        assert backend.generate([CHAT], GenerationParams(n=1)) == [["NO"]]
        packed = _backend(f"{http_server}/gzip")  # 4 MiB decompressed: under the 64 MiB default
        assert packed.generate([CHAT], GenerationParams(n=1)) == [["NO"]]
        packed.close()
    finally:
        backend.close()


def test_the_api_estimator_censors_and_notes_when_only_n_is_listed(http_server):
    """The top list holds 'N' (logprob -0.01) but no 'NO': p_abs was 0.99 for every passage, then 0
    (issue 35: a silent zero); now censored below the list's last probability (exp(-4.6)), never 0."""
    from udcg.annotate.estimators import abstention_estimates

    backend = _backend(f"{http_server}/ok")
    try:
        [estimate] = abstention_estimates(backend, [CHAT], "api-logprobs")
        assert estimate.censored and estimate.note.startswith("censored")
        assert 0 < estimate.p_abs == estimate.ci_high / 2 and estimate.ci_high == pytest.approx(math.exp(-4.6))
        lp = backend.first_token_logprobs([CHAT], ["NO-RESPONSE"])[0]
        assert lp.logprobs["NO-RESPONSE"] == -math.inf and "holds only the shorter 'N'" in lp.note
    finally:
        backend.close()
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings, ReadSettings

    told = OpenAIBackend("m", ClientSettings(f"{http_server}/ok/v1", api_key_env="UDCG_NO_SUCH_KEY"),
                         ReadSettings(candidate_tokens={"NO-RESPONSE": "N"}))
    try:  # the first token named by the caller is read as it is
        assert told.first_token_logprobs([CHAT], ["NO-RESPONSE"])[0].logprobs["NO-RESPONSE"] == -0.01
    finally:
        told.close()
