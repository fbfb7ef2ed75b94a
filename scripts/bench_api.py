"""Is udcg's API client the bottleneck? `udcg annotate --run` against a local OpenAI-compatible server,
beside a minimal raw async client posting the same payloads to the same server, in the same run.

    python scripts/bench_api.py [--queries 1000] [--depth 10] [--latency 0.2] [--concurrency 256]

Two settings, each a fresh server (``scripts/instant_openai_server.py``, its own process):

1. **instant**: the server answers at once; udcg at its default settings (no flag tuning) and the
   baseline at the same number of requests in flight (udcg's default ``--concurrency``);
2. **latency**: every answer waits ``--latency`` seconds; both at ``--concurrency`` in flight,
   against the ideal ``concurrency / latency``.

udcg: the real command (`udcg annotate --corpus C --run R --depth D --model openai:bench --api-base
URL -o OUT`) in a subprocess; its rate is what it prints, pairs computed per second of model time
(the runner with prompts, estimator and fsynced cache; the fixed start-up and corpus read are
printed apart). Its client CPU per pair is the child's CPU time over the pairs. Baseline: a child
that builds every payload dict first (outside the timing), then posts them with ``concurrency``
workers on one keep-alive client, serialising each body with ``json.dumps`` as it posts and
``json.loads``-ing each answer; twice, once with each HTTP client udcg can ride on: httpx's
AsyncClient (the package the SDK is built on: the issue's baseline) and aiohttp's ClientSession
(udcg's default client where aiohttp is installed). Lines ``ratio vs raw aiohttp: X`` and, last,
``ratio: X``: udcg / the raw httpx client, each the worse of the two settings.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from instant_openai_server import Process as Server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UDCG = [sys.executable, "-m", "udcg"]
WORDS = ("river city war album film born river season team king church song party village station army school "
         "university county league district novel island company family series game record state world").split()

BASELINE = r'''
import asyncio, json, sys, time
from udcg.llm.openai_wire import logprobs_payload
from udcg.annotate.prompt import reader_chat

url, concurrency, data, client = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
queries = {json.loads(l)["_id"]: json.loads(l)["text"] for l in open(f"{data}/queries.jsonl")}
corpus = {}
for line in open(f"{data}/corpus.jsonl"):
    d = json.loads(line); corpus[d["_id"]] = d["text"]
pairs = [l.split()[:3:2] for l in open(f"{data}/run.trec")]
payloads = [logprobs_payload("bench", reader_chat(queries[q], [corpus[d]], "udcg-code-v1"), 20) for q, d in pairs]
HEADERS = {"Content-Type": "application/json"}

async def with_httpx(todo):
    from udcg.llm.openai_transport import http_module
    http = http_module()
    async with http.AsyncClient(limits=http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
                                timeout=60) as client:
        async def worker():
            for payload in todo:
                r = await client.post(url, content=json.dumps(payload).encode(), headers=HEADERS)
                json.loads(r.content)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0

async def with_aiohttp(todo):
    import aiohttp
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker():
            for payload in todo:
                async with session.post(url, data=json.dumps(payload).encode(), headers=HEADERS) as r:
                    json.loads(await r.read())
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0

seconds = asyncio.run((with_aiohttp if client == "aiohttp" else with_httpx)(iter(payloads)))
print(json.dumps({"requests": len(payloads), "seconds": seconds}))
'''
CLIENTS = ("httpx", "aiohttp")


def make_data(folder: Path, queries: int, depth: int, seed: int = 0) -> int:
    """A BEIR folder (corpus.jsonl, queries.jsonl) and a run whose top-``depth`` are distinct documents."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "queries.jsonl", "w") as q, open(folder / "corpus.jsonl", "w") as c, open(folder / "run.trec", "w") as r:
        for i in range(queries):
            q.write(json.dumps({"_id": f"q{i}", "text": "what " + " ".join(rng.choices(WORDS, k=8)) + "?",
                                "metadata": {"answers": [rng.choice(WORDS)]}}) + "\n")
            for j in range(depth):
                doc = f"d{i}-{j}"
                c.write(json.dumps({"_id": doc, "title": rng.choice(WORDS).title(),
                                    "text": " ".join(rng.choices(WORDS, k=90))}) + "\n")
                r.write(f"q{i} Q0 {doc} {j + 1} {depth - j} bench\n")
    return queries * depth


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_udcg(data: Path, url: str, out: Path, depth: int, concurrency: int | None) -> dict:
    cmd = [*UDCG, "annotate", "--corpus", str(data), "--run", str(data / "run.trec"), "--depth", str(depth),
           "--model", "openai:bench", "--api-base", url, "-o", str(out), "--no-progress"]
    if concurrency is not None:
        cmd += ["--concurrency", str(concurrency)]
    cpu0, t0 = _child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if done.returncode:
        raise SystemExit(f"udcg annotate failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    m = re.search(r"new pairs annotated: (\d+).*?model time ([\d.]+) s", done.stderr, re.S)
    if m is None:
        raise SystemExit(f"udcg annotate printed no model time: {done.stderr.strip()[-800:]}")
    pairs, seconds = int(m.group(1)), float(m.group(2))
    return {"pairs": pairs, "model_seconds": seconds, "wall": wall, "rate": pairs / seconds, "cpu_ms_per_pair": 1000 * cpu / pairs,
            "client": client_name()}


def client_name() -> str:
    """The HTTP client udcg's API backend uses in this environment (UDCG_HTTP_CLIENT or the default)."""
    from udcg.llm.openai_transport import client_kind

    return client_kind()


def run_baseline(data: Path, url: str, concurrency: int, client: str) -> dict:
    done = subprocess.run([sys.executable, "-c", BASELINE, f"{url}/chat/completions", str(concurrency), str(data), client],
                          capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    return {**out, "rate": out["requests"] / out["seconds"]}


def default_concurrency() -> int:
    from udcg.bounds import DEFAULT_CONCURRENCY

    return DEFAULT_CONCURRENCY


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1000, help="10,000 pairs at depth 10: the model time (printed to 0.1 s) is long enough to read")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=256, help="in flight in the latency setting")
    args = ap.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        pairs = make_data(data, args.queries, args.depth)
        print(f"{pairs:,} pairs ({args.queries:,} queries x depth {args.depth}); 2 processes: server, client")
        settings = [("instant", 0.0, None, default_concurrency()), (f"{args.latency:g} s latency", args.latency,
                                                                     args.concurrency, args.concurrency)]
        for i, (name, latency, flag, inflight) in enumerate(settings):
            bases = {}
            for client in CLIENTS:
                with Server(latency) as server:
                    bases[client] = run_baseline(data, server.url, inflight, client)
            with Server(latency) as server:
                ours = run_udcg(data, server.url, Path(tmp) / f"out{i}", args.depth, flag)
            ratio = {c: ours["rate"] / bases[c]["rate"] for c in CLIENTS}
            ratios.append(ratio)
            raw = ", ".join(f"{c} {bases[c]['rate']:.0f} req/s (udcg / it {ratio[c]:.2f})" for c in CLIENTS)
            print(f"{name} ({inflight} in flight): udcg {ours['rate']:.0f} pairs/s ({ours['pairs']:,} pairs in "
                  f"{ours['model_seconds']:.2f} s of model time, {ours['wall']:.2f} s wall with start-up and corpus read; "
                  f"client CPU {ours['cpu_ms_per_pair']:.2f} ms/pair, HTTP client {ours['client']}); raw clients: {raw}")
            if latency:
                ideal = inflight / latency
                print(f"  ideal concurrency/latency = {ideal:.0f}/s: udcg at {ours['rate'] / ideal:.0%}, raw "
                      + ", raw ".join(f"{c} at {bases[c]['rate'] / ideal:.0%}" for c in CLIENTS))
    print(f"ratio vs raw aiohttp: {min(r['aiohttp'] for r in ratios):.2f}")
    print(f"ratio: {min(r['httpx'] for r in ratios):.2f}")


if __name__ == "__main__":
    main()
