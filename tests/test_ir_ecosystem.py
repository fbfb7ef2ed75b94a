"""udcg inside PyTerrier, ir_measures and ranx (issue 37), with the real libraries: ``udcg.ir_measure``
in ``ir_measures.calc_aggregate`` / ``iter_calc`` and in ``pt.Experiment`` (means, per-query values,
PyTerrier's significance columns) equals ``udcg score`` on the same files; ranx objects and
PyTerrier-shaped DataFrames are inputs like dicts; ``udcg.pyterrier.Utility`` annotates a pipeline's
passages into the utilities folder the CLI reuses.

The utilities come from ``udcg annotate`` on the packaged example against a real OpenAI-compatible
server on 127.0.0.1 (``scripts/instant_openai_server.py``: log-probabilities a deterministic
function of the prompt, so each pair has its own utility). PyTerrier 1.x runs ``pt.Experiment``
without Java; nothing here starts Java or reaches the network (checked by
``test_pyterrier_runs_offline``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import ir_measures
import numpy as np
import pandas as pd
import pytest
from ir_measures import nDCG
from scipy import stats

import udcg
from tests import lazy
from tests.conftest import load_script
from udcg.cli import main
from udcg.errors import InputError
from udcg.flows.run_scores import read_any_qrels, read_any_run
from udcg.io.sources import example_path

# imported on first use (tests/lazy.py): collecting the suite does not load them
pt = lazy.LazyModule("pyterrier")
ranx = lazy.LazyModule("ranx")

EX = example_path()
RUNS = {name: EX / "runs" / f"{name}.trec" for name in ("bm25", "dense")}
QRELS = EX / "qrels" / "test.tsv"


@pytest.fixture(scope="module")
def server():
    with load_script("instant_openai_server").Process(0.0) as s, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "test-key")
        yield s


@pytest.fixture(scope="module")
def utilities(server, tmp_path_factory):
    """The quickstart's utilities folder (the union of the BM25 and dense runs' top 5)."""
    out = tmp_path_factory.mktemp("quickstart") / "utilities"
    udcg.annotate_runs(EX, list(RUNS.values()), out, "bench", depth=5, api_base=server.url,
                       show_progress=False)
    return out


def _cli_score(utilities, tmp_path, capsys, metrics="UDCG@5,nDCG@5") -> dict:
    """``udcg score --run bm25 --run dense``: {(run, qid, measure): value} of its output file, and
    qid 'all': the means it prints."""
    capsys.readouterr()
    argv = ["score", *[a for r in RUNS.values() for a in ("--run", str(r))], "--qrels", str(QRELS), "--utilities",
            str(utilities), "--metrics", metrics, "-o", str(tmp_path / "scores.tsv")]
    assert main(argv) == 0
    lines = (tmp_path / "scores.tsv").read_text().splitlines() + capsys.readouterr().out.splitlines()
    rows = [line.split("\t") for line in lines]
    return {(run, qid, m): float(v) for run, qid, m, v in rows}


def _experiment(measures, **kwargs):
    topics, qrels = udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS)
    bm25, dense = (udcg.pyterrier.results(path) for path in RUNS.values())
    return pt.Experiment([bm25, dense], topics, qrels, eval_metrics=measures, names=["bm25", "dense"], **kwargs)


def test_pt_experiment_gives_udcg_scores_means_and_pyterriers_tests(utilities, tmp_path, capsys):
    cli = _cli_score(utilities, tmp_path, capsys)
    measure = udcg.ir_measure("UDCG@5", utilities=utilities)
    name = str(measure)  # UDCG(utilities='utilities#...')@5: the column
    table = _experiment([nDCG @ 5, measure], baseline=0).set_index("name")
    for run in RUNS:
        assert table.loc[run, name] == pytest.approx(cli[run, "all", "UDCG@5"], abs=1e-12)
        assert table.loc[run, "nDCG@5"] == pytest.approx(cli[run, "all", "nDCG@5"], abs=1e-12)
    assert table.loc["bm25", name] != table.loc["dense", name]
    qids = sorted({q for (_, q, _) in cli if q != "all"})
    a, b = ([cli[run, q, "UDCG@5"] for q in qids] for run in RUNS)
    assert table.loc["dense", f"{name} p-value"] == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert table.loc["dense", f"{name} +"] + table.loc["dense", f"{name} -"] == sum(x != y for x, y in zip(a, b))

    per_query = _experiment([measure], perquery=True)
    got = {(r.name, r.qid): r.value for r in per_query.itertuples()}
    assert got == pytest.approx({(run, q): cli[run, q, "UDCG@5"] for run in RUNS for q in qids}, abs=1e-12)
    ours = pd.concat([udcg.evaluate(path, QRELS, utilities=utilities, metrics="UDCG@5").to_frame(long=True)
                      for path in RUNS.values()])  # RunScores in pt.Experiment(perquery=True)'s layout
    assert list(ours.columns) == list(per_query.columns)
    pd.testing.assert_frame_equal(ours.sort_values(["name", "qid"]).reset_index(drop=True),
                                  per_query.assign(measure="UDCG@5").sort_values(["name", "qid"]).reset_index(drop=True),
                                  check_exact=False)


def test_ir_measures_calc_aggregate_and_iter_calc(utilities, tmp_path, capsys):
    cli = _cli_score(utilities, tmp_path, capsys, "UDCG@5,UDCG@3,UDCG@2")
    qrels = {q: {d: int(r) for d, r in docs.items()} for q, docs in read_any_qrels(QRELS).items()}  # pytrec_eval: ints
    measure = udcg.ir_measure("UDCG@5", utilities=str(utilities))
    label = str(measure).removeprefix("UDCG").removesuffix("@5")  # (utilities='utilities#...')
    assert str(measure @ 3) == f"UDCG{label}@3" and str(udcg.ir_measure("UDCG")) == "UDCG"
    run = list(ir_measures.read_trec_run(str(RUNS["bm25"])))
    whole = udcg.ir_measure("UDCG", utilities)  # the whole ranking; @2 its first two
    means = ir_measures.calc_aggregate([measure, measure @ 3, whole @ 2, nDCG @ 5], qrels, run)
    assert means[measure] == pytest.approx(cli["bm25", "all", "UDCG@5"], abs=1e-12)
    assert means[measure @ 3] == pytest.approx(cli["bm25", "all", "UDCG@3"], abs=1e-12)
    assert means[whole @ 2] == pytest.approx(cli["bm25", "all", "UDCG@2"], abs=1e-12)
    with pytest.raises(InputError, match="89 of the 200 top-10 documents have no utility"):
        whole.calc_aggregate(qrels, run)  # the run's top 10, annotated to depth 5
    per_query = {(m.query_id, m.measure): m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    assert per_query == pytest.approx({(q, measure): v for (r, q, m), v in cli.items()
                                       if r == "bm25" and q != "all" and m == "UDCG@5"}, abs=1e-12)


def test_options_gamma_dict_utilities_and_the_utility_column(utilities):
    table = udcg.read_utilities(utilities)
    qrels = read_any_qrels(QRELS)
    run = read_any_run(RUNS["dense"])
    want = udcg.evaluate(run, qrels, utilities=utilities, metrics=["UDCG@5"], gamma=0.5).means()["UDCG@5"]
    assert udcg.ir_measure("UDCG@5", table, gamma=0.5).calc_aggregate(qrels, run) == pytest.approx(want, abs=1e-12)
    frame = udcg.pyterrier.results(run).rename(columns={"qid": "query_id", "docno": "doc_id"})  # ir_measures' names
    frame["utility"] = [table[q].get(d, np.nan) for q, d in zip(frame.query_id, frame.doc_id)]
    from_column = udcg.ir_measure("UDCG@5").calc_aggregate(qrels, frame)
    assert from_column == pytest.approx(udcg.evaluate(run, qrels, utilities=table, metrics="UDCG@5").means()["UDCG@5"])


def test_unannotated_documents_follow_udcg(utilities):
    run = read_any_run(RUNS["bm25"])
    qrels = read_any_qrels(QRELS)
    run["nq0"]["not-annotated"] = 99.0  # now the top document of nq0, without a utility
    with pytest.raises(InputError, match="1 of the 100 top-5 documents have no utility"):
        udcg.ir_measure("UDCG@5", utilities).calc_aggregate(qrels, run)
    for policy in ("zero", "worst"):
        want = udcg.evaluate(run, qrels, utilities=utilities, metrics="UDCG@5", unannotated=policy).means()["UDCG@5"]
        got = udcg.ir_measure("UDCG@5", utilities, unannotated=policy).calc_aggregate(qrels, run)
        assert got == pytest.approx(want, abs=1e-12)
    assert udcg.ir_measure("UDCG@5", utilities, unannotated="zero").calc_aggregate(qrels, run) != pytest.approx(
        udcg.ir_measure("UDCG@5", utilities, unannotated="worst").calc_aggregate(qrels, run))


def test_bad_measures_are_one_line_errors(utilities):
    with pytest.raises(InputError, match="unknown measure 'nope'"):
        udcg.ir_measure("nope@5")
    with pytest.raises(InputError, match="needs utilities.*utility column"):
        udcg.ir_measure("UDCG@5").calc_aggregate(read_any_qrels(QRELS), read_any_run(RUNS["bm25"]))
    with pytest.raises(InputError, match="unannotated"):
        udcg.ir_measure("UDCG@5", utilities, unannotated="skip")


def test_ranx_and_dataframes_are_inputs_like_dicts(utilities):
    qrels = read_any_qrels(QRELS)
    runs = {name: read_any_run(path) for name, path in RUNS.items()}
    want = udcg.evaluate(runs["bm25"], qrels, utilities=utilities, metrics="UDCG@5,nDCG@5,P@5")
    rx_run, rx_qrels = ranx.Run.from_dict(runs["bm25"], name="bm25"), ranx.Qrels.from_dict(
        {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()})
    frames = udcg.pyterrier.results(RUNS["bm25"]), udcg.pyterrier.qrels(QRELS)
    for run, judged in ((rx_run, rx_qrels), frames, (rx_run, frames[1])):
        got = udcg.evaluate(run, judged, utilities=utilities, metrics="UDCG@5,nDCG@5,P@5")
        assert got.per_query() == want.per_query()
    util_frame = pd.DataFrame([(q, d, u) for q, docs in udcg.read_utilities(utilities).items() for d, u in docs.items()],
                              columns=["qid", "docno", "utility"])
    cmp_frames = udcg.compare({n: udcg.pyterrier.results(p) for n, p in RUNS.items()}, frames[1], utilities=util_frame,
                              metrics="UDCG@5,nDCG@5", n_boot=200)
    cmp_dicts = udcg.compare(runs, qrels, utilities=utilities, metrics="UDCG@5,nDCG@5", n_boot=200)
    apart = ("footer", "notes")  # the folder's utilities carry annotate's reader check; the frame's carry none
    assert {k: v for k, v in cmp_frames.to_dict().items() if k not in apart} == {
        k: v for k, v in cmp_dicts.to_dict().items() if k not in apart}
    assert cmp_dicts.notes[0].startswith("UDCG's reader (bench, ")  # then the label checks, in both
    assert cmp_frames.notes[0] == cmp_dicts.notes[1] and cmp_frames.notes[0].startswith("labels (qrels, top 5")
    rx_dense = ranx.Run.from_dict(runs["dense"], name="dense")
    # a list of ranx runs, named by their names (the qrels as a dict: the bootstrap draws queries in the qrels' order)
    cmp_ranx = udcg.compare([rx_run, rx_dense], qrels, utilities=utilities, metrics="UDCG@5,nDCG@5", n_boot=200)
    assert cmp_ranx.to_dict() == cmp_dicts.to_dict()
    assert udcg.evaluate(rx_run, rx_qrels, utilities=utilities, metrics="UDCG@5").name == "bm25"


def test_pyterrier_frames_keep_graded_and_fractional_labels():
    assert udcg.pyterrier.qrels({"q": {"d": 2.0, "e": 0.0}}).label.tolist() == [2, 0]
    assert udcg.pyterrier.qrels({"q": {"d": 0.5}}).label.tolist() == [0.5]  # never truncated to 0


def test_bad_frames_name_the_row_or_column():
    good = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d2"], "score": [1.0, 0.5]})
    with pytest.raises(InputError, match=r"needs a score column named score \(its columns: qid, docno, rank\)"):
        udcg.evaluate(good.rename(columns={"score": "rank"}), utilities={"q1": {"d1": 0.5}}, metrics="UDCG@2")
    with pytest.raises(InputError, match=r"row 1 .*score = 'nan' is not a finite number"):
        udcg.evaluate(good.assign(score=[1.0, np.nan]), utilities={"q1": {"d1": 0.5}}, metrics="UDCG@2")
    with pytest.raises(InputError, match=r"row 1: .*appears twice"):
        udcg.evaluate(good.assign(docno=["d1", "d1"]), utilities={"q1": {"d1": 0.5}}, metrics="UDCG@2")


def _texts() -> dict[str, str]:
    return {json.loads(line)["_id"]: json.loads(line)["text"] for line in (EX / "corpus.jsonl").open()}


def test_the_utility_transformer_shares_the_cli_folder(server, utilities, tmp_path, capsys):
    topics, qrels = udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS)
    texts = _texts()
    retrieved = udcg.pyterrier.results(RUNS["bm25"]).merge(topics, on="qid").assign(text=lambda f: f.docno.map(texts))
    utility = udcg.pyterrier.Utility("bench", depth=5, output=tmp_path / "u", api_base=server.url,
                                     qrels=qrels)
    pipeline = pt.Transformer.from_df(retrieved) >> utility
    table = pt.Experiment([pipeline], topics, qrels, eval_metrics=[udcg.ir_measure("UDCG@5")], names=["bm25"])
    assert utility.report.computed == 100
    want = udcg.evaluate(RUNS["bm25"], QRELS, utilities=utilities, metrics="UDCG@5").means()["UDCG@5"]
    assert table.loc[0, "UDCG@5"] == pytest.approx(want, abs=1e-12)  # the transformer's utilities are the CLI's
    annotated = utility.transform(retrieved)
    assert annotated.utility.notna().sum() == 100 and annotated.query("rank >= 5").utility.isna().all()
    capsys.readouterr()
    assert main(["annotate", "--corpus", str(EX), *[a for r in RUNS.values() for a in ("--run", str(r))], "--depth", "5",
                 "--model", "bench", "--api-base", server.url, "-o", str(tmp_path / "u"),
                 "--no-progress"]) == 0
    assert "new pairs annotated: 65; already in " in capsys.readouterr().err  # 165 pairs, 100 from the transformer
    with pytest.raises(InputError, match="no 'text' column.*pt.text.get_text"):
        utility.transform(retrieved.drop(columns="text"))


def test_the_ir_libraries_load_only_when_used_and_name_the_extra_when_missing():
    code = ("import sys, udcg; udcg.evaluate({'q': {'d': 1.0}}, utilities={'q': {'d': 0.5}}, metrics='UDCG@1');"
            "print(sorted(m for m in ('pyterrier', 'ir_datasets', 'ranx', 'ir_measures', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
    for module, call in (("ir_measures", "udcg.ir_measure('UDCG@5')"), ("pyterrier", "udcg.pyterrier.Utility"),
                         ("ir_datasets", "udcg.evaluate({'q': {'d': 1.0}}, 'irds:x', metrics='nDCG@1')")):
        code = f"import sys; sys.modules[{module!r}] = None; import udcg\ntry:\n {call}\nexcept Exception as e: print(e)"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.stdout.strip().endswith("is not installed: pip install -e '.[ir]' in the udcg checkout"), (module, done.stdout, done.stderr)
        assert len(done.stdout.strip().splitlines()) == 1


def test_pyterrier_runs_offline(tmp_path):
    """Importing pyterrier and running pt.Experiment with udcg's measure opens no network connection
    and starts no Java (every socket connect is refused and recorded in the child)."""
    code = f"""
import socket
tried = []
def refuse(self, address, *a):
    tried.append(address)
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
import pyterrier as pt, udcg
from ir_measures import nDCG
from udcg.flows.run_scores import read_any_run
from udcg.io.sources import example_path
ex = example_path()
topics, qrels = udcg.pyterrier.topics(ex), udcg.pyterrier.qrels(ex / "qrels" / "test.tsv")
run = udcg.pyterrier.results(ex / "runs" / "bm25.trec")
utilities = {{q: {{d: 0.5 for d in docs}} for q, docs in read_any_run(ex / "runs" / "bm25.trec").items()}}
pt.Experiment([run], topics, qrels, eval_metrics=[nDCG@5, udcg.ir_measure("UDCG@5", utilities=utilities)])
print(tried, pt.java.started())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] False"


README_SECTION = "## In PyTerrier, ir_measures, ir_datasets and ranx"


def test_the_readme_section_runs_as_printed(utilities, tmp_path, monkeypatch, capsys):
    """The section's Python block, as printed, in a folder like the quickstart's (the packaged
    example, the utilities folder of the BM25 and dense runs' top 5): it prints the side-by-side table
    with udcg score's means. (The README's figures are those of the quickstart's reader,
    qwen2.5-coder-0.5b; here the reader is the test server, so the figures are this folder's.)"""
    import re
    import shutil
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert readme.count(README_SECTION) == 1
    section = readme.split(README_SECTION)[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    shutil.copytree(EX, tmp_path / "nq-example")
    shutil.copytree(utilities, tmp_path / "utilities")
    cli = _cli_score(utilities, tmp_path, capsys)
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md (PyTerrier)", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["name", "nDCG@5", "UDCG@5", "UDCG@5", "p-value"]
    for line in printed[1:]:
        name, ndcg, value, _ = line.split()
        assert float(value) == pytest.approx(cli[name, "all", "UDCG@5"], abs=1e-6)  # printed to 6 decimals
        assert float(ndcg) == pytest.approx(cli[name, "all", "nDCG@5"], abs=1e-6)


@pytest.mark.slow
def test_a_local_offline_reader_in_one_pt_experiment(tmp_path, capsys, one_torch_thread):
    """The smallest bundled model (SmolLM2-135M, local, no server) annotates the BM25 run's top 2
    inside pt.Experiment; UDCG@2 from the utility column equals ``udcg score`` on the folder it wrote."""
    topics, qrels = udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS)
    texts = _texts()
    retrieved = udcg.pyterrier.results(RUNS["bm25"]).merge(topics, on="qid").assign(text=lambda f: f.docno.map(texts))
    utility = udcg.pyterrier.Utility("smollm2-135m", depth=2, output=tmp_path / "u", qrels=qrels)
    table = pt.Experiment([pt.Transformer.from_df(retrieved) >> utility], topics, qrels,
                          eval_metrics=[nDCG @ 2, udcg.ir_measure("UDCG@2")], names=["bm25"])
    assert utility.report.computed == 40 and utility.report.model_loaded
    assert main(["score", "--run", str(RUNS["bm25"]), "--qrels", str(QRELS), "--utilities", str(tmp_path / "u"),
                 "--metrics", "UDCG@2", "-o", str(tmp_path / "s.tsv")]) == 0
    mean = float(capsys.readouterr().out.split()[-1])
    assert table.loc[0, "UDCG@2"] == pytest.approx(mean, abs=1e-12)
    assert 0.0 < table.loc[0, "UDCG@2"] < 1.0


def test_compare_agrees_with_ranx_compare():
    """The same three packaged runs in ranx.compare (an independent implementation): every mean,
    every paired t-test p (ranx's "student") and every win / tie / loss count (ranx's
    ``win_tie_loss``) equals udcg.compare's (test="t"; a_higher / equal / b_higher)."""
    names = ("bm25", "dense", "hybrid")
    runs = {n: read_any_run(EX / "runs" / f"{n}.trec") for n in names}
    qrels = read_any_qrels(QRELS)
    pairs = {"nDCG@5": "ndcg@5", "P@5": "precision@5", "RR@5": "mrr@5", "AP@5": "map@5"}
    ours = udcg.compare(runs, qrels, metrics=list(pairs), test="t", n_boot=200)
    report = ranx.compare(ranx.Qrels.from_dict(qrels), [ranx.Run.from_dict(runs[n], name=n) for n in names],
                          list(pairs.values()), stat_test="student", max_p=0.05)
    for run in names:
        for m, theirs in pairs.items():
            assert ours.cells[run][m].mean == pytest.approx(report.results[run][theirs], abs=1e-12), (run, m)
    checked = 0
    for t in ours.pairs:
        theirs = pairs[t.measure]
        wtl = report.win_tie_loss[t.run_a, t.run_b][theirs]
        assert (t.a_higher, t.equal, t.b_higher) == (wtl["W"], wtl["T"], wtl["L"]), (t.measure, t.run_a, t.run_b)
        p = report.comparisons[t.run_a, t.run_b][theirs]["p_value"]
        assert (np.isnan(t.p) and np.isnan(p)) or t.p == pytest.approx(p, rel=1e-9), (t.measure, t.run_a, t.run_b)
        checked += t.a_higher + t.b_higher > 0
    assert checked >= 6  # most pairs differ on some query: the counts and p are not all trivial


# ------------------------------------------------------------------ issue 50: names, missing queries, ranx frames


def _theta(seed: int):
    from udcg.metrics.udcg_theta import UDCGTheta

    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, (40, 5))
    return UDCGTheta(C=1.0).fit(u, u.sum(1) + rng.normal(0, 0.1, 40), groups=np.repeat(np.arange(10), 4))


def test_measures_that_compute_different_things_have_different_names(utilities):
    """Issue 50 item 1: gamma, theta and the utilities are in the measure's name (ir_measures'
    ``Measure(param=...)`` style), so pt.Experiment and calc_aggregate give one column each, with
    each measure's own value; measures that compute the same thing are equal."""
    qrels, run = read_any_qrels(QRELS), read_any_run(RUNS["bm25"])
    halves = {q: {d: u / 2 for d, u in docs.items()} for q, docs in udcg.read_utilities(utilities).items()}
    plain = udcg.ir_measure("UDCG@5", utilities=utilities)
    label = str(plain).split("'")[1]
    assert re.fullmatch(r"UDCG\(utilities='utilities#[0-9a-f]{8}'\)@5", str(plain)), str(plain)
    assert udcg.ir_measure("UDCG@5", str(utilities), gamma=1 / 3) == plain  # the same utilities, the default gamma
    assert udcg.ir_measure("UDCG@5", udcg.read_utilities(utilities)) == udcg.ir_measure("UDCG@5", dict(
        udcg.read_utilities(utilities)))  # a dict: named by its content
    measures = [plain, udcg.ir_measure("UDCG@5", utilities=utilities, gamma=0.5), udcg.ir_measure("UDCG@5", halves),
                udcg.ir_measure("UDCG@5", utilities, unannotated="zero")]
    names = [str(m) for m in measures]
    assert names[1] == f"UDCG(gamma=0.5,utilities='{label}')@5" and names[2].startswith("UDCG(utilities='#")
    assert names[3] == f"UDCG(unannotated='zero',utilities='{label}')@5"
    alone = [m.calc_aggregate(qrels, run) for m in measures]
    assert len(set(alone[:3])) == 3  # three different values
    together = ir_measures.calc_aggregate(measures, qrels, run)
    assert [together[m] for m in measures] == pytest.approx(alone, abs=1e-12)
    table = _experiment(measures)
    assert [table.loc[0, n] for n in names] == pytest.approx(alone, abs=1e-12)
    thetas = [udcg.ir_measure("UDCG_theta@5", utilities, theta=_theta(s)) for s in (1, 2)]
    assert thetas[0] != thetas[1] and str(thetas[0]).startswith("UDCG_theta(theta='#")
    assert thetas[0] == udcg.ir_measure("UDCG_theta@5", utilities, theta=_theta(1))
    both = ir_measures.calc_aggregate(thetas, qrels, run)
    assert len(both) == 2 and both[thetas[0]] != both[thetas[1]]
    for m in (*measures, *thetas):
        assert ir_measures.parse_measure(str(m)) == m and str(m @ 3) == str(m).replace("@5", "@3")


def test_ir_measures_parses_udcg_names_once_udcg_is_imported(tmp_path):
    """``ir_measures.parse_measure("UDCG@5")`` works after ``import udcg``, whichever of the two is
    imported first; "UDCG@5" reads the run's utility column, and without one says how to bind
    utilities. A folder can be named in the string."""
    code = """
import sys
{first}
import ir_measures
from udcg.io.sources import example_path
from udcg.flows.run_scores import read_any_qrels, read_any_run
ex = example_path()
m = ir_measures.parse_measure("UDCG@5")
print(m, ir_measures.parse_measure("UDCG(gamma=0.5)@3"), ir_measures.parse_measure("UDCG_theta@5"))
try:
    m.calc_aggregate(read_any_qrels(ex / "qrels" / "test.tsv"), read_any_run(ex / "runs" / "bm25.trec"))
except Exception as e:
    print(f"{type(e).__name__}: {e}")
"""
    for first in ("import udcg", "import ir_measures, udcg"):
        done = subprocess.run([sys.executable, "-c", code.replace("{first}", first)], capture_output=True, text=True)
        lines = done.stdout.splitlines()
        assert done.returncode == 0 and lines[0] == "UDCG@5 UDCG(gamma=0.5)@3 UDCG_theta@5", done.stderr
        assert lines[1].startswith("InputError: udcg.ir_measure: UDCG@5 needs utilities"), lines
        assert "udcg.ir_measure('UDCG@5', utilities=" in lines[1]


def test_a_measure_string_names_its_utilities_folder(utilities):
    qrels, run = read_any_qrels(QRELS), read_any_run(RUNS["bm25"])
    parsed = ir_measures.parse_measure(f"UDCG(utilities={str(utilities)!r})@5")
    assert parsed == udcg.ir_measure("UDCG@5", utilities)
    assert parsed.calc_aggregate(qrels, run) == pytest.approx(
        udcg.evaluate(run, qrels, utilities=utilities, metrics="UDCG@5").means()["UDCG@5"], abs=1e-12)
    with pytest.raises(InputError, match="utilities 'nowhere#12345678': no such folder or file"):
        ir_measures.parse_measure("UDCG(utilities='nowhere#12345678')@5")
    with pytest.raises(InputError, match=r"gamma = 1000.0: must be a number in \[0, 100\]"):
        ir_measures.parse_measure("UDCG(gamma=1000.0)@5")


def test_a_query_the_run_misses_is_an_empty_ranking_for_every_measure_and_every_path(utilities, tmp_path, capsys,
                                                                                      caplog):
    """Issue 50 item 2: a qrels query the run does not rank counts in every mean as an empty
    ranking, as ir_measures (and trec_eval -c, and ranx with make_comparable) count it: nDCG@5 0 and
    UDCG@5 sigma(0) = 0.5 (every slot of the context empty, u = 0); udcg says so in a note."""
    import pytrec_eval

    qrels = read_any_qrels(QRELS)
    full = read_any_run(RUNS["bm25"])
    run = {q: docs for q, docs in full.items() if q != "nq3"}
    ints = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    theirs = ir_measures.calc_aggregate([nDCG @ 5], ints, run)[nDCG @ 5]  # the real libraries' rule
    assert {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 5], ints, run)}["nq3"] == 0.0
    assert "nq3" not in pytrec_eval.RelevanceEvaluator(ints, {"ndcg_cut_5"}).evaluate(run)  # trec_eval without -c
    rx = ranx.evaluate(ranx.Qrels.from_dict(ints), ranx.Run.from_dict(run), "ndcg@5", make_comparable=True)
    assert rx == pytest.approx(theirs, abs=1e-12)

    with caplog.at_level("WARNING", logger="udcg"):
        ours = udcg.evaluate(run, qrels, utilities=utilities, metrics="UDCG@5,nDCG@5")
    assert ours.per_query()["nq3"] == {"UDCG@5": 0.5, "nDCG@5": 0.0}
    assert ours.means()["nDCG@5"] == pytest.approx(theirs, abs=1e-12)
    udcg5 = ours.means()["UDCG@5"]
    assert udcg5 == pytest.approx(np.mean(ours.values["UDCG@5"]), abs=1e-15) and len(ours.qids) == 20
    note = "1 scored queries have no documents in the run (first: 'nq3'): each counts in every mean as an empty ranking"
    assert any(note in n for n in ours.notes) and note in caplog.text

    frame = udcg.pyterrier.results(run)  # a DataFrame and a ranx Run, missing the same query
    for given in (frame, ranx.Run.from_dict(run)):
        assert udcg.evaluate(given, qrels, utilities=utilities, metrics="UDCG@5,nDCG@5").per_query() == ours.per_query()

    measure = udcg.ir_measure("UDCG@5", utilities)
    caplog.clear()
    with caplog.at_level("WARNING", logger="udcg"):
        per_query = {m.query_id: m.value for m in ir_measures.iter_calc([measure], ints, run)}
    assert per_query["nq3"] == 0.5 and len(per_query) == 20 and note in caplog.text
    assert measure.calc_aggregate(ints, run) == pytest.approx(udcg5, abs=1e-12)

    topics, pt_qrels = udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS)
    table = pt.Experiment([udcg.pyterrier.results(full), frame], topics, pt_qrels, eval_metrics=[nDCG @ 5, measure],
                          names=["full", "missing"], baseline=0).set_index("name")
    assert table.loc["missing", str(measure)] == pytest.approx(udcg5, abs=1e-12)
    assert table.loc["missing", "nDCG@5"] == pytest.approx(theirs, abs=1e-12)
    assert np.isfinite(table.loc["missing", f"{measure} p-value"]) and table.loc["missing", f"{measure} -"] >= 1

    path = tmp_path / "missing.trec"
    path.write_text("".join(f"{q} Q0 {d} {i + 1} {s} missing\n" for q, docs in run.items()
                            for i, (d, s) in enumerate(docs.items())))
    capsys.readouterr()
    assert main(["score", "--run", str(path), "--qrels", str(QRELS), "--utilities", str(utilities),
                 "--metrics", "UDCG@5,nDCG@5", "-o", str(tmp_path / "s.tsv")]) == 0
    out = capsys.readouterr()
    rows = [line.split("\t") for line in out.out.splitlines()]
    means = {r[-2]: float(r[-1]) for r in rows if "all" in r}  # [run] all measure mean
    assert means == pytest.approx({"UDCG@5": udcg5, "nDCG@5": theirs}, abs=1e-12) and note in out.out + out.err
    assert main(["compare", "--run", str(path), "--run", str(RUNS["dense"]), "--qrels", str(QRELS), "--utilities",
                 str(utilities), "--metrics", "UDCG@5,nDCG@5", "--n-boot", "200", "--format", "csv"]) == 0
    out = capsys.readouterr()
    assert note in out.out + out.err
    cmp = udcg.compare({"missing": path, "dense": RUNS["dense"]}, QRELS, utilities=utilities, metrics="UDCG@5,nDCG@5",
                       n_boot=200)
    assert [t.n for t in cmp.pairs] == [20, 20]
    assert cmp.cells["missing"]["UDCG@5"].mean == pytest.approx(udcg5, abs=1e-12)


def test_ranx_reads_udcgs_frames():
    """Issue 50 item 3: ranx's from_df takes udcg.pyterrier's frames (ids as object columns, which
    ranx asserts; pandas 3 would make them its str dtype) and gives udcg's values."""
    qrels, run = udcg.pyterrier.qrels(QRELS), udcg.pyterrier.results(RUNS["bm25"])
    rx_qrels = ranx.Qrels.from_df(qrels, q_id_col="qid", doc_id_col="docno", score_col="label")
    rx_run = ranx.Run.from_df(run, q_id_col="qid", doc_id_col="docno", score_col="score")
    want = udcg.evaluate(RUNS["bm25"], QRELS, metrics="nDCG@5,P@5").means()
    assert ranx.evaluate(rx_qrels, rx_run, ["ndcg@5", "precision@5"]) == pytest.approx(
        {"ndcg@5": want["nDCG@5"], "precision@5": want["P@5"]}, abs=1e-12)
    assert udcg.pyterrier.topics(EX).qid.dtype == object


def test_tied_scores_are_where_ranx_and_trec_eval_differ():
    """The BM25 run's scores rounded to whole numbers (ties in every query's top 5): udcg ranks ties
    as trec_eval does (docid descending), whatever the input order, and equals pytrec_eval and
    ir_measures; ranx keeps ties in the order the documents were given (numba's sort of the
    negated scores), so its nDCG@5 changes with the order of the same run."""
    import pytrec_eval

    qrels = {q: {d: int(r) for d, r in docs.items()} for q, docs in read_any_qrels(QRELS).items()}
    run = {q: {d: float(round(s)) for d, s in docs.items()} for q, docs in read_any_run(RUNS["bm25"]).items()}
    backwards = {q: dict(reversed(list(docs.items()))) for q, docs in run.items()}
    ours = [udcg.evaluate(r, qrels, metrics="nDCG@5").means()["nDCG@5"] for r in (run, backwards)]
    trec = np.mean([v["ndcg_cut_5"] for v in pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_5"}).evaluate(run).values()])
    assert ours[0] == ours[1] == pytest.approx(trec, abs=1e-12) == ir_measures.calc_aggregate([nDCG @ 5], qrels, run)[nDCG @ 5]
    theirs = [ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(r), "ndcg@5") for r in (run, backwards)]
    assert [round(x, 4) for x in (ours[0], *theirs)] == [0.8465, 0.9, 0.8259]


def test_the_named_measures_parameters_are_those_their_needs_give():
    """``NAMED`` (what ir_measures' registry gets without importing udcg's metrics) equals what the
    measure registry's declared needs give."""
    from udcg.integrations.measure import NAMED, _param_names

    assert {name: _param_names(name) for name in NAMED} == NAMED
    assert _param_names("nDCG") == () and str(udcg.ir_measure("nDCG@5", gamma=0.5)) == "nDCG@5"


def test_results_with_utilities_carry_a_utility_column_udcg_at_5_reads(utilities):
    """``udcg.pyterrier.results(run, utilities=FOLDER)``: the utilities travel with the run, and the
    plain ``UDCG@5`` (``udcg.ir_measure("UDCG@5")``, ``parse_measure("UDCG@5")``) reads them there:
    the same values as the measure bound to the folder, under the plain name."""
    frames = [udcg.pyterrier.results(path, utilities=utilities) for path in RUNS.values()]
    assert frames[0].query("rank < 5").utility.notna().all()  # the union of both runs' top 5 was annotated
    assert frames[0].utility.isna().sum() == 89  # as the whole-ranking test counts: 89 of the top 10 have none
    bound = udcg.ir_measure("UDCG@5", utilities)
    table = pt.Experiment(frames, udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS),
                          eval_metrics=[ir_measures.parse_measure("UDCG@5"), bound], names=list(RUNS))
    assert sorted(table.columns) == sorted(["name", "UDCG@5", str(bound)])  # pt.Experiment's column order is its own
    assert table["UDCG@5"].tolist() == pytest.approx(table[str(bound)].tolist(), abs=1e-12)
