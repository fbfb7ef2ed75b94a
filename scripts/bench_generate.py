"""Greedy answer throughput: decoding each tight prompt batch alone (udcg 0.1.0 up to this change)
against joining consecutive prompt batches into one decoding batch (HFBackend._waves), same model,
same prompts, same process, alternating chunk by chunk so that machine load hits both alike.

Prompts: the reader chat of one PopQA passage (the eRAG / per-passage answers of `udcg validate`),
or of k passages with --k (the context answers). Both arms must give identical answers; the script
counts any that differ (a float near-tie can flip an argmax).

    python scripts/bench_generate.py --model qwen2.5-coder-0.5b --n-prompts 32 --chunk 16
    python scripts/bench_generate.py --model qwen2.5-coder-0.5b --k 5 --n-prompts 16 --chunk 8

The last line is ``ratio: <joined / per-batch prompts per second>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from bench_annotate import DEFAULT_DATA  # noqa: E402


def prompts(path: Path, n: int, k: int) -> list:
    import json

    from udcg.annotate.prompt import reader_chat

    chats = []
    for line in filter(str.strip, path.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        texts = [c["text"] for c in row["ctxs"]]
        for i in range(0, len(texts) - k + 1, k):
            chats.append(reader_chat(row["question"], texts[i:i + k]))
            if len(chats) == n:
                return chats
    return chats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--n-prompts", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=16, help="prompts per generate() call (validate: reader.chunk_size)")
    parser.add_argument("--k", type=int, default=1, help="passages per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if min(args.n_prompts, args.chunk, args.k, args.max_new_tokens) < 1:
        parser.error("--n-prompts, --chunk, --k and --max-new-tokens must be >= 1")

    import torch

    from udcg.llm.base import GenerationParams
    from udcg.llm.hf import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = HFBackend(args.model, device="cpu", dtype="float32")
    joined_waves = backend._waves
    chats = prompts(args.data, args.n_prompts, args.k)
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    print(f"model: {backend.name}, {len(chats)} prompts of {args.k} passage(s), {args.max_new_tokens} new tokens max, "
          f"chunks of {args.chunk}; {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    seconds = {"per-batch": 0.0, "joined": 0.0}
    answers: dict[str, list] = {"per-batch": [], "joined": []}
    for start in range(0, len(chats), args.chunk):
        chunk = chats[start:start + args.chunk]
        for arm in (("per-batch", "joined") if start // args.chunk % 2 == 0 else ("joined", "per-batch")):
            backend._waves = joined_waves if arm == "joined" else (lambda batches, lengths: [[b] for b in batches])
            t = time.perf_counter()
            answers[arm] += backend.generate(chunk, params)
            seconds[arm] += time.perf_counter() - t
    rates = {arm: len(chats) / s for arm, s in seconds.items()}
    for arm in seconds:
        print(f"{arm:<10} {seconds[arm]:8.1f} s  {rates[arm]:6.3f} prompts/s")
    differ = sum(a != b for a, b in zip(answers["per-batch"], answers["joined"]))
    print(f"answers that differ: {differ} of {len(chats)}")
    print(f"ratio: {rates['joined'] / rates['per-batch']:.2f}")


if __name__ == "__main__":
    main()
