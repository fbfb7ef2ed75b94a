"""PNG figures of ``udcg validate`` (matplotlib, Agg backend, no display needed).

- ``plot_k_sweep``: Fig. 2, mean per-question Spearman, Kendall tau-b and pairwise accuracy of
  each metric against k (one panel each), the bootstrap interval of UDCG and UDCG_theta as a
  band, the circular values at k = 1 marked.
- ``plot_theta_weights``: UDCG_theta's weights per position, per variant.
- ``plot_positions``: Fig. 1, answer accuracy (share correct, with its Wilson interval as a band)
  and the metrics' mean values per position of the single relevant passage.

Figures carry no timestamp, so a rerun writes the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

from udcg.experiment.studies import POSITION_METRICS
from udcg.io.tables import Table


def _figure(ncols: int = 1, width: float = 6.4):
    """A figure on the Agg canvas, without pyplot (no global state, no display, faster import)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, ncols) if ncols > 1 else fig.subplots()


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
    """One panel per statistic (Spearman ρ, Kendall τ-b, pairwise accuracy; the columns the table
    has), one line per metric against k (``k_sweep_table`` rows); the bootstrap interval as a band
    for the UDCG metrics. A circular value (``studies.circular_metrics``: the UDCG variants,
    ANSWER_PROB and eRAG at k = 1) is drawn as a hollow red ring and named in the legend: it is no
    evidence."""
    from udcg.experiment.studies import K_SWEEP_STATISTICS

    stats = [c for c in K_SWEEP_STATISTICS if c in table.columns]
    fig, axes = _figure(len(stats), 6.4 if len(stats) == 1 else 5.0 * len(stats))
    axes = [axes] if len(stats) == 1 else list(axes)
    metrics = list(dict.fromkeys(r["metric"] for r in table.rows))
    bounds = {"mean_rho": ("ci_low", "ci_high"), "mean_tau_b": ("tau_b_ci_low", "tau_b_ci_high"),
              "pair_acc": ("pair_acc_ci_low", "pair_acc_ci_high")}
    for ax, stat in zip(axes, stats):
        lo_col, hi_col = bounds[stat]
        circular_drawn = False
        for name in metrics:
            rows = sorted((r for r in table.rows if r["metric"] == name), key=lambda r: r["k"])
            ks = [r["k"] for r in rows]
            mean = [r[stat] for r in rows]
            lo = [r[stat] if _nan(r.get(lo_col)) else r[lo_col] for r in rows]
            hi = [r[stat] if _nan(r.get(hi_col)) else r[hi_col] for r in rows]
            style = "-" if name.startswith("UDCG") else "--"
            (line,) = ax.plot(ks, mean, style, marker="o", label=name, linewidth=2 if name.startswith("UDCG") else 1.2)
            if name.startswith("UDCG"):  # bands for the proposed metrics only, to keep the figure readable
                ax.fill_between(ks, lo, hi, color=line.get_color(), alpha=0.12)
            circ = [(r["k"], r[stat]) for r in rows if r.get("circular")]
            if circ:
                ax.plot([c[0] for c in circ], [c[1] for c in circ], "o", markersize=13, markerfacecolor="none",
                        markeredgecolor="red", markeredgewidth=1.5, linestyle="none",
                        label=None if circular_drawn else "circular (k = 1: read off the graded prompt itself)")
                circular_drawn = True
        ax.set_xlabel("k (passages per context)")
        ax.set_ylabel(f"mean per-question {K_SWEEP_STATISTICS[stat]}")
        ax.set_xticks(sorted({r["k"] for r in table.rows}))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    axes[0].set_title(title or "Correlation with answer outcomes against k", loc="left")
    _save(fig, Path(path))


def plot_theta_weights(weights: Table, path: str | Path, title: str = "") -> None:
    """UDCG_theta's learned weights per position (``theta_weights_table`` rows): α (the weight of
    u⁺, or of the 0/1 relevance for the binary variant) and β (the weight of u⁻), one line per
    variant and k, in utility units. A saturated fit is named so in the legend: its weights are the
    mean pair difference, not a positional effect."""
    fig, (ax_a, ax_b) = _figure(2, 9.6)
    styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]  # distinct, so equal weights stay visible
    for i, model in enumerate(dict.fromkeys(r["model"] for r in weights.rows)):
        rows = sorted((r for r in weights.rows if r["model"] == model), key=lambda r: r["position"])
        positions = [r["position"] for r in rows]
        line, marker = styles[i % len(styles)]
        label = model + (" (saturated: mean pair difference, no positional effect)"
                         if any(r.get("saturated") == "yes" for r in rows) else "")
        for ax, key in ((ax_a, "alpha"), (ax_b, "beta")):
            ax.plot(positions, [r[key] for r in rows], line, marker=marker, markersize=7 - 1.5 * (i % 3),
                    label=label, linewidth=1.6)
    for ax, name in ((ax_a, "α (weight of u⁺)"), (ax_b, "β (weight of u⁻)")):
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("position in the context")
        ax.set_ylabel(name)
        ax.set_xticks(sorted({r["position"] for r in weights.rows}))
        ax.grid(alpha=0.3)
    ax_a.legend(fontsize=8)
    ax_a.set_title(title or "UDCG_θ weights per position", loc="left")
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
