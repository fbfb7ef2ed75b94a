"""House rule: a result never depends on the order of the input's lines. Every everyday command is
run on the packaged example (runs, qrels, a utilities file, judged answers) and on a published
contexts file, then again on copies whose lines are shuffled (each file, a few seeds): every number
it prints or writes must be byte for byte the same. Files whose lines are records kept one for one
(``score`` of a contexts file) may follow the input's order: their lines are compared as a set.
The commands run in the variant's folder on relative paths, so the file names they print agree."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

import udcg
from udcg.cli import main
from udcg.flows.score import score_context_file
from udcg.io.sources import example_path
from udcg.io.trec import read_qrels, read_run

FOLDER = example_path()
CONTEXTS = Path(__file__).resolve().parents[1] / "docs/results/nq-qwen0.5b/data/contexts.jsonl.gz"
SEEDS = (1, 2, 3)
RUNS = ("bm25.trec", "dense.trec", "hybrid.trec")


def _utilities(qrels: dict) -> list[str]:
    """One record per (query, document) of the runs' top 10: seeded p_abs on a grid of 41 values (ties
    within a query and across), relevant as the qrels say, the rest unjudged."""
    rng = np.random.default_rng(7)
    pairs = sorted({(q, d) for run in RUNS for q, docs in read_run(FOLDER / "runs" / run).items()
                    for d in docs})
    return [json.dumps({"qid": q, "docid": d, "p_abs": float(rng.integers(0, 41)) / 41,
                        "relevant": qrels.get(q, {}).get(d, 0) > 0,
                        "relevance_source": "qrels" if d in qrels.get(q, {}) else "unjudged-irrelevant",
                        "model": "m", "estimator": "first-token", "prompt_version": "p"}) for q, d in pairs]


def _answers(qids: list[str]) -> list[str]:
    """Judged answers of bm25 and dense (dense not judged on two queries: --judged-only drops them)."""
    rng = np.random.default_rng(3)
    return [json.dumps({"qid": q, "cid": cid, "run": cid, "answer": "x",
                        "outcome": str(rng.choice(["correct", "abstained", "wrong"]))})
            for q in qids for cid in ("bm25", "dense") if not (cid == "dense" and q in qids[3:5])]


def _contexts() -> list[str]:
    """The contexts of 24 questions of the published NQ run's main study (outcomes, utilities, metrics)."""
    with gzip.open(CONTEXTS, "rt") as f:
        lines = [line for line in f.read().splitlines() if '"study": "main"' in line]
    keep = list(dict.fromkeys(json.loads(line)["qid"] for line in lines))[:24]
    return [line for line in lines if json.loads(line)["qid"] in keep]


def _write(folder: Path, files: dict[str, list[str]], seed: int | None) -> Path:
    """The files, each one's lines shuffled with ``seed`` (None: as they are); a header stays first."""
    for name, lines in files.items():
        header, body = (lines[:1], lines[1:]) if name.endswith(".tsv") else ([], list(lines))
        if seed is not None:
            random.Random(f"{seed}\t{name}").shuffle(body)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("".join(line + "\n" for line in header + body))
    return folder


def _inputs() -> dict[str, list[str]]:
    files = {f"nq/{name}": (FOLDER / name).read_text().splitlines()
             for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", *(f"runs/{r}" for r in RUNS))}
    qrels = read_qrels(FOLDER / "qrels" / "test.tsv")
    files["utilities.jsonl"] = _utilities(qrels)
    files["judged.jsonl"] = _answers(list(qrels))
    files["contexts.jsonl"] = _contexts()
    return files


def _cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0, argv
    return capsys.readouterr().out


RUN_ARGS = ["--run", "nq/runs/bm25.trec", "--run", "nq/runs/dense.trec", "--run", "nq/runs/hybrid.trec",
            "--qrels", "nq/qrels/test.tsv", "--utilities", "utilities.jsonl"]


def _commands(capsys) -> dict[str, str]:
    """Every everyday command's printed and written output, in the current folder."""
    out = {}
    out["score"] = _cli(capsys, "score", *RUN_ARGS, "--metrics", "UDCG@5,nDCG@5,P@5,RR@5,AP", "-o", "scores.tsv")
    out["score.tsv"] = Path("scores.tsv").read_text()
    _cli(capsys, "score", *RUN_ARGS[:6], *RUN_ARGS[8:], "--metrics", "UDCG@5", "-o", "udcg-only.tsv")
    out["score without qrels (the runs' queries)"] = Path("udcg-only.tsv").read_text()
    out["compare"] = _cli(capsys, "compare", *RUN_ARGS, "--metrics", "UDCG@5,nDCG@5,P@5", "--n-boot", "300",
                          "--format", "json")
    out["compare-answers"] = _cli(capsys, "compare", *RUN_ARGS[:4], *RUN_ARGS[6:], "--metrics", "UDCG@5,nDCG@5",
                                  "--answers", "judged.jsonl", "--n-boot", "300", "--format", "csv")
    out["compare-judged-only"] = _cli(capsys, "compare", *RUN_ARGS[:4], *RUN_ARGS[6:], "--metrics", "UDCG@5",
                                      "--answers", "judged.jsonl", "--judged-only", "--n-boot", "300")
    out["reader-check"] = _cli(capsys, "reader-check", "utilities.jsonl", "--n-boot", "300", "--json")
    out["score-contexts"] = _cli(capsys, "score", "contexts.jsonl", "-o", "scored.jsonl")
    out["scored.jsonl (as a set)"] = "\n".join(sorted(Path("scored.jsonl").read_text().splitlines()))
    out["fit-theta"] = _cli(capsys, "fit-theta", "contexts.jsonl", "--k", "5", "--C", "1", "-o", "theta.json")
    out["theta.json"] = Path("theta.json").read_text()
    out["fit-theta-cv"] = _cli(capsys, "fit-theta", "contexts.jsonl", "--k", "5", "--C", "auto", "--cv-folds", "3",
                               "-o", "theta-cv.json")
    out["theta-cv.json"] = Path("theta-cv.json").read_text()
    out["correlate"] = _cli(capsys, "correlate", "contexts.jsonl", "--metrics", "UDCG,nDCG,P", "--n-boot", "300",
                            "--full", "--theta", "theta.json", "-o", "correlate.json")
    out["correlate.json"] = Path("correlate.json").read_text()
    return out


def _api() -> dict[str, str]:
    """The Python API's equivalents, as JSON."""
    runs = {r.split(".")[0]: f"nq/runs/{r}" for r in RUNS}
    pair = {name: runs[name] for name in ("bm25", "dense")}
    scores = udcg.score_runs(runs, "nq/qrels/test.tsv", utilities="utilities.jsonl", metrics="UDCG@5,nDCG@5,RR@5")
    cmp = udcg.compare(pair, "nq/qrels/test.tsv", utilities="utilities.jsonl", metrics="UDCG@5,P@5", n_boot=300,
                       answers="judged.jsonl")
    check = udcg.reader_check("utilities.jsonl", n_boot=300)
    model = udcg.fit_theta("contexts.jsonl", "theta-api.json", k=5, C="auto", cv_folds=3)
    table = udcg.correlate("contexts.jsonl", metrics="UDCG,nDCG", n_boot=300)
    means = score_context_file("contexts.jsonl", "scored-api.jsonl").means  # its means at full precision
    return {"api score_runs": repr({n: (s.qids, {m: v.tolist() for m, v in s.values.items()}, s.means(), s.notes)
                                for n, s in scores.items()}),
            "api compare": json.dumps(cmp.to_dict()), "api reader_check": json.dumps(check.to_dict()),
            "api fit_theta": json.dumps(model.to_dict()), "api correlate": repr(table.rows),
            "api score (contexts file) means": repr(means.rows)}


def _sample() -> str:
    """``udcg answer --sample``'s draw and the contexts it answers (no model: the step before)."""
    from udcg.flows.own_runs import run_contexts, select_queries
    from udcg.io.beir import read_collection

    runs = {r.split(".")[0]: read_run(f"nq/runs/{r}") for r in RUNS}
    runs, collection = select_queries(runs, read_collection("nq"), sample=8, seed=1)
    contexts, short = run_contexts(runs, collection, 5, samples=2, depth=10, seed=1)
    return repr((sorted(collection.queries), sorted(contexts, key=repr), short))


def _outputs(folder: Path, capsys, monkeypatch) -> dict[str, str]:
    monkeypatch.chdir(folder)
    return {**_commands(capsys), **_api(), "answer --sample": _sample()}


def test_every_output_is_the_same_whatever_the_order_of_the_input_lines(tmp_path, capsys, monkeypatch):
    inputs = _inputs()
    reference = _outputs(_write(tmp_path / "as-given", inputs, None), capsys, monkeypatch)
    differ = {}
    for seed in SEEDS:
        got = _outputs(_write(tmp_path / f"shuffled-{seed}", inputs, seed), capsys, monkeypatch)
        differ[seed] = [name for name in reference if got[name] != reference[name]]
    assert differ == {seed: [] for seed in SEEDS}


def test_the_canonical_query_order_is_numbered_ids_in_number_order_and_total():
    from udcg.records import query_key

    ids = ["nq10", "nq2", "q1", "q01", "nq1", "b", "10", "9", "nq2a", "nq2-1"]
    assert sorted(ids, key=query_key) == ["9", "10", "b", "nq1", "nq2", "nq2-1", "nq2a", "nq10", "q01", "q1"]
    for seed in SEEDS:  # any reading order gives the same order
        random.Random(seed).shuffle(ids)
        assert sorted(ids, key=query_key) == sorted(sorted(ids), key=query_key)
