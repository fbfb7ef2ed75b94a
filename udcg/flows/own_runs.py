"""The everyday job on the user's own collection: annotate the documents their runs retrieve, once,
incrementally; build the reader contexts of their runs for answers, outcomes, UDCG_theta and
correlation.

Pairs of a set of runs: the union over runs of each query's top-``depth`` documents (trec_eval
order), listed query by query in order of first appearance. Relevance R of a pair comes from the
qrels where judged (grade > 0 is relevant); an unjudged pair follows an explicit policy:
``irrelevant`` (R = -1, the usual IR assumption), ``judge`` (the grader stage's relevance judge) or
``error``. Nothing is guessed silently: every output says how many pairs each source labelled.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from udcg.version import __version__
from udcg.annotate import utilities as store
from udcg.annotate.estimators import CENSORED_NOTE
from udcg.annotate.runner import (AnnotateConfig, annotate, annotation_key, cached_annotations, censored_warning, provenance,
                                  to_compute)
from udcg.io.beir import Collection
from udcg.errors import InputError
from udcg.io.files import read_json
from udcg.resumable import StepStats, open_cache
from udcg.records import Annotation, ContextRecord, Passage, Question, query_key
from udcg.flows.annotate_options import UNJUDGED, AnnotateOptions
from udcg.flows.reader_check import check_records, with_judge_command
from udcg.flows.label_checks import (containment_record, corpus_size, label_block, label_meta, merged_containment,
                                    run_label_check)
from udcg.metrics.labels import LabelCheck
from udcg.metrics.reader_check import ReaderCheck
from udcg.io.trec import ranked_docids

if TYPE_CHECKING:
    from udcg.flows.answer_options import AnswerOptions

log = logging.getLogger(__name__)

Run = Mapping[str, Mapping[str, float]]


def top_docids(run: Run, qid: str, depth: int) -> list[str]:
    return ranked_docids(run.get(qid, {}))[:depth]


def pooled_docids(runs: Mapping[str, Run], depth: int) -> dict[str, list[str]]:
    """{qid: docids}: the union of every run's top-``depth``, runs in order, then rank order."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"--depth {depth!r}: must be a positive integer (e.g. 10)")
    pairs: dict[str, dict[str, None]] = {}
    for run in runs.values():
        for qid in run:
            pairs.setdefault(qid, {}).update(dict.fromkeys(top_docids(run, qid, depth)))
    return {qid: list(docs) for qid, docs in pairs.items()}


def run_docids(runs: Mapping[str, Run], depth: int) -> set[str]:
    """The documents of the runs' top-``depth``: all a command reads from the corpus (annotate: its
    --depth; answer: --k, or the larger of --k and --depth with --subsets)."""
    return {docid for docids in pooled_docids(runs, depth).values() for docid in docids}


def _judge_unjudged(missing: list[tuple[str, str]], collection: Collection, judge, cache_path: Path,
                    progress: Callable[[int], None] | None) -> dict[tuple[str, str], tuple[bool, str]]:
    from udcg.grade.judges import PassageItem
    from udcg.grade.runner import check_answers, judge_items

    items = [PassageItem(qid=q, docid=d, question=collection.queries[q].text, answers=collection.queries[q].answers,
                         text=collection.corpus[d].text, title=collection.corpus[d].title) for q, d in missing]
    check_answers(items, judge.task, collection.source)
    records = judge_items(judge, items, cache_path, progress=progress)
    out = {}
    for (qid, docid), rec in zip(missing, records, strict=True):
        out[qid, docid] = (rec["label"] == "relevant", "judge" if rec["label"] is not None else "judge-unparseable")
    return out


def relevance(pairs: Mapping[str, Sequence[str]], collection: Collection, unjudged: str, *,
              judge_factory: Callable[[], object] | None = None, judge_cache: Path | None = None,
              progress: Callable[[int], None] | None = None) -> dict[tuple[str, str], tuple[bool, str]]:
    """(R, source) per pair: the qrels where judged, else the ``unjudged`` policy."""
    if unjudged not in UNJUDGED:
        raise InputError(f"--unjudged {unjudged!r}: choose one of {', '.join(UNJUDGED)}")
    out: dict[tuple[str, str], tuple[bool, str]] = {}
    missing = []
    for qid, docids in pairs.items():
        judged = collection.qrels.get(qid, {})
        for docid in docids:
            if docid in judged:
                out[qid, docid] = (judged[docid] > 0, "qrels")
            else:
                missing.append((qid, docid))
    if missing and unjudged == "error":
        qid, docid = missing[0]
        raise InputError(f"{collection.source}: {len(missing)} retrieved pair(s) have no qrels judgement (first: query "
                         f"{qid!r}, document {docid!r}); choose --unjudged irrelevant (count them as not relevant) "
                         "or --unjudged judge (ask the relevance judge)")
    if missing and unjudged == "irrelevant":
        out.update({pair: (False, "unjudged-irrelevant") for pair in missing})
    elif missing:
        if judge_factory is None or judge_cache is None:
            raise InputError("--unjudged judge needs a judge (--judge rules or --judge MODEL)")
        out.update(_judge_unjudged(missing, collection, judge_factory(), judge_cache, progress))
    return out


@dataclass
class AnnotateRunsReport:
    pairs: int = 0  # pairs of this call's runs
    computed: int = 0  # annotated by the model in this call
    changed: int = 0  # of them, pairs cached for another question or passage text, computed again
    reused: int = 0  # already in the output folder
    total: int = 0  # pairs in the utility file now
    sources: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    model_loaded: bool = False
    server_notes: dict[str, str] = field(default_factory=dict)  # found out about an API server (it ignores n, ...)
    censored: int = 0  # pairs of the utility file whose p_abs is censored (outside an API's top-k list)
    reader_check: ReaderCheck | None = None  # of every pair in the folder now, from the utilities (no model time)
    labels: LabelCheck | None = None  # the label checks of this call's runs (udcg.metrics.labels)

    def lines(self, out: str | Path, verbose: bool = False) -> list[str]:
        src = ", ".join(f"{k} {v}" for k, v in sorted(self.sources.items()))
        return [f"pairs in the runs' top-depth: {self.pairs}; new pairs annotated: {self.computed}; already in "
                f"{out}: {self.reused}" + ("" if self.model_loaded else " (no model loaded)")
                + (f"; recomputed {self.changed} changed pairs (their text differs from the cached one)" if self.changed else ""),
                f"relevance of these pairs: {src}",
                *(f"server: {note}" for note in self.server_notes.values()),
                f"utility file now holds {self.total} pairs"
                + (f"; model time {self.seconds:.1f} s ({self.computed / self.seconds:.2f} pairs/s)"
                   if self.seconds > 0 else ""),
                *([censored_warning(self.censored, self.total)] if self.censored else []),
                *(self.reader_check.lines() + self.reader_check.query_lines() if self.reader_check else []),
                *label_block(self.labels, verbose=verbose)]


def _questions(pairs: Mapping[str, Sequence[str]], collection: Collection) -> list[Question]:
    return [Question(qid=qid, text=collection.queries[qid].text, answers=collection.queries[qid].answers,
                     passages=tuple(Passage(docid=d, text=collection.corpus[d].text, title=collection.corpus[d].title)
                                    for d in docids))
            for qid, docids in pairs.items()]


def _check_meta(out: Path, cfg: AnnotateConfig, model: str) -> dict:
    meta_path = out / store.META
    meta = read_json(meta_path) if meta_path.is_file() else {}
    if not isinstance(meta, dict):
        raise InputError(f"{meta_path}: not a udcg utilities meta file (delete the folder or choose another -o)")
    for key, want in (("model", model), ("estimator", cfg.estimator), ("prompt_version", cfg.prompt_version)):
        if meta.get(key) not in (None, want):
            raise InputError(f"{out}: these utilities were made with {key} {meta[key]!r}, not {want!r}; use another "
                             "output folder (one folder per reader model, prompt and estimator)")
    return meta


@dataclass(frozen=True)
class RunHooks:
    """What ``annotate_run_pairs`` calls: ``load()`` makes the reader's backend, only when some pair needs
    the model, after ``before_model(todo, pairs)`` (the pairs to compute, of all the runs' pairs: the
    command's estimate); ``judge()`` makes the relevance judge of the unjudged pairs
    (``unjudged="judge"``), after ``before_judge(n)`` with the pairs to judge (the command's
    estimate); ``progress(total, desc)`` returns an update function (the CLI's bar). All but ``load``
    optional."""

    load: Callable[[], object]
    judge: Callable[[], object] | None = None
    progress: Callable[[int, str], Callable[[int], None]] | None = None
    before_model: Callable[[int, int], None] | None = None
    before_judge: Callable[[int], None] | None = None


def annotate_run_pairs(collection: Collection, runs: Mapping[str, Run], out: str | Path, model: str, cfg: AnnotateConfig,
                  options: AnnotateOptions, hooks: RunHooks, *,
                  inputs: Mapping[str, object] | None = None) -> AnnotateRunsReport:
    """Annotate every pair of the runs' top-``depth`` not yet in ``out``; rewrite the utility file.

    ``model``: the reader's name (its backend's, loaded by ``hooks.load``); ``cfg``: its settings;
    ``options``: ``depth`` and the ``unjudged`` policy (``AnnotateOptions``); ``hooks``: what it calls.
    ``inputs``: the command's inputs as given (corpus, queries, qrels, answers, limit, model, api,
    run_files by run name, judge), recorded in meta.json (but the run files, kept by run, and the
    judge, in ``containment`` where the unjudged pairs are judged: ``label_checks.containment_record``)
    so that the reader check can name the command that judges the unjudged pairs."""
    depth, unjudged = options.depth, options.unjudged
    judge = (inputs or {}).get("judge")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder (-o names the utilities folder)")
    _check_meta(out, cfg, model)  # before any work; read again when the folder is written
    pairs = pooled_docids(runs, depth)
    n_unjudged = sum(d not in collection.qrels.get(q, {}) for q, docids in pairs.items() for d in docids)
    if unjudged == "judge" and n_unjudged and hooks.before_judge is not None:
        hooks.before_judge(n_unjudged)
    progress = hooks.progress
    rel = relevance(pairs, collection, unjudged, judge_factory=hooks.judge, judge_cache=out / "judgements.jsonl",
                    progress=progress(n_unjudged, "judge relevance") if progress and n_unjudged else None)
    report = AnnotateRunsReport(pairs=len(rel), sources=dict(Counter(source for _, source in rel.values())))
    with_answers = any(any(a.strip() for a in collection.queries[q].answers) for q in pairs)
    if collection.qrels:
        report.labels = run_label_check(runs, collection.qrels, depth, sorted(pairs, key=query_key),
                                        corpus_size(collection), answers={q: collection.queries[q].answers
                                                                          for q in pairs} if with_answers else None)
    containment = containment_record(rel, collection, judge if unjudged == "judge" else None) if collection.qrels else None
    questions = _questions(pairs, collection)
    with open_cache(out / store.ANNOTATIONS, provenance(model, cfg)) as cache:
        todo = to_compute(cache, questions, cfg)
        done = cached_annotations(cache)
    report.reused = report.pairs - todo
    if todo:
        if hooks.before_model is not None:
            hooks.before_model(todo, report.pairs)
        backend = hooks.load()
        report.model_loaded = True
        if backend.name != model:
            raise InputError(f"the backend is named {backend.name!r}, not {model!r}")
        t0 = time.perf_counter()
        done, stats = annotate(questions, backend, cfg, out / store.ANNOTATIONS,
                               progress(report.pairs, f"annotate {model}") if progress else None)
        report.computed, report.changed, report.seconds = stats.n_computed, stats.n_changed, time.perf_counter() - t0
        report.server_notes = dict(backend.notes)
    with open_cache(out / store.ANNOTATIONS):  # the folder's lock: one command merges and writes at a time
        meta = _check_meta(out, cfg, model)  # read again: another command may have written the folder since
        records = _merged_records(out, done, rel, model, cfg)
        report.total = len(records)
        report.censored = sum(r.note == CENSORED_NOTE for r in records.values())
        files = dict((inputs or {}).get("run_files") or {})
        runs_meta = {**meta.get("runs", {}), **{name: {"depth": depth, "queries": len(run),
                                                       **({"file": str(files[name])} if name in files else {})}
                                                for name, run in runs.items()}}
        new_meta = {
            "model": model, "estimator": cfg.estimator, "prompt_version": cfg.prompt_version, "udcg_version": __version__,
            "collection": collection.source, "runs": runs_meta, "pairs": len(records), "unjudged": unjudged,
            "relevance_sources": _count_sources(records), "n_censored": report.censored,
            "model_time": _model_time(meta, report),
            **({"inputs": {k: v for k, v in inputs.items() if k not in ("run_files", "judge")}} if inputs else {}),
            **({"labels": label_meta(report.labels)} if report.labels else {}),
            **({"containment": merged_containment(meta.get("containment"), containment)} if containment else {}),
            **({"server_notes": report.server_notes} if report.server_notes else {})}
        report.reader_check = with_judge_command(check_records(records.values(), model, cfg.estimator), out, new_meta)
        store.write_utilities(out, records, {**new_meta, "reader_check": report.reader_check.to_dict()})
    return report


def _model_time(meta: Mapping, report: AnnotateRunsReport) -> dict:
    """The reader's pairs computed and seconds spent, over every call that wrote the folder (its measured rate)."""
    before = meta.get("model_time") if isinstance(meta.get("model_time"), dict) else {}
    return {"pairs": int(before.get("pairs", 0)) + report.computed,
            "seconds": float(before.get("seconds", 0.0)) + report.seconds}


def _count_sources(records: Mapping[tuple[str, str], store.UtilityRecord]) -> dict[str, int]:
    return dict(sorted(Counter(r.relevance_source for r in records.values()).items()))


def _merged_records(out: Path, done: Mapping[str, Annotation], rel: Mapping[tuple[str, str], tuple[bool, str]], model: str,
                    cfg: AnnotateConfig) -> dict[tuple[str, str], store.UtilityRecord]:
    """This call's pairs with their relevance, plus the pairs of earlier calls as they were written."""
    records = dict(store.load_utilities(out).records) if (out / store.UTILITIES).is_file() else {}
    for (qid, docid), (relevant, source) in rel.items():
        a = done[annotation_key(qid, docid)]
        records[qid, docid] = store.UtilityRecord(
            qid=qid, docid=docid, p_abs=a.p_abs, relevant=relevant, relevance_source=source, model=model,
            estimator=cfg.estimator, prompt_version=cfg.prompt_version, ci_low=a.ci_low, ci_high=a.ci_high,
            n_samples=a.n_samples, note=a.note)
    return records


# ---------------------------------------------------------------- contexts of runs, for answers


def select_queries(runs: Mapping[str, Run], collection: Collection, limit: int | None = None,
                   sample: int | None = None, seed: int = 0) -> tuple[dict[str, Run], Collection]:
    """With ``limit``, the first ``limit`` queries of the queries file (file order, as ``annotate
    --limit``); with ``sample``, that many queries drawn at random (seeded, without replacement) from
    the collection's queries in sorted id order, so the same for every run and every call whatever the
    files' order; then the runs' rankings for them. Without either, the runs and collection as they
    are (the runs checked against the collection first: ``udcg.io.beir.check_run``)."""
    if limit is not None and sample is not None:
        raise InputError("--limit and --sample: give one (--sample N draws N queries at random, --limit takes the "
                         "first N)")
    if limit is None and sample is None:
        return dict(runs), collection
    if sample is not None:
        ids = sorted(collection.queries)
        if sample > len(ids):
            raise InputError(f"--sample {sample}: the collection has {len(ids)} queries (sample at most that many)")
        drawn = set(random.Random(seed).sample(ids, sample))
        kept = {q: v for q, v in collection.queries.items() if q in drawn}
    else:
        kept = dict(list(collection.queries.items())[:limit])
    collection = replace(collection, queries=kept, qrels={q: r for q, r in collection.qrels.items() if q in kept})
    return {name: {q: docs for q, docs in run.items() if q in kept} for name, run in runs.items()}, collection


@dataclass(frozen=True)
class RunContext:
    """The top-k documents of one run for one query: what the reader is shown."""

    qid: str
    cid: str  # the run's name, or sample-<i> for a random k-subset
    run: str
    docids: tuple[str, ...]


def run_contexts(runs: Mapping[str, Run], collection: Collection, k: int, *, samples: int = 0, depth: int = 20,
                 seed: int = 0) -> tuple[list[RunContext], dict[str, int]]:
    """One context per (query, run): the run's top-k. With ``samples`` > 0, also that many random
    k-subsets per query of the union of the runs' top-``depth`` (kept in rank order of first
    appearance, seeded), to give UDCG_theta and correlation contexts that differ within a query.
    Queries whose ranking holds fewer than k documents are skipped and counted."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"--k {k!r}: must be a positive integer (e.g. 5)")
    if samples < 0:
        raise InputError(f"--subsets {samples}: must be >= 0")
    out: list[RunContext] = []
    short: dict[str, int] = {}
    pool = pooled_docids(runs, depth) if samples else {}
    for qid in collection.queries:
        for name, run in runs.items():
            if qid not in run:
                continue
            docids = top_docids(run, qid, k)
            if len(docids) < k:
                short[name] = short.get(name, 0) + 1
                continue
            out.append(RunContext(qid, name, name, tuple(docids)))
        candidates = pool.get(qid, [])
        if samples and len(candidates) >= k:
            rng = random.Random(f"{seed}\t{qid}")
            for i in range(samples):
                chosen = sorted(rng.sample(range(len(candidates)), k))
                out.append(RunContext(qid, f"sample-{i}", "sample", tuple(candidates[j] for j in chosen)))
    return out, short


def run_context_record(ctx: RunContext, collection: Collection,
                       utilities: Mapping[str, Mapping[str, float]] | None) -> ContextRecord:
    """The context's record (``udcg.io.contexts``), also an answer item for ``udcg judge answer``
    once answered: pids, relevant, utilities, n_relevant, and as extra fields the run, the question,
    its answers and whether the context holds a relevant passage."""
    q = collection.queries[ctx.qid]
    judged = collection.qrels.get(ctx.qid, {})
    relevant = tuple(judged.get(d, 0) > 0 for d in ctx.docids)
    u = None
    if utilities is not None:
        known = utilities.get(ctx.qid, {})
        missing = [d for d in ctx.docids if d not in known]
        if missing:
            raise InputError(f"query {ctx.qid!r}, context {ctx.cid!r}: document {missing[0]!r} has no utility "
                             "(annotate these runs first: udcg annotate --run ... --depth K)")
        u = tuple(known[d] for d in ctx.docids)
    return ContextRecord(qid=ctx.qid, cid=ctx.cid, relevant=relevant, docids=tuple(ctx.docids), utilities=u,
                         n_relevant=max(sum(v > 0 for v in judged.values()), sum(relevant)),
                         extra={"run": ctx.run, "question": q.text, "answers": list(q.answers),
                                "context_has_relevant": any(relevant)})


def answer_contexts(contexts: Sequence[RunContext], collection: Collection, model: str,
                    load_backend: Callable[[], object], cache_path: Path, options: AnswerOptions,
                    progress=None) -> tuple[dict[str, str], dict]:
    """The reader's greedy answer to every context (the project's reader prompt, k numbered
    documents), resumable: finished chunks live in ``cache_path``; a context already answered (by
    any run: same query, same documents in the same order) is not asked again, and when every
    answer is cached no model is loaded; ``options``: the prompt version, the answer length and the
    chunk size of ``udcg answer``. Returns ({context key: answer}, timing stats)."""
    from udcg.annotate.prompt import reader_chat
    from udcg.flows.reading import answer_expect, context_key, generate_cached

    requests = [(context_key(c.qid, c.docids),
                 reader_chat(collection.queries[c.qid].text, [collection.corpus[d].text for d in c.docids],
                             options.prompt)) for c in contexts]
    with open_cache(cache_path, answer_expect(model, options.prompt, options.max_new_tokens)) as cache:
        if all(key in cache for key, _ in requests):
            return {key: cache.get(key)["answer"] for key, _ in requests}, StepStats(len(dict(requests))).summary()
    backend = load_backend()
    if backend.name != model:
        raise InputError(f"the backend is named {backend.name!r}, not {model!r}")
    return generate_cached(backend, requests, Path(cache_path), options.max_new_tokens, options.prompt,
                           options.chunk_size, progress,
                           "answer contexts")
