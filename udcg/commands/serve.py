"""udcg serve: an OpenAI-compatible server over a local model (for ``--backend openai`` clients and fleets)."""

from __future__ import annotations

import argparse

from udcg.commands._parser import add_model_options, command, model_choice


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "serve", help="serve a local model over an OpenAI-compatible HTTP API",
                description="""Serve a local model at /v1/chat/completions, /v1/completions and /v1/models (OpenAI
                wire format: messages or prompt, temperature, top_p, max_tokens, n, seed, stop, logprobs,
                top_logprobs, echo, stream with server-sent events), so any OpenAI-compatible client, udcg's own
                --backend openai included, can use it. Model calls run one at a time; a request asking for more
                than --max-request-tokens of work, or running past --max-request-seconds, gets a 400; a client that
                leaves stops its request.""",
                examples=["udcg serve --model smollm2-135m --port 8000",
                          "UDCG_SERVE_KEY=... udcg serve --model qwen2.5-coder-0.5b --host 0.0.0.0 --api-key-env UDCG_SERVE_KEY"])
    add_model_options(p, api=False, help="offline alias (smollm2-135m, qwen2.5-coder-0.5b, ...), HF model id or local "
                      "path, or SCHEME:MODEL of an installed backend (udcg models)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--served-name", default=None, help="model name clients must send (default: the backend's name)")
    p.add_argument("--max-request-tokens", type=int, default=None, metavar="N",
                   help="most tokens of model work one request may ask for: prompt tokens plus n x max_tokens (default 32768)")
    p.add_argument("--max-request-seconds", type=float, default=None, metavar="S",
                   help="most seconds of model work one request may take; it is stopped there with a 400 (default 60)")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="require 'Authorization: Bearer <key>' with the key read from this environment variable")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import logging
    import os

    from udcg.errors import InputError
    from udcg.llm.server import check_port_free, serve
    from udcg.llm.server_model import check_servable
    from udcg.llm.server_watch import MAX_REQUEST_SECONDS
    from udcg.llm.server_wire import MAX_REQUEST_TOKENS

    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: a port is a number in 0..65535")
    if args.max_request_tokens is not None and args.max_request_tokens < 1:
        raise InputError(f"--max-request-tokens {args.max_request_tokens}: give a positive number of tokens")
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {args.api_key_env}: that environment variable is unset or empty (export it first)")
    elif args.host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("udcg.serve").warning("listening on %s without an API key: anyone who reaches it can use the model", args.host)
    spec = model_choice(args).spec()  # an unknown scheme fails now, before the port is checked
    spec.check_installed()
    check_port_free(args.host, args.port)  # a busy port fails now, not after the model has loaded
    backend = spec.load()
    check_servable(backend)  # a backend that does not declare it can be served: one line, exit 2
    logging.getLogger("udcg.llm.server").setLevel(logging.INFO)
    serve(backend, args.host, args.port, args.served_name, api_key, args.max_request_tokens or MAX_REQUEST_TOKENS,
          args.max_request_seconds or MAX_REQUEST_SECONDS)
    return 0
