"""Agreement between two judges over the same items: confusion matrix and Cohen's kappa.

kappa = (p_o - p_e) / (1 - p_e), p_o the share of items both judges label alike, p_e the share
expected by chance from each judge's label frequencies. When p_e = 1 (both judges gave one and
the same label to everything) kappa is undefined and reported as NaN, as scikit-learn does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np


def _label_index(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None) -> list:
    if len(a) != len(b):
        raise ValueError(f"the two judges labelled {len(a)} and {len(b)} items (pair them first)")
    if labels is None:
        labels = sorted(set(a) | set(b), key=str)
    elif len(set(labels)) != len(labels):
        raise ValueError("labels must be distinct")
    return list(labels)


def confusion_matrix(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None) -> np.ndarray:
    """Counts C[i, j] of items judge A labelled ``labels[i]`` and judge B ``labels[j]``. Items
    with a label outside ``labels`` are left out."""
    labels = _label_index(a, b, labels)
    index = {lab: i for i, lab in enumerate(labels)}
    ia = np.array([index.get(x, -1) for x in a], dtype=np.int64)
    ib = np.array([index.get(x, -1) for x in b], dtype=np.int64)
    keep = (ia >= 0) & (ib >= 0)
    m = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(m, (ia[keep], ib[keep]), 1)
    return m


def kappa_from_matrix(m: np.ndarray) -> float:
    n = m.sum()
    if n == 0:
        return math.nan
    p_o = np.trace(m) / n
    p_e = float(m.sum(1) @ m.sum(0)) / n**2
    return math.nan if p_e == 1.0 else float((p_o - p_e) / (1.0 - p_e))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None) -> float:
    """Cohen's kappa between two label sequences over the same items."""
    return kappa_from_matrix(confusion_matrix(a, b, labels))


@dataclass(frozen=True)
class Agreement:
    """Two judges compared over the items both labelled."""

    name_a: str
    name_b: str
    labels: tuple
    matrix: np.ndarray  # rows: judge A, columns: judge B
    kappa: float
    observed: float  # share of items with the same label
    n: int  # items both judges labelled
    unparseable_a: int  # items judge A has no label for (left out)
    unparseable_b: int
    unmatched: int  # items only one judge has a record for

    def to_text(self) -> str:
        width = max(12, *(len(str(x)) + 2 for x in self.labels))
        corner = "A \\ B"
        head = f"{corner:<{width}}" + "".join(f"{str(lab):>{width}}" for lab in self.labels) + f"{'total':>{width}}"
        rows = [f"A = {self.name_a}", f"B = {self.name_b}", head]
        for lab, row in zip(self.labels, self.matrix):
            rows.append(f"{str(lab):<{width}}" + "".join(f"{v:>{width}}" for v in row) + f"{row.sum():>{width}}")
        rows.append(f"{'total':<{width}}" + "".join(f"{v:>{width}}" for v in self.matrix.sum(0)) + f"{self.n:>{width}}")
        rows.append(f"n = {self.n}   agreement = {self.observed:.3f}   Cohen's kappa = {self.kappa:.3f}")
        rows.append(f"left out: unparseable A = {self.unparseable_a}, unparseable B = {self.unparseable_b}, "
                    f"unmatched = {self.unmatched}")
        return "\n".join(rows)


def compare_labels(records_a: Sequence[dict], records_b: Sequence[dict], id_field: str = "pid",
            labels: Sequence[Hashable] | None = None, name_a: str = "", name_b: str = "") -> Agreement:
    """Pair two judges' records by (qid, ``id_field``) and compare their labels. Unparseable
    judgements (label None) and items only one side has are counted and left out."""
    la = {(r["qid"], r[id_field]): r["label"] for r in records_a}
    lb = {(r["qid"], r[id_field]): r["label"] for r in records_b}
    common = [k for k in la if k in lb]
    unmatched = len(la) + len(lb) - 2 * len(common)
    none_a = sum(la[k] is None for k in common)
    none_b = sum(lb[k] is None for k in common)
    pairs = [(la[k], lb[k]) for k in common if la[k] is not None and lb[k] is not None]
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    labs = _label_index(a, b, labels)
    m = confusion_matrix(a, b, labs)
    n = int(m.sum())
    return Agreement(
        name_a=name_a or _judge_name(records_a), name_b=name_b or _judge_name(records_b), labels=tuple(labs),
        matrix=m, kappa=kappa_from_matrix(m), observed=float(np.trace(m) / n) if n else math.nan, n=n,
        unparseable_a=none_a, unparseable_b=none_b, unmatched=unmatched)


def _judge_name(records: Sequence[dict]) -> str:
    names = sorted({str(r.get("judge", "?")) for r in records})
    return ", ".join(names) if names else "?"
