"""Paths in a ``udcg validate`` config: resolved on load, made portable when a run publishes it.

``resolve_paths``: a data set name (a packaged sample, a shared data set, ``hf:NAME``) stays a
name; a relative path is looked up beside the config file, then in the working directory, and
becomes absolute; ``output`` and ``theta.from_run`` are relative to the working directory.
``data.data_dir`` left out stays None: the shared data sets are then found through
``$UDCG_DATA_DIR`` when they are loaded (``udcg.io.sources.shared_data_dir``).

``portable``: the config a run writes (``config.yaml``) holds paths relative to the working
directory where they lie inside it (data paths also beside it, ``../data``), so no machine's
absolute path is published. Paths elsewhere (e.g. a temporary folder) stay absolute.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from udcg.errors import InputError
from udcg.experiment.config import Config


def _dataset_ref(ref: str, key: str, where: str, base_dir: Path | None) -> str:
    """A data set name stays a name; a path becomes absolute (config folder, then working directory)."""
    from udcg.io.hf import HUB_PREFIX
    from udcg.io.sources import dataset_names

    names = dataset_names()
    if ref in names or ref.startswith(HUB_PREFIX):
        return ref
    path = Path(ref).expanduser()
    candidates = [path] if path.is_absolute() else list(dict.fromkeys(d / path for d in (base_dir, Path.cwd()) if d))
    for c in candidates:
        if c.exists():
            return str(c.resolve())
    raise InputError(f"{where}: {key} = {ref!r} is neither a known data set ({', '.join(names)}) "
                     f"nor an existing path (looked in: {', '.join(str(c.parent) for c in candidates)})")


def resolve_paths(cfg: Config, where: str, base_dir: Path | None) -> Config:
    data_dir = cfg.data.data_dir
    if data_dir is not None:
        p = Path(data_dir).expanduser()
        places = [p] if p.is_absolute() else [d / p for d in (base_dir, Path.cwd()) if d]
        found = [c for c in places if c.is_dir()]
        if not found:
            raise InputError(f"{where}: data.data_dir = {data_dir!r}: no such folder (give the folder that holds the "
                             "shared data sets, relative to the config file or the working directory)")
        data_dir = str(found[0].resolve())
    data = dataclasses.replace(cfg.data, data_dir=data_dir,
                               questions=_dataset_ref(cfg.data.questions, "data.questions", where, base_dir))
    corpus = tuple(_dataset_ref(c, "pool.corpus", where, base_dir) for c in cfg.pool.corpus)
    output = cfg.output or str(Path("runs") / cfg.name)
    from_run = cfg.theta.from_run
    if from_run is not None and not Path(from_run).expanduser().is_dir():
        raise InputError(f"{where}: theta.from_run = {from_run!r}: no such run folder (run that config first)")
    theta = dataclasses.replace(cfg.theta, from_run=str(Path(from_run).expanduser().resolve()) if from_run else None)
    return dataclasses.replace(cfg, data=data, pool=dataclasses.replace(cfg.pool, corpus=corpus),
                               output=str(Path(output).expanduser().resolve()), theta=theta)


def _portable_path(path: str | None, beside: bool = False) -> str | None:
    """An absolute path inside the working directory made relative to it; with ``beside``, also one
    in the folder that holds it (``../data``). Names, relative paths and paths elsewhere stay as
    they are."""
    if path is None or not Path(path).is_absolute():
        return path
    cwd = Path.cwd().resolve()
    bases = [(cwd, Path())]
    if beside and cwd.parent != Path(cwd.anchor):
        bases.append((cwd.parent, Path("..")))
    for base, prefix in bases:
        try:
            return str(prefix / Path(path).relative_to(base))
        except ValueError:
            continue
    return path


def portable(cfg: Config) -> Config:
    """The config as a run publishes it (``config.yaml``): ``output`` and ``theta.from_run``
    relative to the working directory when inside it; ``data.data_dir``, ``data.questions`` and
    ``pool.corpus`` also when beside it (``../data``). Data set names stay names."""
    data = dataclasses.replace(cfg.data, data_dir=_portable_path(cfg.data.data_dir, beside=True),
                               questions=_portable_path(cfg.data.questions, beside=True))
    pool = dataclasses.replace(cfg.pool, corpus=tuple(_portable_path(c, beside=True) for c in cfg.pool.corpus))
    theta = dataclasses.replace(cfg.theta, from_run=_portable_path(cfg.theta.from_run))
    return dataclasses.replace(cfg, output=_portable_path(cfg.output), data=data, pool=pool, theta=theta)
