"""LLM relevance judge vs the answer-containment rule on PopQA passages: Cohen's kappa and the
confusion matrix.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/judge_agreement.py --questions 20 --passages 25 \
        --model qwen2.5-coder-0.5b --max-new-tokens 60

Data: ../shared/data/popqa-contriever-100 (PopQA long-tail, MIT; top-25 Contriever passages of the
DPR Wikipedia split, CC BY-SA). Judgements are cached under --out (resumable: rerun the same
command after an interruption) and written there as JSONL; the table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tqdm import tqdm  # noqa: E402

from udcg.grade import runner  # noqa: E402
from udcg.grade.agreement import compare_labels  # noqa: E402
from udcg.grade.judges import TASKS, LLMJudge, PassageItem, RuleJudge  # noqa: E402
from udcg.io.files import atomic_write_jsonl, iter_jsonl  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "popqa-contriever-100" / "popqa_longtail_w_gs_example.jsonl"


def popqa_items(path: Path, n_questions: int, n_passages: int) -> list[PassageItem]:
    items = []
    for _, row in list(iter_jsonl(path))[:n_questions]:
        qid = str(row["id"])
        for j, ctx in enumerate(row["ctxs"][:n_passages]):
            # some passages (the added gold-support ones) carry no id: name them by rank
            items.append(PassageItem(qid=qid, docid=str(ctx.get("id", f"{qid}#{j}")), question=row["question"],
                                     answers=tuple(row["answers"]), text=ctx["text"].strip(), title=ctx.get("title", "")))
    return items


def judge_all(judge, items, cache: Path, batch_size: int) -> tuple[list[dict], float]:
    start = time.perf_counter()
    with tqdm(total=len(items), desc=judge.name, unit="passage", file=sys.stderr) as bar:
        records = runner.judge_items(judge, items, cache, chunk_size=batch_size, progress=bar.update)
    return records, time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--passages", type=int, default=25)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--max-new-tokens", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=8, help="rows per forward pass of the model")
    ap.add_argument("--chunk", type=int, default=16, help="items per generate call and cache flush")
    ap.add_argument("--retries", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("runs/judge_agreement"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from udcg.llm.registry import load_backend

    items = popqa_items(args.data, args.questions, args.passages)
    task = TASKS["relevance"]
    rules, _ = judge_all(RuleJudge(task), items, args.out / "rules.cache.jsonl", 10_000)
    backend = load_backend(args.model, batch_size=args.batch_size)
    judge = LLMJudge(backend, task, max_new_tokens=args.max_new_tokens, retries=args.retries)
    safe = args.model.replace("/", "_")
    llm, seconds = judge_all(judge, items, args.out / f"{safe}.cache.jsonl", args.chunk)
    atomic_write_jsonl(args.out / "rules.jsonl", rules)
    atomic_write_jsonl(args.out / f"{safe}.jsonl", llm)

    ag = compare_labels(rules, llm, labels=["relevant", "irrelevant"])
    summary = runner.count_labels(llm)
    print(f"PopQA long-tail: {args.questions} questions x {args.passages} passages = {len(items)} pairs")
    print(f"LLM judge {judge.name} ({judge.prompt_id}, greedy, max_new_tokens={args.max_new_tokens}, "
          f"retries={args.retries}, batch {args.batch_size})")
    print(f"LLM summary: {runner.format_summary(summary)}")
    print(f"rules summary: {runner.format_summary(runner.count_labels(rules))}")
    print(ag.to_text())
    repairs: dict[str, int] = {}
    for r in llm:
        for name in r.get("repair", []):
            repairs[name] = repairs.get(name, 0) + 1
    print("repairs used:", json.dumps(repairs, sort_keys=True) or "{}")
    print(f"time this run: {seconds:.0f} s for the LLM judge (cached items cost nothing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
