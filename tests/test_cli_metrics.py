"""The metrics CLI end to end: score (authors' format, contexts JSONL), fit-theta, correlate; bad input."""

import json
from importlib import resources

import numpy as np
import pytest

from udcg.cli import main
from udcg.metrics.udcg import theta_features

AUTHORS = str(resources.files("udcg") / "data" / "authors-sample.json")


def run(*argv):
    return main([str(a) for a in argv])


def test_score_reproduces_authors_file(tmp_path):
    out = tmp_path / "scored.json"
    assert run("score", AUTHORS, "-o", out, "--gamma", "0.333") == 0
    stored = json.loads(open(AUTHORS).read())
    ours = json.loads(out.read_text())
    for a, b in zip(stored, ours):
        for model, value in a["udcg"].items():
            assert abs(b["udcg"][model] - value) <= 1e-12
            assert abs(b["metrics"]["UDCG"] - value) <= 1e-12
        assert b["passages"] == a["passages"]  # everything the user had is kept
    assert ours[0]["metrics"]["RR"] == 1.0 and ours[0]["metrics"]["P"] == pytest.approx(0.4)


def synthetic_contexts(path, n_q=40, k=5, seed=0):
    rng = np.random.default_rng(seed)
    w = np.array([1.0, 0.5, 0.3, 0.5, 0.9, 0.4, 0.2, 0.1, 0.2, 0.3])
    with open(path, "w") as f:
        for q in range(n_q):
            for c in range(10):
                rel = rng.random(k) < 0.35
                p = rng.random(k)
                u = np.where(rel, 1, -1) * (1 - p)
                s = theta_features(u[None])[0] @ w + rng.normal(0, 0.1)
                outcome = "correct" if s > 0.6 else ("abstained" if s > 0.2 else "wrong")
                f.write(json.dumps({"qid": f"q{q}", "cid": f"q{q}:{c}", "relevant": rel.tolist(),
                                    "p_abs": p.tolist(), "outcome": outcome}) + "\n")


def test_fit_theta_then_correlate(tmp_path, capsys):
    ctx = tmp_path / "contexts.jsonl"
    synthetic_contexts(ctx)
    assert run("fit-theta", ctx, "-o", tmp_path / "theta.json", "--C", "10") == 0
    model = json.loads((tmp_path / "theta.json").read_text())
    assert model["k"] == 5 and len(model["alpha"]) == 5
    assert run("score", ctx, "-o", tmp_path / "scored.jsonl", "--metrics", "UDCG,UDCG_theta,nDCG@5,P@5,RR,AP",
               "--theta", tmp_path / "theta.json") == 0
    capsys.readouterr()
    assert run("correlate", tmp_path / "scored.jsonl", "--n-boot", "500", "-o", tmp_path / "table.json") == 0
    table = {r["metric"]: r for r in json.loads((tmp_path / "table.json").read_text())}
    # outcomes were generated from a utility model: the utility metrics must beat binary-relevance ones
    assert table["UDCG_theta"]["mean_rho"] > table["P@5"]["mean_rho"]
    assert table["UDCG"]["mean_rho"] > table["RR"]["mean_rho"]
    assert table["UDCG_theta"]["ci_low"] < table["UDCG_theta"]["mean_rho"] < table["UDCG_theta"]["ci_high"]
    assert "| metric |" in capsys.readouterr().out


@pytest.mark.parametrize("content,needle", [
    ('{"qid": "q1", "relevant": [true], "p_abs": [1.5], "outcome": "correct"}\n', "p_abs"),
    ('{"qid": "q1", "relevant": [true, false], "utilities": [0.5], "outcome": "correct"}\n', "has 1 values"),
    ('{"qid": "q1", "relevant": [], "outcome": "correct"}\n', "k must be >= 1"),
    ('{"relevant": [true], "utilities": [0.5]}\n', "qid"),
    ('{"qid": "q1", "relevant": [true], "utilities": [NaN]}\n', "NaN"),
    ('{"qid": "q1", "relevant": [true], "utilities": [0.5]}\n{"qid": \n', ":2:"),
    ('[{"example_id": "a", "question": "q?", "passages": []}]', "empty 'passages'"),
    ('[{"example_id": "a", "question": "q?", "passages": [{"doc_id": "d", "is_relevant": true}]}]', "'text'"),
    ('{"question": "q?", "answers": ["a"], "ctxs": [{"id": "1", "text": "t"}]}\n', "run 'udcg annotate"),  # shared PopQA rows
])
def test_bad_input_one_line_error_exit_2_no_output(tmp_path, capsys, content, needle):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    out = tmp_path / "out.jsonl"
    assert run("score", bad, "-o", out) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and str(bad) in err and "\n" not in err
    assert not out.exists()


def test_k_must_be_positive(tmp_path, capsys):
    assert run("score", AUTHORS, "-o", tmp_path / "o.json", "--k", "0") == 2
    assert "--k 0" in capsys.readouterr().err
