"""Render a comparison (``udcg.metrics.comparison.ComparisonData``, which ``udcg.metrics.compare.Comparison``
is) as Markdown, CSV, JSON or LaTeX.

Markdown and LaTeX: one row per run labelled a, b, c, ...; a cell is the mean (bold when best),
superscript letters of the runs it beats, and the bootstrap interval; then every pairwise
comparison (mean difference with its interval, the queries where A is higher / equal / lower,
minimum detectable difference, p, adjusted p);
then a footer naming the test, the family and its number of comparisons, alpha, the intervals,
what the MDD is, and n. CSV: one rectangular table (``_csv``). JSON: ``Comparison.to_dict()``.
"""

from __future__ import annotations

import csv
import io
import json
import math

from udcg.errors import InputError
from udcg.metrics.compare_power import per_measure, floor_lines, mdd_line
from udcg.metrics.comparison import EQUAL_WITHIN, ComparisonData, labels_of
from udcg.metrics.constants import FORMATS
from udcg.metrics.planning import count_of
from udcg.metrics.stats import EXACT_MAX_N

CSV_COLUMNS = ("kind", "measure", "run", "run_b", "mean", "low", "high", "n", "beats", "diff", "a_higher", "equal",
               "b_higher", "mdd", "p", "p_holm", "significant", "test", "correction", "family_size", "mdd_alpha",
               "tied_on", "margin", "p_tost", "p_tost_holm", "equivalent", "decision", "queries_to_detect",
               "queries_for_equivalence")

_SUPERSCRIPT = dict(zip("abcdefghijklmnopqrstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖ𐞥ʳˢᵗᵘᵛʷˣʸᶻ"))
_LATEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"} | {"~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                                                     "\\": r"\textbackslash{}", "<": r"\textless{}",
                                                     ">": r"\textgreater{}", "±": r"$\pm$"}  # < > in OT1: ¡ ¿


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


def _best(cmp: ComparisonData, measure: str) -> float:
    """The best mean: the largest (direction +1), the smallest (-1), none (0: NaN). None either when
    the runs' means are over different queries: they do not compare (``ComparisonData.same_population``)."""
    means = [cmp.cells[r][measure].mean for r in cmp.runs if not math.isnan(cmp.cells[r][measure].mean)]
    direction = cmp.direction.get(measure, 1)
    if not means or not direction or not cmp.same_population(measure):
        return float("nan")
    return max(means) if direction > 0 else min(means)


def _interval(low: float, high: float, digits: int) -> str:
    return "" if math.isnan(low) else f" [{_num(low, digits)}, {_num(high, digits)}]"


def _cell_text(cmp: ComparisonData, run: str, measure: str, digits: int, latex: bool) -> str:
    c, labels = cmp.cells[run][measure], cmp.labels
    mean = _num(c.mean, digits)
    if c.mean == _best(cmp, measure):
        mean = rf"\textbf{{{mean}}}" if latex else f"**{mean}**"
    own_n = "" if len({cmp.cells[r][measure].n for r in cmp.runs}) == 1 else f" (n={c.n})"
    return (mean + _sup([labels[r] for r in cmp.beats[run][measure]], latex)
            + _interval(c.low, c.high, max(2, digits - 2)) + own_n)


def _uniform_n(cmp: ComparisonData) -> int | None:
    """The one number of queries behind every cell and pair of the table, or None when they differ."""
    counts = {c.n for by_m in cmp.cells.values() for c in by_m.values()} | {t.n for t in cmp.pairs}
    return next(iter(counts)) if len(counts) == 1 else None


def measure_header(cmp: ComparisonData, measure: str) -> str:
    """The measure, with its n when the table's rows are not all on one number of queries and this
    measure's runs share one (else each cell states its own)."""
    counts = {cmp.cells[r][measure].n for r in cmp.runs}
    return measure if _uniform_n(cmp) is not None or len(counts) != 1 else f"{measure} (n={counts.pop()})"


def label_of_test(cmp: ComparisonData) -> str:
    """The test as the CSV names it: permutation-exact, permutation-random, permutation-mixed (exact for
    the pairs with n <= EXACT_MAX_N queries, random sign flips for the others), t or wilcoxon."""
    if cmp.test != "permutation":
        return cmp.test
    small = [t.n <= EXACT_MAX_N for t in cmp.pairs]
    if cmp.exact and all(small):
        return "permutation-exact"
    return "permutation-random" if not cmp.exact or not any(small) else "permutation-mixed"


def _mc_error(cmp: ComparisonData) -> str:
    """The largest Monte Carlo standard error of the table's estimated p-values, in words."""
    errors = [t.p_se for t in cmp.pairs if not math.isnan(t.p_se)]
    if not errors:
        return ""
    return (f"; each such p is an estimate of the exact p, Monte Carlo standard error at most {max(errors):.4f} "
            "(--n-resamples for more flips)")


def _test_text(cmp: ComparisonData) -> str:
    if cmp.test == "t":
        return "paired t-test"
    if cmp.test == "wilcoxon":
        return "Wilcoxon signed-rank test"
    flips = f"{cmp.n_resamples:,} random sign flips, seed {cmp.seed}"
    if not cmp.exact:
        return (f"paired sign-flip permutation test, {flips}, for every pair: enumerating all 2^n sign flips of "
                "this table would take more than a few seconds" + _mc_error(cmp))
    small = [t.n <= EXACT_MAX_N for t in cmp.pairs]
    if all(small):
        return "paired sign-flip permutation test, exact (all 2^n sign flips)"
    if not any(small):
        return f"paired sign-flip permutation test, {flips} (n > {EXACT_MAX_N} queries)" + _mc_error(cmp)
    return (f"paired sign-flip permutation test, exact for n ≤ {EXACT_MAX_N} queries, else {flips}"
            + _mc_error(cmp))


def family_text(cmp: ComparisonData) -> str:
    """The correction, its family and the number of comparisons per family, in words."""
    sizes = cmp.family_sizes
    against = f"the other runs' comparisons with the baseline {cmp.baseline}" if cmp.baseline else ""
    if cmp.correction == "measure":
        count = per_measure(sizes, lambda k: f"{k} comparison{'s' * (k != 1)}")
        return (f"Holm within each measure (family = {against or 'the run pairs compared'} on one measure; "
                f"{len(sizes)} famil{'ies' if len(sizes) != 1 else 'y'}): {count} per family")
    if cmp.correction == "table":
        total = next(iter(sizes.values()), 0)
        return (f"Holm over the whole table (one family: {against or 'every run pair'} × every measure, {total} "
                "comparisons)")
    return f"none (raw p, each comparison at alpha{'; ' + against if against else ''})"


def _directions(cmp: ComparisonData) -> str:
    lower = [m for m in cmp.measures if cmp.direction.get(m, 1) < 0]
    neither = [m for m in cmp.measures if cmp.direction.get(m, 1) == 0]
    return ((f" (lower is better for {', '.join(lower)}" if lower else "")
            + (("; " if lower else " (") + f"no better side for {', '.join(neither)}" if neither else "")
            + (")" if lower or neither else ""))


def _population(cmp: ComparisonData) -> str:
    """How many queries each row is on: one number when every cell and pair shares it."""
    uniform = _uniform_n(cmp)
    if uniform is not None:
        return f"n queries = {uniform}"
    return ("n queries differ by row (each stated in its header, cell or the pairs' n column: the queries where "
            "the run's value, or both runs' values, are defined)")


def footer_lines(cmp: ComparisonData) -> list[str]:
    return [f"Test: {_test_text(cmp)}. Correction: {family_text(cmp)}; alpha = {cmp.alpha:g}.",
            f"Intervals: {cmp.level:.0%} percentile bootstrap over queries ({cmp.n_boot:,} resamples; the same "
            "resampled queries for the run means and the paired differences).",
            f"Queries A > / = / < B: of the queries where both are defined, those where A's value is higher, equal "
            f"(within {EQUAL_WITHIN:g}) or lower than B's.",
            mdd_line(cmp), *floor_lines(cmp, cmp.pairs, cmp.family_sizes, cmp.mdd_alpha),
            f"{_population(cmp)}. Letters: the runs a run significantly beats; bold: the best mean"
            + _directions(cmp) + _unbolded(cmp) + ".",
            *([tie_footer(cmp)] if cmp.ties_of else []),
            *floor_lines(cmp, cmp.tie_pairs, cmp.tie_family_sizes, cmp.tie_mdd_alpha, f"Where {cmp.ties_of} ties"),
            *([equivalence_footer(cmp)] if _equivalence(cmp) else []),
            *cmp.notes]


def _unbolded(cmp: ComparisonData) -> str:
    """The measures without a bold mean because the runs' means are over different queries."""
    apart = [m for m in cmp.measures if not cmp.same_population(m)]
    return (f" (none for {', '.join(apart)}: the runs' means there are over different queries)" if apart else "")


def _adjusted_header(cmp: ComparisonData) -> list[str]:
    return {"measure": ["p (Holm, per measure)"], "table": ["p (Holm, whole table)"], "none": []}[cmp.correction]


def _equivalence(cmp: ComparisonData) -> bool:
    return any(not math.isnan(t.margin) for t in cmp.pairs)


def pair_header(cmp: ComparisonData) -> list[str]:
    n = ["n"] if _uniform_n(cmp) is None else []
    tost = ([f"equivalence: ±margin, p (TOST{', Holm' if cmp.correction != 'none' else ''})", "decision"]
            if _equivalence(cmp) else [])
    return ["measure", "run A", "run B", *n, f"mean diff (A - B) [{cmp.level:.0%} CI]", "queries A > / = / < B",
            f"MDD ({cmp.power:.0%} power)",
            "p", *_adjusted_header(cmp), "significant", *tost]


def _tost_cells(cmp: ComparisonData, t, digits: int) -> list[str]:
    if not _equivalence(cmp):
        return []
    if math.isnan(t.margin):
        return ["", ""]
    plan = (f" (queries needed: {_queries(t.queries_to_detect)} to detect ±{t.margin:g}, "
            f"{_queries(t.queries_for_equivalence)} to show equivalence)"
            if t.decision == "inconclusive" and not math.isnan(t.queries_to_detect) else "")
    return [f"±{t.margin:g}: {_p(t.p_tost if cmp.correction == 'none' else t.p_tost_holm, digits)}", t.decision + plan]


def _mdd_text(t, digits: int) -> str:
    return "undetectable" if t.undetectable else _num(t.mdd, digits)


def _pair_rows(cmp: ComparisonData, digits: int, ties: bool = False) -> list[list[str]]:
    adjusted = bool(_adjusted_header(cmp))
    n = ties or _uniform_n(cmp) is None
    return [[t.measure, t.run_a, t.run_b, *([str(t.n)] if n else []),
             _num(t.diff, digits) + _interval(t.low, t.high, digits), f"{t.a_higher} / {t.equal} / {t.b_higher}",
             _mdd_text(t, digits), _p(t.p, digits),
             *([_p(t.p_holm, digits)] if adjusted else []), "yes" if t.significant else "no",
             *_tost_cells(cmp, t, digits)]
            for t in (cmp.tie_pairs if ties else cmp.pairs)]


def tie_header(cmp: ComparisonData) -> list[str]:
    """The tie table's columns: the pair table's, with the tied queries as n."""
    header = pair_header(cmp)
    if "n" in header:
        header.remove("n")
    return [*header[:3], f"queries tied on {cmp.ties_of}", *header[3:]]


def tie_title(cmp: ComparisonData) -> str:
    return (f"Where {cmp.ties_of} ties: each run pair on the queries where its two runs' {cmp.ties_of} values are "
            "equal")


def equivalence_footer(cmp: ComparisonData) -> str:
    """What the equivalence columns are, in one sentence."""
    margins = {t.measure: t.margin for t in cmp.pairs if not math.isnan(t.margin)}
    family = {"measure": "Holm over the equivalence tests of each measure", "table": "Holm over every equivalence test "
              "of the table", "none": "no correction"}[cmp.correction]
    return (f"Equivalence: margins {per_measure(margins, lambda m: f'±{m:g}')}; two one-sided tests (TOST, the same "
            f"paired test) of H0 mean difference <= -margin and of H0 >= +margin, p_TOST the larger p, {family}. "
            "Decision: different (significant), equivalent (p_TOST < alpha), different within the margin (both), "
            "inconclusive (neither). A margin is the smallest difference that matters to you, chosen before the data. "
            f"Queries needed (inconclusive pairs): with the paired differences spread as here, the queries at which a "
            f"true difference of ±margin would be detected, and at which the TOST would show equivalence were the "
            f"true difference 0, each with {cmp.power:.0%} power at the MDD's level (planning figures, not promises).")


def tie_footer(cmp: ComparisonData) -> str:
    """What the tie table is, in one sentence."""
    if not cmp.ties_of:
        return ""
    errors = [t.p_se for t in cmp.tie_pairs if not math.isnan(t.p_se)]
    if errors:
        p = (f"p estimated from {cmp.n_resamples:,} sign flips where more than {EXACT_MAX_N} queries tie, Monte Carlo "
             f"standard error at most {max(errors):.4f}")
    else:
        p = "p exact" if cmp.test == "permutation" else _test_text(cmp)
    sizes = cmp.tie_family_sizes
    family = ("no correction" if cmp.correction == "none" else
              f"Holm over the run pairs of each measure in this table ({per_measure(sizes, str)} per family)"
              if cmp.correction == "measure" else
              f"Holm over this whole table ({next(iter(sizes.values()), 0)} comparisons)")
    return (f"Where {cmp.ties_of} ties: per run pair, the queries where both runs' {cmp.ties_of} are equal (within "
            f"{EQUAL_WITHIN:g}); each other measure's mean paired difference on them, its interval (those queries "
            f"resampled), detectable difference and the same paired test ({p}), {family}. A difference here is "
            f"one {cmp.ties_of} cannot show.")


def _markdown(cmp: ComparisonData, digits: int) -> str:
    def table(header: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                *("| " + " | ".join(r) + " |" for r in rows)]

    main = [[label, run.replace("|", r"\|"), *(_cell_text(cmp, run, m, digits, False) for m in cmp.measures)]
            for label, run in zip(labels_of(len(cmp.runs)), cmp.runs)]
    pairs = [[c.replace("|", r"\|") for c in r] for r in _pair_rows(cmp, digits)]
    tied = ([f"{tie_title(cmp)}:", "", *table(tie_header(cmp), [[c.replace("|", r"\|") for c in r]
                                                             for r in _pair_rows(cmp, digits, ties=True)]), ""]
            if cmp.ties_of else [])
    return "\n".join([*table(["", "run", *(measure_header(cmp, m) for m in cmp.measures)], main), "",
                      *table(pair_header(cmp), pairs), "", *tied,
                      *footer_lines(cmp)]) + "\n"


def _tex(s: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in s)


def _latex(cmp: ComparisonData, digits: int) -> str:
    def tabular(spec: str, header: list[str], rows: list[list[str]]) -> list[str]:
        return [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule",
                *(" & ".join(r) + r" \\" for r in rows), r"\bottomrule", r"\end{tabular}"]

    main = [[label, _tex(run), *(_cell_text(cmp, run, m, digits, True) for m in cmp.measures)]
            for label, run in zip(labels_of(len(cmp.runs)), cmp.runs)]
    header = pair_header(cmp)
    pairs = [[_tex(c) for c in r] for r in _pair_rows(cmp, digits)]
    footer = [_tex(line).replace("≤", r"$\leq$").replace("×", r"$\times$").replace("√(3/π)", r"$\sqrt{3/\pi}$")
              for line in footer_lines(cmp)]
    measures = [_tex(measure_header(cmp, m)) for m in cmp.measures]
    tied = []
    if cmp.ties_of:
        ties = tie_header(cmp)
        tied = [_tex(tie_title(cmp)) + ":", "", *tabular("lll" + "r" * (len(ties) - 4) + "c", [_tex(h) for h in ties],
                                                         [[_tex(c) for c in r] for r in _pair_rows(cmp, digits, True)]), ""]
    return "\n".join([*tabular("ll" + "c" * len(cmp.measures), ["", "run", *measures], main), "",
                      *tabular("lll" + "r" * (len(header) - 4) + "c", [_tex(h) for h in header], pairs), "", *tied,
                      *footer]) + "\n"


def _csv_num(x: float) -> str:
    return "" if math.isnan(x) else repr(float(x))


def _queries(x: float) -> str:
    """A planned number of queries as text (``planning.count_of``; "" where there is none)."""
    count = count_of(x)
    return "" if count is None else str(count)


def _csv(cmp: ComparisonData) -> str:
    """One rectangular CSV: ``kind`` = "cell" rows (run, measure, mean, low, high, n, beats as
    space-separated run names) then "pair" rows (measure, run, run_b, diff with its interval in
    low/high, n = queries where both are defined, of which a_higher / equal / b_higher, mdd, p,
    p_holm, significant, and the test, correction = the family (measure, table, none), family_size
    and mdd_alpha), then with ``ties`` "tie-pair" rows (the same fields on the pair's queries tied on
    the measure ``tied_on``; n = those queries). Empty field = not applicable or NA."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for run in cmp.runs:
        for m in cmp.measures:
            c = cmp.cells[run][m]
            w.writerow({"kind": "cell", "measure": m, "run": run, "mean": _csv_num(c.mean), "low": _csv_num(c.low),
                        "high": _csv_num(c.high), "n": c.n, "beats": " ".join(cmp.beats[run][m])})
    test = label_of_test(cmp)
    for kind, pairs, sizes, alphas in (("pair", cmp.pairs, cmp.family_sizes, cmp.mdd_alpha),
                                       ("tie-pair", cmp.tie_pairs, cmp.tie_family_sizes, cmp.tie_mdd_alpha)):
        for t in pairs:
            w.writerow({"kind": kind, "measure": t.measure, "run": t.run_a, "run_b": t.run_b,
                        "diff": _csv_num(t.diff), "low": _csv_num(t.low), "high": _csv_num(t.high), "n": t.n,
                        "a_higher": t.a_higher, "equal": t.equal, "b_higher": t.b_higher,
                        "mdd": "undetectable" if t.undetectable else _csv_num(t.mdd), "p": _csv_num(t.p),
                        "p_holm": _csv_num(t.p_holm), "significant": "yes" if t.significant else "no", "test": test,
                        "correction": cmp.correction, "family_size": sizes.get(t.measure, 0),
                        "mdd_alpha": _csv_num(alphas.get(t.measure, math.nan)),
                        "tied_on": cmp.ties_of if kind == "tie-pair" else "", "margin": _csv_num(t.margin),
                        "p_tost": _csv_num(t.p_tost), "p_tost_holm": _csv_num(t.p_tost_holm),
                        "equivalent": ("yes" if t.equivalent else "no") if t.decision else "",
                        "decision": t.decision, "queries_to_detect": _queries(t.queries_to_detect),
                        "queries_for_equivalence": _queries(t.queries_for_equivalence)})
    return buf.getvalue()


def format_comparison(cmp: ComparisonData, fmt: str = "markdown", digits: int = 4) -> str:
    """Render as ``fmt`` in ``FORMATS`` (module docstring). JSON: ``Comparison.to_dict()`` with
    sorted keys (the footer's sentences under ``footer``)."""
    if fmt not in FORMATS:
        raise InputError(f"format {fmt!r} is unknown: use one of {', '.join(FORMATS)}")
    if fmt == "json":
        return json.dumps(cmp.to_dict(), sort_keys=True, indent=2) + "\n"
    if fmt == "csv":
        return _csv(cmp)
    return _markdown(cmp, digits) if fmt == "markdown" else _latex(cmp, digits)
