"""The score flow: every metric of every context of a contexts file (kept whole, 'metrics' added), or
per-query values of TREC runs against qrels and utilities, written as TSV."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from udcg.flows.run_options import ScoringOptions
    from udcg.io.tables import Table

# Light at import (the command's help names the defaults): numpy and the metrics load when a flow runs.
DEFAULT_CONTEXT_METRICS = "UDCG,nDCG,P,Success,RR,AP"


def score_notes(scores: dict, metrics: Any = None) -> list[str]:
    """The measures of ``metrics`` (a ``--metrics`` text) spelled as an alias (``MRR@5`` is ``RR@5``);
    then per run (``{name: RunScores}``): the share of top-k documents annotated, then its notes."""
    from udcg.metrics.measures import alias_notes

    out = alias_notes(metrics)
    for name, s in scores.items():
        out += [f"{name}: annotated@{k if k is not None else 'all'} = {annotated}/{total}"
                for k, (annotated, total) in s.coverage.items()]
        out += [f"{name}: {note}" for note in s.notes]
    return out


@dataclass
class RunFileScores:
    """What ``score_run_files`` wrote: per run, its scores (``RunScores``); the mean lines in the
    written rows' layout (qid = all, trec_eval's name for the mean row), and the notes."""

    scores: dict
    output: Path
    reader: tuple[str, ...] = ()  # the reader check recorded with the utilities (``reader_check.reader_note``)
    metrics: Any = None  # the --metrics as given (its aliases get a note)

    def mean_lines(self) -> list[str]:
        """Each mean rounded to 12 decimals for display: 0.18, not 0.18000000000000005 (float noise), and
        as precise as any reader of the file needs; the file keeps every digit."""
        several = len(self.scores) > 1
        return [f"{name}\t" * several + f"all\t{measure}\t{round(mean, 12)!r}"
                for name, s in self.scores.items() for measure, mean in s.means().items()]

    def note_lines(self, verbose: bool = False) -> list[str]:
        """The notes, the reader check recorded with the utilities, and the label checks' block."""
        from udcg.flows.label_checks import label_block

        labels = next(iter(self.scores.values())).labels if self.scores else None
        return score_notes(self.scores, self.metrics) + list(self.reader) + label_block(labels, verbose=verbose)

    def summary(self) -> str:
        n = sum(len(s.qids) * len(s.values) for s in self.scores.values())
        return f"wrote {n} per-query values of {len(self.scores)} run(s) to {self.output}"


def score_run_files(options: ScoringOptions, output: str | Path) -> RunFileScores:
    """Per-query values of every run of ``options.runs``, as ``qid<TAB>measure<TAB>value`` (with several
    runs a leading run column), written atomically to ``output``."""
    from udcg.flows.reader_check import reader_note
    from udcg.flows.run_scores import named_runs, scored_runs
    from udcg.io.files import atomic_write_text
    from udcg.metrics.evaluate import format_tsv

    scores = scored_runs(named_runs(options.runs), options)
    several = len(scores) > 1
    text = "".join(("".join(f"{name}\t{line}" for line in format_tsv(s.rows()).splitlines(keepends=True))
                    if several else format_tsv(s.rows())) for name, s in scores.items())
    atomic_write_text(output, text)
    rows = list(next(iter(scores.values())).values) if scores else []
    return RunFileScores(scores, Path(output), reader_note(options.utilities, rows), options.metrics)


@dataclass
class ContextFileScores:
    means: Table  # mean, count and NA count of every metric
    notes: list[str] = field(default_factory=list)


def score_context_file(path: str, output: str | Path, *, metrics: str | None = None, k: int | None = None,
                       gamma: float | None = None, reader: str | None = None, theta: str | None = None) -> ContextFileScores:
    """Every metric of every context of ``path`` (the authors' format or a contexts JSONL), written to
    ``output`` with every input field kept ('metrics' added; the authors' ``udcg[<model>]``
    recomputed). Without ``metrics``: the defaults, UDCG left out (with a note) when utilities are
    missing."""
    from udcg.flows.scoring import default_metrics, means_table, read_contexts, score_rows, scored_items
    from udcg.flows.theta import load_theta
    from udcg.io.authors import write_authors
    from udcg.metrics.contexts import parse_metrics
    from udcg.metrics.udcg import GAMMA

    gamma = GAMMA if gamma is None else gamma
    rows = read_contexts(path, reader=reader, k=k)
    notes = []
    if metrics is None:
        chosen, why = default_metrics(rows, DEFAULT_CONTEXT_METRICS, reader)
        if why:  # nothing annotated yet: classical only
            notes.append(f"UDCG left out of the default metrics: {why}")
    else:
        chosen = parse_metrics(metrics)
    values = score_rows(rows, chosen, gamma, load_theta(theta) if theta else None)
    write_authors(output, scored_items(rows, values, gamma, k))
    return ContextFileScores(means_table(values, f"{len(rows)} contexts from {path}"), notes)
