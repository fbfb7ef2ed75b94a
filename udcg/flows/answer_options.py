"""The options of ``udcg answer`` and ``udcg.answer_runs``, each declared once (``udcg.options``):
the command's flags and the API's keywords are made from ``AnswerOptions``; the flow
(``flows/answer.answer_run_files``) and its reader (``flows/own_runs.answer_contexts``) take the object.
The model and its options (``--model``, ``--device``, ``--api-base`` ...) are a ``ModelChoice``,
shared with the other commands that run a model (``commands/_parser.add_model_options``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from udcg.annotate.prompt import DEFAULT_VERSION
from udcg.options import Options, option


@dataclass(frozen=True)
class AnswerOptions(Options):
    """Which queries and contexts the reader answers, in which prompt, and where the work is cached."""

    operation = "answer"

    queries: str | None = option(None, "queries file or irds:NAME (default: the BEIR folder's or irds "
                                        "dataset's)", kind=str)
    sample: int | None = option(None, "answer N queries drawn at random (--seed), the same N for every run: the cheap "
                                "way to check UDCG against real answers (then compare --answers ... --judged-only)",
                                kind=int, metavar="N")
    detect: float | None = option(None, "plan only: print the queries (--sample N), prompts and time at which a "
                                  "difference D in correct rate between two runs would be detected (e.g. 0.1), then "
                                  "stop before any model call", kind=float, metavar="D", api=False)
    limit: int | None = option(None, "only the first N queries of the queries file (file order, as annotate --limit; "
                               "--sample draws them at random instead); the runs' other queries are left out", kind=int)
    qrels: str | None = option(None, "qrels or irds:NAME (default: the BEIR folder's qrels/test.tsv); relevance of "
                               "each position", kind=str)
    answers: str | None = option(None, "JSONL of {_id, answers} (default: queries' metadata.answers)", kind=str)
    utilities: str | None = option(None, "the udcg annotate --run folder: adds each position's utility", kind=str)
    k: int = option(5, "documents per context (default {default})", kind=int)
    samples: int = option(0, "also N random k-subsets per query of the runs' top --depth (rank order kept), so "
                          "contexts differ within a query (for fit-theta and correlate; was --samples, which still "
                          "works)", flag="--subsets", parsed="samples", kind=int,
                          metavar="N")
    depth: int = option(20, "with --subsets: the pool depth per run (default {default})", kind=int)
    seed: int = option(0, "the seed of --sample and --subsets (default {default})", kind=int)
    prompt: str = option(DEFAULT_VERSION, "reader prompt version ({default}, paper-fig4-v1)", kind=str)
    max_new_tokens: int = option(32, "answer length limit (default {default})", kind=int)
    chunk_size: int = option(16, "contexts per cached, fsynced unit of work (default {default})", kind=int)
    cache: str | Path | None = option(None, "resume cache (default OUTPUT.cache.jsonl)", kind=Path)
