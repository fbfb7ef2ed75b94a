"""Annotation throughput: the authors' loop against udcg's batched backend, same model, passages, machine.

The authors' loop (GiovanniTRA/UDCG, src/compute_abstention_probability.py): for each passage,
render the chat, tokenise, one forward pass with logits for every position, softmax of the last
row, probability of the first token of "NO-RESPONSE". Ours: ``abstention_probs(HFBackend, chats)``
(length-sorted batches, shared-prefix key/value cache, vocabulary projection at the answer
position only). Both run on the same loaded model object, alternating chunk by chunk so that a
change in machine load hits both alike.

FLOP counts use 2 x parameters x tokens: transformer-body parameters (embedding lookup excluded)
for every token run, plus the vocabulary projection (hidden x vocab) for every position projected.

    python scripts/bench_annotate.py --model qwen2.5-coder-0.5b --n-passages 64
    python scripts/bench_annotate.py --model smollm2-135m --n-passages 32 --int8
    python scripts/bench_annotate.py --model CONFIG_FOLDER --random-init --device cuda --dtype bfloat16 \
        --n-passages 1024 --chunk 256 --peak-gflops 989000

``--random-init``: the model's config and tokenizer with randomly initialised weights (seeded),
for a GPU machine the weights cannot travel to: the same shapes cost the same FLOPs. The model
folder then needs config.json and the tokenizer files only.

The last line is ``ratio: <ours / authors' passages per second>``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared/data/popqa-contriever-100/popqa_longtail_w_gs_example.jsonl"


def load_passages(path: Path, n: int) -> list[tuple[str, str, list[str]]]:
    """The first n (question, passage text, answers) pairs, question by question."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        for ctx in row["ctxs"]:
            out.append((row["question"], ctx["text"], list(row.get("answers", []))))
            if len(out) == n:
                return out
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def contains_answer(text: str, answers: list[str]) -> bool:
    t = f" {_norm(text)} "
    return any(_norm(a) and f" {_norm(a)} " in t for a in answers)


def authors_loop(model, tokenizer, chats, token_id: int) -> tuple[list[float], int]:
    import torch

    probs, tokens = [], 0
    with torch.no_grad():
        for chat in chats:
            prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            inputs = tokenizer(prompt, return_tensors="pt", truncation=True)
            inputs = {k: v.to(model.device) for k, v in inputs.items()}
            logits = model(**inputs).logits
            probs.append(torch.softmax(logits[0, -1, :], dim=-1)[token_id].item())
            tokens += inputs["input_ids"].shape[1]
    return probs, tokens


def body_params(model) -> tuple[int, int, int]:
    """(parameters of the transformer body without the embedding table, hidden size, vocab size)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters())
    body = total - emb.numel() - (head.numel() if head.data_ptr() != emb.data_ptr() else 0)
    return body, head.shape[1], head.shape[0]


def our_tokens(backend, chats, chunk: int) -> tuple[int, int]:
    """Tokens our backend runs through the body (shared prefix once per call, padding included)."""
    from udcg.llm.batching import prompt_batches, shared_prefix
    from udcg.llm.hf import MIN_SHARED_PREFIX

    run = useful = 0
    for start in range(0, len(chats), chunk):
        seqs = [backend.encode(c) for c in chats[start:start + chunk]]
        p = shared_prefix(seqs) if backend.share_prefix and len(seqs) > 1 else 0
        p = min(p, min(len(s) for s in seqs) - 1)
        p = p if p >= MIN_SHARED_PREFIX else 0
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        for batch in prompt_batches(order, [len(s) - p for s in seqs], backend.batch_size,
                                    backend.device.startswith("cuda")):
            run += len(batch) * max(len(seqs[i]) - p for i in batch)
        run += p
        useful += sum(len(s) for s in seqs)
    return run, useful


def random_model(source: str, dtype: str, folder: Path, device: str = "cpu") -> str:
    """A model folder with ``source``'s config and tokenizer and seeded random weights in ``dtype``.

    The weights are drawn on ``device``: on a GPU a 1.5B model is initialised in seconds, where the
    CPU's initialisers took most of a lent GPU's time.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from udcg.llm.hf_load import locate

    path, _, local = locate(source)
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(path, local_files_only=local)
    with torch.device(device):
        net = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    net.save_pretrained(folder)
    AutoTokenizer.from_pretrained(path, local_files_only=local).save_pretrained(folder)
    return str(folder)


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return cpu_name()


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x {os.cpu_count()}"
    except OSError:
        pass
    return f"{os.cpu_count()} cpus"


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--n-passages", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=None, help="rows per forward pass (default: by token budget)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chunk", type=int, default=32, help="passages per call, alternating authors' / ours")
    parser.add_argument("--no-share-prefix", action="store_true", help="turn the shared-prefix cache off")
    parser.add_argument("--int8", action="store_true", help="also time the int8 dynamic-quantisation path (CPU)")
    parser.add_argument("--peak-gflops", type=float, default=150.0, help="the machine's fp32 peak")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--random-init", action="store_true",
                        help="the model's config and tokenizer with seeded random weights (no weights needed)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from udcg.annotate.estimators import abstention_probs
    from udcg.annotate.prompt import reader_chat
    from udcg.llm.hf import HFBackend

    rows = load_passages(args.data, args.n_passages)
    chats = [reader_chat(q, [text]) for q, text, _ in rows]
    with tempfile.TemporaryDirectory() as tmp:
        model_path = random_model(args.model, args.dtype, Path(tmp), args.device) if args.random_init else args.model
        backend = HFBackend(model_path, device=args.device, dtype=args.dtype, batch_size=args.batch_size,
                            share_prefix=not args.no_share_prefix)
    model, tokenizer = backend.model, backend.tokenizer
    token_id = backend.first_token("NO-RESPONSE")
    print(f"device: {device_name(backend.device)}")
    weights = "seeded random weights" if args.random_init else "its weights"
    print(f"model {args.model} with {weights} ({args.dtype}, {args.device}, {torch.get_num_threads()} threads), {len(chats)} PopQA "
          f"passages, chunks of {args.chunk}; load average at start {os.getloadavg()[0]:.1f}")
    authors_loop(model, tokenizer, chats[:1], token_id)  # warm-up, both paths
    abstention_probs(backend, chats[:2])

    theirs, ours, t_theirs, t_ours, tok_theirs = [], [], 0.0, 0.0, 0
    for start in range(0, len(chats), args.chunk):
        part = chats[start:start + args.chunk]
        t0 = time.perf_counter()
        p, n = authors_loop(model, tokenizer, part, token_id)
        t1 = time.perf_counter()
        q = abstention_probs(backend, part)
        t2 = time.perf_counter()
        theirs += p
        ours += q
        tok_theirs += n
        t_theirs += t1 - t0
        t_ours += t2 - t1
        print(f"  passages {start + len(part):4d}: authors' {len(part) / (t1 - t0):.3f}/s, ours {len(part) / (t2 - t1):.3f}/s",
              flush=True)
    n = len(chats)
    delta = max(abs(a - b) for a, b in zip(theirs, ours))
    body, hidden, vocab = body_params(model)
    run, useful = our_tokens(backend, chats, args.chunk)
    flop_theirs = 2 * body * tok_theirs + 2 * hidden * vocab * tok_theirs
    flop_ours = 2 * body * run + 2 * hidden * vocab * n
    peak = args.peak_gflops * 1e9
    print(f"tokens per passage: {tok_theirs / n:.1f}; ours runs {run / n:.1f} (shared prefix once per call, padding)")
    print(f"authors' loop: {n / t_theirs:.3f} passages/s, {flop_theirs / t_theirs / 1e9:.1f} GFLOP/s "
          f"= {flop_theirs / t_theirs / peak:.0%} of peak")
    print(f"ours:          {n / t_ours:.3f} passages/s, {flop_ours / t_ours / 1e9:.1f} GFLOP/s executed "
          f"= {flop_ours / t_ours / peak:.0%} of peak; effective (the authors' FLOPs in our time) "
          f"{flop_theirs / t_ours / 1e9:.1f} GFLOP/s")
    print(f"max |dp| ours vs authors': {delta:.2e}")
    if args.int8:
        quant = HFBackend(args.model, device="cpu", dtype="float32", batch_size=args.batch_size, quantize="int8",
                          share_prefix=not args.no_share_prefix)
        abstention_probs(quant, chats[:2])
        t0 = time.perf_counter()
        q8 = [p for s in range(0, n, args.chunk) for p in abstention_probs(quant, chats[s:s + args.chunk])]
        t8 = time.perf_counter() - t0
        rel = [1.0 if contains_answer(text, answers) else -1.0 for _, text, answers in rows]
        u32 = [r * (1 - p) for r, p in zip(rel, ours)]
        u8 = [r * (1 - p) for r, p in zip(rel, q8)]
        print(f"int8 dynamic: {n / t8:.3f} passages/s, ratio to authors' {t_theirs / t8:.2f} (timed after, not "
              f"interleaved), max |dp| vs fp32 {max(abs(a - b) for a, b in zip(ours, q8)):.3f}, Spearman of utilities "
              f"vs fp32 {spearman(u32, u8):.4f}, of p_abs {spearman(ours, q8):.4f}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    print(f"ratio: {t_theirs / t_ours:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
