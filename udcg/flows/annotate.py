"""The annotate flow: every (question, passage)'s p_abs and utility for one reader, from a QA file
(the authors' format or a QA data set) or from the union of retrieval runs' top documents.

``reader(model, options)`` resolves the reader and the estimator settings (``AnnotateOptions``)
before any file is read or model loaded; ``annotate_file`` and ``annotate_run_files`` do the work and
return what the command prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from udcg.flows.annotate_options import AnnotateOptions
from udcg.grade.rules import RULES

if TYPE_CHECKING:  # light at import: the rest loads on use
    from udcg.annotate.runner import AnnotateConfig
    from udcg.flows.own_runs import AnnotateRunsReport
    from udcg.llm.registry import ModelChoice, ModelSpec

Say = Callable[[str], None]  # a line for the user (the command prints it on stderr)


def quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class Reader:
    """The reader resolved once and the annotation settings, checked before any work."""

    spec: ModelSpec
    config: AnnotateConfig


LOCAL_DEFAULTS = {"device": "auto", "dtype": "float32"}  # a local reader's, where not given (annotate, answer)


def reader(model: str | ModelChoice, options: AnnotateOptions | None = None) -> Reader:
    """The reader (a ``ModelChoice``, or a model name: resolved once; an API model refuses
    ``batch_size``, ``device`` and ``dtype``; an option left None is the backend's default) and its
    ``AnnotateConfig`` from ``options`` (``AnnotateOptions``: the estimator, first-token for a local
    model and api-logprobs for an API one where not given; ``chunk_size``: None leaves it to the
    backend, ``BaseBackend.chunk_size``: 256 for a local model on a GPU, else 32)."""
    from udcg.annotate.prompt import check_version
    from udcg.annotate.runner import AnnotateConfig
    from udcg.llm.registry import ModelChoice

    o = options or AnnotateOptions()
    spec = ModelChoice.of(model).spec(defaults=LOCAL_DEFAULTS)
    spec.check_installed()  # a core install says which extra to add now, not after reading the corpus
    config = AnnotateConfig(estimator=o.estimator_for(spec.api), prompt_version=check_version(o.prompt),
                            chunk_size=o.chunk_size, n_samples=o.samples, temperature=o.temperature,
                            target_width=o.target_width, seed=o.seed)
    return Reader(spec, config)


def estimate_line(todo: int, pairs: int, depth: int, reader_: Reader) -> str:
    """What ``annotate --run`` says before the model loads: the pairs it will compute (the union of
    the runs' top-``depth``, less those already annotated) and about how long they take, from the
    rates measured on a 2-core CPU (``udcg.llm.offline``'s table); a rough estimate, which the
    progress lines' ETA refines from the first pairs on."""
    head = (f"annotate: {todo} of the {pairs} pairs in the runs' top-{depth} to compute "
            f"({pairs - todo} already annotated)")
    return f"{head}; {_how_long(todo, reader_.spec)}"


def judge_line(n: int, judge_spec: ModelSpec | None) -> str:
    """What ``annotate --unjudged judge`` says before it judges: the pairs, the judge, and for a model
    judge how long at least (a reader's forward pass a pair at the measured rates: ``_how_long``;
    a judge also generates its reply, so longer)."""
    if judge_spec is None:
        return f"judge relevance: {n} unjudged pairs, by --judge rules (answer containment; no model)"
    from udcg.grade.judges import LLMJudge

    tokens = LLMJudge.max_new_tokens
    return (f"judge relevance: {n} unjudged pairs to label with {judge_spec.model} before the reader, a generated reply "
            f"(up to {tokens} tokens) a pair, the first progress line after its first chunk of pairs; at least as long "
            f"as reading them: {_how_long(n, judge_spec)}; generating the replies takes longer")


def _how_long(todo: int, spec: ModelSpec) -> str:
    from udcg.llm import offline

    later = "the progress lines give an ETA from the first pairs on"
    if spec.api:
        return f"through a server the server sets the pace (udcg posts thousands of pairs/s at most); {later}"
    if _on_gpu(spec):
        return f"on a GPU: hundreds of pairs/s (641/s on one H100 for a 0.5B model); {later}"
    busy, idle = offline.ALIASES[spec.model].cpu_rate if spec.model in offline.ALIASES else (None, None)
    rates = [(rate, what) for rate, what in ((idle, "idle"), (busy, "with other jobs on its cores")) if rate]
    if not rates:
        return f"no measured CPU rate for this model; {later}"
    spans = " to ".join(_minutes(todo / rate) for rate, _ in rates)
    measured = ", ".join(f"{rate:g} pairs/s {what}" for rate, what in rates)
    return (f"on a CPU about {spans} (measured on a 2-core CPU: {measured}; a rough estimate, {later})")


def _on_gpu(spec: ModelSpec) -> bool:
    """Whether a local transformers reader will run on a GPU, said before it loads (a scheme's
    backend: no measured rate to say)."""
    if spec.api or spec.scheme is not None:
        return False
    device = str(spec.options.get("device") or "auto")
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return device.startswith("cuda")


def _minutes(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:02.0f} min"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@dataclass
class FileAnnotation:
    """What ``annotate_file`` did: the output's summary line and what was found out about an API server."""

    summary: str
    server_notes: list[str] = field(default_factory=list)


def annotate_file(path: str, output: str, reader_: Reader, *, limit: int | None = None,
                  show_progress: bool = True, say: Say = quiet) -> FileAnnotation:
    """Annotate every passage of a QA file (the first ``limit`` questions) and write the authors'
    format with our record beside it; resumable through ``OUTPUT.cache.jsonl``. ``say``: a line for
    the user (an API reader's server, once the backend is made)."""
    from udcg.annotate.output import load_questions, write_annotated
    from udcg.annotate.runner import annotate
    from udcg.llm.registry import where_it_goes
    from udcg.progress import bar

    spec = reader_.spec.settled()  # an openai: model's server, settled once (the line and the backend read it)
    line = where_it_goes(spec) if spec.api else ""  # an openai: model with no server and no key: refused now
    questions, raw = load_questions(path, limit)
    backend = spec.load()
    if line:  # the first line names the server, once the backend is made (a bad client setting fails alone)
        say(line)
    n = sum(len(q.passages) for q in questions)
    with bar(total=n, desc=f"annotate {backend.name}", unit="passage", enabled=show_progress) as progress:
        annotations, stats = annotate(questions, backend, reader_.config, f"{output}.cache.jsonl", progress.update)
    summary = write_annotated(output, questions, raw, annotations, reader_.config, backend.name, stats)
    return FileAnnotation(summary, list(backend.notes.values()))


def annotate_run_files(corpus: str, run_paths: Sequence[str], output: str, reader_: Reader,
                       options: AnnotateOptions | None = None, *, show_progress: bool = True,
                       say: Say = quiet) -> AnnotateRunsReport:
    """Annotate the union of the runs' top-``depth`` documents per query into the utilities folder
    ``output`` (created, or extended with the new pairs only); with ``limit``, of the first ``limit``
    queries of the queries file only (as ``answer --limit``); ``options``: those of ``udcg annotate
    --run`` (``AnnotateOptions``: ``depth``, ``queries``, ``qrels``, ``answers``, ``unjudged``,
    ``judge``, ``limit``; its reader settings are ``reader_``'s). Only the documents annotated are
    kept from the corpus. Returns the report (``.lines(output)``: what the command prints)."""
    from udcg.flows.own_runs import RunHooks, annotate_run_pairs, run_docids, select_queries
    from udcg.flows.run_scores import named_runs
    from udcg.io.beir import check_run, read_collection
    from udcg.io.trec import read_run
    from udcg.llm.registry import ModelChoice, where_it_goes
    from udcg.progress import bar

    o = options or AnnotateOptions()
    judge_spec = ModelChoice.of(o.judge).spec() if o.unjudged == "judge" and o.judge != RULES else None
    if judge_spec is not None:
        judge_spec.check_installed()
    spec = reader_.spec.settled()  # an openai: model's server, settled once (the line and the backend read it)
    if spec.api:  # the first line names the server (an openai: model without one refuses without a key)
        say(where_it_goes(spec))
    paths = named_runs(run_paths)
    runs = {name: read_run(path) for name, path in paths.items()}
    collection = read_collection(corpus, **o.keywords("queries", "qrels", "answers"),
                                 docids=run_docids(runs, o.depth))
    for name, run in runs.items():
        check_run(run, collection, str(paths[name]), depth=o.depth, queries_source=o.queries)
    runs, collection = select_queries(runs, collection, o.limit)
    say(collection.scan.line())
    bars = []

    def progress(total: int, desc: str):
        bars.append(bar(total=total, desc=desc, unit="pair", enabled=show_progress))
        return bars[-1].update

    try:
        inputs = {**{k: None if v is None else str(v) for k, v in (("corpus", corpus), ("queries", o.queries),
                                                                     ("qrels", o.qrels), ("answers", o.answers))},
                  "limit": o.limit, "model": reader_.spec.model, "api": reader_.spec.api, "flags": _flags(reader_),
                  "run_files": {name: str(path) for name, path in paths.items()}, "judge": o.judge}
        hooks = RunHooks(spec.load, judge=lambda: relevance_judge(judge_spec), progress=progress,
                         before_model=lambda todo, pairs: say(estimate_line(todo, pairs, o.depth, reader_)),
                         before_judge=lambda n: say(judge_line(n, judge_spec)))
        return annotate_run_pairs(collection, runs, output, spec.name, reader_.config, o, hooks, inputs=inputs)
    finally:
        for b in bars:
            b.close()


def _flags(reader_: Reader) -> list[str]:
    """The reader flags a rerun needs to meet this folder's cache (``reader_check.reader_flags``)."""
    from udcg.flows.reader_check import reader_flags

    cfg = reader_.config
    sampling = ({"samples": cfg.n_samples, "temperature": cfg.temperature, "target_width": cfg.target_width,
                 "seed": cfg.seed} if cfg.estimator == "sampling" else {})
    return reader_flags(reader_.spec.api, cfg.estimator, cfg.prompt_version, sampling)


def relevance_judge(judge: str | ModelSpec | None = RULES):
    """The judge of unjudged pairs' relevance (``--unjudged judge``): answer containment for
    ``rules`` (or None), else the LLM judge of ``judge`` (a spec resolved once, or a model name)."""
    from udcg.grade.judges import LLMJudge, RuleJudge
    from udcg.llm.registry import ModelChoice, ModelSpec

    if judge is None or judge == RULES:
        return RuleJudge("relevance")
    spec = judge if isinstance(judge, ModelSpec) else ModelChoice.of(judge).spec()
    return LLMJudge(spec.load(), "relevance")
