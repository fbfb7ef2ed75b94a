"""The report of a ``udcg validate`` run, from its published data alone (no model).

``write_data`` writes what a run computed, per context and per passage, under ``RUN/data/``
(gzipped JSONL with fixed gzip headers, so the same data give the same bytes):

    data/contexts.jsonl.gz      every context of every study (study, split, pids, relevant, p_abs,
                                utilities, answer, outcome, metrics, ...)
    data/pools.jsonl.gz         the candidate pools (authors' format)
    data/annotations.jsonl.gz   per (qid, pid): rank, relevance, p_abs, utility, grade, answer, eRAG, ...
    data/notes.json             what the steps before the report noted (pool stats, grading, theta, ...)
    data/per-question.jsonl.gz  per correlation table, metric and question: rho, tau_b, pair_acc, status

``report(run_dir, out_dir)`` rebuilds every table (Markdown, CSV, JSON), figure, ``report.md`` and
``summary.json`` from ``config.yaml``, ``data/`` and ``theta/*.json``. ``udcg validate`` writes its
report through the same function, so ``udcg report RUN_DIR`` reproduces it byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gzip
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path

from udcg.flows.theta import load_theta
from udcg.errors import InputError
from udcg.experiment import paired, studies
from udcg.experiment.config import Config, read_run_config
from udcg.io import contexts
from udcg.io.files import atomic_write_bytes, atomic_write_text, check_output_path, iter_jsonl, read_json
from udcg.metrics.udcg import VARIANTS
from udcg.io.tables import Table
from udcg.records import ContextRecord

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta

DATA = "data"
CONTEXTS, POOLS, ANNOTATIONS, NOTES, PER_QUESTION = (
    "contexts.jsonl.gz", "pools.jsonl.gz", "annotations.jsonl.gz", "notes.json", "per-question.jsonl.gz")
RULE_GRADES_NOTE = ("RA-nWG and the other set-based metrics are left out of the correlation tables: with rule grades "
                    "(relevant -> 5, else 2) RA-nWG@k = P@k * k / min(k, relevant passages in the pool), a linear "
                    "function of P within a question, so its per-question correlations repeat P's and add no evidence. "
                    "They are still computed for every context (data/contexts.jsonl.gz).")
POWER_TABLE = "table3-all-power"
POWER_NOTE = ("How to read it: the paired test (two-sided, α 0.05) on a metric's n_usable questions detects a true gap "
              "of min_detectable_diff between its mean per-question rho and {baseline}'s four times in five, and a "
              "smaller gap less often, so a p above 0.05 in Table 3 (all questions) does not show that the two metrics are "
              "equal.")
CIRCULAR_NOTE = ("At k = 1 UDCG, UDCG_theta, ANSWER_PROB and eRAG are circular: a one-passage context is the very prompt "
                 "that gave the passage's p_abs (UDCG's utilities), answer likelihood (ANSWER_PROB) and answer (eRAG), "
                 "so their values there (marked circular, never best, outside the Holm correction) are no evidence.")


# ---------------------------------------------------------------- data files


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def gzip_bytes(data: bytes) -> bytes:
    """gzip with a fixed header (no file name, mtime 0): the same input gives the same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def write_jsonl_gz(path: Path, rows: Iterable[object]) -> None:
    atomic_write_bytes(path, gzip_bytes("".join(_dumps(r) + "\n" for r in rows).encode("utf-8")))


REBUILD = "the file was edited or damaged: rerun udcg validate on the run folder, its caches make that cheap"


def read_jsonl_gz(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) of a gzipped JSONL data file, through the size-bounded line stream (a gzip
    that inflates past its limit stops there) with file:line errors."""
    if not path.is_file():
        raise InputError(f"{path}: missing (a run folder written by udcg validate since the data/ folder existed; "
                         "rerun udcg validate on it, its caches make that cheap)")
    return list(iter_jsonl(path))


def read_notes(path: Path) -> dict:
    """``data/notes.json``, checked for what the report reads: the pool statistics, the grading, the
    grades and the UDCG_theta models (``{"k5": ["full", ...]}``)."""
    if not path.is_file():
        raise InputError(f"{path}: missing (not a udcg validate run folder with its data/, "
                         "or one written before data/ existed: rerun udcg validate on it)")
    notes = read_json(path)
    if not isinstance(notes, dict):
        raise InputError(f"{path}: expected a JSON object of notes, got {type(notes).__name__} ({REBUILD})")
    for key, kind, name in (("pool_stats", dict, "an object"), ("grading", str, "a string"), ("grades", dict, "an object"),
                            ("theta", dict, "an object")):
        if not isinstance(notes.get(key, {} if key == "theta" else None), kind):
            raise InputError(f"{path}: field {key!r} is missing or not {name} ({REBUILD})")
    if not isinstance(notes["pool_stats"].get("questions"), int):
        raise InputError(f"{path}: field 'pool_stats.questions' is missing or not an integer ({REBUILD})")
    for key, variants in notes.get("theta", {}).items():
        if not re.fullmatch(r"k[1-9][0-9]{0,5}", key) or not isinstance(variants, list) or \
                not all(v in VARIANTS for v in variants):
            raise InputError(f"{path}: field 'theta' holds {key[:40]!r}: {str(variants)[:80]} (expected k<number>: "
                             f"a list of {', '.join(VARIANTS)}; {REBUILD})")
    return notes


def finite(obj):
    """NaN -> None, recursively (JSON has no NaN); tuples become lists."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return None if isinstance(obj, float) and obj != obj else obj


def write_data(run_dir: Path, groups: dict[str, list[dict]], notes: dict) -> dict:
    """Write ``data/`` (module docstring) except the per-question values; returns the notes as
    stored (JSON-normalised), which is what the report is built from."""
    data = run_dir / DATA
    write_jsonl_gz(data / CONTEXTS, (r for records in groups.values() for r in records))
    for name, plain in ((POOLS, "pools.jsonl"), (ANNOTATIONS, "annotations.jsonl")):
        atomic_write_bytes(data / name, gzip_bytes((run_dir / plain).read_bytes()))
    stored = json.loads(json.dumps(finite(notes), ensure_ascii=False, allow_nan=False))
    atomic_write_text(data / NOTES, json.dumps(stored, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return stored


def read_groups(run_dir: Path) -> dict[str, list[ContextRecord]]:
    """{study: [context records]} from ``data/contexts.jsonl.gz``, in the order they were written."""
    groups: dict[str, list[ContextRecord]] = {}
    for line_no, r in read_jsonl_gz(run_dir / DATA / CONTEXTS):
        record = contexts.from_json(r, f"{run_dir / DATA / CONTEXTS}:{line_no}")
        groups.setdefault(record.study or "main", []).append(record)
    return groups


def read_per_question(run_dir: Path, table: str) -> list[dict]:
    """The rows of ``data/per-question.jsonl.gz`` for one correlation table (``table3-all``, ``table3``, ...)."""
    path = Path(run_dir) / DATA / PER_QUESTION
    rows = [r for _, r in read_jsonl_gz(path) if r.get("table") == table]
    if not rows or not all(isinstance(r.get("metric"), str) and isinstance(r.get("qid"), str) for r in rows):
        raise InputError(f"{path}: no per-question values of table {table!r}, or a row without its metric and qid "
                         f"({REBUILD})")
    return rows


def question_order(run_dir: Path) -> list[str]:
    """The run's question ids in the order they were selected (``data/pools.jsonl.gz``'s): a run grown
    to a larger ``data.limit`` keeps the smaller run's questions first."""
    return [str(r.get("example_id")) for _, r in read_jsonl_gz(Path(run_dir) / DATA / POOLS)]


def read_thetas(run_dir: Path, notes: dict) -> dict[int, dict[str, UDCGTheta]]:
    """The fitted UDCG_theta models the run used (``notes["theta"]`` names them), by k and variant."""
    out: dict[int, dict[str, UDCGTheta]] = {}
    for key, variants in notes.get("theta", {}).items():
        k = int(key[1:])
        out[k] = {v: load_theta(run_dir / "theta" / f"{v}-k{k}.json") for v in VARIANTS if v in variants}
    return out


# ---------------------------------------------------------------- tables


def correlated_names(cfg: Config) -> tuple[list[str], list[str]]:
    """(metrics of the correlation tables, metrics left out): set-based metrics are left out when
    their grades come from the relevance rule (``RULE_GRADES_NOTE``)."""
    from udcg.metrics.contexts import parse_metric
    from udcg.metrics.setbased import SETBASED

    names = list(cfg.metrics.names)
    if cfg.metrics.grades != "rules":
        return names, []
    dropped = [n for n in names if parse_metric(n).family in SETBASED]
    return [n for n in names if n not in dropped], dropped


def build_tables(cfg: Config, groups: dict[str, list[ContextRecord]], notes: dict, thetas: dict[int, dict[str, UDCGTheta]]
                 ) -> tuple[dict[str, Table], list[dict]]:
    """Every table of the report, and the per-question values behind the correlation tables."""
    m = cfg.metrics
    names, dropped = correlated_names(cfg)
    if dropped:
        notes["dropped_from_correlation"] = {"metrics": dropped, "why": RULE_GRADES_NOTE}
    test = [r for r in groups["main"] if r.split == "test"]
    corr = notes.setdefault("correlation", {})
    tables: dict[str, Table] = {}
    per_question: list[dict] = []

    in_sample = ["UDCG_theta"] if notes.get("theta_in_sample", {}).get("in_sample") else []

    def corr_table(key, records, metric_names, title, baseline=m.baseline):
        tables[key], corr[key] = studies.correlate_records(records, metric_names, baseline, m.constant_metric, m.n_boot,
                                                   cfg.seed, title, in_sample)
        per_question.extend({"table": key, **row} for row in studies.per_question_rows(records, metric_names,
                                                                                       m.constant_metric))

    k = cfg.contexts.k
    corr_table("table3", test, names, f"Table 3: correlation with answer outcomes, k = {k}, test questions")
    corr_table("table3-all", groups["main"], [n for n in names if n != "UDCG_theta"],
               f"Table 3 (all questions, no UDCG_theta), k = {k}")
    all_rows = [r for r in per_question if r["table"] == "table3-all"]
    if m.baseline in {r["metric"] for r in all_rows}:
        shown = tables["table3-all"].rows
        tables[POWER_TABLE] = paired.power_table(
            all_rows, m.baseline, [r["metric"] for r in shown],
            f"Power of Table 3 (all questions): per-question rho of each metric against {m.baseline}, paired "
            f"(diff = metric - {m.baseline}); smallest true difference detected with {paired.POWER:.0%} power, "
            f"two-sided α {paired.ALPHA}", circular=[r["metric"] for r in shown if r.get("circular") == "yes"])
    corr_table("table4", test, ["UDCG_theta", *studies.ABLATIONS[:2], "UDCG", studies.ABLATIONS[2]],
               f"Table 4: ablation, k = {k}, test questions", baseline="UDCG")
    if cfg.studies.k_values:
        per_k = {}
        for kk in cfg.studies.k_values:
            key = f"k{kk}"
            records = [r for r in (groups["main"] if kk == k else groups[key]) if r.split == "test"]
            per_k[kk], corr[key] = studies.correlate_records(records, names, m.baseline, m.constant_metric, m.n_boot, cfg.seed,
                                                     f"k = {kk}", in_sample)
            per_question.extend({"table": key, **row} for row in studies.per_question_rows(records, names,
                                                                                           m.constant_metric))
        tables["fig2-k"] = studies.k_sweep_table(per_k)
    if cfg.studies.positions:
        tables["fig1-positions"] = studies.position_table(groups["positions"], k)
    if cfg.studies.oracle:
        tables["table2-oracle"] = studies.oracle_table(groups["oracle"], min(cfg.studies.oracle_k, cfg.pool.size))
    models = {f"{v}-k{kk}": model for kk, by_variant in sorted(thetas.items()) for v, model in by_variant.items()}
    if models:
        tables["theta-weights"] = studies.theta_weights_table(models)
        cv = studies.theta_cv_table(models)
        if cv.rows:
            tables["theta-cv"] = cv
    return tables, per_question


# ---------------------------------------------------------------- report


def _header(cfg: Config, notes: dict) -> list[str]:
    from_run = cfg.theta.from_run
    theta = (f"loaded from {from_run}" if from_run else
             f"trained on {cfg.theta.train_share:.0%} of the questions, C "
             + ("chosen by cross-validation grouped by question (table theta-cv)" if cfg.theta.C == "auto"
                else f"= {cfg.theta.C}") + ", features standardised")
    return [f"# udcg validate: {cfg.name}", "",
            f"Reader `{cfg.reader.model}` (prompt {cfg.reader.prompt_version}, p_abs {cfg.annotation.estimator}); "
            f"data `{Path(cfg.data.questions).name}`, {notes['pool_stats']['questions']} questions; pool "
            f"{cfg.pool.source} top-{cfg.pool.size} (relevance {cfg.pool.relevance_judge or cfg.pool.relevance}); "
            f"contexts k = {cfg.contexts.k}, {cfg.contexts.n_contexts} per question, balance {cfg.contexts.balance}, "
            f"passages in {cfg.contexts.order} order; outcomes by {notes['grading']}; seed {cfg.seed}.", "",
            f"UDCG_theta: {theta}; Table 3 and the k sweep use the other (test) questions. nDCG/AP use n_relevant = "
            f"{cfg.metrics.n_relevant}. eRAG scores single-passage answers by {cfg.metrics.erag_score}; ANSWER_PROB = "
            f"mean log P(first reference answer | passage); RA-nWG grades: {notes['grades']['mapping'] or 'not computed'}. "
            "Correlation statistics per question: Spearman's rho (the paper's), Kendall's tau-b, and the pairwise "
            "ordering accuracy over context pairs with different outcomes (metric ties count half; tie-neutral); each "
            "is averaged over the questions where it is defined, with a 95% bootstrap interval and a paired sign-flip "
            "permutation test against the baseline, raw and Holm-corrected within the table; best (*) marks the highest "
            "mean only where those Holm-corrected tests (α 0.05) tell it apart from every other metric. NA metric values are NaN, "
            "never 0: a question with one has no value for that metric (na_metric).", ""]


def verdict(cfg: Config, tables: dict[str, Table]) -> str:
    """The report's first sentence: what Table 3 over all questions can and cannot tell, from its
    Holm-corrected paired tests against the baseline and the smallest gap its questions could detect."""
    from udcg.flows.correlate import ALPHA

    base, table, power = cfg.metrics.baseline, tables.get("table3-all"), tables.get(POWER_TABLE)
    rows = [r for r in (table.rows if table else []) if r.get("circular") != "yes" and r["metric"] != base]
    if not rows or base not in {r["metric"] for r in table.rows}:
        return f"No metric can be compared with {base}: there are no graded contexts with different outcomes to correlate."
    usable = max((r["n_usable"] for r in power.rows), default=0) if power else 0
    gaps = [r["min_detectable_diff"] for r in (power.rows if power else []) if _finite(r["min_detectable_diff"])]
    gap = f"the smallest ρ gap these questions could detect (80% power) is {min(gaps):.2f}" if gaps else \
        "too few questions vary in outcome to detect any gap"
    sig = [r for r in rows if _finite(r["p_holm"]) and r["p_holm"] < ALPHA]
    if not sig:
        return (f"No metric can be told apart from {base} at this size: on {usable} usable questions every Holm-corrected "
                f"p is at least {ALPHA}, and {gap}.")
    above = [r["metric"] for r in sig if r["diff_vs_baseline"] > 0]
    below = [r["metric"] for r in sig if r["diff_vs_baseline"] < 0]
    said = ([f"{', '.join(above)} follow{'s' if len(above) == 1 else ''} answer accuracy better than {base}"] if above else []) + \
           ([f"{base} follows answer accuracy better than {', '.join(below)}"] if below else [])
    rest = [r["metric"] for r in rows if r not in sig]
    tail = f", and {', '.join(rest)} cannot be told apart from it: {gap}" if rest else ""
    return f"{' and '.join(said)} (Holm-corrected p < {ALPHA}, {usable} usable questions){tail}."


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def theta_lines(cfg: Config, tables: dict[str, Table], notes: dict) -> list[str]:
    """Why UDCG_theta is missing from Table 3, or why it is flagged in-sample."""
    lines = []
    shown = {r["metric"] for r in tables["table3"].rows} if "table3" in tables else set()
    if "UDCG_theta" in cfg.metrics.names and "UDCG_theta" not in shown:
        why = notes.get("theta_unfitted", {}).get(f"full-k{cfg.contexts.k}") or "no model was fitted on the training questions"
        lines += [f"_UDCG_theta has no row in Table 3: it could not be fitted ({why})._", ""]
    sample = notes.get("theta_in_sample") or {}
    if sample.get("in_sample"):
        lines += [f"_UDCG_theta was loaded from {cfg.theta.from_run} and is in-sample ({sample.get('why')}): it is "
                  "marked circular, never best, and left out of the Holm correction._", ""]
    return lines


def write_report(cfg: Config, out_dir: Path, tables: dict[str, Table], notes: dict) -> None:
    """Tables (.md, .csv, .json), figures, summary.json and report.md into ``out_dir``."""
    from udcg.experiment import plots

    for name, table in tables.items():
        for suffix in (".md", ".csv", ".json"):
            table.write(out_dir / "tables" / f"{name}{suffix}")
    figures = []
    if "fig2-k" in tables and tables["fig2-k"].rows:
        plots.plot_k_sweep(tables["fig2-k"], out_dir / "figures" / "fig2-k.png", f"{cfg.name}: correlation against k")
        figures.append(("fig2-k", "Fig. 2: correlation against k (hollow red ring: circular)"))
    if "fig1-positions" in tables and any(r["n_questions"] for r in tables["fig1-positions"].rows):
        plots.plot_positions(tables["fig1-positions"], out_dir / "figures" / "fig1-positions.png", f"{cfg.name}: positions")
        figures.append(("fig1-positions", "Fig. 1: one relevant passage moved through the positions"))
    weights = tables.get("theta-weights")
    main_k = [m for m in dict.fromkeys(r["model"] for r in weights.rows) if m.endswith(f"-k{cfg.contexts.k}")] if weights else []
    if main_k:
        shown = Table(weights.columns, [r for r in weights.rows if r["model"] in main_k], weights.title)
        plots.plot_theta_weights(shown, out_dir / "figures" / "theta-weights.png",
                                 f"{cfg.name}: UDCG_θ weights per position, k = {cfg.contexts.k}")
        figures.append(("theta-weights", "UDCG_theta weights per position"))
    notes = finite(notes)
    summary = {"name": cfg.name, "reader": cfg.reader.model, "verdict": verdict(cfg, tables), "notes": notes,
               "tables": {name: t.records() for name, t in tables.items()}}
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    lines = _header(cfg, notes)
    lines[1:1] = ["", f"**Verdict.** {verdict(cfg, tables)}"]
    lines += theta_lines(cfg, tables, notes)
    if "p_abs_censored" in notes:
        c = notes["p_abs_censored"]
        lines += [f"_p_abs censored for {c['pairs']} of {c['of']} passages ({c['pairs'] / c['of']:.1%}): {c['why']}; "
                  f"{c['fix']}._", ""]
    if "dropped_from_correlation" in notes:
        lines += [f"_{notes['dropped_from_correlation']['why']}_", ""]
    if any(r.get("circular") for t in tables.values() for r in t.rows):
        lines += [f"_{CIRCULAR_NOTE}_", ""]
    for name, table in tables.items():
        if name == "fig2-k":
            lines += [studies.pivot_k(table, value).markdown(3) for value in studies.K_SWEEP_STATISTICS]
        else:
            lines += [table.markdown(3)]
        if name == POWER_TABLE:
            lines += [f"_{POWER_NOTE.format(baseline=cfg.metrics.baseline)}_", ""]
        if name in notes.get("correlation", {}):
            n = notes["correlation"][name]
            lines += [f"_{n['questions']} questions, {n['contexts']} graded contexts, {n['ungraded_contexts']} ungraded, "
                      f"{n['na_values']} NA metric values (left out, never scored 0)._", ""]
    lines += [f"![{title}](figures/{fig}.png)\n" for fig, title in figures]
    lines += ["## Notes", "", "```json", json.dumps({k: v for k, v in notes.items() if k != "correlation"}, indent=2), "```", ""]
    atomic_write_text(out_dir / "report.md", "\n".join(lines))


def report(run_dir: str | Path, out_dir: str | Path | None = None, cfg: Config | None = None
           ) -> tuple[dict[str, Table], dict, list[dict]]:
    """Rebuild the report of ``run_dir`` from its ``config.yaml``, ``data/`` and ``theta/`` into
    ``out_dir`` (default: ``run_dir``). Returns the tables, the notes and the per-question values."""
    run_dir = Path(run_dir)
    out_dir = check_output_path(out_dir, "-o", folder=True) if out_dir is not None else run_dir
    if cfg is None:
        cfg = read_run_config(run_dir / "config.yaml")
    notes = read_notes(run_dir / DATA / NOTES)
    groups = read_groups(run_dir)
    studies_needed = ["main", *(f"k{kk}" for kk in cfg.studies.k_values if kk != cfg.contexts.k),
                      *(["positions"] if cfg.studies.positions else []), *(["oracle"] if cfg.studies.oracle else [])]
    missing = [s for s in studies_needed if s not in groups]
    if missing:
        raise InputError(f"{run_dir / DATA / CONTEXTS}: no contexts of study {missing[0]!r}, which config.yaml asks for "
                         f"({REBUILD})")
    tables, per_question = build_tables(cfg, groups, notes, read_thetas(run_dir, notes))
    write_report(cfg, out_dir, tables, notes)
    return tables, notes, per_question


def write_per_question(run_dir: Path, per_question: list[dict]) -> None:
    write_jsonl_gz(run_dir / DATA / PER_QUESTION, finite(per_question))
