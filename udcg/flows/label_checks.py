"""The label checks where labels are read, in one place for every command: the block
(``udcg.metrics.labels``) and, for ``compare``, each significant UDCG difference's fragility
(``udcg.metrics.fragility``), with the command that judges the unjudged pairs it hangs on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg.annotate.utilities import recorded_meta
from udcg.flows.reader_check import judge_command, labels_caveat
from udcg.metrics.comparison import ComparisonData, PairTest
from udcg.metrics.evaluate import top_k_utilities
from udcg.metrics.fragility import Fragility, TopK, relabel_bound
from udcg.metrics.gains import GainTable
from udcg.metrics.labels import ROW_COLUMNS, LabelCheck
from udcg.metrics.measures import Measure
from udcg.metrics.reader_verdict import FRAGILE_MIN
from udcg.metrics.stats import EXACT_MAX_N, holm, paired_test, sign_flip_pvalues

# A difference ended by relabelling at most max(FRAGILE_MIN, this share) of its unjudged pairs hangs on them:
# the reader check's absolute floor (3 pairs can be checked by hand in a minute), a wider share (a difference
# rests on two runs' top k, so on fewer pairs than a whole folder's check)
DIFFERENCE_FRAGILE_SHARE = 0.1


def keeps_verdict(cmp: ComparisonData, pair: PairTest) -> Any:
    """``keeps(d)``: whether paired differences ``d`` keep ``pair``'s verdict in ``cmp`` (significant
    after the same family's correction, the other p-values held, and of the same sign), with
    compare's own test, resamples and seed."""
    family = [t for t in cmp.pairs if cmp.correction == "table" or t.measure == pair.measure]
    at = family.index(pair)
    p_family = np.array([t.p for t in family], dtype=float)
    sign = np.sign(pair.diff)

    def keeps(d: np.ndarray) -> bool:
        if cmp.test == "permutation":
            p = sign_flip_pvalues([d], cmp.n_resamples, cmp.seed, EXACT_MAX_N if cmp.exact else 0)[0]
        else:
            p = paired_test(d, np.zeros_like(d), cmp.test, cmp.n_resamples, cmp.seed)
        if cmp.correction != "none":
            p_family[at] = p
            p = holm(p_family)[at]
        return bool(p < cmp.alpha and np.sign(d.mean()) == sign)
    return keeps


def _top(scores: Any, k: int) -> TopK | None:
    """A run's top k (``TopK``: utilities as scored, context lengths, pair numbers, unjudged-irrelevant entries)."""
    top = scores.top
    if top is None or top.utility is None or top.pair is None:
        return None
    n_q = len(top.depth)
    table = GainTable(scores.qids, np.zeros((n_q, top.utility.shape[1])), np.zeros((n_q, 0)),
                      {"utility": top.utility}, depth=top.depth)
    u, length = top_k_utilities(table, k, top.opts)
    width = min(k, top.pair.shape[1])
    pair = np.full(u.shape, np.nan)
    pair[:, :width] = top.pair[:, :width]
    judged = np.ones(u.shape, bool)
    judged[:, :width] = top.judged[:, :width]
    inside = np.arange(k)[None, :] < length[:, None]
    return TopK(u, length, pair, inside & ~judged & (u < 0) & ~np.isnan(pair))


def fragilities(cmp: ComparisonData, scores: Mapping[str, Any]) -> list[Fragility]:
    """The relabelling bound of every significant UDCG@k difference of ``cmp`` (plain UDCG with a
    cutoff; ``scores`` kept with ``keep_pairs``)."""
    out = []
    for t in cmp.pairs:
        m = t.measure
        if not (t.significant and isinstance(m, Measure) and m.name == "UDCG" and m.cutoff):
            continue
        a, b = _top(scores[t.run_a], m.cutoff), _top(scores[t.run_b], m.cutoff)
        if a is None or b is None:
            continue
        gamma = scores[t.run_a].top.opts.gamma
        out.append(relabel_bound(a, b, gamma, keeps_verdict(cmp, t), measure=str(m), run_a=t.run_a, run_b=t.run_b))
    return out


def fragility_lines(found: Sequence[Fragility], runs: Mapping[str, Any], utilities: Any, verbose: bool = False
                    ) -> list[str]:
    """One line for the most fragile significant UDCG difference (every one with ``verbose``)."""
    if not found:
        return []
    ranked = sorted(found, key=lambda f: (f.needed is None, (f.needed or 0) / max(f.candidates, 1)))
    folder, meta = _folder(utilities)
    lines = []
    for f in ranked if verbose else ranked[:1]:
        what = f"{f.measure} {f.run_a} vs {f.run_b}"
        if not f.candidates:
            lines.append(f"  fragility: {what}: no unjudged pair of the two top {f.measure.rsplit('@', 1)[1]} would move "
                         "it towards 0 if relevant: it does not hang on the unjudged labels")
            continue
        if f.needed is None:
            lines.append(f"  fragility: {what} stays significant with all {f.candidates} of its {f.unjudged} unjudged "
                         "pairs that move it towards 0 relabelled relevant at once: it does not hang on the unjudged "
                         "labels")
            continue
        hangs = f.needed <= max(FRAGILE_MIN, DIFFERENCE_FRAGILE_SHARE * f.unjudged)
        k = int(f.measure.rsplit("@", 1)[1])
        lines.append(f"  fragility: {what} ends (not significant) with {f.needed} of its {f.unjudged} unjudged pairs "
                     "relabelled relevant (those it rests on most first; a greedy bound: at most that many)"
                     + (f"; it hangs on the unjudged labels: judge them ({f.unjudged} pairs): "
                        + judge_command(folder, meta, runs=[str(runs.get(f.run_a, f.run_a)),
                                                            str(runs.get(f.run_b, f.run_b))], depth=k)
                        if hangs else ""))
    more = len(found) - len(lines)
    if more > 0:
        lines[-1] += f" ({more} more significant UDCG difference(s): udcg -v)"
    return lines


def _folder(utilities: Any) -> tuple[Any, dict]:
    """The utilities folder a command names and its recorded meta.json ("UTILITIES" and {} for
    utilities held in memory or a folder without one)."""
    if isinstance(utilities, (str, Path)):
        path = Path(utilities)
        recorded = recorded_meta(path)
        if recorded is not None:
            return (utilities if path.is_dir() else path.parent), recorded
    return "UTILITIES", {}


def label_block(check: LabelCheck | None, runs: Mapping[str, Any] | None = None, utilities: Any = None,
                verbose: bool = False) -> list[str]:
    """The block the commands print: the label checks, then compare's fragility line
    (``check.fragility``); with ``verbose`` every query flagged and every fragility."""
    if check is None:
        return []
    lines = check.lines() + fragility_lines(check.fragility, runs or {}, utilities, verbose)
    caveat = labels_caveat(_folder(utilities)[1]) if any(check.judge_labelled) else ""
    lines += [f"  labels: {caveat}"] if caveat else []
    return lines + (flagged_lines(check) if verbose else [])


def flagged_lines(check: LabelCheck) -> list[str]:
    """A line per query the label checks flag (no relevant document, implausibly many, or a short or
    numeric answer)."""
    return [f"  query {q.qid}: {q.n_relevant} relevant" + (" (none)" if q.zero_relevant else " (implausible)"
                                                             if q.implausible else "")
            + (f" (short/numeric answer `{q.short_answer}`" + (": labels likely loose)" if q.short_loose else ")")
               if q.short_answer else "")
            for q in check.queries if q.zero_relevant or q.implausible or q.short_answer]


def label_details(check: LabelCheck | None, runs: Mapping[str, Any] | None = None, utilities: Any = None
                  ) -> list[str]:
    """What ``verbose`` adds to a block already printed (compare's footer holds ``label_block``):
    the significant UDCG differences' fragility lines after the first, and the flagged queries;
    nothing when there are none."""
    if check is None:
        return []
    return fragility_lines(check.fragility, runs or {}, utilities, True)[1:] + flagged_lines(check)


def write_label_rows(output: str | Path, check: LabelCheck | None) -> None:
    """The per-query rows of ``check`` as TSV (qid, relevant, corpus_share, zero_relevant,
    implausible, short_answer, short_loose, then one unjudged column per run)."""
    from udcg.errors import InputError
    from udcg.io.files import atomic_write_text

    if check is None:
        raise InputError("--label-rows: the label checks read the qrels; give --qrels")
    lines = ["\t".join((*ROW_COLUMNS, *(f"unjudged_{r}" for r in check.runs)))]
    lines += ["\t".join((q.qid, str(q.n_relevant), repr(q.corpus_share), str(q.zero_relevant).lower(),
                         str(q.implausible).lower(), " ".join(q.short_answer.split()), str(q.short_loose).lower(),
                         *map(str, q.unjudged))) for q in check.queries]
    atomic_write_text(output, "\n".join(lines) + "\n")


def run_label_check(runs: Mapping[str, Mapping[str, Mapping[str, float]]], qrels: Mapping[str, Mapping[str, float]],
                    depth: int, qids: Sequence[str], corpus_size: int | None = None,
                    source: str = "qrels", answers: Mapping[str, Sequence[str]] | None = None) -> LabelCheck:
    """The label checks of runs given as dicts (``annotate --run``: the queries ``qids``, each run's
    top ``depth``, the corpus size when known; ``answers``: {qid: answer aliases}, where at hand, for
    the short-answer check)."""
    from udcg.metrics.gains import ranked_docids
    from udcg.metrics.labels import RELEVANT_AT, label_check
    from udcg.text import short_answer

    counts = {}
    for name, run in runs.items():
        tops = [ranked_docids(run.get(q, {}))[:depth] for q in qids]
        counts[name] = ([sum(d not in qrels.get(q, {}) for d in top) for q, top in zip(qids, tops)],
                        [len(top) for top in tops])
    relevant = [sum(g >= RELEVANT_AT for g in qrels.get(q, {}).values()) for q in qids]
    short = None if answers is None else {q: short_answer(answers.get(q, ())) for q in qids}
    return label_check(list(qids), relevant, counts, k=depth, corpus_size=corpus_size, source=source,
                       short_answers=short)


def containment_record(rel: Mapping[tuple[str, str], tuple[bool, str]], collection: Any,
                       judge: str | None) -> dict | None:
    """How the pairs' labels stand to answer containment (``udcg.text.contains_answer``, the rules
    judge's rule), for meta.json's ``containment``: the pairs the qrels judge, how many of them say
    what containment says and are relevant; the unjudged pairs (taken as irrelevant) and how many
    hold an answer alias (those ``--judge rules`` would relabel); the judge of this call
    (``--unjudged judge``) or None. None when a query lacks answers (containment cannot be applied)."""
    from udcg.text import contains_answer

    queries, corpus = collection.queries, collection.corpus
    if not rel or any(not any(str(a).strip() for a in queries[q].answers) for q, _ in rel):
        return None
    contains = {pair: contains_answer(corpus[pair[1]].text, queries[pair[0]].answers) for pair in rel}
    qrels = [pair for pair, (_, source) in rel.items() if source == "qrels"]
    unjudged = [pair for pair, (_, source) in rel.items() if source == "unjudged-irrelevant"]
    return {"qrels_pairs": len(qrels), "qrels_agree": sum(rel[p][0] == contains[p] for p in qrels),
            "qrels_relevant": sum(rel[p][0] for p in qrels), "unjudged": len(unjudged),
            "unjudged_contained": sum(contains[p] for p in unjudged), "judge": judge}


def corpus_size(collection: Any) -> int | None:
    """The documents a collection's corpus holds, when its read counted them (not a docstore lookup)."""
    scan = getattr(collection, "scan", None)
    if scan is None:
        return len(collection.corpus) or None
    return None if scan.docstore else scan.scanned


def label_meta(check: LabelCheck) -> dict:
    """The label checks as a utilities folder's meta.json records them: the figures, the flagged
    queries and the printed block (``recorded_labels``), without the per-query rows."""
    return {**{k: v for k, v in check.to_dict().items() if k != "per_query"}, "lines": label_block(check),
            **({} if check.short_at is None else
               {"short_answers": {q.qid: q.short_answer for q in check.queries if q.short_answer}})}


def recorded_short_answers(utilities: Any) -> dict[str, str] | None:
    """The short or numeric answers ``udcg annotate --run`` found among its queries' answers and
    recorded in the utilities folder's meta.json (``label_meta``), for the label checks of score and
    compare, which read no answers; None where nothing was recorded (no answers at hand)."""
    if not isinstance(utilities, (str, Path)):
        return None
    labels = (recorded_meta(utilities) or {}).get("labels")
    short = labels.get("short_answers") if isinstance(labels, dict) else None
    return {str(q): str(a) for q, a in short.items()} if isinstance(short, dict) else None


def recorded_labels(utilities: str | Path) -> list[str]:
    """The label block ``udcg annotate --run`` recorded in a utilities folder's meta.json (for a
    file, the meta.json beside it), or nothing."""
    labels = (recorded_meta(utilities) or {}).get("labels")
    lines = labels.get("lines", []) if isinstance(labels, dict) else []
    return [str(line) for line in lines] if isinstance(lines, list) else []


def merged_containment(before: Any, now: dict) -> dict:
    """A folder's ``containment`` record after another annotate call: this call's figures (its
    pairs' texts are the ones at hand), with the judge of the latest call that judged."""
    return {**now, "judge": now["judge"] or (before.get("judge") if isinstance(before, dict) else None)}
