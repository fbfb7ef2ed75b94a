"""udcg annotate: abstention probability and utility of every (question, passage) for one LLM."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("annotate", help="p(NO-RESPONSE) and utility per passage, for one LLM (resumable)",
                       description="Give every (question, passage) its abstention probability p_abs for one "
                       "reader LLM, alone in the paper's prompt, and its utility u = R * (1 - p_abs). Writes "
                       "the authors' models_info[<model>].no_res_prob plus our record (estimator, interval, "
                       "samples, prompt version). Relevance R comes from is_relevant, else answer containment. "
                       "Resumable: rerun the same command after a crash; finished passages are not recomputed.",
                       epilog="examples:\n"
                       "  udcg annotate data.json -o annotated.json --model qwen2.5-coder-0.5b\n"
                       "  udcg annotate ../shared/data/popqa-contriever-100/popqa_longtail_w_gs_example.jsonl \\\n"
                       "      --limit 10 -o popqa10.jsonl --model qwen2.5-coder-0.5b --estimator sequence\n"
                       "  OPENAI_API_KEY=... udcg annotate data.json -o out.json --api-base https://api.openai.com/v1 \\\n"
                       "      --model gpt-4o-mini --estimator sampling --samples 20 --temperature 1.0 --target-width 0.2",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="authors' JSON/JSONL, or a shared data set file (PopQA, NQ, SQuAD, ...)")
    p.add_argument("-o", "--output", required=True, help="output (.json = JSON list, else JSONL), authors' format")
    p.add_argument("--model", required=True, help="offline alias (smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b), "
                   "a Hugging Face id or local directory, or the API's model name with --api-base")
    p.add_argument("--estimator", default=None, choices=("first-token", "sequence", "sampling", "api-logprobs"),
                   help="default: first-token (paper parity) for local models, api-logprobs with --api-base")
    p.add_argument("--prompt", default="udcg-code-v1", help="reader prompt version (udcg-code-v1 = the authors' code; paper-fig4-v1)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible base URL(s), comma-separated (round-robin)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    p.add_argument("--concurrency", type=int, default=8, help="API requests in flight")
    p.add_argument("--rpm", type=float, default=None, help="API requests-per-minute limit")
    p.add_argument("--timeout", type=float, default=60.0, help="API: seconds to wait for one response (default 60)")
    p.add_argument("--max-retries", type=int, default=5, help="API: retries per request after the first attempt, "
                   "with exponential backoff and Retry-After (default 5); then the run stops, keeping finished work")
    p.add_argument("--device", default="auto", help="cpu, cuda, auto")
    p.add_argument("--dtype", default="float32", help="float32, bfloat16, float16")
    p.add_argument("--batch-size", type=int, default=None, help="passages per forward pass (default: automatic)")
    p.add_argument("--chunk-size", type=int, default=32, help="passages per cached unit of work")
    p.add_argument("--samples", type=int, default=20, help="sampling: answers per passage")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling: temperature")
    p.add_argument("--target-width", type=float, default=None, help="sampling: stop early once the Wilson interval is narrower")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def load_backend(args: argparse.Namespace):
    if args.api_base:
        from udcg.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(args.model, [u.strip() for u in args.api_base.split(",") if u.strip()],
                             api_key_env=args.api_key_env, max_concurrency=args.concurrency,
                             requests_per_minute=args.rpm, timeout=args.timeout, max_retries=args.max_retries)
    from udcg.llm.registry import load_backend as load

    return load(args.model, device=args.device, dtype=args.dtype, batch_size=args.batch_size)


def run(args: argparse.Namespace) -> int:
    from udcg.annotate.output import load_questions, write_annotated
    from udcg.annotate.runner import AnnotateConfig, annotate
    from udcg.errors import InputError
    from udcg.progress import bar, follow_libraries

    for flag, value in (("--limit", args.limit), ("--chunk-size", args.chunk_size), ("--samples", args.samples)):
        if value is not None and value < 1:  # checked before any model loads
            raise InputError(f"{flag} {value}: must be a positive integer")
    questions, raw = load_questions(args.input, args.limit)
    estimator = args.estimator or ("api-logprobs" if args.api_base else "first-token")
    cfg = AnnotateConfig(estimator=estimator, prompt_version=args.prompt, chunk_size=args.chunk_size,
                         n_samples=args.samples, temperature=args.temperature, target_width=args.target_width, seed=args.seed)
    follow_libraries(not args.no_progress)
    backend = load_backend(args)
    n = sum(len(q.passages) for q in questions)
    with bar(total=n, desc=f"annotate {backend.name}", unit="passage", enabled=not args.no_progress) as progress:
        annotations, stats = annotate(questions, backend, cfg, f"{args.output}.cache.jsonl", progress.update)
    summary = write_annotated(args.output, questions, raw, annotations, cfg, backend.name, stats)
    print(summary, file=sys.stderr)
    return 0
