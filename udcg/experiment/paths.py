"""Paths in a ``udcg validate`` config: resolved on load, made portable when a run publishes it.
The rules for one value each; ``udcg.experiment.config`` applies them to a config's fields
(``resolve_paths`` on load, ``portable`` for the ``config.yaml`` a run writes).

``dataset_ref``: a data set name (a packaged sample, a shared data set, ``hf:NAME``) stays a
name; a relative path is looked up beside the config file, then in the working directory, and
becomes absolute. ``data_folder``: ``data.data_dir`` found the same way (left out, it stays None:
the shared data sets are then found through ``$UDCG_DATA_DIR`` when they are loaded,
``udcg.io.sources.shared_data_dir``). ``output`` and ``theta.from_run`` are relative to the
working directory.

``portable_path``: a run's ``config.yaml`` holds paths relative to the working directory where
they lie inside it (data paths also beside it, ``../data``), so no machine's absolute path is
published. Paths elsewhere (e.g. a temporary folder) stay absolute.
"""

from __future__ import annotations

from pathlib import Path

from udcg.errors import InputError


def dataset_ref(ref: str, key: str, where: str, base_dir: Path | None) -> str:
    """A data set name stays a name; a path becomes absolute (config folder, then working
    directory); neither is an ``InputError`` naming ``where`` and ``key``."""
    from udcg.io.hf import HUB_PREFIX
    from udcg.io.sources import dataset_names

    names = dataset_names()
    if ref in names or ref.startswith((HUB_PREFIX, "irds:")):
        return ref
    path = Path(ref).expanduser()
    candidates = [path] if path.is_absolute() else list(dict.fromkeys(d / path for d in (base_dir, Path.cwd()) if d))
    for c in candidates:
        if c.exists():
            return str(c.resolve())
    raise InputError(f"{where}: {key} = {ref!r} is neither a known data set ({', '.join(names)}) "
                     f"nor an existing path (looked in: {', '.join(str(c.parent) for c in candidates)})")


def data_folder(data_dir: str | None, where: str, base_dir: Path | None) -> str | None:
    """``data.data_dir`` as an absolute folder (config folder, then working directory); None stays None."""
    if data_dir is None:
        return None
    p = Path(data_dir).expanduser()
    places = [p] if p.is_absolute() else [d / p for d in (base_dir, Path.cwd()) if d]
    found = [c for c in places if c.is_dir()]
    if not found:
        raise InputError(f"{where}: data.data_dir = {data_dir!r}: no such folder (give the folder that holds the "
                         "shared data sets, relative to the config file or the working directory)")
    return str(found[0].resolve())


def run_folder(path: str, where: str, key: str) -> str:
    """An existing run folder (``theta.from_run``) as an absolute path."""
    if not Path(path).expanduser().is_dir():
        raise InputError(f"{where}: {key} = {path!r}: no such run folder (run that config first)")
    return str(Path(path).expanduser().resolve())


def portable_path(path: str | None, beside: bool = False) -> str | None:
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
