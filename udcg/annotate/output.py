"""Input and output of `udcg annotate`: questions in, the authors' format with our record out."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from udcg.version import __version__
from udcg.annotate.runner import AnnotateConfig, AnnotateStats, annotation_key, annotation_record
from udcg.io.authors import question_to_authors, read_authors, write_authors
from udcg.io.files import atomic_write_json, read_records
from udcg.metrics.reader_check import ReaderPairs, check_reader_pairs
from udcg.metrics.udcg import utility
from udcg.records import Annotation, Question


def load_questions(path: str, limit: int | None = None) -> tuple[list[Question], list[dict]]:
    """Authors' format (raw items kept, to write back with every field the user had) or any data
    set udcg.io.sources reads. Passages without a relevance label get one by answer containment."""
    from udcg.io.sources import label_by_containment, load_dataset

    p = Path(path)
    if p.is_file() and all("passages" in obj for _, obj in read_records(p)[:1]):
        raw, questions = read_authors(p)
    else:
        questions = load_dataset(path, limit=limit)
        raw = [question_to_authors(q) for q in questions]
    if limit is not None:
        raw, questions = raw[:limit], questions[:limit]
    return label_by_containment(questions), raw


def write_annotated(output: str, questions: Sequence[Question], raw: Sequence[dict], annotations: dict[str, Annotation],
                    cfg: AnnotateConfig, model: str, stats: AnnotateStats) -> str:
    items, rel_p, irr_p, pairs = [], [], [], []
    for q, item in zip(questions, raw, strict=True):
        out = dict(item)
        passages = []
        for p, praw in zip(q.passages, item["passages"], strict=True):
            a = annotations[annotation_key(q.qid, p.docid)]
            d = dict(praw)
            if "is_relevant" not in praw:
                d["is_relevant"] = p.relevant
                d["relevance_source"] = "containment"
            info = dict(praw.get("models_info", {}))
            record = {k: v for k, v in annotation_record(a).items() if k not in ("qid", "pid", "model") and v not in (None, "")}
            record["utility"] = utility(bool(p.relevant), a.p_abs)
            info[model] = {"no_res_prob": a.p_abs, "udcg": record}
            d["models_info"] = info
            passages.append(d)
            (rel_p if p.relevant else irr_p).append(a.p_abs)
            pairs.append((a.p_abs, bool(p.relevant), q.qid))
        out["passages"] = passages
        items.append(out)
    write_authors(output, items)
    mean = lambda v: sum(v) / len(v) if v else math.nan  # noqa: E731
    meta = {"udcg_version": __version__, "model": model, **asdict(cfg), "n_questions": len(items),
            "n_passages": stats.n_passages, "n_computed_this_run": stats.n_computed,
            "n_changed_this_run": stats.n_changed,
            "passages_per_s_this_run": stats.passages_per_s, "notes": stats.notes, "n_censored": stats.n_censored,
            "mean_p_abs_relevant": mean(rel_p), "mean_p_abs_irrelevant": mean(irr_p),
            "n_relevant": len(rel_p), "n_irrelevant": len(irr_p), "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    check = check_reader_pairs(ReaderPairs([x[0] for x in pairs], [x[1] for x in pairs], [True] * len(pairs),
                                           [x[2] for x in pairs]), model=model, estimator=cfg.estimator)
    meta["reader_check"] = check.to_dict()
    atomic_write_json(f"{output}.meta.json", {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in meta.items()})
    lines = [f"annotated {stats.n_passages} passages of {len(items)} questions with {model} ({cfg.estimator}); "
             f"computed {stats.n_computed} this run at {stats.passages_per_s:.2f} passages/s"
             + (f" (recomputed {stats.n_changed} changed pairs: their text differs from the cached one)"
                if stats.n_changed else ""),
             f"mean p_abs: relevant {mean(rel_p):.4f} (n={len(rel_p)})  irrelevant {mean(irr_p):.4f} (n={len(irr_p)})"]
    lines += [f"note: {n} passages: {note}" for note, n in stats.notes.items()]
    if stats.n_censored:
        from udcg.annotate.runner import censored_warning

        lines.append(censored_warning(stats.n_censored, stats.n_passages))
    return "\n".join(lines + check.lines() + check.query_lines())
