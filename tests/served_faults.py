"""An adversarial pass over the served-reader paths (issue 49): a real ``udcg serve`` (a tiny random
Llama with SmolLM2's tokenizer) behind ``tests.faultproxy.FaultProxy``, whose ``reshape`` rewrites
the server's well-formed replies, one case at a time: echoes shifted, truncated, re-tokenised, with
NaN, -inf, nulls or strings (``/v1/completions``), chat top lists and sampled answers gone wrong
(``/v1/chat/completions``). Each case is read through an ``OpenAIBackend`` as udcg's commands read
it (exact scoring, the ``auto`` probe, chat logprobs, sampling) and sorted:

- ``same``: the values of the well-formed server (a benign difference, e.g. ``token_id:<id>`` tokens);
- ``refused``: a ``BackendError`` / ``InputError`` in one line (for ``auto``: exact scoring refused
  at the probe, with the reason in ``notes``);
- ``wrong``: other numbers, silently; ``traceback``: any other exception; ``leak``: the key shown.

A case is clean when its result is one its kind allows (a benign case must be ``same``). Run alone
(``python -m tests.served_faults``) it prints the count; tests/test_served_echo_faults.py
runs every case as a test.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

KEY = "sk-served-faults-0123456789"
CHATS = [[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Where is the Eiffel tower?"}],
         [{"role": "user", "content": "Capital of France? Say NO-RESPONSE if unsure."}]]
CANDIDATES = ["NO-RESPONSE", "Paris"]
CONTINUATION = "Paris, France"


# ---------------------------------------------------------------- echo mutations (/v1/completions)

def _each_echo(f: Callable[[dict], dict | None]) -> Callable:
    """A reshape applying ``f`` to every choice's ``logprobs`` of a completions reply."""
    def reshape(path: str, request: object, reply: object) -> object:
        if not path.endswith("/completions") or "chat" in path:
            return None
        reply = copy.deepcopy(reply)
        for choice in reply["choices"]:
            choice["logprobs"] = f(choice["logprobs"])
        return reply
    return reshape


def _body(f: Callable[[dict], object]) -> Callable:
    def reshape(path: str, request: object, reply: object) -> object:
        if not path.endswith("/completions") or "chat" in path:
            return None
        return f(copy.deepcopy(reply))
    return reshape


def _front(token: str = "<s>", offsets: bool = True) -> Callable[[dict], dict]:
    """A token the server put in front of the prompt (a BOS it added): every list one longer, the
    prompt's first token now scored (-1.5), every value one place on."""
    def f(lp: dict) -> dict:
        lp = {**lp, "tokens": [token, *lp["tokens"]], "token_logprobs": [None, -1.5, *lp["token_logprobs"][1:]]}
        if offsets:
            lp["top_logprobs"] = [None, {}, *lp["top_logprobs"][1:]]
            lp["text_offset"] = [0, *(o + len(token) for o in lp["text_offset"])]
        else:
            lp.pop("top_logprobs"), lp.pop("text_offset")
        return lp
    return f


def _values(g: Callable[[list], list]) -> Callable[[dict], dict]:
    def f(lp: dict) -> dict:
        lp["token_logprobs"] = g(list(lp["token_logprobs"]))
        lp.pop("top_logprobs", None)  # a server that lists no alternatives: the values alone
        return lp
    return f


def _at(pos: int, value) -> Callable[[dict], dict]:
    """Put ``value`` at echo position ``pos`` (negative: from the end, -2 = the last prompt token)."""
    def g(values: list) -> list:
        values[pos] = value
        return values
    return _values(g)


def _slice(stop) -> Callable[[dict], dict]:
    def f(lp: dict) -> dict:
        return {k: (v[:stop(len(v))] if isinstance(v, list) else v) for k, v in lp.items()}
    return f


def _drop_first(lp: dict) -> dict:
    tokens = lp["tokens"][1:]
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {**lp, "tokens": tokens, "token_logprobs": [None, *lp["token_logprobs"][2:]],
            "top_logprobs": [None, *lp["top_logprobs"][2:]], "text_offset": offsets}


def _tokens(g: Callable[[list], list], offsets: bool = True) -> Callable[[dict], dict]:
    def f(lp: dict) -> dict:
        lp["tokens"] = g(list(lp["tokens"]))
        if offsets:
            at, lp["text_offset"] = 0, []
            for t in lp["tokens"]:
                lp["text_offset"].append(at)
                at += len(t)
        lp.pop("top_logprobs", None)
        return lp
    return f


def _swap(values: list) -> list:
    values[3], values[4] = values[4], values[3]
    return values


def _rotate_values(values: list) -> list:
    return [None, None, *values[1:-1]]


def _key(name: str, value) -> Callable[[dict], dict]:
    def f(lp: dict) -> dict:
        if value is _DROP:
            lp.pop(name, None)
        else:
            lp[name] = value
        return lp
    return f


_DROP = object()


def _token_ids(path: str, request: object, reply: object) -> object:
    """vLLM's ``return_tokens_as_token_ids``: every token written ``token_id:<id>``."""
    if not path.endswith("/completions") or "chat" in path:
        return None
    reply = copy.deepcopy(reply)
    for c, choice in enumerate(reply["choices"]):
        ids = request["prompt"][c] if isinstance(request["prompt"][0], list) else request["prompt"]
        lp = choice["logprobs"]
        lp["tokens"] = [f"token_id:{t}" for t in ids] + lp["tokens"][len(ids):]
        lp.pop("text_offset")
        lp.pop("top_logprobs")
    return reply


def _reorder(keep_index: bool) -> Callable:
    def f(body: dict) -> dict:
        body["choices"] = body["choices"][::-1]
        if not keep_index:
            for c in body["choices"]:
                c.pop("index")
        return body
    return f


def _indices(values: list) -> Callable:
    def f(body: dict) -> dict:
        for c, v in zip(body["choices"], values):
            c["index"] = v
        return body
    return f


def _text(f: Callable[[str], str]) -> Callable[[dict], dict]:
    return _tokens(lambda ts: [f(t) if i > 0 else t for i, t in enumerate(ts)], offsets=True)


SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def _no_special_text(ts: list) -> list:
    """vLLM's default echo (``skip_special_tokens``): a special token's text is ""."""
    return ["" if t in SPECIAL else t for t in ts]


INF = math.inf
ECHO = {  # name -> (reshape, expected): True: the well-formed server's values; False: those or a
    # one-line refusal; a function: the value it makes of the well-formed server's
    "well-formed": (None, True),
    "bos-front": (_each_echo(_front()), False),
    "bos-front-values-only": (_each_echo(_values(lambda v: [None, *v][:len(v) + 1])), False),
    "bos-front-no-offsets": (_each_echo(_front(offsets=False)), False),
    "im-start-doubled": (_each_echo(_front("<|im_start|>")), False),
    "eos-front": (_each_echo(_front("<|endoftext|>")), False),
    "empty-token-front": (_each_echo(_front("")), False),
    "two-in-front": (_each_echo(lambda lp: _front("<s>")(_front("<s>")(lp))), False),
    "drop-first": (_each_echo(_drop_first), False),
    "cut-last-prompt-token": (_each_echo(_slice(lambda n: n - 2)), False),
    "cut-half": (_each_echo(_slice(lambda n: n // 2)), False),
    "cut-to-one": (_each_echo(_slice(lambda n: 1)), False),
    "empty-lists": (_each_echo(_slice(lambda n: 0)), False),
    "no-generated-token": (_each_echo(_slice(lambda n: n - 1)), True),
    "three-generated": (_each_echo(lambda lp: {k: (v + v[-1:] * 2 if isinstance(v, list) else v) for k, v in lp.items()}),
                        False),
    "no-tokens": (_each_echo(_key("tokens", _DROP)), False),
    "no-token-logprobs": (_each_echo(_key("token_logprobs", _DROP)), False),
    "no-offsets": (_each_echo(_key("text_offset", _DROP)), True),
    "no-top-logprobs": (_each_echo(_key("top_logprobs", _DROP)), True),
    "logprobs-null": (_each_echo(lambda lp: None), False),
    "logprobs-list": (_each_echo(lambda lp: [lp]), False),
    "logprobs-string": (_each_echo(lambda lp: "logprobs"), False),
    "token-logprobs-object": (_each_echo(_key("token_logprobs", {"0": -1.0})), False),
    "tokens-string": (_each_echo(_key("tokens", "Hello")), False),
    "offsets-string": (_each_echo(lambda lp: {**lp, "text_offset": [str(o) for o in lp["text_offset"]]}), False),
    "offsets-shifted": (_each_echo(lambda lp: {**lp, "text_offset": [o + 1 for o in lp["text_offset"]]}), False),
    "offsets-short": (_each_echo(lambda lp: {**lp, "text_offset": lp["text_offset"][:-3]}), False),
    "all-minus-inf": (_each_echo(_values(lambda v: [None] + [-INF] * (len(v) - 1))), False),
    "all-floor": (_each_echo(_values(lambda v: [None] + [-9999.0] * (len(v) - 1))), False),
    "all-below-floor": (_each_echo(_values(lambda v: [None] + [-1e6] * (len(v) - 1))), False),
    "all-zero": (_each_echo(_values(lambda v: [None] + [0.0] * (len(v) - 1))), False),
    "span-minus-inf": (_each_echo(_at(-2, -INF)), False),
    "span-plus-inf": (_each_echo(_at(-2, INF)), False),
    "span-nan": (_each_echo(_at(-2, math.nan)), False),
    "span-null": (_each_echo(_at(-2, None)), False),
    "span-string": (_each_echo(_at(-2, "-0.5")), False),
    "span-true": (_each_echo(_at(-2, True)), False),
    "span-positive": (_each_echo(_at(-2, 0.5)), False),
    "span-list": (_each_echo(_at(-2, [-0.5])), False),
    "prompt-nan": (_each_echo(_at(2, math.nan)), False),
    "prompt-null": (_each_echo(_at(2, None)), False),
    "prompt-string": (_each_echo(_at(2, "x")), False),
    "values-shifted-right": (_each_echo(_values(_rotate_values)), False),
    "values-shifted-kept-tops": (_each_echo(lambda lp: {**lp, "token_logprobs": _rotate_values(lp["token_logprobs"])}),
                                 False),
    "values-swapped-kept-tops": (_each_echo(lambda lp: {**lp, "token_logprobs": _swap(lp["token_logprobs"])}), False),
    "tokens-swapped": (_each_echo(_tokens(_swap)), False),
    "tokens-reversed": (_each_echo(_tokens(lambda ts: ts[::-1])), False),
    "token-replaced": (_each_echo(_tokens(lambda ts: [*ts[:3], "zzz", *ts[4:]])), False),
    "tokens-retokenised": (_each_echo(_tokens(lambda ts: ["".join(ts[:2]), *ts[2:], ""])), False),
    "tokens-as-ids": (_token_ids, True),
    "tokens-with-space-markers": (_each_echo(_text(lambda t: t.replace(" ", "\u2581"))), True),
    "tokens-stripped": (_each_echo(_tokens(lambda ts: [t.strip() or t for t in ts], offsets=True)), True),
    "tokens-undecodable-kept": (_each_echo(_tokens(lambda ts: [*ts[:1], "bytes:\\xe2", *ts[2:]])), True),
    "special-tokens-empty": (_each_echo(_tokens(_no_special_text)), True),
    "special-tokens-empty-bos-front": (_each_echo(lambda lp: _tokens(_no_special_text)(_front("<|endoftext|>")(lp))), False),
    "tokens-ints": (_each_echo(_tokens(lambda ts: list(range(len(ts))), offsets=False)), False),
    "choices-reversed-indexed": (_body(_reorder(True)), True),
    "choices-reversed-unindexed": (_body(_reorder(False)), False),
    "choices-index-repeated": (_body(lambda b: _indices([0] * len(b["choices"]))(b)), False),
    "choices-index-string": (_body(lambda b: _indices([str(i) for i in range(len(b["choices"]))])(b)), False),
    "choices-index-out-of-range": (_body(lambda b: _indices([i + 1 for i in range(len(b["choices"]))])(b)), False),
    "choices-one-missing": (_body(lambda b: {**b, "choices": b["choices"][:-1]}), False),
    "choices-one-extra": (_body(lambda b: {**b, "choices": [*b["choices"], {**b["choices"][0], "index": len(b["choices"])}]}),
                          False),
    "choices-empty": (_body(lambda b: {**b, "choices": []}), False),
    "choices-null": (_body(lambda b: {**b, "choices": None}), False),
    "choice-string": (_body(lambda b: {**b, "choices": ["x"] * len(b["choices"])}), False),
    "body-list": (_body(lambda b: [b]), False),
    "body-string": (_body(lambda b: "ok"), False),
    "body-not-json": (_body(lambda b: b"<html>502</html>"), False),
    "body-truncated-json": (_body(lambda b: __import__("json").dumps(b)[:200]), False),
    "error-in-200": (_body(lambda b: {"error": {"message": "model overloaded"}}), False),
}


# ---------------------------------------------------------------- chat replies (/v1/chat/completions)

def _chat(f: Callable[[dict, dict], object]) -> Callable:
    def reshape(path: str, request: object, reply: object) -> object:
        if not path.endswith("/chat/completions"):
            return None
        return f(copy.deepcopy(reply), request)
    return reshape


def _first_top(g: Callable[[list], object]) -> Callable:
    def f(body: dict, request: dict) -> dict:
        entry = body["choices"][0]["logprobs"]["content"][0]
        entry["top_logprobs"] = g(entry["top_logprobs"])
        return body
    return _chat(f)


def _set_top(index: int, field: str, value) -> Callable:
    def g(top: list) -> list:
        top[index][field] = value
        return top
    return _first_top(g)


def _answers(g: Callable[[list, dict], list]) -> Callable:
    def f(body: dict, request: dict) -> dict:
        body["choices"] = g(body["choices"], request)
        return body
    return _chat(f)


def _content(value) -> Callable:
    def g(choices: list, request: dict) -> list:
        choices[0]["message"]["content"] = value
        return choices
    return _answers(g)


def _first_answer(text: str) -> Callable:
    """What a case whose first answer the server changed must read: the reference, that answer ``text``."""
    return lambda reference: [[text, *answers[1:]] for answers in reference]


CHAT = {  # chat logprobs (scoring: top-logprobs): name -> (reshape, benign)
    "well-formed": (None, True),
    "top-nan": (_set_top(0, "logprob", math.nan), False),
    "top-minus-inf": (_set_top(0, "logprob", -INF), False),
    "top-plus-inf": (_set_top(0, "logprob", INF), False),
    "top-positive": (_set_top(0, "logprob", 0.7), False),
    "top-string": (_set_top(0, "logprob", "-0.5"), False),
    "top-null-logprob": (_set_top(0, "logprob", None), False),
    "top-null-token": (_set_top(0, "token", None), False),
    "top-int-token": (_set_top(0, "token", 7), False),
    "top-empty": (_first_top(lambda top: []), False),
    "top-null": (_first_top(lambda top: None), False),
    "top-repeated-token": (_first_top(lambda top: [top[0], {**top[0], "logprob": top[0]["logprob"] - 3}, *top[1:]]), False),
    "top-above-one": (_first_top(lambda top: [{**t, "logprob": -0.01} for t in top]), False),
    "top-unsorted": (_first_top(lambda top: top[::-1]), True),
    "content-empty": (_chat(lambda b, r: {**b, "choices": [{**b["choices"][0], "logprobs": {"content": []}}]}), False),
    "content-null": (_chat(lambda b, r: {**b, "choices": [{**b["choices"][0], "logprobs": {"content": None}}]}), False),
    "logprobs-missing": (_chat(lambda b, r: {**b, "choices": [{k: v for k, v in b["choices"][0].items() if k != "logprobs"}]}),
                         False),
    "chat-choices-empty": (_chat(lambda b, r: {**b, "choices": []}), False),
    "chat-body-list": (_chat(lambda b, r: [b]), False),
    "chat-key-in-error": (_chat(lambda b, r: {"error": {"message": f"bad key {KEY}"}}), False),
}

SAMPLE = {  # sampling (generate with n): name -> (reshape, benign)
    "well-formed": (None, True),
    "fewer-than-n": (_answers(lambda cs, r: cs[:1] if len(cs) > 1 else []), False),
    "more-than-n": (_answers(lambda cs, r: [*cs, {**cs[0], "index": len(cs)}]), False),
    "content-null": (_content(None), _first_answer("")),  # null content: an empty answer, as some servers send it
    "content-int": (_content(42), False),
    "content-list": (_content(["Paris"]), False),
    "content-object": (_content({"text": "Paris"}), False),
    "message-null": (_answers(lambda cs, r: [{**c, "message": None} for c in cs]), False),
    "index-repeated": (_answers(lambda cs, r: [{**c, "index": 0} for c in cs]), False),
    "index-float": (_answers(lambda cs, r: [{**c, "index": float(c["index"])} for c in cs]), False),
    "index-negative": (_answers(lambda cs, r: [{**c, "index": -1 - c["index"]} for c in cs]), False),
    "reversed-indexed": (_answers(lambda cs, r: cs[::-1]), True),
    "key-in-answer": (_content(f"Paris {KEY}"), _first_answer("Paris ***")),  # the key masked
    "nan-in-content": (_content("NaN"), _first_answer("NaN")),
    "huge-answer": (_content("Paris " * 20000), _first_answer("Paris " * 20000)),
}


TRANSPORT = {  # a completions request broken at the HTTP level (tests.faultproxy's faults): name -> (fault, benign)
    name: (name, False) for name in ("truncated", "truncated-json", "non-json", "drop", "500", "503", "429", "400",
                                     "echo-auth")
}


# ---------------------------------------------------------------- running a case


@dataclass
class Outcome:
    kind: str  # same / other / refused / traceback / leak
    detail: str = ""
    value: object = None  # what was read (same / other)


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-5 or (math.isnan(a) and math.isnan(b))
    return a == b


def _backend(url: str, tokenizer: str, model: str, scoring: str):
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings, ReadSettings

    return OpenAIBackend(model, ClientSettings(url, max_retries=0, timeout=60, api_key_env="SERVED_FAULTS_KEY"),
                         ReadSettings(tokenizer=tokenizer, scoring=scoring))


def call(mode: str, url: str, tokenizer: str, model: str):
    """What udcg's commands ask of a served reader, per mode; the value it gives (the backend closed)."""
    backend = _backend(url, tokenizer, model, {"first": "completions", "continuation": "completions", "read": "completions",
                                               "auto": "auto"}.get(mode, "top-logprobs"))
    try:
        return _ask(mode, backend)
    finally:
        backend.close()


def _ask(mode: str, backend):
    from udcg.llm.base import GenerationParams

    if mode in ("first", "chat-logprobs"):  # p_abs and the candidates' first tokens: exact, or the chat top list
        return [r.logprobs for r in backend.first_token_scores(CHATS, CANDIDATES)]
    if mode == "continuation":
        return backend.continuation_logprobs([(c, CONTINUATION) for c in CHATS])
    if mode == "read":
        return [(r.first, r.answer, r.continuation) for r in backend.read(CHATS, CANDIDATES, [CONTINUATION] * 2, 4)]
    if mode == "auto":  # the probe decides; then first tokens, exact or from the top list
        scores = backend.first_token_scores(CHATS, CANDIDATES)
        return {"exact": backend.scorer() is not None, "scores": [r.logprobs for r in scores],
                "note": backend.notes.get("scoring", "")}
    if mode == "sample":
        return backend.generate(CHATS, GenerationParams(max_new_tokens=4, temperature=1.0, n=3, seed=1))
    raise ValueError(mode)


def outcome(mode: str, url: str, tokenizer: str, model: str, reference) -> Outcome:
    from udcg.errors import BackendError, InputError

    try:
        got = call(mode, url, tokenizer, model)
    except (BackendError, InputError) as e:
        text = str(e)
        if KEY in text:
            return Outcome("leak", text)
        return Outcome("refused" if "\n" not in text else "traceback", text)
    except Exception as e:  # noqa: BLE001 (what the pass looks for)
        return Outcome("traceback", f"{type(e).__name__}: {e}")
    if KEY in repr(got):
        return Outcome("leak", repr(got)[:300])
    if mode == "auto" and reference is not None and reference["exact"] and not got["exact"]:
        return Outcome("refused", got["note"])  # the probe refused exact scoring, and said why
    return Outcome("same" if reference is None or _close(got, reference) else "other", repr(got)[:300], got)


MODES = {"first": ECHO, "continuation": ECHO, "read": ECHO, "auto": ECHO, "chat-logprobs": CHAT, "sample": SAMPLE,
         "transport-first": TRANSPORT, "transport-auto": TRANSPORT}


def cases() -> list[tuple[str, str]]:
    return [(mode, name) for mode, table in MODES.items() for name in table if name != "well-formed"]


def clean(mode: str, name: str, got: Outcome, reference=None) -> bool:
    """Whether a case's outcome is one its kind allows (``reference``: the well-formed values)."""
    expected = MODES[mode][name][1]
    if got.kind in ("traceback", "leak"):
        return False
    if callable(expected):
        return got.kind in ("same", "other") and _close(got.value, expected(reference))
    if got.kind == "other":
        return False
    return got.kind == "same" if expected else True


class Pass:
    """The tiny served model behind a reshaping proxy; ``run(mode, name)`` gives a case's outcome."""

    def __init__(self, backend, tokenizer: str) -> None:
        from tests.conftest import serve_backend
        from tests.faultproxy import FaultProxy

        self.tokenizer, self.model = tokenizer, backend.name
        self._stack = contextlib.ExitStack()
        server = self._stack.enter_context(serve_backend(backend))
        self.server_url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # the well-formed server itself
        self.proxy = self._stack.enter_context(FaultProxy(self.server_url))
        self.references: dict[str, object] = {}
        from udcg.llm import chat_tokens

        loader = chat_tokens.load_chat_tokens  # one tokenizer load for the whole pass, put back at close
        chat_tokens.load_chat_tokens = functools.lru_cache(loader)
        self._stack.callback(setattr, chat_tokens, "load_chat_tokens", loader)

    def close(self) -> None:
        self._stack.close()

    def run(self, mode: str, name: str) -> Outcome:
        import os

        os.environ["SERVED_FAULTS_KEY"] = KEY
        if mode not in self.references:
            self.proxy.reshape = self.proxy.rule = None
            self.references[mode] = call(mode.removeprefix("transport-"), self.proxy.url, self.tokenizer, self.model)
        asked = mode.removeprefix("transport-")
        if asked != mode:  # an HTTP fault on every completions request (the chat ones pass)
            fault = MODES[mode][name][0]
            self.proxy.rule = lambda body: fault if isinstance(body, dict) and "prompt" in body else None
        else:
            self.proxy.reshape = MODES[mode][name][0]
        try:
            return outcome(asked, self.proxy.url, self.tokenizer, self.model, self.references[mode])
        finally:
            self.proxy.reshape = self.proxy.rule = None


def main() -> None:
    import tempfile
    from pathlib import Path

    from tests.conftest import build_tiny_model
    from udcg.llm.hf import HFBackend

    folder = Path(tempfile.mkdtemp(prefix="served-faults-"))
    build_tiny_model(folder)
    run = Pass(HFBackend(str(folder), name="tiny-served"), str(folder))
    counts: dict[str, int] = {}
    try:
        for mode, name in cases():
            got = run.run(mode, name)
            ok = clean(mode, name, got, run.references[mode])
            counts["clean" if ok else "not clean"] = counts.get("clean" if ok else "not clean", 0) + 1
            if not ok:
                print(f"NOT CLEAN {mode:14} {name:28} {got.kind}: {got.detail[:160]}")
    finally:
        run.close()
    print(f"{sum(counts.values())} cases: {counts.get('clean', 0)} clean, {counts.get('not clean', 0)} not clean")


if __name__ == "__main__":
    main()
