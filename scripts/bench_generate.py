"""Greedy answer throughput: decoding each tight prompt batch alone (udcg 0.1.0 up to this change)
against joining consecutive prompt batches into one decoding batch (HFBackend._waves), same model,
same prompts, same process, alternating chunk by chunk so that machine load hits both alike.

Prompts: the reader chat of one PopQA passage (the eRAG / per-passage answers of `udcg validate`),
or of k passages with --k (the context answers). Both arms must give identical answers; the script
counts any that differ (a float near-tie can flip an argmax).

    python scripts/bench_generate.py --model qwen2.5-coder-0.5b --n-prompts 32 --chunk 16
    python scripts/bench_generate.py --model qwen2.5-coder-0.5b --k 5 --n-prompts 16 --chunk 8

On a GPU, with a model's config and tokenizer and random weights (weights cannot travel there),
and a third arm, the minimal client a user writes without udcg (``model.generate`` one prompt at a
time, greedy):

    python scripts/bench_generate.py --model CONFIG_FOLDER --random-init --device cuda --dtype bfloat16 \
        --n-prompts 256 --chunk 64 --minimal

The last line is ``ratio: <joined / per-batch prompts per second>``; with --minimal the line before
it is ``ratio to the minimal client: <joined / minimal>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from bench_annotate import DEFAULT_DATA, device_name, random_model  # noqa: E402


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


def minimal_client(model, tokenizer, chats, max_new_tokens: int) -> list[str]:
    """What a user writes without udcg: one greedy ``model.generate`` per prompt."""
    import torch

    out = []
    with torch.no_grad():
        for chat in chats:
            ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt",
                                                return_dict=True).to(model.device)
            new = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)[0, ids["input_ids"].shape[1]:]
            out.append(tokenizer.decode(new, skip_special_tokens=True).strip())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--n-prompts", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=16, help="prompts per generate() call (validate: reader.chunk_size)")
    parser.add_argument("--k", type=int, default=1, help="passages per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--random-init", action="store_true",
                        help="the model's config and tokenizer with seeded random weights (no weights needed)")
    parser.add_argument("--minimal", action="store_true",
                        help="a third arm: model.generate one prompt at a time (the minimal client)")
    args = parser.parse_args()
    if min(args.n_prompts, args.chunk, args.k, args.max_new_tokens) < 1:
        parser.error("--n-prompts, --chunk, --k and --max-new-tokens must be >= 1")

    import torch

    from udcg.llm.base import GenerationParams
    from udcg.llm.hf import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = random_model(args.model, args.dtype, Path(tmp), args.device) if args.random_init else args.model
        backend = HFBackend(model, device=args.device, dtype=args.dtype, name=args.model)
    joined_waves = backend._waves
    chats = prompts(args.data, args.n_prompts, args.k)
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    print(f"model: {backend.name}, {len(chats)} prompts of {args.k} passage(s), {args.max_new_tokens} new tokens max, "
          f"chunks of {args.chunk}; {device_name(backend.device)}, {args.dtype}"
          f"{', seeded random weights' if args.random_init else ''}; {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    backend.generate(chats[:2], params)  # warm-up
    arms = ("per-batch", "joined") + (("minimal",) if args.minimal else ())
    seconds = dict.fromkeys(arms, 0.0)
    answers: dict[str, list] = {arm: [] for arm in arms}
    for start in range(0, len(chats), args.chunk):
        chunk = chats[start:start + args.chunk]
        turn = start // args.chunk % len(arms)
        for arm in arms[turn:] + arms[:turn]:
            t = time.perf_counter()
            if arm == "minimal":
                answers[arm] += minimal_client(backend.model, backend.tokenizer, chunk, args.max_new_tokens)
            else:
                backend._waves = joined_waves if arm == "joined" else (lambda batches, lengths: [[b] for b in batches])
                answers[arm] += [a[0] for a in backend.generate(chunk, params)]
            seconds[arm] += time.perf_counter() - t
            print(f"  prompts {start + len(chunk):4d}: {arm} {len(chunk) / (time.perf_counter() - t):.3f}/s", flush=True)
    rates = {arm: len(chats) / s for arm, s in seconds.items()}
    for arm in seconds:
        print(f"{arm:<10} {seconds[arm]:8.1f} s  {rates[arm]:6.3f} prompts/s")
    differ = sum(a != b for a, b in zip(answers["per-batch"], answers["joined"]))
    print(f"answers that differ: {differ} of {len(chats)}")
    if args.minimal:
        differ = sum(a != b for a, b in zip(answers["minimal"], answers["joined"]))
        print(f"answers that differ, minimal vs joined: {differ} of {len(chats)}")
        print(f"ratio to the minimal client: {rates['joined'] / rates['minimal']:.2f}")
    print(f"ratio: {rates['joined'] / rates['per-batch']:.2f}")


if __name__ == "__main__":
    main()
