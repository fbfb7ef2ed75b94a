"""PNG figures of ``udcg validate`` (matplotlib, Agg backend, no display needed).

- ``plot_k_sweep``: Fig. 2, mean per-question Spearman of each metric against k, with the
  bootstrap interval of UDCG and UDCG_theta as a band.
- ``plot_positions``: Fig. 1, answer accuracy (share correct, with its Wilson interval as a band)
  and the metrics' mean values per position of the single relevant passage.

Figures carry no timestamp, so a rerun writes the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

from udcg.experiment.studies import POSITION_METRICS
from udcg.report import Table


def _figure():
    """A figure on the Agg canvas, without pyplot (no global state, no display, faster import)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def _save(fig, path: Path) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=120, metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def plot_k_sweep(table: Table, path: str | Path, title: str = "") -> None:
    """One line per metric: mean rho against k (``k_sweep_table`` rows); the bootstrap interval
    as a band for the UDCG metrics."""
    fig, ax = _figure()
    metrics = list(dict.fromkeys(r["metric"] for r in table.rows))
    for name in metrics:
        rows = sorted((r for r in table.rows if r["metric"] == name), key=lambda r: r["k"])
        ks = [r["k"] for r in rows]
        mean = [r["mean_rho"] for r in rows]
        lo = [r["ci_low"] if not _nan(r["ci_low"]) else r["mean_rho"] for r in rows]
        hi = [r["ci_high"] if not _nan(r["ci_high"]) else r["mean_rho"] for r in rows]
        style = "-" if name.startswith("UDCG") else "--"
        (line,) = ax.plot(ks, mean, style, marker="o", label=name, linewidth=2 if name.startswith("UDCG") else 1.2)
        if name.startswith("UDCG"):  # bands for the proposed metrics only, to keep the figure readable
            ax.fill_between(ks, lo, hi, color=line.get_color(), alpha=0.12)
    ax.set_xlabel("k (passages per context)")
    ax.set_ylabel("mean per-question Spearman ρ")
    ax.set_title(title or "Correlation with answer outcomes against k")
    ax.set_xticks(sorted({r["k"] for r in table.rows}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    _save(fig, Path(path))


def plot_positions(table: Table, path: str | Path, title: str = "") -> None:
    """Accuracy (% correct, right axis) and each metric's mean (left axis) per position."""
    fig, ax = _figure()
    positions = [r["position"] for r in table.rows]
    metrics = [c for c in table.columns if c in POSITION_METRICS]
    for name in metrics:
        ax.plot(positions, [r[name] for r in table.rows], "--", marker="o", label=name, linewidth=1.2)
    ax.set_xlabel("position of the relevant passage")
    ax.set_ylabel("mean metric value")
    ax.set_xticks(positions)
    ax.grid(alpha=0.3)
    acc = ax.twinx()
    acc.plot(positions, [r["correct"] for r in table.rows], "-", color="black", marker="s", linewidth=2.4,
             label="accuracy (% correct)")
    if "correct_low" in table.columns:
        acc.fill_between(positions, [r["correct_low"] for r in table.rows], [r["correct_high"] for r in table.rows],
                         color="black", alpha=0.12, linewidth=0, label="accuracy, 95% Wilson interval")
    acc.set_ylabel("accuracy (% correct)")
    acc.set_ylim(0, 100)
    handles = ax.get_legend_handles_labels()
    handles2 = acc.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], fontsize=8, loc="best")
    ax.set_title(title or "One relevant passage moved through the context")
    _save(fig, Path(path))


def _nan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
