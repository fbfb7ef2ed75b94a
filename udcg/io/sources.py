"""Loaders that turn the shared QA data sets into ``Question`` records, and the packaged sample.

``load_dataset`` takes a packaged sample (``popqa-sample``, ``authors-sample``: files of
``udcg/data``, found with ``importlib.resources``), a shared data set by name (``popqa``, ``nq``,
``squad`` …: a folder under the shared data folder, given as ``data_dir`` or ``$UDCG_DATA_DIR``;
there is no default), a Hugging Face data set (``hf:NAME[:CONFIG]``, rows in the authors' format,
loaded with ``datasets``), ``irds:NAME`` (an ir_datasets dataset's queries with answers and their
judged documents, ``udcg.io.irds.dataset_questions``), or a file or folder path.

Each loader reads one file shape (the shared data folder's README describes them) and returns
questions whose ``passages`` keep the file's order. Relevance follows what the file knows:

=====================  ===================================================================
loader                 ``Passage.relevant``
=====================  ===================================================================
``load_popqa``         ``None`` (no labels); ``label=True`` fills them by answer containment
``load_nq_open_gold``  ``True`` for the gold passage (``isgold``)
``load_nq_pon``        ``True`` for the gold passage
``load_squad``         ``True`` for the question's own paragraph, ``None`` for the article's others
``load_nomiracl``      ``None`` in the ``relevant`` split, ``False`` in the ``nonrelevant`` split
``load_dpr``           ``True`` for ``positive_ctxs``, ``False`` for the (hard) negatives
=====================  ===================================================================

Malformed input raises ``InputError`` naming file:line (or record), the field and the fix.
"""

from __future__ import annotations

import gzip
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from udcg.errors import InputError
from udcg.io import hf as hfdata, irds
from udcg.io.authors import question_from_authors, read_authors
from udcg.io.loaders import (ContainmentChecker, unique_qids, label_by_containment, load_dpr, load_nomiracl,
                          load_nq_open_gold, load_nq_pon, load_popqa, load_squad)
from udcg.text import contains_answer
from udcg.records import Question

SAMPLES = ("popqa-sample.jsonl", "authors-sample.json")
_SAMPLE_ALIASES = {"popqa-sample": "popqa-sample.jsonl", "authors-sample": "authors-sample.json"}
DATA_DIR_ENV = "UDCG_DATA_DIR"


# ---------------------------------------------------------------- the packaged sample


def sample_path(name: str) -> Path:
    """Path of a sample shipped inside the package (``popqa-sample.jsonl``, ``authors-sample.json``)."""
    if name not in SAMPLES:
        raise InputError(f"unknown packaged sample {name!r} (choose one of: {', '.join(SAMPLES)})")
    return Path(str(resources.files("udcg") / "data" / name))


def example_path() -> Path:
    """The packaged BEIR-style example folder ``nq-example`` (corpus, queries, qrels, three runs);
    read it with ``udcg.io.beir.read_collection``."""
    return Path(str(resources.files("udcg") / "data" / "nq-example"))


def load_sample(name: str = "popqa-sample.jsonl") -> list[Question]:
    """The questions of a packaged sample (authors' format)."""
    return read_authors(sample_path(name))[1]


# ---------------------------------------------------------------- dispatch

_FOLDERS: dict[str, Callable[..., list[Question]]] = {
    "popqa-contriever-100": load_popqa, "nq-open-gold": load_nq_open_gold, "nq-open-gold-pon": load_nq_pon,
    "squad-v1.1-dev": load_squad, "nomiracl-en": load_nomiracl, "dpr-nq-dev-sample": load_dpr,
}
_ALIASES = {"popqa": "popqa-contriever-100", "nq": "nq-open-gold", "nq-pon": "nq-open-gold-pon",
            "squad": "squad-v1.1-dev", "nomiracl": "nomiracl-en", "dpr": "dpr-nq-dev-sample"}


@dataclass(frozen=True)
class Shape:
    """A file shape ``load_dataset`` recognises: the ``keys`` that must all occur near the start of
    the file (its first 64 KiB), and the ``loader(path, limit=None)`` that reads it."""

    name: str
    keys: tuple[str, ...]
    loader: Callable[..., list[Question]]


class Shapes:
    """The registry of file shapes, tried in order, the first whose keys all occur winning: the
    shapes added with ``register`` first (in the order added), then the built-in ones (the most
    specific first)."""

    def __init__(self, builtin: Sequence[Shape]) -> None:
        self._builtin = tuple(builtin)
        self._added: list[Shape] = []

    def __iter__(self) -> Iterator[Shape]:
        return iter((*self._added, *self._builtin))

    def names(self) -> list[str]:
        return [shape.name for shape in self]

    def register(self, name: str, keys: Sequence[str], loader: Callable[..., list[Question]]) -> Shape:
        """Add a shape, tried before the built-in ones; a name already taken is refused."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"shape name {name!r}: must be non-empty text")
        if isinstance(keys, str) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise ValueError(f"shape {name!r}: keys must be a non-empty list of non-empty strings, got {keys!r}")
        if not callable(loader):
            raise ValueError(f"shape {name!r}: loader must be callable as loader(path, limit=None)")
        if name in self.names():
            raise ValueError(f"shape {name!r} is already registered (unregister it first)")
        shape = Shape(name, tuple(keys), loader)
        self._added.append(shape)
        return shape

    def unregister(self, name: str) -> None:
        """Remove an added shape (the built-in ones stay)."""
        kept = [shape for shape in self._added if shape.name != name]
        if len(kept) == len(self._added):
            raise ValueError(f"shape {name!r} was not added with register (added: {[s.name for s in self._added]})")
        self._added = kept

    def loader_for(self, head: str) -> Callable[..., list[Question]] | None:
        """The loader of the first shape whose keys all occur in ``head``; None when none does."""
        return next((shape.loader for shape in self if all(k in head for k in shape.keys)), None)


def _load_authors(path: Path, limit: int | None = None) -> list[Question]:
    return list(itertools.islice(read_authors(path)[1], limit))


SHAPES = Shapes([
    Shape("dpr", ('"positive_ctxs"',), load_dpr), Shape("nq-pon", ('"idx_gold_in_corpus"',), load_nq_pon),
    Shape("squad", ('"paragraphs"', '"qas"'), load_squad), Shape("nomiracl", ('"docids"', '"prompt"'), load_nomiracl),
    Shape("nq-open-gold", ('"ctxs"', '"isgold"'), load_nq_open_gold), Shape("popqa", ('"ctxs"',), load_popqa),
    Shape("authors", ('"passages"',), _load_authors),
])


def register_shape(name: str, keys: Sequence[str], loader: Callable[..., list[Question]]) -> Shape:
    """Teach ``load_dataset`` a file shape: a file whose first 64 KiB hold every one of ``keys`` is
    read by ``loader(path, limit=None)`` (a list of ``Question``); tried before the built-in shapes.
    ``unregister_shape(name)`` removes it."""
    return SHAPES.register(name, keys, loader)


def unregister_shape(name: str) -> None:
    """Remove a shape added with ``register_shape``."""
    SHAPES.unregister(name)


def dataset_names() -> tuple[str, ...]:
    """Names ``load_dataset`` accepts without a path: aliases, shared-folder names, packaged samples."""
    return (*sorted(_ALIASES), *_FOLDERS, *SAMPLES, *_SAMPLE_ALIASES)


def default_data_dir() -> Path | None:
    """The shared data folder named by ``$UDCG_DATA_DIR`` (None when it is not set)."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else None


def shared_data_dir(name: str, data_dir: str | Path | None = None) -> Path:
    """The folder of the shared data sets for data set ``name``: ``data_dir``, else
    ``$UDCG_DATA_DIR``; neither is an ``InputError`` naming the fix."""
    folder = Path(data_dir) if data_dir else default_data_dir()
    if folder is None:
        raise InputError(f"{name}: a shared data set, but no shared data folder is given (set {DATA_DIR_ENV}=FOLDER "
                         f"or data.data_dir: FOLDER in the config, FOLDER holding {_ALIASES.get(name, name)}/)")
    return folder


def load_hub(source: str, limit: int | None = None) -> list[Question]:
    """Questions from a Hugging Face data set (``hf:NAME[:CONFIG]``, its ``test`` split or its only
    one) whose rows are in the authors' format (question, answers, passages)."""
    table = hfdata.pick(hfdata.load(source), "test", source)
    questions = []
    for where, row in itertools.islice(hfdata.rows(table, source), limit):
        if "passages" not in row:
            raise InputError(f"{where}: no 'passages' (a hub data set of questions needs rows in the authors' format: "
                             "question, answers, passages; or save the data to a file in a shape udcg reads)")
        questions.append(question_from_authors(row, where))
    return unique_qids(questions, Path(source))


def _loader_for_file(path: Path) -> Callable[..., list[Question]]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                head = f.read(65536)
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                head = f.read(65536)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e} (check the path)") from None
    loader = SHAPES.loader_for(head)
    if loader is None:
        raise InputError(f"{path}: unknown data set shape (expected one of: {', '.join(SHAPES.names())}; see "
                         "udcg.io.sources, or add one with udcg.io.sources.register_shape)")
    return loader


def load_dataset(name_or_path: str | Path, limit: int | None = None, data_dir: str | Path | None = None) -> list[Question]:
    """Load a data set by packaged-sample name, shared-folder name (or short alias: popqa, nq,
    nq-pon, squad, nomiracl, dpr), folder path or file path. A folder's data files are read in
    name order and concatenated; ``limit`` caps the number of questions."""
    if limit is not None and limit < 1:
        raise InputError(f"limit={limit} must be a positive number of questions (or None for all)")
    name = str(name_or_path)
    if name in SAMPLES or name in _SAMPLE_ALIASES:
        return list(itertools.islice(load_sample(_SAMPLE_ALIASES.get(name, name)), limit))
    if name.startswith(hfdata.HUB_PREFIX):
        return load_hub(name, limit)
    if name.startswith(irds.PREFIX):
        return irds.dataset_questions(name, limit)
    path = Path(name_or_path)
    if not path.exists():
        folder = _ALIASES.get(name, name)
        if folder not in _FOLDERS:
            raise InputError(f"{name}: no such file or folder, and not a known data set (known: "
                             f"{', '.join(sorted(_ALIASES))}, {', '.join(SAMPLES)})")
        path = shared_data_dir(name, data_dir) / folder
        if not path.is_dir():
            raise InputError(f"{path}: data set folder not found (point {DATA_DIR_ENV} or data.data_dir at the "
                             f"folder that holds {folder}/)")
    if path.is_file():
        return _loader_for_file(path)(path, limit=limit)
    if not path.is_dir():  # a FIFO, a device (/dev/zero), a socket: reading it could block or never end
        raise InputError(f"{path}: not a regular file or a folder (save the data to a file and give its path)")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".jsonl", ".gz")))
    if not files:
        raise InputError(f"{path}: folder holds no .json/.jsonl/.gz data file")
    questions: list[Question] = []
    for f in files:
        loader = _FOLDERS.get(path.name) or _loader_for_file(f)
        questions += loader(f, limit=None if limit is None else limit - len(questions))
        if limit is not None and len(questions) >= limit:
            break
    return unique_qids(questions, path)


__all__ = [
    "label_by_containment", "load_popqa", "load_nq_open_gold", "load_nq_pon", "load_squad", "load_nomiracl",
    "load_dpr", "load_dataset", "load_hub", "ContainmentChecker", "dataset_names", "default_data_dir",
    "shared_data_dir", "sample_path", "example_path", "load_sample", "contains_answer", "DATA_DIR_ENV",
]
