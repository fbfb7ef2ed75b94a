"""`udcg validate` with an API reader (issue 35): the reader's API settings in a config, no silent
remote default, ANSWER_PROB refused before any model call where the reader cannot give it, a
verdict in words, and, end to end, the run through `udcg serve` on 127.0.0.1 equal to the local
one, p_abs included for the pairs whose NO-RESPONSE is outside the server's top 20 (slow)."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import free_port
from udcg.cli import main
from udcg.errors import InputError
from udcg.experiment.config import from_dict, load_config
from udcg.flows.correlate import significant_best
from udcg.llm.openai_scoring import parse_scores, score_payload
from udcg.llm.registry import resolve, where_it_goes

ROOT = Path(__file__).resolve().parents[1]
# the smallest run that has every step: 3 questions, pools of 4, contexts of 2, the k = 1 study
TINY = {"name": "tiny-api", "seed": 0, "data": {"questions": "popqa-sample", "limit": 3},
        "pool": {"source": "dataset", "size": 4},
        "reader": {"model": "smollm2-135m", "device": "cpu", "max_new_tokens": 8, "chunk_size": 8, "threads": 1},
        "contexts": {"k": 2, "n_contexts": 3}, "metrics": {"n_boot": 200}, "theta": {"train_share": 0.5},
        "studies": {"k_values": [1, 2], "oracle_k": 2}}


# ---------------------------------------------------------------- settings, checked at load


def test_the_reader_api_settings_are_config_keys(tmp_path):
    cfg = from_dict({"reader": {"model": "openai:m", "api_base": "http://127.0.0.1:9/v1,http://127.0.0.1:10/v1",
                                "concurrency": 2, "timeout": 900, "rpm": 30, "max_retries": 1, "tokenizer": "smollm2-135m",
                                "api_key_env": "MY_KEY"}})
    from udcg.experiment.validate import reader_spec

    spec = reader_spec(cfg)
    assert spec.api and dict(spec.options) == {
        "base_urls": ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], "api_key_env": "MY_KEY", "max_concurrency": 2,
        "requests_per_minute": 30.0, "timeout": 900.0, "max_retries": 1, "tokenizer": "smollm2-135m", "scoring": "auto"}
    with pytest.raises(InputError, match=r"reader.concurrency = 0: must be"):
        from_dict({"reader": {"concurrency": 0}})
    with pytest.raises(InputError, match=r"reader.scoring = 'x' is not one of"):
        from_dict({"reader": {"scoring": "x"}})


def test_answer_prob_through_a_top_list_reader_is_refused_at_config_load():
    with pytest.raises(InputError, match=r"metrics.names holds ANSWER_PROB.*reader.scoring: top-logprobs.*drop it"):
        from_dict({"reader": {"model": "openai:m", "api_base": "http://127.0.0.1:9/v1", "scoring": "top-logprobs"}})
    from_dict({"reader": {"model": "openai:m", "scoring": "top-logprobs"},
               "metrics": {"names": ["UDCG", "nDCG"], "baseline": "UDCG"}})  # nothing it cannot give


def test_answer_prob_through_a_chat_only_server_is_refused_before_any_model_call(tmp_path, capsys):
    """A real server with the chat endpoint only: the probe finds it cannot score text, and the run
    stops before the pools, naming the metric and the fix."""
    import http.server
    import threading

    hits = []

    class ChatOnly(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            hits.append(self.path)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "no such endpoint"}}')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "api.yaml"
        config.write_text(yaml.safe_dump({**TINY, "reader": {"model": "smollm2-135m", "api_base":
                                                             f"http://127.0.0.1:{server.server_port}/v1"}}))
        assert main(["validate", str(config), "-o", str(tmp_path / "run"), "--no-progress"]) == 2
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert err.splitlines()[0].endswith(f"reader smollm2-135m: requests go to http://127.0.0.1:{server.server_port}/v1")
    assert "metrics.names holds ANSWER_PROB" in err and "cannot give" in err and "Drop it" in err
    assert hits == ["/v1/completions"]  # the probe only: no chat request, no pools step
    assert not (tmp_path / "run" / "pools.jsonl").exists()


def test_an_openai_model_without_a_server_names_where_it_goes_and_needs_a_key(monkeypatch):
    for var in ("UDCG_OPENAI_BASE_URLS", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(InputError) as e:
        where_it_goes(resolve("openai:gpt-4o-mini"))
    for named in ("https://api.openai.com/v1", "--api-base", "reader.api_base", "$UDCG_OPENAI_BASE_URLS", "$OPENAI_API_KEY"):
        assert named in str(e.value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert where_it_goes(resolve("openai:gpt-4o-mini")).startswith(
        "reader gpt-4o-mini: requests go to https://api.openai.com/v1 (OpenAI's API (no server given by --api-base")
    monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", "http://127.0.0.1:9/v1")
    assert where_it_goes(resolve("openai:m")) == "reader m: requests go to http://127.0.0.1:9/v1 ($UDCG_OPENAI_BASE_URLS)"


def test_answer_and_judge_take_the_api_flags(tmp_path, capsys):
    for argv in (["answer", "--run", "r", "--corpus", "c", "--model", "m", "-o", "o"], ["judge", "answer", "i", "-o", "o"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        out = capsys.readouterr().out
        for flag in ("--api-base", "--concurrency", "--timeout", "--rpm", "--max-retries", "--api-key-env", "--tokenizer"):
            assert flag in out, (argv[0], flag)


# ---------------------------------------------------------------- scoring wire, best mark, verdict


def test_scores_are_read_from_the_echoed_prompt():
    payload = score_payload("m", [[1, 2, 3, 4]])
    assert payload == {"model": "m", "prompt": [[1, 2, 3, 4]], "max_tokens": 1, "echo": True, "logprobs": 1,
                       "temperature": 0.0, "n": 1}
    texts = {1: "a", 2: "b", 3: "c", 4: "d"}.get

    def echo(ids, values):
        tokens = [texts(t) for t in ids] + ["x"] * (len(values) - len(ids))  # the generated token
        return {"tokens": tokens, "token_logprobs": values, "text_offset": list(range(len(tokens)))}

    body = {"choices": [{"index": 1, "logprobs": echo([1, 2, 3, 4], [None, -1.0, -2.0, -0.5, -0.1])},
                        {"index": 0, "logprobs": echo([1, 2, 3], [None, -3.0, -4.0, -0.25])}]}
    assert parse_scores(body, [[1, 2, 3], [1, 2, 3, 4]], [(2, 3), (3, 4)], texts) == [[-4.0], [-0.5]]
    with pytest.raises(Exception, match="not a log-probability"):
        parse_scores({"choices": [{"logprobs": echo([1, 2], [None, None])}]}, [[1, 2]], [(1, 2)], texts)


def _row(metric, mean, p):
    return {"metric": metric, "mean_rho": mean, "p_holm": p}


def test_best_is_marked_only_where_the_tests_tell_it_apart():
    rows = [_row("UDCG", 0.5, math.nan), _row("nDCG", 0.6, 0.3), _row("P", 0.4, 0.01)]
    assert significant_best(rows, "mean_rho", "p_holm", "UDCG") is None  # nDCG's lead is not significant
    rows[1]["p_holm"] = 0.01
    assert significant_best(rows, "mean_rho", "p_holm", "UDCG") == "nDCG"  # above UDCG, P below it
    rows[2]["p_holm"] = 0.2
    assert significant_best(rows, "mean_rho", "p_holm", "UDCG") is None  # P not shown below nDCG
    rows = [_row("UDCG", 0.7, math.nan), _row("nDCG", 0.6, 0.01), _row("P", 0.4, 0.001)]
    assert significant_best(rows, "mean_rho", "p_holm", "UDCG") == "UDCG"


def test_the_verdict_says_what_the_data_cannot_tell():
    from udcg.experiment.reporting import POWER_TABLE, verdict
    from udcg.io.tables import Table

    cfg = from_dict({})
    t = Table(["metric", "p_holm", "diff_vs_baseline"])
    t.add(metric="UDCG", p_holm=math.nan, diff_vs_baseline=math.nan)
    t.add(metric="nDCG", p_holm=1.0, diff_vs_baseline=0.1)
    power = Table(["metric", "n_usable", "min_detectable_diff"])
    power.add(metric="nDCG", n_usable=2, min_detectable_diff=0.58)
    assert verdict(cfg, {"table3-all": t, POWER_TABLE: power}) == (
        "No metric can be told apart from UDCG at this size: on 2 usable questions every Holm-corrected p is at least "
        "0.05, and the smallest ρ gap these questions could detect (80% power) is 0.58.")
    t.rows[1]["p_holm"] = 0.01
    assert verdict(cfg, {"table3-all": t, POWER_TABLE: power}).startswith("nDCG follows answer accuracy better than UDCG")


# ---------------------------------------------------------------- end to end through `udcg serve` (slow)


def _serve(port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "udcg", "serve", "--model", "smollm2-135m", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()[-2000:])
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("udcg serve did not start in 180 s")


def _jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _by_key(rows: list[dict], *keys: str) -> dict:
    return {tuple(str(r[k]) for k in keys): r for r in rows}


@pytest.mark.slow
def test_validate_through_udcg_serve_equals_the_local_run(tmp_path, capsys, one_torch_thread):
    port = free_port()
    server = _serve(port)
    try:
        local_cfg, api_cfg = tmp_path / "local.yaml", tmp_path / "api.yaml"
        local_cfg.write_text(yaml.safe_dump({**TINY, "output": str(tmp_path / "local")}))
        api_reader = {"model": "openai:smollm2-135m", "api_base": f"http://127.0.0.1:{port}/v1", "concurrency": 2,
                      "timeout": 600, "max_retries": 1, "max_new_tokens": 8, "chunk_size": 8}
        api_cfg.write_text(yaml.safe_dump({**TINY, "reader": api_reader, "output": str(tmp_path / "api")}))
        assert main(["validate", str(api_cfg), "--no-progress"]) == 0  # a config alone
        first = capsys.readouterr().err.splitlines()[0]
        assert first.endswith(f"reader smollm2-135m: requests go to http://127.0.0.1:{port}/v1")
        assert main(["validate", str(local_cfg), "--no-progress"]) == 0
        capsys.readouterr()

        local, api = tmp_path / "local", tmp_path / "api"
        la, aa = (_by_key([json.loads(x) for x in (d / "answers.jsonl").read_text().splitlines()], "qid", "pids")
                  for d in (local, api))
        assert la.keys() == aa.keys() and len(la) > 10
        assert {k: (r["answer"], r["outcome"]) for k, r in aa.items()} == {k: (r["answer"], r["outcome"]) for k, r in la.items()}
        ln, an = (_by_key([json.loads(x) for x in (d / "annotations.jsonl").read_text().splitlines()], "qid", "pid")
                  for d in (local, api))
        assert ln.keys() == an.keys()
        for key, row in an.items():  # exact scoring: no censoring, no zero, the local value up to float noise
            assert row["estimator_used"] == "first-token" and "censored" not in row, key
            assert row["p_abs"] == pytest.approx(ln[key]["p_abs"], rel=2e-3, abs=1e-9), key
            assert row["answer_ll"] == pytest.approx(ln[key]["answer_ll"], rel=1e-3, abs=1e-4), key
            assert row["answer"] == ln[key]["answer"], key

        # the pairs whose NO-RESPONSE is outside the server's chat top 20: exact here, never 0
        from udcg.annotate.estimators import abstention_estimates
        from udcg.annotate.prompt import ABSTAIN, reader_chat
        from udcg.llm.openai_backend import OpenAIBackend
        from udcg.llm.openai_settings import ClientSettings

        pools = {q["example_id"]: q for q in (json.loads(x) for x in (api / "pools.jsonl").read_text().splitlines())}
        keys = sorted(an)
        chats = []
        for qid, docid in keys:
            q = pools[qid]
            text = next(p["text"] for p in q["passages"] if str(p["doc_id"]) == docid)
            chats.append(reader_chat(q["question"], [text], "udcg-code-v1"))
        backend = OpenAIBackend("smollm2-135m", ClientSettings(f"http://127.0.0.1:{port}/v1", max_concurrency=2, timeout=600))
        try:
            listed = backend.first_token_logprobs(chats, [ABSTAIN])
            outside = [i for i, r in enumerate(listed) if r.logprobs[ABSTAIN] == -math.inf]
            assert outside, "every pair had NO-RESPONSE in the top 20: the test would not show the censoring fix"
            # read from the chat top list instead (the api-logprobs estimator): censored, never 0, and the
            # bound holds the exact value
            censored = abstention_estimates(backend, [chats[i] for i in outside], "api-logprobs")
        finally:
            backend.close()
        for i, est in zip(outside, censored):
            exact = an[keys[i]]["p_abs"]
            assert 0 < exact == pytest.approx(ln[keys[i]]["p_abs"], rel=2e-3)
            assert est.censored and est.estimator_used == "api-logprobs-censored" and est.p_abs > 0
            assert exact <= est.ci_high and est.p_abs == est.ci_high / 2

        # the same report numbers
        for table in ("table3", "table3-all", "table4"):
            lt, at = (json.loads((d / "tables" / f"{table}.json").read_text()) for d in (local, api))
            lrows, arows = (_by_key(t["rows"] if isinstance(t, dict) else t, "metric") for t in (lt, at))
            assert lrows.keys() == arows.keys(), table
            for m, row in lrows.items():
                for col in ("mean_rho", "n_questions", "pair_acc", "best"):
                    if col in row:
                        a, b = arows[m][col], row[col]
                        if isinstance(b, float):
                            assert np.isclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True), (table, m, col)
                        else:
                            assert a == b, (table, m, col)
        verdicts = [(d / "report.md").read_text().splitlines()[2] for d in (local, api)]
        assert verdicts[0] == verdicts[1] and verdicts[0].startswith("**Verdict.** ")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_theta_from_a_run_that_trained_on_these_questions_is_in_sample(tmp_path):
    from udcg.experiment.studies import theta_in_sample

    run = tmp_path / "run"
    run.mkdir()
    assert theta_in_sample(run, ["q1"]) == {"in_sample": True, "why": "run holds no contexts.jsonl naming its training questions"}
    (run / "contexts.jsonl").write_text("\n".join(json.dumps({"qid": q, "split": s}) for q, s in
                                                  (("q1", "train"), ("q2", "test"), ("q3", "train"))) + "\n")
    assert theta_in_sample(run, ["q2", "q4"]) == {"in_sample": False, "why": "0 of this run's 2 questions trained it"}
    assert theta_in_sample(run, ["q1", "q2", "q3"]) == {"in_sample": True, "why": "2 of this run's 3 questions trained it"}


def test_a_theta_row_that_could_not_be_fitted_says_why():
    from udcg.experiment.reporting import theta_lines
    from udcg.io.tables import Table

    cfg = from_dict({})
    table3 = Table(["metric"])
    table3.add(metric="UDCG")
    notes = {"theta_unfitted": {"full-k5": "1 training questions: 0 pair(s) of contexts of the same question with different outcomes"}}
    (line, _) = theta_lines(cfg, {"table3": table3}, notes)
    assert line == ("_UDCG_theta has no row in Table 3: it could not be fitted (1 training questions: 0 pair(s) of contexts "
                    "of the same question with different outcomes)._")


def test_theta_fits_when_the_alternated_pairs_all_point_one_way():
    """Two questions, one pair each, of opposite signs: the alternation of pairwise_differences made
    them one class and LinearSVC raised (a traceback in a 3-question validate run); now it fits."""
    from udcg.metrics.udcg import pairwise_differences
    from udcg.metrics.udcg_theta import UDCGTheta

    u = np.array([[0.2, 0.1], [0.9, 0.3], [0.8, 0.2], [0.1, 0.4]])
    y, g = np.array([0.0, 1.0, 1.0, 0.0]), np.array(["a", "a", "b", "b"])
    assert len(np.unique(pairwise_differences(u, y, g)[1])) == 1
    model = UDCGTheta(C=1.0).fit(u, y, g)
    scores = model.decision_function(u) if hasattr(model, "decision_function") else model.predict(u)
    assert scores[1] > scores[0] and scores[2] > scores[3]  # the correct context of each question ranks first


def test_every_command_refuses_an_openai_model_with_no_server_and_no_key(tmp_path, monkeypatch, capsys):
    for var in ("UDCG_OPENAI_BASE_URLS", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**TINY, "reader": {"model": "openai:m"}}))
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"qid": "q", "cid": "c", "question": "Q?", "answers": ["a"], "answer": "a"}) + "\n")
    for argv in (["annotate", str(tmp_path / "in.json"), "-o", str(tmp_path / "o.json"), "--model", "openai:m"],
                 ["answer", "--run", str(tmp_path / "r.trec"), "--corpus", str(tmp_path), "--model", "openai:m",
                  "-o", str(tmp_path / "a.jsonl")],
                 ["judge", "answer", str(answers), "-o", str(tmp_path / "j.jsonl"), "--judge", "openai:m"],
                 ["validate", str(config), "-o", str(tmp_path / "run")]):
        assert main(argv) == 2, argv[0]
        err = capsys.readouterr().err
        assert "would go to OpenAI's API (https://api.openai.com/v1)" in err and "reader.api_base" in err, argv[0]
        assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_validate_through_a_chat_only_server_censors_never_zero(tmp_path, capsys, caplog):
    """A real chat-only server on 127.0.0.1 whose top list never holds NO-RESPONSE's first token: the
    run finishes, every p_abs is censored (half the list's last probability, never 0), counted in the
    notes, warned of with its share and named in the report."""
    import http.server
    import threading

    class ChatOnly(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.path.endswith("/chat/completions"):
                status, out = 404, {"error": {"message": "no such endpoint"}}
            elif body.get("logprobs"):
                top = [{"token": "The", "logprob": -0.1}, {"token": "A", "logprob": -3.0}]
                status, out = 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "The"},
                                                 "logprobs": {"content": [{"token": "The", "logprob": -0.1,
                                                                           "top_logprobs": top}]}}]}
            else:
                status, out = 200, {"choices": [{"index": i, "message": {"role": "assistant", "content": "politician"}}
                                                for i in range(body.get("n", 1))]}
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "chat.yaml"
        config.write_text(yaml.safe_dump({**TINY, "output": str(tmp_path / "run"),
                                          "reader": {"model": "m", "api_base": f"http://127.0.0.1:{server.server_port}/v1",
                                                     "max_retries": 0},
                                          "metrics": {"names": ["UDCG", "nDCG", "P", "eRAG"], "n_boot": 100}}))
        assert main(["validate", str(config), "--no-progress"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    rows = [json.loads(x) for x in (tmp_path / "run" / "annotations.jsonl").read_text().splitlines()]
    assert rows and all(r["censored"] and r["estimator_used"] == "api-logprobs-censored" for r in rows)
    assert all(r["p_abs"] == pytest.approx(math.exp(-3.0) / 2) and r["p_abs_bound"] == pytest.approx(math.exp(-3.0))
               for r in rows)
    notes = json.loads((tmp_path / "run" / "data" / "notes.json").read_text())
    assert notes["p_abs_censored"]["pairs"] == notes["p_abs_censored"]["of"] == len(rows)
    assert err.splitlines()[0].endswith(f"reader m: requests go to http://127.0.0.1:{server.server_port}/v1")
    assert f"warning: p_abs censored for {len(rows)} of {len(rows)} pairs (100.0%)" in caplog.text  # a logged warning
    assert f"_p_abs censored for {len(rows)} of {len(rows)} passages (100.0%)" in (tmp_path / "run" / "report.md").read_text()
