"""API faults: ``udcg annotate --estimator api-logprobs`` through a fault-injecting proxy
(tests/faultproxy.py) in front of the real local OpenAI-compatible server over a tiny random Llama
(tests/conftest.py: SmolLM2's tokenizer and chat template, milliseconds per request, so the test
time goes to the faults and not to the model). The embedding of the first token of NO-RESPONSE is
scaled up so that it is often among the returned top log-probabilities: p_abs then varies from
passage to passage, and equal files prove something.

- At a 30% fault rate (429 with and without Retry-After, 500/502/503, client timeouts, dropped
  connections, truncated transfers, cut JSON bodies, HTML instead of JSON) the annotation of 200
  passages completes with every passage present and a file byte-identical to a fault-free run.
- A persistent failure stops with one clear line after the retry budget, keeps every finished
  passage, and the rerun completes, asking the server only for the rest.
- ``--model openai:NAME`` (with --api-base, or the base URL from the environment) writes the bare
  name's file byte for byte and resumes its cache.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from tests.conftest import TINY_SERVED_NAME, build_tiny_model, serve_backend
from tests.faultproxy import FaultProxy
from udcg.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

MODEL = TINY_SERVED_NAME
N_PASSAGES = 200
# 30% in all, every kind of fault the proxy knows that a client should survive.
RATES = {"429": 0.04, "429-retry-after": 0.03, "500": 0.03, "502": 0.03, "503": 0.03, "timeout": 0.02,
         "drop": 0.03, "truncated": 0.03, "truncated-json": 0.03, "non-json": 0.03}


@pytest.fixture(scope="module")
def boosted_server(tmp_path_factory):
    """The server over a tiny random Llama whose NO-RESPONSE first token is boosted (see above);
    not conftest's ``tiny_server``, whose p_abs are almost all 0."""
    import torch

    from udcg.annotate.prompt import ABSTAIN
    from udcg.llm.hf import HFBackend

    folder = tmp_path_factory.mktemp("tiny-no-boosted")
    build_tiny_model(folder, seed=1)
    backend = HFBackend(str(folder), name=TINY_SERVED_NAME)
    token = backend.tokenizer.encode(ABSTAIN, add_special_tokens=False)[0]
    with torch.no_grad():
        backend.model.get_input_embeddings().weight[token] *= 6.0
    with serve_backend(backend) as server:
        yield server


def write_passages(path: Path, n: int, chars: int = 80) -> list[str]:
    """The packaged PopQA sample's passages (cut to ``chars`` to keep the model work small), in
    question order, ``n`` of them in all. Returns the passage keys (qid<TAB>pid)."""
    rows = [json.loads(line) for line in (resources.files("udcg") / "data" / "popqa-sample.jsonl").read_text().splitlines()]
    out, keys = [], []
    for r in rows:
        take = r["passages"][: n - len(keys)]
        if not take:
            break
        r["passages"] = [{**p, "text": p["text"][:chars]} for p in take]
        keys += [f"{r['example_id']}\t{p['doc_id']}" for p in take]
        out.append(r)
    assert len(keys) == n
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return keys


def annotate_argv(src: Path, out: Path, url: str, *extra: str) -> list[str]:
    return ["annotate", str(src), "-o", str(out), "--model", MODEL, "--api-base", url, "--estimator", "api-logprobs",
            "--concurrency", "2", "--chunk-size", "40", *extra]


def p_abs_by_key(out: Path) -> dict[str, tuple[float, str]]:
    return {f"{item['example_id']}\t{p['doc_id']}": (p["models_info"][MODEL]["no_res_prob"], p["models_info"][MODEL]["udcg"].get("note", ""))
            for item in json.loads(out.read_text()) for p in item["passages"]}


def cache_keys(out: Path) -> list[str]:
    path = Path(f"{out}.cache.jsonl")
    return [json.loads(line)["key"] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def clean_run(boosted_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("api-clean")
    src = folder / "popqa200.jsonl"
    keys = write_passages(src, N_PASSAGES)
    out = folder / "clean.json"
    assert main(annotate_argv(src, out, boosted_server.url)) == 0
    values = p_abs_by_key(out)
    assert len({p for p, _ in values.values() if p > 0}) >= 20, "p_abs must vary, or equal files prove little"
    return src, keys, out.read_bytes(), values


def test_30_percent_faults_complete_with_identical_values(boosted_server, clean_run, tmp_path, capsys):
    src, keys, clean, _ = clean_run
    out = tmp_path / "faulty.json"
    with FaultProxy(boosted_server.url, rates=RATES, seed=11, retry_after=0.5, stall_s=4.0) as proxy:
        rc = main(annotate_argv(src, out, proxy.url, "--timeout", "3", "--max-retries", "8"))
        faults = proxy.faults()
    err = capsys.readouterr().err
    assert rc == 0, err
    assert out.read_bytes() == clean, "values must equal the fault-free run"
    assert sorted(cache_keys(out)) == sorted(keys)  # every passage, once
    injected = [f for f in faults if f is not None]
    assert set(injected) == set(RATES), f"not every fault kind was exercised: {set(RATES) - set(injected)}"
    assert 0.2 < len(injected) / len(faults) < 0.4
    # one forwarded request per passage, plus any the client gave up on while the server was busy
    assert len(faults) - len(injected) >= N_PASSAGES
    doc = {f: injected.count(f) for f in RATES}
    print(f"requests={len(faults)} faults={len(injected)} ({len(injected) / len(faults):.0%}) {doc}; "
          f"forwarded beyond one per passage: {len(faults) - len(injected) - N_PASSAGES}")


def test_persistent_failure_stops_clearly_and_resumes(boosted_server, clean_run, tmp_path, capsys):
    clean_values = clean_run[3]
    src = tmp_path / "popqa20.jsonl"
    keys = write_passages(src, 20)  # the first 20 passages of the clean run
    doomed = json.loads(src.read_text().splitlines()[0])["passages"][7]["text"]
    out = tmp_path / "out.json"
    argv = annotate_argv(src, out, "{url}", "--chunk-size", "5", "--max-retries", "2")

    def rule(body):
        return "503" if any(doomed in m.get("content", "") for m in body.get("messages", [])) else None

    with FaultProxy(boosted_server.url, rule=rule) as proxy:
        rc = main([a.replace("{url}", proxy.url) for a in argv])
        doomed_attempts = sum(f == "503" for f in proxy.faults())
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert doomed_attempts == 3  # the first try and the 2 retries of the budget
    line = err[-1]
    assert line.startswith("udcg annotate: error: ") and "HTTP 503" in line and "gave up after 3 attempts" in line
    assert "finished and kept in" in line and "rerun the same command to resume" in line
    assert not out.exists(), "a failed run writes no output"
    kept = cache_keys(out)
    assert len(set(kept)) == len(kept) and set(kept) < set(keys)
    # an API model's pieces run at once (udcg.resumable, parallel): every finished passage is kept, the
    # failed one is not, and no piece starts after the failure
    assert kept and keys[7] not in kept

    with FaultProxy(boosted_server.url) as proxy:  # the failure is gone: rerun
        assert main([a.replace("{url}", proxy.url) for a in argv]) == 0
        asked = len(proxy.faults())
    capsys.readouterr()
    assert asked == len(keys) - len(kept), "the rerun must ask only for the passages not finished"
    assert p_abs_by_key(out) == {k: clean_values[k] for k in keys}


def test_openai_scheme_writes_what_the_bare_name_writes(boosted_server, clean_run, tmp_path, monkeypatch, capsys):
    """``--model openai:NAME`` goes through the registry's openai scheme; with --api-base, or with the
    base URL from $UDCG_OPENAI_BASE_URLS, it writes the bare name's file byte for byte, and it resumes
    a cache the bare name made without asking the server anything."""
    src, _, clean, _ = clean_run

    def argv(out: Path, url: str | None) -> list[str]:
        args = annotate_argv(src, out, url or "")
        args[args.index(MODEL)] = f"openai:{MODEL}"
        if url is None:
            at = args.index("--api-base")
            del args[at:at + 2]
        return args

    assert main(argv(tmp_path / "scheme.json", boosted_server.url)) == 0
    assert (tmp_path / "scheme.json").read_bytes() == clean
    monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", boosted_server.url)
    assert main(argv(tmp_path / "env.json", None)) == 0
    assert (tmp_path / "env.json").read_bytes() == clean

    resumed = tmp_path / "resumed.json"
    Path(f"{resumed}.cache.jsonl").write_bytes(Path(f"{src.parent / 'clean.json'}.cache.jsonl").read_bytes())
    with FaultProxy(boosted_server.url) as proxy:
        assert main(argv(resumed, proxy.url)) == 0
        assert proxy.faults() == [], "every passage is in the bare name's cache"
    assert resumed.read_bytes() == clean
    capsys.readouterr()
