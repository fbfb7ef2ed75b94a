"""Files that are not plain data files (issue 17, defects 2, 4, 6 and 7): outputs onto devices,
FIFOs, symbolic links, folders or under a file are refused before any work and leave the path as
it was; unreadable inputs, FIFOs and /dev/zero as input give the one-line error (never a hang or a
traceback); a read-only folder or a failing write is an InputError; ``.jsonl.gz`` inputs load; a
gzip bomb is refused at its size limit. Special files are made in a temporary folder."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from udcg.cli import main

CORPUS = Path(__file__).parent / "badinput"
AUTHORS = CORPUS / "good_authors.json"
CONTEXTS = CORPUS / "contexts_k3.jsonl"
REPO = Path(__file__).resolve().parents[1]


def one_error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"udcg {command}: error: "), err
    return lines[0]


def make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "char-device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
        except PermissionError:
            pytest.skip("mknod needs root")
    elif kind == "symlink":
        target = path.with_name("target.txt")
        target.write_text("keep me\n")
        path.symlink_to(target)
    elif kind == "dangling-symlink":
        path.symlink_to(path.with_name("nowhere.txt"))
    elif kind == "directory":
        path.mkdir()


def node(path: Path) -> tuple:
    st = path.lstat()
    return stat.S_IFMT(st.st_mode), st.st_ino, (path.read_text() if stat.S_ISREG(st.st_mode) else None)


COMMANDS = {
    "score": ["score", str(CONTEXTS), "-o", "{out}"],
    "fit-theta": ["fit-theta", str(CONTEXTS), "-o", "{out}"],
    "judge": ["judge", "relevance", str(AUTHORS), "-o", "{out}"],
    "judge-write-authors": ["judge", "relevance", str(AUTHORS), "-o", "{tmp}/j.jsonl", "--write-authors", "{out}"],
    "judge-cache": ["judge", "relevance", str(AUTHORS), "-o", "{tmp}/j.jsonl", "--cache", "{out}"],
    "annotate": ["annotate", str(AUTHORS), "-o", "{out}", "--model", "smollm2-135m"],
    "correlate": ["correlate", str(CONTEXTS), "--metrics", "UDCG,P", "-o", "{out}"],
    "compare": ["compare", "--run", str(CORPUS / "good_run.txt"), "--qrels", str(CORPUS / "good_qrels.txt"),
                "--metrics", "P@1", "-o", "{out}"],
}


@pytest.fixture
def no_model(monkeypatch):
    """Fails the test if a command loads a model: the refusal must come before any work."""
    from udcg.llm import registry

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the output path was checked")

    monkeypatch.setattr(registry, "load_backend", refuse)


@pytest.mark.parametrize("kind", ["fifo", "char-device", "symlink", "dangling-symlink", "directory"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_outputs_that_are_not_regular_files_are_refused(kind, command, tmp_path, capsys, no_model):
    out = tmp_path / "out.json"
    make(kind, out)
    before = node(out)
    argv = [a.replace("{out}", str(out)).replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    rc = main(argv)
    line = one_error_line(capsys.readouterr().err, argv[0])
    assert rc == 2 and str(out) in line and "not a regular file" in line
    assert node(out) == before, "the path was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in tmp_path.iterdir() if p.name in
                                                               ("out.json", "target.txt")), "something was written"


@pytest.mark.parametrize("command", ["validate", "annotate-runs"])
def test_folder_outputs_that_are_not_folders_are_refused(command, tmp_path, capsys, no_model):
    out = tmp_path / "run"
    os.mkfifo(out)
    argv = {"validate": ["validate", str(CORPUS / "config_wrong_type.yaml"), "-o", str(out)],
            "annotate-runs": ["annotate", "--corpus", str(tmp_path), "--run", str(CORPUS / "good_run.txt"),
                              "--model", "smollm2-135m", "-o", str(out)]}[command]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, argv[0])
    assert "is a FIFO" in line and "not a folder" in line and stat.S_ISFIFO(out.lstat().st_mode)


def test_output_under_a_file_is_refused(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert main(["score", str(CONTEXTS), "-o", str(blocker / "sub" / "out.jsonl")]) == 2
    line = one_error_line(capsys.readouterr().err, "score")
    assert f"{blocker} is a file, not a folder" in line and blocker.read_text() == "x"


def test_a_folder_without_write_permission_is_refused_before_work(tmp_path, capsys, monkeypatch, no_model):
    """As root every folder is writable, so the permission answer is simulated for this folder."""
    import udcg.io.files

    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(udcg.io.files.os, "access", lambda p, mode: False if Path(p) == locked else real(p, mode))
    assert main(["annotate", str(AUTHORS), "-o", str(locked / "out.json"), "--model", "smollm2-135m"]) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert f"cannot write into folder {locked}" in line and "permission denied" in line


def test_a_failing_write_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    import udcg.io.files

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(udcg.io.files.os, "open", denied)
    assert main(["score", str(CONTEXTS), "-o", str(tmp_path / "out.jsonl")]) == 2
    line = one_error_line(capsys.readouterr().err, "score")
    assert "out.jsonl: cannot write: Permission denied" in line and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_a_read_only_folder_for_real(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert main(["score", str(CONTEXTS), "-o", str(locked / "out.jsonl")]) == 2
    assert "cannot write into folder" in one_error_line(capsys.readouterr().err, "score")


# ---------------------------------------------------------------- inputs


@pytest.mark.parametrize("argv", [["score", "{in}", "-o", "{tmp}/o.jsonl"],
                                  ["annotate", "{in}", "-o", "{tmp}/o.json", "--model", "smollm2-135m"],
                                  ["score", "--run", "{in}", "--qrels", str(CORPUS / "good_qrels.txt"), "--metrics", "P@1",
                                   "-o", "{tmp}/o.tsv"]], ids=["score", "annotate", "score-run"])
def test_an_unreadable_input_is_one_line(argv, tmp_path, capsys, monkeypatch, no_model):
    """PermissionError while reading (simulated: root reads everything) is an InputError."""
    src = tmp_path / "in.json"
    src.write_text(AUTHORS.read_text() if argv[0] == "annotate" else CONTEXTS.read_text())
    real = Path.read_bytes

    def read_bytes(self):
        if self == src:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert main([a.replace("{in}", str(src)).replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    line = one_error_line(capsys.readouterr().err, argv[0])
    assert f"{src}: cannot read: Permission denied" in line and "permissions" in line


def _cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "udcg", *argv], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=60)


@pytest.mark.parametrize("case", ["annotate-fifo", "score-fifo", "annotate-dev-zero", "score-run-fifo"])
def test_fifos_and_devices_as_input_neither_hang_nor_crash(case, tmp_path):
    """Real processes with a timeout: a regression would block on the FIFO or read /dev/zero forever."""
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    src = "/dev/zero" if case.endswith("dev-zero") else str(fifo)
    argv = {"annotate": ["annotate", src, "-o", "o.json", "--model", "smollm2-135m"],
            "score": ["score", src, "-o", "o.json"],
            "score-run": ["score", "--run", src, "--qrels", str(CORPUS / "good_qrels.txt"), "--metrics", "P@1", "-o", "o.tsv"],
            }[case.rsplit("-", 2 if case.endswith("dev-zero") else 1)[0]]
    proc = _cli(argv, tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc.stderr, argv[0])
    assert src in line and ("FIFO" in line or "device" in line or "not a regular file" in line)
    assert "empty" not in line


def test_gzipped_inputs_load(tmp_path, capsys, monkeypatch):
    """`annotate FILE.jsonl.gz` reads the file as the same file uncompressed does (it said 'not UTF-8')."""
    from udcg.annotate.output import load_questions
    from udcg.llm import registry

    plain = tmp_path / "authors.jsonl"
    plain.write_text("".join(json.dumps(item) + "\n" for item in json.loads(AUTHORS.read_text())))
    packed = tmp_path / "authors.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_questions(str(packed))[0] == load_questions(str(plain))[0]

    from tests.conftest import ScriptedBackend

    fixed = ScriptedBackend(first=lambda chat, candidates: {c: -1.0 for c in candidates}, name="fixed")
    monkeypatch.setattr(registry, "load_backend", lambda *a, **kw: fixed)
    assert main(["annotate", str(packed), "-o", str(tmp_path / "out.json"), "--model", "fixed", "--no-progress"]) == 0
    assert len(json.loads((tmp_path / "out.json").read_text())) == len(json.loads(AUTHORS.read_text()))
    contexts = tmp_path / "contexts.jsonl.gz"
    contexts.write_bytes(gzip.compress(CONTEXTS.read_bytes()))
    assert main(["score", str(contexts), "-o", str(tmp_path / "scored.jsonl"), "--metrics", "UDCG,P"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_gzip_bomb_stops_at_its_limit(where, tmp_path, capsys):
    """200 MB of zeros in 0.2 MB: refused once 64 MiB (the floor of 100x the compressed size) are
    decompressed, without holding the rest."""
    import resource

    folder = tmp_path / "data"
    folder.mkdir()
    bomb = folder / "popqa.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"question": "q", "ctxs": [], "answers": ["a"]}\n')
        for _ in range(200):  # written a MiB at a time: the test itself never holds 200 MB
            f.write(b" " * 1024**2)
    assert bomb.stat().st_size < 1024**2
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    src = bomb if where == "file" else folder
    assert main(["annotate", str(src), "-o", str(tmp_path / "o.json"), "--model", "smollm2-135m"]) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "popqa.jsonl.gz: decompresses to more than 67,108,864 bytes" in line
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mib < 400, f"peak memory grew by {grown_mib:.0f} MiB"
