"""The options of ``udcg annotate`` and ``udcg.annotate_runs``, each declared once (``udcg.options``):
the command's flags and the API's keywords are made from ``AnnotateOptions``; the flows
(``flows/annotate``: ``reader``, ``annotate_run_files``; ``flows/own_runs.annotate_runs``) take the
object. The reader model and its options (``--model``, ``--device``, ``--api-base`` ...) are a
``ModelChoice``, shared with the other commands that run a model (``commands/_parser.add_model_options``).
The estimators are the registry's (``udcg.annotate.estimators``: plugins add to it), the prompt
versions ``udcg.annotate.prompt``'s, the policies of an unjudged pair ``UNJUDGED`` here (applied by
``flows/own_runs.relevance``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from udcg.annotate.estimators import check_estimator, estimator_names
from udcg.annotate.prompt import DEFAULT_VERSION
from udcg.grade.rules import RULES
from udcg.options import Options, option

# a retrieved pair the qrels do not judge: not relevant (R = -1), judged by --judge, or refused
UNJUDGED = ("irrelevant", "judge", "error")
RUNS = "runs"  # the group of the options of annotate --run (the command's "your runs" flags)


def default_estimator(api: bool) -> str:
    """The estimator of a reader where none is given: the chat top list's for an API model, the
    paper's first token for a local one (``--estimator``'s help says so)."""
    return "api-logprobs" if api else "first-token"


@dataclass(frozen=True)
class AnnotateOptions(Options):
    """Which queries and pairs are annotated (``--run``'s group), and how the reader estimates p_abs."""

    operation = "annotate"

    queries: str | Path | None = option(None, "queries file or irds:NAME (default: the BEIR folder's queries.jsonl, or "
                                        "the irds dataset's queries)", kind=Path, group=RUNS)
    qrels: str | Path | None = option(None, "qrels (TREC 4 columns, BEIR TSV or irds:NAME; default: the BEIR folder's "
                                      "qrels/test.tsv, or the irds dataset's)", kind=Path, group=RUNS)
    answers: str | Path | None = option(None, "JSONL of {_id, answers} (default: queries' metadata.answers)", kind=Path,
                                        group=RUNS)
    depth: int = option(10, "documents per run and query to annotate (default {default})", kind=int, group=RUNS)
    unjudged: str = option("irrelevant", "relevance of a retrieved pair the qrels do not judge (default {default})",
                           choices=UNJUDGED, group=RUNS)
    # a model name or folder: checked by the API's door (udcg.api_args.model), resolved by the flow
    judge: str = option(RULES, "with --unjudged judge: rules (answer containment) or a model", group=RUNS)
    estimator: str | None = option(None, "default: first-token (paper parity) for local models, api-logprobs (the chat "
                                   "top list; a token outside it is censored, never 0) for an API model; first-token "
                                   "or sequence through an API model: exact where its server scores text "
                                   "(/v1/completions: vLLM, SGLang, udcg serve)", kind=str, choices=estimator_names)
    prompt: str = option(DEFAULT_VERSION, "reader prompt version ({default} = the authors' code; paper-fig4-v1)",
                         kind=str)
    limit: int | None = option(None, "only the first N questions (with --run: the first N queries of the queries file)",
                               kind=int)
    chunk_size: int | None = option(None, "passages per cached, fsynced unit of work (default: the backend's, 32; 256 "
                                    "for a local model on a GPU)", kind=int)
    samples: int = option(20, "sampling: answers per passage", kind=int)
    temperature: float = option(1.0, "sampling: temperature", kind=float)
    target_width: float | None = option(None, "sampling: stop early once the Wilson interval is narrower", kind=float)
    seed: int = option(0, "", kind=int)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_estimator(self.estimator)  # the registry's names now: an estimator registered since is one

    def estimator_for(self, api: bool) -> str:
        """The estimator given, else the default for a reader served through an API or not."""
        return self.estimator or default_estimator(api)
