"""What the commands print: correlate's compact default view (every column with --full and in -o
files), and score --run's printed means in the layout of its written per-query rows."""

import json

import pytest

from udcg.cli import main
from udcg.flows.correlate import COLUMNS
from udcg.io.sources import example_path


def _contexts(path, n_questions=6):
    rows = []
    for q in range(n_questions):
        for c in range(4):
            rel = [c == j for j in range(3)]
            rows.append({"qid": f"q{q}", "cid": f"c{c}", "relevant": rel, "p_abs": [0.1 * c, 0.3, 0.5 + 0.05 * q],
                         "outcome": ["correct", "abstained", "wrong", "wrong"][(c + q) % 4]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _header(out):
    return next(line for line in out.splitlines() if line.startswith("| metric"))


def test_correlate_compact_by_default_full_on_request_and_in_files(tmp_path, capsys):
    src = tmp_path / "c.jsonl"
    _contexts(src)
    args = ["correlate", str(src), "--metrics", "UDCG,nDCG,P", "--n-boot", "100", "--n-resamples", "100"]
    assert main(args + ["-o", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr()
    assert _header(out.out) == "| metric | rho [95% CI] | p vs UDCG (Holm) | tau_b | pairwise accuracy |"
    assert "--full" in out.err
    table = json.loads((tmp_path / "t.json").read_text())
    assert list(table[0]) == COLUMNS  # the file keeps every column
    rows = {line.split(" | ")[0].strip("| "): line for line in out.out.splitlines() if line.startswith("| ")}
    assert "| — |" in rows["UDCG"]  # the baseline has no p against itself
    by_metric = {r["metric"]: r for r in table}
    assert f"{by_metric['P']['mean_rho']:.3f} [{by_metric['P']['ci_low']:.3f}, " in rows["P"]
    assert main(args + ["--full"]) == 0
    assert _header(capsys.readouterr().out) == "| " + " | ".join(COLUMNS) + " |"


def test_score_prints_its_means_in_the_written_layout(tmp_path, capsys):
    folder = example_path()
    out = tmp_path / "pq.tsv"
    for runs in (["bm25"], ["bm25", "dense"]):
        argv = ["score", *[a for r in runs for a in ("--run", str(folder / "runs" / f"{r}.trec"))],
                "--qrels", str(folder / "qrels" / "test.tsv"), "--metrics", "P@5,RR", "-o", str(out)]
        assert main(argv) == 0
        printed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
        written = [line.split("\t") for line in out.read_text().splitlines()]
        width = 3 + (len(runs) > 1)
        assert {len(r) for r in printed} == {len(r) for r in written} == {width}
        qid = width - 3
        assert {r[qid] for r in printed} == {"all"} and {r[qid + 1] for r in printed} == {"P@5", "RR"}
        assert {r[qid + 1] for r in written} == {"P@5", "RR"}
        for row in printed:
            values = [float(w[-1]) for w in written if w[:qid] == row[:qid] and w[qid + 1] == row[qid + 1]]
            assert float(row[-1]) == pytest.approx(sum(values) / len(values), abs=1e-12)


def test_correlate_equivalence_against_a_hand_computation(tmp_path, capsys):
    """--equivalence 0.03 on 40 questions of 6 contexts (outcomes and three metrics' values drawn at
    random, stored as the file's 'metrics': RR close to the baseline nDCG, P unrelated): each question's Spearman rho by scipy (a question whose outcomes
    are all equal is not usable; a constant metric's rho is 0), p_TOST of the rho differences by
    equivalence_test, Holm over the two metrics tested against the baseline, and the decision by the
    rule; the compact view shows it, the file keeps every column."""
    import numpy as np
    from scipy import stats

    from udcg.flows.correlate import EQUIVALENCE_COLUMNS
    from udcg.metrics.equivalence import decision, equivalence_test
    from udcg.metrics.stats import holm

    rng = np.random.default_rng(4)
    rows, rho = [], {"RR": [], "P": [], "nDCG": []}
    labels = np.array(["correct", "abstained", "wrong"])
    for q in range(40):
        outcome = rng.integers(0, 3, 6)
        score = np.array([1, 0, -1])[outcome]
        base = score + rng.normal(0, 1.0, 6)
        metrics = {"nDCG": base, "RR": base + rng.normal(0, 0.05, 6), "P": rng.normal(0, 1, 6)}
        for c in range(6):
            rows.append({"qid": f"q{q:02d}", "cid": f"c{c}", "outcome": str(labels[outcome[c]]),
                         "relevant": [True, False], "p_abs": [0.2, 0.8],
                         "metrics": {m: float(v[c]) for m, v in metrics.items()}})
        if len(set(score.tolist())) > 1:
            for m, v in metrics.items():
                rho[m].append(stats.spearmanr(v, score).statistic)
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["correlate", str(src), "--metrics", "RR,P,nDCG", "--baseline", "nDCG", "--n-boot", "100", "--equivalence", "0.03"]
    assert main(args + ["-o", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    table = {r["metric"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert list(next(iter(table.values())))[-len(EQUIVALENCE_COLUMNS):] == EQUIVALENCE_COLUMNS
    p = {m: equivalence_test(np.array(rho[m]) - np.array(rho["nDCG"]), 0.03)[0] for m in ("RR", "P")}
    assert [table[m]["rho_p_tost"] for m in ("RR", "P")] == pytest.approx([p["RR"], p["P"]])
    p_holm = dict(zip(("RR", "P"), holm([p["RR"], p["P"]])))
    for m in ("RR", "P"):
        assert table[m]["rho_p_tost_holm"] == pytest.approx(p_holm[m])
        assert table[m]["decision"] == decision(table[m]["p_holm"] < 0.05, p_holm[m] < 0.05, 0.03)
    assert table["RR"]["decision"] == "equivalent within ±0.03" and table["P"]["decision"] == "different"
    assert table["nDCG"]["decision"] == "" and "rho vs nDCG: decision (TOST ±0.03, Holm p)" in _header(out)
    from udcg.metrics.planning import queries_to_detect, queries_to_show_equivalence

    for m in ("RR", "P"):  # the questions each margin needs, at Holm's strictest level over the two tests
        sd = float(np.std(np.array(rho[m]) - np.array(rho["nDCG"]), ddof=1))
        assert table[m]["questions_to_detect"] == queries_to_detect(sd, 0.03, 0.05 / 2, 0.8)
        assert table[m]["questions_for_equivalence"] == queries_to_show_equivalence(sd, 0.03, 0.05 / 2, 0.8)
    assert table["nDCG"]["questions_to_detect"] is None  # NaN in the JSON table: the baseline is not tested
    assert main(args[:-1] + ["0.002", "-o", str(tmp_path / "t2.json")]) == 0
    tiny = {r["metric"]: r for r in json.loads((tmp_path / "t2.json").read_text())}
    assert tiny["RR"]["decision"] == "inconclusive"
    assert (f"usable questions needed: {tiny['RR']['questions_to_detect']} to detect, "
            f"{tiny['RR']['questions_for_equivalence']} for equivalence") in capsys.readouterr().out
    assert main(args[:-1] + ["0.000001", "-o", str(tmp_path / "t3.json")]) == 0  # beyond any number of questions
    assert "usable questions needed: unreachable to detect, unreachable for equivalence" in capsys.readouterr().out
    beyond = {r["metric"]: r for r in json.loads((tmp_path / "t3.json").read_text())}
    assert beyond["RR"]["questions_to_detect"] == beyond["RR"]["questions_for_equivalence"] == "unreachable"
    assert main(["correlate", str(src), "--metrics", "RR,P", "--baseline", "nDCG", "--equivalence", "0.03"]) == 2
    assert main(["correlate", str(src), "--metrics", "RR,nDCG", "--baseline", "nDCG", "--equivalence", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--baseline nDCG: not among --metrics" in err and "--equivalence -1.0: must be a number in (0, 2]" in err
