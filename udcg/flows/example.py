"""The packaged example collection (NQ questions, a Wikipedia corpus, qrels and three runs), copied
whole into a new folder to try the own-data quickstart on."""

from __future__ import annotations

import shutil
from pathlib import Path

from udcg.errors import InputError
from udcg.io.sources import example_path


def copy_example(folder: str | Path) -> Path:
    """Copy the example into ``folder``, which must not exist: whole or not at all."""
    target = Path(folder)
    if target.exists() or target.is_symlink():
        raise InputError(f"{target}: already exists (choose a new folder, or remove it first)")
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(example_path(), tmp)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"{target}: cannot write here ({e.strerror}); choose another folder") from None
    tmp.rename(target)
    return target
