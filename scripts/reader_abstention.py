"""Does the reader abstain on distractors? p(NO-RESPONSE), abstention and correct-answer rates of a
reader given one PopQA passage, for relevant and for irrelevant passages, per model and prompt.

Passages (deterministic): PopQA long-tail (the shared ``popqa-contriever-100`` file), relevance by
answer containment; questions from the 51st on (then from the 1st), per question at most 2 relevant
passages (any rank) and 2 irrelevant ones from ranks 6-25, until ``--per-class`` of each.

Per (model, prompt) and passage, one prompt pass (``HFBackend.read``): p_abs = P(first token of
NO-RESPONSE), the greedy answer (32 new tokens), and the outcome:
abstained / correct by the rule judge (``udcg.grade.rules.answer_outcome``: an abstention, else
correct when a normalised answer alias occurs in the answer: the "contains" rule, named).
Resumable: the cached runner (``udcg.resumable``) appends finished chunks to
``--work/cache-<model>-<prompt>.jsonl``. Writes
``--out/table.md``, ``table.json`` and the per-passage data ``passages.jsonl.gz`` (gzip, mtime 0).

    .venv/bin/python scripts/reader_abstention.py --data-dir ../shared/data \\
        --models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b --prompts udcg-code-v1,paper-fig4-v1
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def select(data_dir: Path, per_class: int, start: int = 50) -> list[dict]:
    from udcg.io.loaders import load_popqa

    questions = load_popqa(data_dir / "popqa-contriever-100" / "popqa_longtail_w_gs_example.jsonl", label=True)
    order = questions[start:] + questions[:start]
    rel, irr = [], []
    for q in order:
        r = [(i, p) for i, p in enumerate(q.passages) if p.relevant][:2]
        n = [(i, p) for i, p in enumerate(q.passages) if i >= 5 and p.relevant is False][:2]
        for bucket, items, label in ((rel, r, True), (irr, n, False)):
            for i, p in items:
                if len(bucket) < per_class:
                    bucket.append({"qid": q.qid, "pid": p.docid, "rank": i + 1, "relevant": label, "question": q.text,
                                   "answers": list(q.answers), "text": p.text})
        if len(rel) >= per_class and len(irr) >= per_class:
            break
    return rel + irr


def measure(items: list[dict], model: str, prompt: str, cache_path: Path, chunk: int) -> tuple[list[dict], float]:
    """Each item's p_abs, greedy answer and outcome, through the cached runner (``udcg.resumable``: keys
    ``qid<TAB>pid``, chunks of ``chunk`` cut from the whole item list); the model's seconds in this
    run (its load left out)."""
    from udcg import resumable
    from udcg.annotate.prompt import reader_chat
    from udcg.grade.rules import answer_outcome
    from udcg.llm.lazy import LazyBackend

    backend = LazyBackend(model)  # loaded by the first chunk to compute: none when all is cached

    def read(chats: list) -> list[dict]:
        readings = backend.read(chats, ["NO-RESPONSE"], [""] * len(chats), max_new_tokens=32)
        return [{"p_abs": math.exp(r.first["NO-RESPONSE"]), "answer": r.answer.strip()} for r in readings]

    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done += n
        print(f"{model} {prompt}: {done}/{len(items)}", flush=True)

    keys = [resumable.key(it["qid"], it["pid"]) for it in items]
    requests = [(k, reader_chat(it["question"], [it["text"]], prompt)) for k, it in zip(keys, items)]
    with resumable.open_cache(cache_path) as cache:
        stats = resumable.fill(cache, requests, read, chunk, progress=progress, fingerprint=resumable.fingerprint)
        out = []
        for k, it in zip(keys, items):
            rec = cache.get(k)
            outcome = answer_outcome(rec["answer"], it["answers"], "contains")  # the rule the table records
            out.append({"qid": it["qid"], "pid": it["pid"], "rank": it["rank"], "relevant": it["relevant"],
                        "model": model, "prompt_version": prompt, "p_abs": rec["p_abs"], "answer": rec["answer"],
                        "abstained": outcome == "abstained", "correct": outcome == "correct"})
    return out, stats.seconds - backend.load_seconds


def summarise(rows: list[dict]) -> list[dict]:
    from udcg.metrics.stats import bootstrap_ci

    table = []
    keys = sorted({(r["model"], r["prompt_version"]) for r in rows})
    for model, prompt in keys:
        for relevant in (True, False):
            part = [r for r in rows if (r["model"], r["prompt_version"], r["relevant"]) == (model, prompt, relevant)]
            p = np.array([r["p_abs"] for r in part])
            low, high = bootstrap_ci(p)
            table.append({"model": model, "prompt": prompt, "passages": "relevant" if relevant else "irrelevant",
                          "n": len(part), "mean_p_abs": float(p.mean()), "ci_low": low, "ci_high": high,
                          "abstained": float(np.mean([r["abstained"] for r in part])),
                          "correct": float(np.mean([r["correct"] for r in part]))})
    return table


def markdown(table: list[dict]) -> str:
    lines = ["| reader | prompt | passages | n | mean p(NO-RESPONSE) [95% CI] | abstained | answered correctly |",
             "|---|---|---|---|---|---|---|"]
    for t in table:
        lines.append(f"| {t['model']} | {t['prompt']} | {t['passages']} | {t['n']} | {t['mean_p_abs']:.3f} "
                     f"[{t['ci_low']:.3f}, {t['ci_high']:.3f}] | {t['abstained']:.1%} | {t['correct']:.1%} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("--prompts", default="udcg-code-v1,paper-fig4-v1")
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--work", type=Path, default=Path("docs/results/reader-abstention/cache"))
    ap.add_argument("--out", type=Path, default=Path("docs/results/reader-abstention"))
    ap.add_argument("--finished-only", action="store_true",
                    help="tabulate only the (model, prompt) pairs whose cache is complete; load no model")
    args = ap.parse_args()
    items = select(args.data_dir, args.per_class)
    rows, timing = [], {}
    for model in args.models.split(","):
        for prompt in args.prompts.split(","):
            cache = args.work / f"cache-{model}-{prompt}.jsonl"
            if args.finished_only and (not cache.is_file() or len(cache.read_text().splitlines()) < len(items)):
                print(f"{model} {prompt}: not finished, left out", flush=True)
                continue
            part, seconds = measure(items, model, prompt, args.work / f"cache-{model}-{prompt}.jsonl", args.chunk)
            rows += part
            timing[f"{model} {prompt}"] = round(seconds, 1)
    table = summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(markdown(table))
    (args.out / "table.json").write_text(json.dumps({"table": table, "model_seconds_this_run": timing}, indent=2) + "\n")
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    with open(args.out / "passages.jsonl.gz", "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(data)
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
