"""Compare retrieval runs on per-query scores: means with bootstrap intervals, paired tests
between every pair of runs, Holm correction over the whole table, ranx-style reports.

``compare_scores`` returns a ``Comparison`` (data); ``format_comparison`` renders it as Markdown,
CSV, JSON or LaTeX. One family for the correction: every pair of runs x every measure.
Run A *beats* run B on a measure when the paired mean difference A - B (over the queries where
both are defined) is positive and the Holm-corrected p is below ``alpha``; without NaNs that
difference is the difference of the two means.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from udcg.errors import InputError
from udcg.metrics.stats import EXACT_MAX_N, TESTS, bootstrap_ci, holm, paired_test

FORMATS = ("markdown", "csv", "json", "latex")
CSV_COLUMNS = ("kind", "measure", "run", "run_b", "mean", "low", "high", "n", "beats", "diff", "p", "p_holm",
               "significant")


@dataclass(frozen=True, slots=True)
class Cell:
    mean: float  # over the queries where the run's value is defined
    low: float
    high: float
    n: int


@dataclass(frozen=True, slots=True)
class PairTest:
    measure: str
    run_a: str
    run_b: str
    diff: float  # mean of a - b over the queries where both are defined
    p: float
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class Comparison:
    runs: tuple[str, ...]
    measures: tuple[str, ...]
    test: str
    alpha: float
    n_resamples: int
    n_boot: int
    level: float
    n_queries: dict[str, int]  # measure -> queries (array length)
    cells: dict[str, dict[str, Cell]]  # run -> measure -> cell
    pairs: tuple[PairTest, ...]  # run pairs in run order, measure by measure
    beats: dict[str, dict[str, list[str]]]  # run -> measure -> runs it significantly beats, in run order
    correction: str = "holm"

    @property
    def labels(self) -> dict[str, str]:
        return dict(zip(self.runs, _labels(len(self.runs))))

    def to_dict(self) -> dict:
        """JSON-ready: NaN becomes None."""
        return {"runs": list(self.runs), "labels": self.labels, "measures": list(self.measures), "test": self.test,
                "alpha": self.alpha, "correction": self.correction, "n_resamples": self.n_resamples,
                "n_boot": self.n_boot, "level": self.level, "n_queries": dict(self.n_queries),
                "cells": {r: {m: {"mean": _none(c.mean), "low": _none(c.low), "high": _none(c.high), "n": c.n}
                              for m, c in by_m.items()} for r, by_m in self.cells.items()},
                "pairs": [{"measure": t.measure, "run_a": t.run_a, "run_b": t.run_b, "diff": _none(t.diff),
                           "p": _none(t.p), "p_holm": _none(t.p_holm), "significant": t.significant}
                          for t in self.pairs],
                "beats": {r: {m: list(b) for m, b in by_m.items()} for r, by_m in self.beats.items()}}

    def format(self, fmt: str = "markdown", digits: int = 4) -> str:
        """The report as Markdown, CSV, JSON or LaTeX (``format_comparison``)."""
        return format_comparison(self, fmt, digits)

    def to_frame(self):
        """A pandas DataFrame, one row per (run, measure): mean, low, high, n, beats (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("to_frame() needs pandas (pip install pandas)") from None
        rows = [{"run": r, "measure": m, "mean": c.mean, "low": c.low, "high": c.high, "n": c.n,
                 "beats": ",".join(self.beats[r][m])} for r, by_m in self.cells.items() for m, c in by_m.items()]
        return pd.DataFrame(rows).set_index(["run", "measure"])


def _none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _labels(n: int) -> list[str]:
    """a, b, ..., z, aa, ab, ...: spreadsheet-style letters."""
    out = []
    for i in range(n):
        s, i = "", i + 1
        while i:
            i, r = divmod(i - 1, 26)
            s = chr(97 + r) + s
        out.append(s)
    return out


def _validate(scores: Mapping[str, Mapping[str, object]]) -> tuple[list[str], list[str], dict]:
    if not scores:
        raise InputError("compare_scores: no runs given (pass {run: {measure: per-query values}})")
    runs = list(scores)
    measures = list(scores[runs[0]])
    if not measures:
        raise InputError(f"compare_scores: run {runs[0]!r} has no measures")
    arrays: dict[str, dict[str, np.ndarray]] = {}
    for run in runs:
        if set(scores[run]) != set(measures):
            raise InputError(f"compare_scores: run {run!r} has measures {sorted(scores[run])}, run {runs[0]!r} has "
                             f"{sorted(measures)} (score every run on the same measures)")
        arrays[run] = {m: np.asarray(scores[run][m], dtype=float) for m in measures}
        for m, v in arrays[run].items():
            if v.ndim != 1:
                raise InputError(f"compare_scores: run {run!r}, measure {m!r}: expected one value per query (1-D), "
                                 f"got shape {v.shape}")
            if len(v) != len(arrays[runs[0]][m]):
                raise InputError(f"compare_scores: measure {m!r} has {len(v)} queries in run {run!r} but "
                                 f"{len(arrays[runs[0]][m])} in run {runs[0]!r} (align every run on the same queries)")
    return runs, measures, arrays


def compare_scores(scores: Mapping[str, Mapping[str, object]], *, test: str = "permutation", alpha: float = 0.05,
                   n_resamples: int = 10_000, seed: int = 0, n_boot: int = 10_000, level: float = 0.95) -> Comparison:
    """``scores[run][measure]``: per-query values, aligned on the same queries across runs (NaN =
    undefined for that query). Runs keep the given order, measures the first run's order."""
    if test not in TESTS:
        raise InputError(f"compare_scores: test {test!r} is unknown: use one of {', '.join(TESTS)}")
    if not 0 < alpha < 1:
        raise InputError(f"compare_scores: alpha = {alpha!r}: use a significance level between 0 and 1 (e.g. 0.05)")
    runs, measures, arrays = _validate(scores)
    cells = {}
    for run in runs:
        cells[run] = {}
        for m, v in arrays[run].items():
            defined = v[~np.isnan(v)]
            low, high = bootstrap_ci(defined, n_boot, level, seed)
            cells[run][m] = Cell(float(defined.mean()) if len(defined) else float("nan"), low, high, len(defined))
    raw = []  # (measure, a, b, diff, p)
    for m in measures:
        for a, b in combinations(runs, 2):
            x, y = arrays[a][m], arrays[b][m]
            d = (x - y)[~(np.isnan(x) | np.isnan(y))]
            raw.append((m, a, b, float(d.mean()) if len(d) else float("nan"),
                        paired_test(x, y, test, n_resamples, seed)))
    adjusted = holm([r[4] for r in raw])
    pairs = tuple(PairTest(m, a, b, diff, p, float(ph), bool(ph < alpha))
                  for (m, a, b, diff, p), ph in zip(raw, adjusted))
    order = {r: i for i, r in enumerate(runs)}
    beats: dict[str, dict[str, list[str]]] = {r: {m: [] for m in measures} for r in runs}
    for t in pairs:
        if t.significant and t.diff != 0:
            winner, loser = (t.run_a, t.run_b) if t.diff > 0 else (t.run_b, t.run_a)
            beats[winner][t.measure].append(loser)
    for by_m in beats.values():
        for m in by_m:
            by_m[m] = sorted(by_m[m], key=order.__getitem__)
    return Comparison(tuple(runs), tuple(measures), test, float(alpha), int(n_resamples), int(n_boot), float(level),
                      {m: len(arrays[runs[0]][m]) for m in measures}, cells, pairs, beats)


# ---------------------------------------------------------------- rendering

_SUPERSCRIPT = dict(zip("abcdefghijklmnopqrstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖ𐞥ʳˢᵗᵘᵛʷˣʸᶻ"))
_LATEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"} | {"~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                                                     "\\": r"\textbackslash{}"}


def _num(x: float, digits: int) -> str:
    return "NA" if math.isnan(x) else f"{x:.{digits}f}"


def _p(p: float, digits: int) -> str:
    return "NA" if math.isnan(p) else f"< {10.0 ** -digits:.{digits}f}" if p < 10.0 ** -digits else f"{p:.{digits}f}"


def _sup(letters: list[str], latex: bool) -> str:
    if not letters:
        return ""
    text = ("" if all(len(s) == 1 for s in letters) else ",").join(letters)
    if latex:
        return f"$^{{{text}}}$"
    return "".join(_SUPERSCRIPT[s] for s in letters) if all(len(s) == 1 for s in letters) else f"^{{{text}}}"


def _best(cmp: Comparison, measure: str) -> float:
    means = [cmp.cells[r][measure].mean for r in cmp.runs if not math.isnan(cmp.cells[r][measure].mean)]
    return max(means) if means else float("nan")


def _cell_text(cmp: Comparison, run: str, measure: str, digits: int, latex: bool) -> str:
    c, labels = cmp.cells[run][measure], cmp.labels
    mean = _num(c.mean, digits)
    if c.mean == _best(cmp, measure):
        mean = rf"\textbf{{{mean}}}" if latex else f"**{mean}**"
    ci = "" if math.isnan(c.low) else f" [{_num(c.low, max(2, digits - 2))}, {_num(c.high, max(2, digits - 2))}]"
    return mean + _sup([labels[r] for r in cmp.beats[run][measure]], latex) + ci


def _footer(cmp: Comparison) -> str:
    test = {"permutation": f"paired sign-flip permutation test (exact for n ≤ {EXACT_MAX_N} queries, else "
                           f"{cmp.n_resamples:,} random sign flips)",
            "t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test"}[cmp.test]
    sizes = sorted(set(cmp.n_queries.values()))
    n = str(sizes[0]) if len(sizes) == 1 else ", ".join(f"{m}: {k}" for m, k in cmp.n_queries.items())
    family = sum(not math.isnan(t.p) for t in cmp.pairs)
    return (f"Test: {test}; correction: {cmp.correction} over {family} comparisons; alpha = {cmp.alpha:g}; "
            f"{cmp.level:.0%} percentile bootstrap intervals ({cmp.n_boot:,} resamples); n queries = {n}. "
            "Letters: the runs a run significantly beats; bold: the best mean.")


def _pair_rows(cmp: Comparison, digits: int) -> list[list[str]]:
    return [[t.measure, t.run_a, t.run_b, _num(t.diff, digits), _p(t.p, digits), _p(t.p_holm, digits),
             "yes" if t.significant else "no"] for t in cmp.pairs]


PAIR_HEADER = ["measure", "run A", "run B", "mean diff (A - B)", "p", "p (Holm)", "significant"]


def _markdown(cmp: Comparison, digits: int) -> str:
    def table(header: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                *("| " + " | ".join(r) + " |" for r in rows)]

    main = [[label, run.replace("|", r"\|"), *(_cell_text(cmp, run, m, digits, False) for m in cmp.measures)]
            for label, run in zip(_labels(len(cmp.runs)), cmp.runs)]
    pairs = [[c.replace("|", r"\|") for c in r] for r in _pair_rows(cmp, digits)]
    return "\n".join([*table(["", "run", *cmp.measures], main), "", *table(PAIR_HEADER, pairs), "",
                      _footer(cmp)]) + "\n"


def _tex(s: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in s)


def _latex(cmp: Comparison, digits: int) -> str:
    def tabular(spec: str, header: list[str], rows: list[list[str]]) -> list[str]:
        return [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule",
                *(" & ".join(r) + r" \\" for r in rows), r"\bottomrule", r"\end{tabular}"]

    main = [[label, _tex(run), *(_cell_text(cmp, run, m, digits, True) for m in cmp.measures)]
            for label, run in zip(_labels(len(cmp.runs)), cmp.runs)]
    pairs = [[_tex(c) for c in r] for r in _pair_rows(cmp, digits)]
    return "\n".join([*tabular("ll" + "c" * len(cmp.measures), ["", "run", *map(_tex, cmp.measures)], main), "",
                      *tabular("lllrrrc", [_tex(h) for h in PAIR_HEADER], pairs), "",
                      _tex(_footer(cmp)).replace("≤", r"$\leq$")]) + "\n"


def _csv_num(x: float) -> str:
    return "" if math.isnan(x) else repr(float(x))


def _csv(cmp: Comparison) -> str:
    """One rectangular CSV: ``kind`` = "cell" rows (run, measure, mean, low, high, n, beats as
    space-separated run names) then "pair" rows (measure, run, run_b, diff, p, p_holm, significant).
    Empty field = not applicable or NA."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for run in cmp.runs:
        for m in cmp.measures:
            c = cmp.cells[run][m]
            w.writerow({"kind": "cell", "measure": m, "run": run, "mean": _csv_num(c.mean), "low": _csv_num(c.low),
                        "high": _csv_num(c.high), "n": c.n, "beats": " ".join(cmp.beats[run][m])})
    for t in cmp.pairs:
        w.writerow({"kind": "pair", "measure": t.measure, "run": t.run_a, "run_b": t.run_b, "diff": _csv_num(t.diff),
                    "p": _csv_num(t.p), "p_holm": _csv_num(t.p_holm), "significant": "yes" if t.significant else "no"})
    return buf.getvalue()


def format_comparison(cmp: Comparison, fmt: str = "markdown", digits: int = 4) -> str:
    """Render as ``fmt`` in ``FORMATS``. Markdown and LaTeX: one row per run labelled a, b, c, ...;
    a cell is the mean (bold when best), superscript letters of the runs it beats, and the bootstrap
    interval; then every pairwise comparison; then a footer naming the test, correction, alpha, n.
    CSV: see ``_csv``. JSON: ``Comparison.to_dict()`` with sorted keys."""
    if fmt not in FORMATS:
        raise InputError(f"format {fmt!r} is unknown: use one of {', '.join(FORMATS)}")
    if fmt == "json":
        return json.dumps(cmp.to_dict(), sort_keys=True, indent=2) + "\n"
    if fmt == "csv":
        return _csv(cmp)
    return _markdown(cmp, digits) if fmt == "markdown" else _latex(cmp, digits)
