"""The figures of ``compare --plot`` and ``reader-check --plot`` (matplotlib, the ``experiment``
extra, imported only here and only when a figure is asked for; the Agg canvas, no display).

- ``comparison_figure``: a forest plot, one panel per row of the table (a measure, or an answer
  rate), one line per compared pair: the mean paired difference A - B (a filled dot where the pair
  is significant after the correction, hollow where not), its bootstrap interval, and a grey band
  from -MDD to +MDD (a true difference inside it is likely missed); a line at 0. Every number is the
  comparison's own (``Comparison.pairs``), nothing is recomputed.
- ``reader_check_figure``: one panel per utilities folder, histograms of p_abs of the relevant,
  judged-irrelevant and unjudged pairs (the pairs the check counted), the 0.5 line the check's
  "answers from" uses, and the check's AUC with its interval and its verdict in the title.

``save_figure`` writes PNG or SVG by the file's extension, atomically; ``figure_path`` checks the
extension before any work. Figures carry no date, so a rerun writes the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.metrics.compare import Comparison
from udcg.metrics.reader_check import ReaderCheck

PLOT_FORMATS = {".png": "png", ".svg": "svg"}
EXTRA = "pip install -e '.[experiment]'"


def figure_path(path: str | Path, flag: str = "--plot") -> Path:
    """``path`` if its extension is one ``save_figure`` writes (.png, .svg) and matplotlib is
    installed; else one line naming the fix. Called before any work."""
    path = Path(path)
    if path.suffix.lower() not in PLOT_FORMATS:
        raise InputError(f"{flag} {path}: give a .png or .svg file (the figure's format follows the extension)")
    _figure_class()
    return path


def _figure_class():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(f"--plot needs matplotlib, which is not installed: {EXTRA}") from None
    return Figure, FigureCanvasAgg


def _figure(rows: int, height: float, width: float = 7.0):
    Figure, Canvas = _figure_class()
    fig = Figure(figsize=(width, height), layout="constrained")
    Canvas(fig)
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    return fig, list(axes)


def save_figure(fig, path: str | Path) -> None:
    """The figure as PNG or SVG (by ``path``'s extension), written atomically."""
    from udcg.io.writing import atomic_write_bytes

    path = figure_path(path)
    buffer = io.BytesIO()
    fmt = PLOT_FORMATS[path.suffix.lower()]
    metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    fig.savefig(buffer, format=fmt, dpi=120, metadata=metadata)
    atomic_write_bytes(path, buffer.getvalue())


def _finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))


def comparison_figure(cmp: Comparison):
    """The forest plot of ``cmp`` (module doc): one panel per row of the table, each pair's artists
    with a ``gid`` (``diff``, ``interval``, ``mdd``) in the order of ``cmp.pairs``."""
    by_measure = {m: [t for t in cmp.pairs if t.measure == m] for m in cmp.measures}
    n_pairs = max(len(v) for v in by_measure.values())
    fig, axes = _figure(len(cmp.measures), 0.9 + len(cmp.measures) * (0.55 + 0.38 * n_pairs))
    level = f"{cmp.level:.0%}"
    for ax, (measure, tests) in zip(axes, by_measure.items()):
        y = -np.arange(len(tests), dtype=float)
        diff = np.array([t.diff for t in tests])
        low, high = np.array([t.low for t in tests]), np.array([t.high for t in tests])
        mdd = np.array([t.mdd if _finite(t.mdd) else np.nan for t in tests])
        ax.hlines(y, -mdd, mdd, colors="0.85", linewidth=9, gid="mdd", label="±MDD (detectable at "
                  f"{cmp.power:.0%} power)", zorder=1)
        ax.hlines(y, low, high, colors="C0", linewidth=1.6, gid="interval", label=f"{level} interval", zorder=2)
        significant = np.array([t.significant for t in tests])
        ax.plot(diff, y, "o", color="C0", markersize=6, gid="diff", zorder=3, markerfacecolor="white",
                label="difference (hollow: not significant)")
        ax.plot(diff[significant], y[significant], "o", color="C0", markersize=6, zorder=4, gid="significant",
                label=f"significant ({_family(cmp)})")
        ax.axvline(0, color="0.3", linewidth=0.8, zorder=0)
        labels = [f"{t.run_a} − {t.run_b}" + ("" if _finite(t.mdd) else " (no MDD)") for t in tests]
        ax.set_yticks(y, labels)
        ax.set_ylim(y[-1] - 0.6, 0.6)
        span = np.nanmax(np.abs(np.concatenate([low, high, diff, mdd, [0.0]])))
        ax.set_xlim(-1.08 * span or -1, 1.08 * span or 1)
        ax.set_title(f"{measure}  (n = {cmp.n_queries.get(measure, 0)} queries)", fontsize=10, loc="left")
        ax.tick_params(labelsize=9)
    axes[-1].set_xlabel("mean paired difference A − B")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=2, fontsize=8, frameon=False)
    return fig


def _family(cmp: Comparison) -> str:
    if cmp.correction == "none":
        return f"p < {cmp.alpha:g}"
    return f"Holm-adjusted p < {cmp.alpha:g}, per {'measure' if cmp.correction == 'measure' else 'table'}"


def reader_check_figure(checks: Mapping[str, ReaderCheck], pairs: Mapping[str, Sequence[tuple[float, str]]]):
    """Histograms of p_abs per relevance group (``pairs[folder]``: (p_abs, "relevant" | "judged" |
    "unjudged") of every pair the check counted), one panel per folder, the check's AUC in its title."""
    fig, axes = _figure(len(checks), 0.6 + 2.9 * len(checks))
    bins = np.linspace(0.0, 1.0, 21)
    groups = (("relevant", "relevant", "C2"), ("judged", "judged irrelevant", "C3"),
              ("unjudged", "unjudged (taken as irrelevant)", "C1"))
    for ax, (folder, check) in zip(axes, checks.items()):
        for key, name, color in groups:
            p = np.array([p for p, g in pairs[folder] if g == key], dtype=float)
            if len(p):
                filled = key == "relevant"  # filled, so that irrelevant steps on top of it leave it visible
                ax.hist(p, bins=bins, weights=np.full(len(p), 1 / len(p)), histtype="stepfilled" if filled else "step",
                        alpha=0.35 if filled else 1.0, linewidth=1.6, color=color, gid=key,
                        label=f"{name} ({len(p)} pairs)")
        ax.axvline(0.5, color="0.3", linewidth=0.8, linestyle="--", label="p_abs = 0.5")
        auc = "NA" if math.isnan(check.auc) else (f"{check.auc:.3f} [{check.auc_low:.3f}, {check.auc_high:.3f}]")
        ax.set_title(f"{folder}: AUC {auc}: this reader {check.verdict} measure distraction"
                     if check.conclusion in ("can", "cannot") else f"{folder}: AUC {auc}; {check.conclusion}",
                     fontsize=10, loc="left")
        ax.set_xlim(0, 1)
        ax.set_ylabel("share of the group's pairs")
        ax.legend(fontsize=8, frameon=False)
    axes[-1].set_xlabel("p_abs (the reader's probability of abstaining on the pair)")
    return fig


def plot_reader_checks(paths: Sequence[str | Path], checks: Sequence[ReaderCheck], output: str | Path) -> None:
    """``reader-check --plot``: the figure of each folder's check, from the pairs it counted."""
    from udcg.annotate.utilities import load_utilities
    from udcg.flows.reader_check import UNJUDGED

    pairs = {}
    for path, check in zip(paths, checks):
        records = load_utilities(path).records.values()
        pairs[str(path)] = [(r.p_abs, "relevant" if r.relevant else "unjudged" if r.relevance_source == UNJUDGED
                             else "judged") for r in records]
    save_figure(reader_check_figure(dict(zip(map(str, paths), checks)), pairs), output)
