"""udcg serve: an OpenAI-compatible server over a local model (for ``--backend openai`` clients and fleets)."""

from __future__ import annotations

import argparse

from udcg.commands._parser import add_model_options, command, model_choice
from udcg.llm.serve_options import ServeOptions


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
    ServeOptions.add_arguments(p)  # --host, --port, ... declared once (udcg.llm.serve_options)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import logging
    import os

    from udcg.errors import InputError
    from udcg.llm.server import check_port_free, serve
    from udcg.llm.server_model import check_servable

    options = ServeOptions.from_args(args)  # every value checked by its declaration (--port 99999: must be ...)
    api_key = None
    if options.api_key_env:
        api_key = os.environ.get(options.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {options.api_key_env}: that environment variable is unset or empty "
                             "(export it first)")
    elif options.open_to_others:
        logging.getLogger("udcg.serve").warning("listening on %s without an API key: anyone who reaches it can use "
                                                "the model", options.host)
    spec = model_choice(args).spec()  # an unknown scheme fails now, before the port is checked
    spec.check_installed()
    check_port_free(options.host, options.port)  # a busy port fails now, not after the model has loaded
    backend = spec.load()
    check_servable(backend)  # a backend that does not declare it can be served: one line, exit 2
    logging.getLogger("udcg.llm.server").setLevel(logging.INFO)
    serve(backend, options, api_key)
    return 0
