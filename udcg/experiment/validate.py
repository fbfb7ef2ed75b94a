"""``udcg validate``: the paper's end-to-end experiment, resumable, from one config.

Steps (each writes its records into the run folder; model work goes through the one resumable
runner, ``udcg.resumable``, and caches under ``cache/``, so a killed run restarts without recomputing
finished chunks; every model step, the reader's and the LLM judges', is cut into chunks of
``reader.chunk_size`` requests, and ``reader.batch_size`` is the reader's prompts per forward pass):

1. pools       candidate pools per question (data set ranking, BM25 or dense) + relevance
2. passages    p_abs of every pooled passage alone (annotation), its single-passage answer
               (eRAG), log P(reference | passage) (ANSWER_PROB), its 5-point grade (RA-nWG)
3. contexts    balanced contexts (§7.2) + the studies' contexts (k sweep, positions, oracle)
4. answers     one greedy answer per distinct context
5. outcomes    correct / abstained / wrong
6. metrics     every metric on every context; UDCG_theta trained on the train questions
7. report      Tables 3, 4, 2, Figs. 1, 2 (Markdown, CSV, JSON, PNG) + report.md

Run folder::

    config.yaml           the resolved config          run.json     versions, counts, timings
    pools.jsonl           pools (authors' format)      annotations.jsonl   per (qid, pid) scores
    contexts.jsonl        main contexts (contexts-file format: utilities, outcome, metrics)
    studies/k{K}.jsonl, studies/positions.jsonl, studies/oracle.jsonl
    answers.jsonl         every context answer with its outcome
    theta/{variant}-k{K}.json   fitted UDCG_theta models (C, validation curve, scaler)
    data/*.jsonl.gz, data/notes.json   the per-context / per-passage data the report is built from
                          (``udcg.experiment.reporting``; ``udcg report RUN`` rebuilds it, no model)
    tables/*.{md,csv,json}  figures/*.png  report.md  summary.json
    cache/                resumable model work

``config.yaml`` holds paths relative to the repository root (``udcg.experiment.config.portable``).
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from udcg.annotate.estimators import CENSORED_FIX, CENSORED_NOTE
from udcg.flows.theta import load_theta, save_theta
from udcg.errors import InputError
from udcg.version import __version__
from udcg.experiment import context_records, judging, questions, reporting, steps, studies
from udcg.flows import reading
from udcg.experiment.config import Config, exact_needs, portable, read_run_config, to_yaml
from udcg.io import contexts
from udcg.io.files import atomic_write_json, atomic_write_jsonl, atomic_write_text
from udcg.llm.lazy import LazyBackend
from udcg.llm.registry import API_ONLY, ModelChoice, ModelSpec, where_it_goes
from udcg.metrics.constants import VARIANTS
from udcg.records import ContextRecord, Question
from udcg.io.tables import Table

SETBASED = ("RA-nWG", "PROC", "%PROC", "N-Recall4+", "N-Recall5", "Precision4+", "Harm")


class _Quiet:
    def __init__(self, *args: object) -> None: ...
    def __enter__(self) -> _Quiet: return self
    def __exit__(self, *exc: object) -> None: ...
    def update(self, n: int = 1) -> None: ...


@dataclass
class RunResult:
    run_dir: Path
    tables: dict[str, Table]
    notes: dict
    timings: dict = field(default_factory=dict)

    @property
    def table3(self) -> Table:
        return self.tables["table3"]


class _Timer:
    def __init__(self) -> None:
        self.steps: dict[str, dict] = {}

    @contextlib.contextmanager
    def step(self, name: str):
        t0 = time.perf_counter()
        self.steps[name] = {}
        yield self.steps[name]
        self.steps[name]["seconds"] = round(time.perf_counter() - t0, 3)


class _Models:
    """The reader (``spec``, resolved once) and any judge models, each loaded lazily once (a judge
    that names the reader's model shares it)."""

    def __init__(self, cfg: Config, given: dict | None = None, spec: ModelSpec | None = None) -> None:
        r = cfg.reader
        self._others = dict(given or {})
        # the config's device and dtype hold for a local model; an API model (openai:MODEL) leaves them out,
        # and takes the reader's API settings (a judge too, where it is an API model)
        self._local = {"device": r.device, "dtype": r.dtype,
                       **{k: v for k, v in reader_choice(cfg).options().items() if k in API_ONLY}}
        if r.model not in self._others:
            self._others[r.model] = LazyBackend(spec or reader_spec(cfg), threads=r.threads)
        self.reader = self._others[r.model]
        self._threads = r.threads

    def judge(self, model: str | None):
        if model in (None, "rules"):
            return None
        if model not in self._others:
            self._others[model] = LazyBackend(ModelChoice(model).spec(defaults=self._local), threads=self._threads)
        return self._others[model]

    def load_seconds(self) -> dict[str, float]:
        return {m: round(b.load_seconds, 3) for m, b in self._others.items() if getattr(b, "load_seconds", 0)}


def reader_choice(cfg: Config) -> ModelChoice:
    """The config's ``reader:`` model and its options, the same value as the commands' model flags
    (its device and dtype are defaults: ``reader_spec``)."""
    r = cfg.reader
    return ModelChoice(r.model, batch_size=r.batch_size, api_base=r.api_base, api_key_env=r.api_key_env,
                       concurrency=r.concurrency, rpm=r.rpm, timeout=r.timeout, max_retries=r.max_retries,
                       tokenizer=r.tokenizer, scoring=r.scoring)


def reader_spec(cfg: Config) -> ModelSpec:
    """The reader resolved (a model name with ``reader.api_base`` is the model that server serves; an
    ``openai:`` model's server settled once, ``ModelSpec.settled``: refused here without one or a key)."""
    return reader_choice(cfg).spec(defaults={"device": cfg.reader.device, "dtype": cfg.reader.dtype}).settled()


def check_reader_can(cfg: Config, reader) -> None:
    """Before any model work: an API reader asked for what only exact scoring gives (ANSWER_PROB,
    the sequence estimator) must reach a server that scores text; else an ``InputError`` naming the
    metric and the fix. (``reader.scoring: top-logprobs`` is refused at config load already.)"""
    needs = exact_needs(cfg)
    if not needs or not reader.api or reader.can_read():  # can_read: its server scores text
        return
    why = reader.notes.get("scoring", "its backend cannot score given text")
    raise InputError(f"{needs[0]}, which reader {cfg.reader.model!r} cannot give: {why}. Drop it from the config "
                     "(e.g. --set metrics.names=[UDCG,UDCG_theta,nDCG,RR,AP,P,Success,eRAG]) or serve the reader where "
                     "it scores text (vLLM, SGLang, udcg serve) and give reader.tokenizer if its name is no tokenizer")


def reader_line(reader: Config | ModelSpec) -> str:
    """Where the reader (of a config, or resolved: ``reader_spec``) runs, in one line
    (``udcg.llm.registry.where_it_goes``): an API reader names its server; one without a server or
    key is refused (``InputError``)."""
    return where_it_goes(reader if isinstance(reader, ModelSpec) else reader_spec(reader))


def run_validation(cfg: Config, progress: reading.Progress | None = None, backends: dict | None = None,
                   reader: ModelSpec | None = None) -> RunResult:
    """Run (or resume) the experiment of ``cfg`` in ``cfg.output``; returns the tables.
    ``progress(total, desc, unit)``: a progress-bar factory (e.g. ``udcg.progress.bar``).
    ``backends``: already loaded backends by model name (default: loaded on first use); ``reader``:
    the reader already resolved (``reader_spec(cfg)``; default: resolved here)."""
    progress = progress or _Quiet
    models = _Models(cfg, backends, reader)  # a model whose packages are missing fails here, before the run folder
    check_reader_can(cfg, models.reader)  # so does a metric the reader cannot give
    run_dir = Path(cfg.output)
    run_dir.mkdir(parents=True, exist_ok=True)
    published = portable(cfg)
    atomic_write_text(run_dir / "config.yaml", to_yaml(published))
    timer = _Timer()
    notes: dict = {}
    t_start = time.perf_counter()

    with timer.step("pools") as t:
        pooled, notes["pool_stats"] = questions.cached_pools(cfg, run_dir)
        if cfg.pool.relevance_judge:
            pooled, notes["relevance_unparseable_kept_rule_label"] = judging.judge_relevance(
                pooled, models.judge(cfg.pool.relevance_judge), cfg, run_dir, progress)
        atomic_write_jsonl(run_dir / "pools.jsonl", [questions.pool_record(q) for q in pooled])
        t["questions"] = len(pooled)
    by_qid = {q.qid: q for q in pooled}

    with timer.step("passages") as t:
        scores, single_keys, notes["grades"] = _passage_scores(cfg, pooled, models, run_dir, progress, t)
        if t.get("p_abs_censored"):
            notes["p_abs_censored"] = {"pairs": t["p_abs_censored"], "of": sum(len(q.passages) for q in pooled),
                                       "why": CENSORED_NOTE, "fix": CENSORED_FIX}

    with timer.step("contexts"):
        if cfg.theta.from_run:
            notes["theta_in_sample"] = studies.theta_in_sample(Path(cfg.theta.from_run), [q.qid for q in pooled])
        split = studies.split_questions([q.qid for q in pooled], 0.0 if cfg.theta.from_run else cfg.theta.train_share, cfg.seed)
        groups, notes["contexts"] = _build_contexts(cfg, pooled, scores, split)

    with timer.step("answers") as t:
        keys = list(dict.fromkeys(reading.context_key(r.qid, r.docids) for rs in groups.values() for r in rs))
        # a question's contexts batched together, in question order (as the published runs were answered)
        rank = {q.qid: i for i, q in enumerate(pooled)}
        pending = sorted((k for k in keys if k not in single_keys), key=lambda k: rank[reading.split_context_key(k)[0]])
        requests = steps.context_requests(by_qid, pending, cfg)
        answers, t["generate"] = reading.generate_cached(models.reader, requests, run_dir / "cache" / "answers.jsonl",
                                                       cfg.reader.max_new_tokens, cfg.reader.prompt_version,
                                                       cfg.reader.chunk_size, progress, "answer contexts")
        answers.update({k: single_keys[k] for k in keys if k in single_keys})

    with timer.step("outcomes"):
        items = judging.answer_items(by_qid, keys, answers)
        outcomes, notes["grading"] = judging.grade_answers(items, models.judge(cfg.grading.judge), cfg, run_dir, progress)
        groups = {name: [context_records.answered(r, answers[key], outcomes[key].label, outcomes[key].note)
                         for r in rs for key in [reading.context_key(r.qid, r.docids)]] for name, rs in groups.items()}
        atomic_write_jsonl(run_dir / "answers.jsonl", [
            {"qid": reading.split_context_key(k)[0], "pids": reading.split_context_key(k)[1], "answer": answers[k], "outcome": outcomes[k].label,
             **({"note": outcomes[k].note} if outcomes[k].note else {})} for k in keys])

    with timer.step("metrics"):
        groups = _metrics(cfg, groups, run_dir, notes)
        lines = {name: [contexts.to_json(r) for r in rs] for name, rs in groups.items()}
        _write_contexts(run_dir, lines)

    with timer.step("report"):  # from the data as written, as `udcg report` rebuilds it
        reporting.write_data(run_dir, lines, notes)
        tables, notes, per_question = reporting.report(run_dir, run_dir, published)
        reporting.write_per_question(run_dir, per_question)

    timings = {"steps": timer.steps, "model_load_seconds": models.load_seconds(),
               "total_seconds": round(time.perf_counter() - t_start, 3)}
    atomic_write_json(run_dir / "run.json", {"udcg_version": __version__, "python": platform.python_version(),
                                            "reader": models.reader.name, "timings": timings})
    return RunResult(run_dir, tables, notes, timings)


def refit_theta(run_dir: str | Path) -> RunResult:
    """Steps 6 and 7 again on a run folder's published data alone (no model, no data set, no cache):
    UDCG_theta refitted on the train questions by the current code (``theta/*.json``), every
    context rescored (``data/contexts.jsonl.gz``), the models named in ``data/notes.json`` and the
    report rebuilt (``reporting.report``, as ``udcg report`` does). Brings a published run to a new
    fitting rule deterministically; ``run.json`` (the original run's timings) is left as it was."""
    run_dir = Path(run_dir)
    data = run_dir / reporting.DATA
    cfg = read_run_config(run_dir / "config.yaml")
    notes = reporting.read_notes(data / reporting.NOTES)
    groups = _metrics(cfg, reporting.read_groups(run_dir), run_dir, notes)
    reporting.write_jsonl_gz(data / reporting.CONTEXTS, (contexts.to_json(r) for rs in groups.values() for r in rs))
    stored = json.loads(json.dumps(reporting.finite(notes), ensure_ascii=False, allow_nan=False))  # as write_data stores them
    atomic_write_text(data / reporting.NOTES, json.dumps(stored, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    tables, notes, per_question = reporting.report(run_dir, run_dir, cfg)
    reporting.write_per_question(run_dir, per_question)
    return RunResult(run_dir, tables, notes)


# ---------------------------------------------------------------- step bodies


def _passage_scores(cfg: Config, pooled: list[Question], models: _Models, run_dir: Path, progress, t: dict):
    from udcg.grade import rules
    from udcg.text import contains_answer

    names = {n.split("@")[0] for n in cfg.metrics.names}
    need_single = "eRAG" in names or cfg.studies.oracle or 1 in cfg.studies.k_values
    if need_single:  # one prompt pass per passage for all three values, where the reader can
        read = steps.read_passages(pooled, models.reader, cfg, run_dir, progress, loglik="ANSWER_PROB" in names)
        if read is not None:
            t["read"] = read
    annotations, t["annotate"] = steps.annotate_pools(pooled, models.reader, cfg, run_dir, progress)
    single: dict[str, str] = {}
    if need_single:
        requests = [(reading.context_key(q.qid, [p.docid]), steps.passage_chat(q, [p.text], cfg)) for q in pooled for p in q.passages]
        single, t["generate_single"] = reading.generate_cached(models.reader, requests, run_dir / "cache" / "answers.jsonl",
                                                             cfg.reader.max_new_tokens, cfg.reader.prompt_version,
                                                             cfg.reader.chunk_size, progress, "answer single passages")
    loglik: dict[str, float] = {}
    if "ANSWER_PROB" in names:
        requests = [(reading.context_key(q.qid, [p.docid]), steps.passage_chat(q, [p.text], cfg), q.answers[0])
                    for q in pooled if q.answers for p in q.passages]
        loglik, t["answer_ll"] = reading.loglik_cached(models.reader, requests, run_dir / "cache" / "answer-ll.jsonl",
                                                     cfg.reader.prompt_version, cfg.reader.chunk_size, progress)
    grades, grade_note = ({}, "")
    if names & set(SETBASED):
        grades, grade_note = judging.grade_passages(pooled, models.judge(cfg.metrics.grades), cfg, run_dir, progress)
    scores: dict[str, dict[str, context_records.PassageScore]] = {}
    rows = []
    for q in pooled:
        scores[q.qid] = {}
        for rank, p in enumerate(q.passages, start=1):
            key = reading.context_key(q.qid, [p.docid])
            answer = single.get(key)
            erag = None
            if answer is not None:
                erag = (rules.token_f1(answer, q.answers) if cfg.metrics.erag_score == "f1"
                        else float(rules.answer_outcome(answer, q.answers, "contains") == "correct"))
            a = annotations[f"{q.qid}\t{p.docid}"]
            s = context_records.PassageScore(relevant=bool(p.relevant), p_abs=a.p_abs,
                                             contains=contains_answer(p.text, q.answers), grade=grades.get((q.qid, p.docid)),
                                             erag=erag, answer_ll=loglik.get(key))
            scores[q.qid][p.docid] = s
            rows.append({"qid": q.qid, "pid": p.docid, "rank": rank, "relevant": s.relevant, "p_abs": s.p_abs,
                         "utility": s.utility, "contains": s.contains, "grade": s.grade, "answer": answer,
                         "erag": s.erag, "answer_ll": s.answer_ll, "estimator_used": a.estimator_used or a.estimator,
                         **({"censored": True, "p_abs_bound": a.ci_high} if a.censored else {})})
    atomic_write_jsonl(run_dir / "annotations.jsonl", rows)
    n_ungraded = sum(r["grade"] is None for r in rows) if grades else 0
    censored = sum(bool(r.get("censored")) for r in rows)
    if censored:  # counted in the notes (the report says it); the annotation step warned of it
        t["p_abs_censored"] = censored
    return scores, single, {"mapping": grade_note, "unparseable": n_ungraded}


def _build_contexts(cfg: Config, pooled: list[Question], scores: dict, split: dict[str, str]):
    """{study name: [context records]}: main, k{K} for the sweep's other k, positions, oracle."""
    from udcg.experiment.contexts import oracle_select, order_passages, position_contexts, sample_all_contexts

    c, size = cfg.contexts, cfg.pool.size
    notes = {}

    def records(contexts, study):
        out = []
        for ctx in contexts:
            q = by_qid[ctx.qid]
            grades = [scores[q.qid][p.docid].grade for p in q.passages]
            corpus = [grades.count(g) for g in range(1, 6)] if None not in grades else None
            n_rel = sum(scores[q.qid][p.docid].relevant for p in q.passages)
            out.append(context_records.context_record(q.qid, ctx.cid, study, split[q.qid], ctx.docids, scores[q.qid], n_rel,
                                                      corpus))
        return out

    by_qid = {q.qid: q for q in pooled}
    groups: dict[str, list[ContextRecord]] = {}
    main, notes["main"] = sample_all_contexts(pooled, k=c.k, n_contexts=c.n_contexts, pool_size=size, seed=cfg.seed, balance=c.balance)
    groups["main"] = records(order_passages(main, c.order, cfg.seed), "main")
    for k in sorted(set(cfg.studies.k_values) - {c.k}):
        ctxs, notes[f"k{k}"] = sample_all_contexts(pooled, k=k, n_contexts=c.n_contexts, pool_size=size, seed=cfg.seed,
                                                    balance=c.balance)
        ctxs = [type(x)(x.qid, f"{x.qid}:k{k}:{x.cid.rsplit(':', 1)[1]}", x.docids) for x in ctxs]
        groups[f"k{k}"] = records(order_passages(ctxs, c.order, cfg.seed), f"k{k}")
    if cfg.studies.positions:
        groups["positions"] = records([x for q in pooled for x in position_contexts(q, k=c.k, pool_size=size)], "positions")
        notes["positions"] = {"questions": len({r.qid for r in groups["positions"]})}
    if cfg.studies.oracle:
        ok = min(cfg.studies.oracle_k, size)
        selections = {"binary": lambda s: float(s.relevant), "erag": lambda s: s.erag, "utility": lambda s: s.utility}
        groups["oracle"] = records([oracle_select(q, {docid: f(s) for docid, s in scores[q.qid].items()}, k=ok, pool_size=size,
                                                  name=f"oracle-{name}", order="score")
                                    for name, f in selections.items() for q in pooled], "oracle")
    for n in notes.values():
        for key in ("no_relevant_in_pool", "too_few_irrelevant", "skipped"):
            if key in n:
                n[key] = len(n[key])
    return groups, notes


def _metrics(cfg: Config, groups: dict[str, list[ContextRecord]], run_dir: Path, notes: dict
             ) -> dict[str, list[ContextRecord]]:
    """Fit (or load) UDCG_theta per k on the train questions; every group scored."""
    from udcg.metrics.udcg_theta import UDCGTheta

    names = list(cfg.metrics.names)
    train_group = {cfg.contexts.k: "main", **{int(g[1:]): g for g in groups if g.startswith("k")}}
    thetas: dict[int, dict[str, UDCGTheta]] = {}
    unfitted: dict[str, str] = {}
    for k, group in sorted(train_group.items()):
        variants = VARIANTS if group == "main" else ("full",)
        thetas[k] = {}
        for v in variants:
            path = run_dir / "theta" / f"{v}-k{k}.json"
            if cfg.theta.from_run:
                source = Path(cfg.theta.from_run) / "theta" / f"{v}-k{k}.json"
                model = load_theta(source) if source.is_file() else None
                why = "" if model else f"no {source.name} in theta.from_run"
            else:
                model, why = studies.fit_theta_why([r for r in groups[group] if r.split == "train"], v, cfg.theta.C,
                                                   cfg.seed, cfg.theta.C_grid, cfg.theta.cv_folds, cfg.theta.cv_score)
            if model is None:
                unfitted[f"{v}-k{k}"] = why
                path.unlink(missing_ok=True)  # no stale model from an earlier run
            else:
                save_theta(model, path)
                thetas[k][v] = model
    notes["theta"] = {f"k{k}": sorted(t) for k, t in thetas.items()}
    notes["theta_C"] = {f"{v}-k{k}": m.C_ for k, t in thetas.items() for v, m in t.items()}
    if unfitted:
        notes["theta_unfitted"] = unfitted
    return {group: studies.score_each_k(records, names, cfg.metrics.gamma, cfg.metrics.n_relevant, thetas,
                                        ablations=(group == "main")) for group, records in groups.items()}


def _write_contexts(run_dir: Path, groups: dict[str, list[dict]]) -> None:
    """The contexts-file lines of every group: main in contexts.jsonl, the studies under studies/."""
    atomic_write_jsonl(run_dir / "contexts.jsonl", groups["main"])
    for name, records in groups.items():
        if name != "main":
            atomic_write_jsonl(run_dir / "studies" / f"{name}.jsonl", records)
