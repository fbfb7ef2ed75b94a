"""The answer flow: the reader's greedy answer to each run's top-k context (and to seeded k-subsets
of its top documents), resumable, written as a contexts JSONL that ``judge answer`` grades."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from udcg.annotate.prompt import check_version
from udcg.errors import InputError
from udcg.flows.annotate import LOCAL_DEFAULTS, Say, quiet
from udcg.flows.answer_options import AnswerOptions
from udcg.flows.answer_plan import AnswerPlan, RateWatch, detect_lines, detectable, rate_of
from udcg.llm.registry import ModelChoice, where_it_goes
from udcg.progress import bar

FIRST_PROMPTS = 4  # answered alone first when there are more than twice as many: their rate refines the time


@dataclass(frozen=True)
class AnswerResult:
    contexts: int
    queries: int
    runs: int
    computed: int  # prompts the model answered in this call (the rest came from the cache)
    output: Path

    def line(self, samples: int) -> str:
        return (f"{self.contexts} contexts ({self.queries} queries, {self.runs} runs"
                f"{f', {samples} random subsets per query' if samples else ''}); {self.computed} new prompts answered by the "
                f"model, the rest from the cache -> {self.output}")


def detection_plan(difference: float, model: str | ModelChoice, runs: int, samples: int) -> list[str]:
    """``udcg answer --detect D``: the queries (their prompts and the time) at which two of ``runs``
    runs' correct rates differing by D would be detected; no file read, no model loaded."""
    spec = ModelChoice.of(model).spec(defaults=LOCAL_DEFAULTS)
    return detect_lines(difference, runs, runs * (1 + samples), spec.name,
                        rate_of(spec.name, spec.options.get("device"), spec.api))


def plan_of(contexts: list, queries: int, runs: int, spec, cache: Path, prompt: str,
            max_new_tokens: int) -> tuple[AnswerPlan, list]:
    """The plan of an answer run (``flows.answer_plan``: its distinct prompts, those its cache
    already holds, the rate, the detectable difference) and the contexts not in the cache, one per
    distinct prompt; checks the cache's provenance (no model yet)."""
    from udcg.flows.reading import answer_expect, context_key
    from udcg.resumable import open_cache

    keys = {context_key(c.qid, c.docids): c for c in contexts}
    with open_cache(cache, answer_expect(spec.name, prompt, max_new_tokens)) as done:
        fresh = [c for key, c in keys.items() if key not in done]
    plan = AnswerPlan(spec.name, queries, runs, len(fresh), len(keys) - len(fresh),
                      rate_of(spec.name, spec.options.get("device"), spec.api), detectable(queries, runs))
    return plan, fresh


def answer_run_files(corpus: str, run_paths: Sequence[str], output: str | Path, model: str | ModelChoice,
                options: AnswerOptions | None = None, *, show_progress: bool = True, say: Say = quiet) -> AnswerResult:
    """Answer every context of the runs and write them, each with its answer, model and prompt
    version, to ``output`` (contexts already answered, by any run, are not asked again; a bad input
    fails before a model loads). ``model``: a name or a ``ModelChoice`` (its options: the reader's).
    ``options.sample``: answer N queries drawn at random (``seed``), the same for every run
    (``own_runs.select_queries``)."""
    from udcg.flows.own_runs import answer_contexts, run_context_record, run_contexts, run_docids, select_queries
    from udcg.flows.reading import context_key
    from udcg.flows.run_scores import named_runs, read_utilities
    from udcg.io.beir import check_run, read_collection
    from udcg.io.contexts import write_contexts
    from udcg.io.trec import read_run

    o = options or AnswerOptions()
    check_version(o.prompt)
    spec = ModelChoice.of(model).spec(defaults=LOCAL_DEFAULTS)  # an API model refuses the local options
    spec.check_installed()
    spec = spec.settled()  # an openai: model's server, settled once (the line and the backend read it)
    if spec.api:  # the first line names the server (an openai: model without one refuses without a key)
        say(where_it_goes(spec))
    output = Path(output)
    cache = Path(o.cache) if o.cache else output.with_name(output.name + ".cache.jsonl")
    if cache.resolve() == output.resolve():
        raise InputError(f"{output}: the output and the cache are one file (choose another --cache)")
    table = read_utilities(o.utilities, spec.name, o.prompt) if o.utilities else None
    paths = named_runs(run_paths)
    runs = {name: read_run(path) for name, path in paths.items()}
    needed = max(o.k, o.depth) if o.samples else o.k  # the documents the contexts are made of
    collection = read_collection(corpus, queries=o.queries, qrels=o.qrels, answers=o.answers, docids=run_docids(runs, needed))
    for name, run in runs.items():
        check_run(run, collection, str(paths[name]), depth=needed, queries_source=o.queries)
    runs, collection = select_queries(runs, collection, o.limit, o.sample, o.seed)
    say(collection.scan.line())
    contexts, short = run_contexts(runs, collection, o.k, samples=o.samples, depth=o.depth, seed=o.seed)
    for name, count in short.items():
        say(f"{name}: {count} queries rank fewer than {o.k} documents and get no context")
    if not contexts:
        raise InputError(f"no context of {o.k} documents in any run (lower --k)")
    records = [run_context_record(c, collection, table) for c in contexts]  # fails before a model loads
    plan, fresh = plan_of(contexts, len(collection.queries), len(runs), spec, cache, o.prompt, o.max_new_tokens)
    for line in plan.lines():  # before the model loads: what the check costs and what it can show
        say(line)
    load = functools.cache(spec.load)  # one model for the first prompts and the rest
    computed = 0
    if len(fresh) > 2 * FIRST_PROMPTS:  # answered first, alone: their rate refines the plan's time
        _, first = answer_contexts(
            fresh[:FIRST_PROMPTS], collection, spec.name, load, cache, dataclasses.replace(o, chunk_size=FIRST_PROMPTS),
            progress=lambda total, desc, unit: RateWatch(
                bar(total=total, desc=f"{desc} (the first)", unit=unit, enabled=show_progress), plan.prompts, 0, say))
        computed = first["computed"]
    found, stats = answer_contexts(
        contexts, collection, spec.name, load, cache, o,
        progress=lambda total, desc, unit: bar(total=total, desc=desc, unit=unit, enabled=show_progress))
    records = [dataclasses.replace(rec, answer=found[context_key(c.qid, c.docids)],
                                   extra={**rec.extra, "model": spec.name, "prompt_version": o.prompt})
               for c, rec in zip(contexts, records, strict=True)]
    write_contexts(output, records)
    return AnswerResult(len(records), len(collection.queries), len(runs), computed + stats["computed"], output)
