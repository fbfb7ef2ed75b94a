"""A minimal OpenAI-compatible chat-completions server for benchmarks: it answers at once (or after a
fixed ``--latency``), so what a benchmark measures is the client, not a model.

    python scripts/instant_openai_server.py --port 8011 [--latency 0.2] [--ignore-n] [--no-logprobs]

``POST /v1/chat/completions`` (keep-alive HTTP/1.1, asyncio, one process): with ``logprobs`` it
returns a first-token top list in which ``NO``'s log-probability is a deterministic function of
the prompt (so utilities differ between pairs); otherwise ``n`` answers (one with ``--ignore-n``, as
servers without ``n`` do), some of them ``NO-RESPONSE``. ``--no-logprobs`` drops the logprobs field
(a server without logprobs). ``GET /stats`` returns what it saw: requests, connections opened and
the most requests in flight at once. It prints ``ready <port>`` on stdout once listening.

``Process(latency)``: the server in a child process, as the benchmarks and tests start it (a
context manager; ``url`` is its base URL, ``.../v1``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import subprocess
import sys

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
_NOT_FOUND = b'{"error": {"message": "not found"}}'
STATS = {"requests": 0, "connections": 0, "in_flight": 0, "max_in_flight": 0}


def _fraction(text: str, salt: str) -> float:
    digest = hashlib.blake2b(f"{salt}\0{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def _answer(body: dict, args: argparse.Namespace) -> dict:
    prompt = json.dumps(body.get("messages", []), sort_keys=True)
    p_no = 0.02 + 0.96 * _fraction(prompt, "p")
    if body.get("logprobs") and not args.no_logprobs:
        top = [{"token": "NO", "logprob": math.log(p_no)}, {"token": "The", "logprob": math.log(1 - p_no)}]
        logprobs = {"content": [{"token": "NO" if p_no >= 0.5 else "The", "logprob": max(t["logprob"] for t in top),
                                 "top_logprobs": top[: int(body.get("top_logprobs") or 0)]}]}
        choices = [{"index": 0, "message": {"role": "assistant", "content": "NO" if p_no >= 0.5 else "The"},
                    "logprobs": logprobs, "finish_reason": "length"}]
    else:
        n = 1 if args.ignore_n else int(body.get("n") or 1)
        seed = str(body.get("seed"))
        choices = [{"index": i, "message": {"role": "assistant",
                                            "content": "NO-RESPONSE" if _fraction(f"{prompt}{seed}{i}", "a") < p_no else "Paris"},
                    "finish_reason": "stop"} for i in range(n)]
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": choices, "usage": {"prompt_tokens": 0, "completion_tokens": len(choices), "total_tokens": len(choices)}}


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, args: argparse.Namespace) -> None:
    STATS["connections"] += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *headers = head.decode("latin-1").split("\r\n")
            length = 0
            for h in headers:
                name, _, value = h.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            raw = await reader.readexactly(length) if length else b""
            path = request_line.split(" ")[1].rstrip("/")
            if path.endswith("/stats"):
                out = json.dumps(STATS).encode()
                writer.write(_OK % len(out) + out)
                await writer.drain()
                continue
            STATS["requests"] += 1
            STATS["in_flight"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
            try:
                if args.latency:
                    await asyncio.sleep(args.latency)
            finally:
                STATS["in_flight"] -= 1
            if path.endswith("/chat/completions"):
                out = json.dumps(_answer(json.loads(raw), args)).encode()
                writer.write(_OK % len(out) + out)
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % len(_NOT_FOUND) + _NOT_FOUND)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


class Process:
    """This server in a child process on a free port, stopped on exit."""

    def __init__(self, latency: float = 0.0, *flags: str) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--latency", str(latency), *flags],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.proc.kill()
            raise SystemExit(f"instant_openai_server.py did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait()


async def main(args: argparse.Namespace) -> None:
    server = await asyncio.start_server(lambda r, w: _serve(r, w, args), "127.0.0.1", args.port, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--ignore-n", action="store_true", help="one answer whatever n asks")
    parser.add_argument("--no-logprobs", action="store_true", help="never return logprobs")
    try:
        asyncio.run(main(parser.parse_args()))
    except KeyboardInterrupt:
        pass
