"""The options of ``udcg serve``, each declared once (``udcg.options``): the command's flags are made
from ``ServeOptions`` and the server (``udcg.llm.server.serve``) takes the object; the ranges are
``bounds.PARAMETERS["serve"]``. The model (``--model`` and its ``--device``, ``--dtype``,
``--batch-size``) is a ``ModelChoice`` (``commands/_parser.add_model_options``)."""

from __future__ import annotations

from dataclasses import dataclass

from udcg.llm.server_watch import MAX_REQUEST_SECONDS
from udcg.llm.server_wire import MAX_REQUEST_TOKENS
from udcg.options import Options, option

LOOPBACK = ("127.0.0.1", "localhost", "::1")  # addresses only this machine reaches


@dataclass(frozen=True)
class ServeOptions(Options):
    """Where the server listens, the name it answers to, its per-request budgets and its key."""

    operation = "serve"

    host: str = option(LOOPBACK[0], "address to listen on (default {default}: this machine only)", kind=str)
    port: int = option(8000, "port (default {default}; 0 picks a free one)", kind=int)
    served_name: str | None = option(None, "model name clients must send (default: the backend's name)", kind=str)
    max_request_tokens: int = option(MAX_REQUEST_TOKENS, "most tokens of model work one request may ask for: prompt "
                                     "tokens plus n x max_tokens (default {default})", kind=int, metavar="N")
    max_request_seconds: float = option(MAX_REQUEST_SECONDS, "most seconds of model work one request may take; it "
                                        "is stopped there with a 400 (default {default})", kind=float, metavar="S")
    api_key_env: str | None = option(None, "require 'Authorization: Bearer <key>' with the key read from this "
                                     "environment variable", kind=str, metavar="VAR")

    @property
    def open_to_others(self) -> bool:
        """Listening where another machine can reach it."""
        return self.host not in LOOPBACK
