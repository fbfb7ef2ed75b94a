"""Per-passage work of `udcg validate`: three calls per chunk of single-passage prompts (p_abs by
next_token_logprobs, the eRAG answer by generate, ANSWER_PROB by continuation_logprobs — udcg 0.1.0
up to this change) against one HFBackend.read call that gets all three from one prompt pass. Same
model, same prompts, same process, alternating chunk by chunk so that machine load hits both alike.

    python scripts/bench_read.py --model qwen2.5-coder-0.5b --n-prompts 32 --chunk 16

The arms must agree: the script prints the largest p_abs and log-likelihood differences and counts
answers that differ. The last line is ``ratio: <read / three calls, prompts per second>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from bench_annotate import DEFAULT_DATA  # noqa: E402


def requests(path: Path, n: int) -> list[tuple[list, str]]:
    """(reader chat of one passage, the first reference answer), PopQA rows in order."""
    from udcg.annotate.prompt import reader_chat

    out = []
    for line in filter(str.strip, path.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        for ctx in row["ctxs"]:
            out.append((reader_chat(row["question"], [ctx["text"]]), row["answers"][0]))
            if len(out) == n:
                return out
    return out


def three_calls(backend, chats: list, answers: list[str], max_new_tokens: int) -> list[tuple]:
    from udcg.annotate.prompt import ABSTAIN
    from udcg.llm.base import GenerationParams

    first = backend.next_token_logprobs(chats, [ABSTAIN])
    said = backend.generate(chats, GenerationParams(max_new_tokens=max_new_tokens))
    conts = backend.continuation_logprobs(list(zip(chats, answers)))
    return [(f[ABSTAIN], a[0], math.fsum(c)) for f, a, c in zip(first, said, conts)]


def one_read(backend, chats: list, answers: list[str], max_new_tokens: int) -> list[tuple]:
    from udcg.annotate.prompt import ABSTAIN

    return [(r.first[ABSTAIN], r.answer, math.fsum(r.continuation))
            for r in backend.read(chats, [ABSTAIN], answers, max_new_tokens)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--n-prompts", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=16, help="prompts per call (validate: reader.chunk_size)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if min(args.n_prompts, args.chunk, args.max_new_tokens) < 1:
        parser.error("--n-prompts, --chunk and --max-new-tokens must be >= 1")

    import torch

    from udcg.llm.hf import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = HFBackend(args.model, device="cpu", dtype="float32")
    reqs = requests(args.data, args.n_prompts)
    print(f"model: {backend.name}, {len(reqs)} single-passage prompts, {args.max_new_tokens} new tokens max, "
          f"chunks of {args.chunk}; {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    arms = {"three calls": three_calls, "read": one_read}
    seconds = dict.fromkeys(arms, 0.0)
    results: dict[str, list] = {arm: [] for arm in arms}
    for start in range(0, len(reqs), args.chunk):
        chats, answers = map(list, zip(*reqs[start:start + args.chunk]))
        for arm in (list(arms) if start // args.chunk % 2 == 0 else list(arms)[::-1]):
            t = time.perf_counter()
            results[arm] += arms[arm](backend, chats, answers, args.max_new_tokens)
            seconds[arm] += time.perf_counter() - t
    rates = {arm: len(reqs) / s for arm, s in seconds.items()}
    for arm in arms:
        print(f"{arm:<12} {seconds[arm]:8.1f} s  {rates[arm]:6.3f} prompts/s")
    pairs = list(zip(results["three calls"], results["read"]))
    print(f"max |Δ p_abs|: {max(abs(math.exp(a[0]) - math.exp(b[0])) for a, b in pairs):.2e}; "
          f"max |Δ log-likelihood|: {max(abs(a[2] - b[2]) for a, b in pairs):.2e}; "
          f"answers that differ: {sum(a[1] != b[1] for a, b in pairs)} of {len(pairs)}")
    print(f"ratio: {rates['read'] / rates['three calls']:.2f}")


if __name__ == "__main__":
    main()
