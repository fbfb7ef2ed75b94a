"""Issue #48 items 2, 5, 6 and issue #49 items 3, 7, 10, on the reader check: how far its verdict hangs
on the unjudged labels (the smallest number of unjudged pairs that, relabelled relevant, flip it),
the command that judges them, the check on the judged pairs alone, wording that says only what its
evidence shows, a qrels file refused, any --n-boot finishing, and numpy alone (no scikit-learn,
scipy, pandas or pyarrow) on annotate's check path. On the published readers' real p_abs, with
labels removed on purpose."""

from __future__ import annotations

import gzip
import itertools
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

import udcg
from udcg.cli import main
from udcg.flows.reader_check import judge_command, reader_note
from udcg.metrics import reader_auc
from udcg.metrics.reader_auc import auc, auc_interval, relabelled_aucs
from udcg.metrics.reader_check import ReaderCheck, ReaderPairs, check_reader_pairs
from udcg.metrics.reader_verdict import fragile_limit, verdicts
from udcg.progress import duration
from tests.test_own_runs import _annotate, beir  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def _published(run: str) -> list[dict]:
    """One record per (query, passage) of a published validation run (the first kept, as a utilities file keeps it)."""
    rows = {}
    for line in gzip.open(RESULTS / run / "data" / "annotations.jsonl.gz", "rt"):
        r = json.loads(line)
        rows.setdefault((r["qid"], r["pid"]), r)
    return list(rows.values())


def _write(path: Path, rows: list[dict], model: str = "qwen2.5-coder-1.5b") -> Path:
    path.write_text("".join(json.dumps({"qid": r["qid"], "docid": r["pid"], "p_abs": r["p_abs"], "relevant": r["relevant"],
                                        "relevance_source": r.get("source", "qrels"), "model": model,
                                        "estimator": "first-token"}) + "\n" for r in rows))
    return path


def _drop_relevant(rows: list[dict], share: float, seed: int = 0, unjudged_irrelevant: float = 0.0) -> list[dict]:
    """The rows with ``share`` of the relevant labels dropped (those pairs unjudged, taken as
    irrelevant, as qrels that miss them make them) and ``unjudged_irrelevant`` of the irrelevant
    pairs unjudged too."""
    rng = np.random.default_rng(seed)
    out = []
    for r in rows:
        if r["relevant"] and rng.random() < share:
            out.append({**r, "relevant": False, "source": "unjudged-irrelevant"})
        elif not r["relevant"] and rng.random() < unjudged_irrelevant:
            out.append({**r, "source": "unjudged-irrelevant"})
        else:
            out.append(r)
    return out


def _first(rows: list[dict], n: int) -> list[dict]:
    """The pairs of the first ``n`` queries (in the file's order)."""
    keep = set(list(dict.fromkeys(r["qid"] for r in rows))[:n])
    return [r for r in rows if r["qid"] in keep]


def _demo_like() -> list[dict]:
    """165 pairs of 20 queries, as the packaged example's folder: the 0.5B reader's first 8 or 9
    pairs of each of its first 20 NQ questions."""
    rows = _first(_published("nq-qwen0.5b"), 20)
    by_query: dict[str, list[dict]] = {}
    for r in rows:
        by_query.setdefault(r["qid"], []).append(r)
    return [r for i, pairs in enumerate(by_query.values()) for r in pairs[:9 if i < 5 else 8]]


def _check(rows: list[dict], **kw) -> ReaderCheck:
    return check_reader_pairs(ReaderPairs([r["p_abs"] for r in rows], [r["relevant"] for r in rows],
                                    [r.get("source", "qrels") != "unjudged-irrelevant" for r in rows],
                                    [r["qid"] for r in rows], docids=[r["pid"] for r in rows]), **kw)


# ---------------------------------------------------------------- numbers: numpy against scikit-learn


def test_the_numpy_auc_and_its_relabellings_are_sklearns_on_published_pairs():
    rows = _published("nq-qwen0.5b")[:400]
    p = np.array([round(r["p_abs"], 2) for r in rows])  # rounded: many ties
    irr = np.array([not r["relevant"] for r in rows])
    assert auc(p, irr) == pytest.approx(roc_auc_score(irr, p), abs=1e-12)
    for order in (np.argsort(-p[irr], kind="stable"), np.argsort(p[irr], kind="stable")):
        moved = np.flatnonzero(irr)[order][:60]
        got = relabelled_aucs(p, irr, moved)
        for m in (0, 1, 2, 7, 30, 60):
            now = irr.copy()
            now[moved[:m]] = False
            assert got[m] == pytest.approx(roc_auc_score(now, p), abs=1e-12)


def test_the_bootstrap_is_the_same_whichever_kernel_and_chunk(monkeypatch):
    """The query-matrix kernel (few queries) and the pairs kernel give the same resampled AUCs, and
    the chunk that bounds memory changes no draw."""
    rows = [r for r in _published("nq-qwen1.5b") if r["qid"] in {f"nq{i}" for i in range(40)}]
    p = np.array([r["p_abs"] for r in rows])
    irr = np.array([not r["relevant"] for r in rows])
    _, query = np.unique([r["qid"] for r in rows], return_inverse=True)
    matrix = auc_interval(p, irr, query, 500, 7)
    monkeypatch.setattr(reader_auc, "CHUNK", 64)  # too small for the query matrix: the pairs kernel, 1 row a chunk
    assert auc_interval(p, irr, query, 500, 7) == pytest.approx(matrix, abs=1e-12)
    monkeypatch.setattr(reader_auc, "CHUNK", 3000)  # the matrix again, in chunks of 3000 // n_queries rows
    assert auc_interval(p, irr, query, 500, 7) == pytest.approx(matrix, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.05, 0.3, 0.5, 0.7, 0.95]), st.booleans(), st.booleans()),
                min_size=22, max_size=30))
def test_no_smaller_set_of_unjudged_pairs_flips_the_verdict(pairs):
    """Property: relabelling any set of fewer unjudged pairs than ``flips_at`` leaves the verdict;
    the pairs named do flip it."""
    p = np.array([x[0] for x in pairs])
    rel = np.array([x[1] for x in pairs])
    jud = rel | np.array([x[2] for x in pairs])
    check = check_reader_pairs(ReaderPairs(p, rel, jud, [f"q{i % 6}" for i in range(len(p))]), n_boot=100)
    fr = check.fragility
    if fr is None or fr.flips_at is None or fr.flips_at > 3:
        return
    unjudged = np.flatnonzero(~rel & ~jud)
    irr = ~rel
    for size in range(1, fr.flips_at):
        for subset in itertools.combinations(unjudged, size):
            now = irr.copy()
            now[list(subset)] = False
            answered = (now & (p < 0.5)).sum() / now.sum()
            assert verdicts((~now).sum(), now.sum(), answered, auc(p, now)) == check.verdict


# ---------------------------------------------------------------- fragility and the judged-only check


def test_half_the_relevant_labels_dropped_shows_the_fragility_and_the_judged_check_agrees():
    """The 1.5B reader with the published NQ labels, then with half its relevant labels dropped
    (those pairs unjudged, counted irrelevant): the labels line appears, the check of the judged
    pairs alone agrees with the full-label check, and no other line is added or reshaped."""
    rows = _published("nq-qwen1.5b")
    full = _check(rows, n_boot=200)
    assert full.verdict == "can" and full.fragility is None and full.judged_only is None
    assert not any(line.startswith(("  labels:", "  judged pairs only")) for line in full.lines())
    for extra in (0.0, 0.9):  # the irrelevant pairs all judged, then 90% of them unjudged too
        check = _check(_drop_relevant(rows, 0.5, unjudged_irrelevant=extra), n_boot=200)
        n_dropped = full.n_relevant - check.n_relevant
        assert n_dropped > 50 and check.n_unjudged >= n_dropped and check.auc < full.auc
        fr = check.fragility
        assert fr.order == "highest p_abs first" and fr.verdict_after == "cannot" and fr.flips_at > 0
        judged = check.judged_only
        assert judged.verdict == full.verdict and full.auc_low < judged.auc < full.auc_high
        assert judged.n_unjudged == 0 and judged.n_relevant == check.n_relevant
        assert judged.n_judged_irrelevant == check.n_judged_irrelevant
        lines = check.lines()
        assert [line.split(":")[0] for line in lines[:4]] == [line.split(":")[0] for line in full.lines()]
        assert lines[4].startswith("  labels: ") and len(lines) == 5 + (fr.fragile or judged.verdict != check.verdict)
        if len(lines) == 6:
            assert lines[5].startswith(f"  judged pairs only ({check.n_relevant} relevant, ")
        assert check.query_line().startswith("  per query: it answers from an irrelevant pair on")


def test_the_pairs_a_flip_names_do_flip_it_and_one_fewer_does_not():
    """Against a "cannot" (the 1.5B reader on PopQA, half its labels missing) the pairs the reader
    answers from most are relabelled first; recomputed with scikit-learn, the first ``flips_at`` of
    them turn the verdict and one fewer does not."""
    rows = _drop_relevant(_published("popqa-qwen1.5b"), 0.5, unjudged_irrelevant=0.5)
    check = _check(rows, n_boot=200)
    fr = check.fragility
    assert check.verdict == "cannot" and fr.order == "lowest p_abs first" and fr.verdict_after == "can"
    p = np.array([r["p_abs"] for r in rows])
    irr = np.array([not r["relevant"] for r in rows])
    unjudged = np.flatnonzero(np.array([r.get("source") == "unjudged-irrelevant" for r in rows]))
    order = unjudged[np.argsort(p[unjudged], kind="stable")]
    for m, want in ((fr.flips_at, "can"), (fr.flips_at - 1, "cannot")):
        now = irr.copy()
        now[order[:m]] = False
        answered = (now & (p < 0.5)).sum() / now.sum()
        assert verdicts((~now).sum(), now.sum(), answered, roc_auc_score(now, p)) == want
    assert fr.auc_after == pytest.approx(roc_auc_score(np.isin(np.arange(len(p)), order[fr.flips_at:]) | (irr & ~np.isin(
        np.arange(len(p)), unjudged)), p), abs=1e-12)


def test_a_verdict_that_one_relabelled_pair_flips_hangs_on_the_labels():
    """With shallow qrels (a quarter of the relevant labels and most irrelevant ones missing) a few
    of the 1.5B reader's abstained-on pairs decide; the verdict says so, names the first pairs and,
    without a command recorded, says how to judge them."""
    rows = _published("nq-qwen1.5b")
    rows = _first(rows, 30)  # 30 queries: a small collection
    check = _check(_drop_relevant(rows, 0.25, seed=2, unjudged_irrelevant=0.9), n_boot=200)
    fr = check.fragility
    assert fr is not None and fr.flips_at <= fragile_limit(check.n_unjudged) and check.hangs_on_labels, fr
    text = "\n".join(check.lines())
    assert f"  labels: {fr.flips_at} pair" in text and f"would turn it to {fr.verdict_after}" in text
    assert f"of the {check.n_unjudged} unjudged pairs taken as irrelevant" in text
    assert "the verdict hangs on the unjudged labels; " in text
    assert f"{fr.pairs[0][0]} {fr.pairs[0][1]}" in text
    assert "judge them: rerun the udcg annotate that wrote these utilities with --unjudged judge --judge MODEL" in text
    assert "  judged pairs only (" in text
    assert check.label_note().startswith(" It hangs on the unjudged labels:")
    back = ReaderCheck.from_dict(json.loads(json.dumps(check.to_dict())))
    assert back.fragility == check.fragility and back.judged_only.auc == check.judged_only.auc
    assert back.lines() == check.lines()


def test_a_folder_whose_verdict_hangs_on_the_labels_names_its_judge_command(tmp_path, capsys):
    """The same pairs as a utilities folder whose meta.json records the annotate inputs: the labels
    line gives the command (with the number of pairs and the time the folder's reader rate implies),
    and --json carries the fragility, the judged-only check and the command."""
    rows = _drop_relevant(_first(_published("nq-qwen1.5b"), 30), 0.25, seed=2, unjudged_irrelevant=0.9)
    folder = tmp_path / "utilities 1.5b"
    folder.mkdir()
    _write(folder / "utilities.jsonl", rows)
    meta = {"model": "qwen2.5-coder-1.5b", "estimator": "first-token", "prompt_version": "udcg-code-v1",
            "runs": {"bm25": {"depth": 5, "queries": 30, "file": "runs/bm25.trec"},
                     "dense": {"depth": 5, "queries": 30, "file": "runs/dense.trec"}},
            "inputs": {"corpus": "nq", "queries": None, "qrels": "qrels/test.tsv", "answers": None, "limit": None,
                       "model": "qwen2.5-coder-1.5b", "api": False, "flags": []},
            "model_time": {"pairs": 300, "seconds": 1500.0}}
    (folder / "meta.json").write_text(json.dumps(meta))
    check = udcg.reader_check(folder, n_boot=200)
    command = (f"udcg annotate --corpus nq --run runs/bm25.trec --run runs/dense.trec --depth 5 --qrels qrels/test.tsv "
               f"--model qwen2.5-coder-1.5b -o '{folder}' --unjudged judge --judge rules")
    assert check.hangs_on_labels and check.judge_command == command
    n = check.n_unjudged
    assert check.judge_estimate == (f"{n} pairs to judge: --judge rules (answer containment) runs no model; --judge "
                                    f"MODEL generates a label a pair, at least {duration(n * 5)} with a judge of the "
                                    "reader's size (this folder's reader: 0.20 pairs/s over 300 pairs, one forward pass "
                                    "a pair; a judge also generates its label)")
    assert f"judge them: {command} ({check.judge_estimate})" in "\n".join(check.lines())
    assert main(["reader-check", str(folder), "--n-boot", "200", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[str(folder)]
    assert record["judge_command"] == command and record["fragility"]["fragile"] is True
    assert record["judged_only"]["verdict"] == check.judged_only.conclusion
    # compare's footer, from the check recorded in meta.json, says that the verdict hangs on the labels
    (folder / "meta.json").write_text(json.dumps({**meta, "reader_check": record}))
    (note,) = reader_note(folder, ["UDCG@5"])
    assert note.endswith(f"It hangs on the unjudged labels: {check.fragility.flips_at} of its {n} unjudged pairs, "
                         f"relabelled relevant, turn it to cannot (udcg reader-check names the command that judges "
                         "them).")


def test_without_judged_irrelevant_pairs_it_says_so():
    rows = _published("nq-qwen1.5b")
    rows = [{**r, "source": "unjudged-irrelevant"} if not r["relevant"] else r for r in _first(rows, 20)]
    check = _check(rows, n_boot=200)
    assert check.n_judged_irrelevant == 0 and check.judged_only is None
    if check.hangs_on_labels:
        assert ("  judged pairs only: none of the irrelevant pairs is judged (0 judged-irrelevant), so the check "
                "cannot be recomputed without the unjudged labels") in check.lines()
    assert check.to_dict()["judged_only"] is None and check.to_dict()["fragility"]["n_unjudged"] == check.n_unjudged


def test_a_record_of_an_earlier_version_still_reads():
    check = _check(_published("nq-qwen1.5b"), n_boot=100)
    old = {k: v for k, v in check.to_dict().items() if k not in ("fragility", "judged_only", "judge_command",
                                                                    "judge_estimate", "borderline")}
    assert ReaderCheck.from_dict(old).verdict_text() == check.verdict_text()


# ---------------------------------------------------------------- what the verdict says


def test_the_verdict_says_what_the_thresholds_rest_on_and_never_recommends_the_reader_checked():
    rows_15 = _published("popqa-qwen1.5b")
    fails_15 = _check(rows_15, model="qwen2.5-coder-1.5b", n_boot=100)
    fails_05 = _check(_published("nq-qwen0.5b"), model="qwen2.5-coder-0.5b", n_boot=100)
    passes = _check(_published("nq-qwen1.5b"), model="qwen2.5-coder-1.5b", n_boot=100)
    assert fails_15.verdict == fails_05.verdict == "cannot" and passes.verdict == "can"
    assert "qwen2.5-coder-1.5b" not in fails_15.verdict_text()  # the reader just checked
    assert "the offline qwen2.5-coder-1.5b" in fails_05.verdict_text() and "failed on PopQA" in fails_05.verdict_text()
    for check in (fails_15, fails_05, passes):
        text = check.verdict_text()
        assert "docs/reliability.md#reader-check" in text and "production" in text
        assert "reflect how distracting" not in text
    assert "does not show that UDCG ranks runs better than nDCG" in passes.verdict_text()


def test_borderline_stays_borderline():
    """An AUC past 0.75 whose interval reaches below it is borderline, not a pass with a footnote;
    and so is one below 0.75 whose interval reaches above."""
    rows = _published("nq-qwen1.5b")
    check = _check(_first(rows, 15), n_boot=300)  # 15 queries: AUC 0.809, its interval reaching below 0.75
    assert check.verdict == "can" and check.auc_low < 0.75 < check.auc, (check.auc, check.auc_low)
    assert check.borderline and check.verdict_text().startswith("borderline: the AUC")
    assert "do not settle whether this reader can measure distraction" in check.verdict_text()
    assert not check.verdict_text().startswith("this reader can")
    assert check.to_dict()["borderline"] is True
    low = _check(_first(_published("nq-qwen0.5b"), 10), n_boot=300)  # AUC 0.60, its interval reaching above 0.75
    assert low.verdict == "cannot" and low.auc < 0.75 < low.auc_high and low.borderline
    assert low.verdict_text().startswith("borderline: the AUC") and "cannot measure" not in low.verdict_text()
    assert not _check(rows, n_boot=200).borderline


# ---------------------------------------------------------------- the command: inputs, bounds, weight


def test_a_qrels_file_is_not_a_utilities_folder(beir, tmp_path, capsys):  # noqa: F811
    folder, _ = beir
    for path in (folder / "qrels" / "test.tsv",):
        assert main(["reader-check", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "not a utilities folder or utilities.jsonl" in err
        assert "a utilities folder is what udcg annotate --run ... -o FOLDER writes" in err
    with pytest.raises(udcg.errors.InputError, match="not a utilities folder"):
        udcg.reader_check(folder / "qrels" / "test.tsv")


@pytest.mark.slow
def test_the_largest_n_boot_finishes(tmp_path, capsys):
    """--n-boot 1,000,000 (the documented maximum) on 165 pairs of 20 queries: it gives its
    interval (before: no answer within 120 s). Not timed: it must finish, and match 1000 resamples."""
    rows = _demo_like()
    assert len({r["qid"] for r in rows}) == 20 and len(rows) == 165
    path = _write(tmp_path / "utilities.jsonl", rows, "qwen2.5-coder-0.5b")
    assert main(["reader-check", str(path), "--n-boot", "1000000", "--json"]) == 0
    big = json.loads(capsys.readouterr().out)[str(path)]
    small = udcg.reader_check(path).to_dict()
    assert big["auc"] == small["auc"] and abs(big["auc_low"] - small["auc_low"]) < 0.02


def test_the_printed_command_judges_the_unjudged_pairs_without_the_reader(beir, tmp_path, tiny_model_dir,  # noqa: F811
                                                                          capsys):
    """The command the check names is the folder's own annotate with --unjudged judge --judge rules:
    run as printed, it loads no model, judges every unjudged pair and leaves the p_abs alone. (No
    unjudged pair of this toy holds an answer alias, so the check itself proposes the model judge.)"""
    folder, runs = beir
    out = tmp_path / "utilities"
    _annotate(folder, runs, ["a", "b"], out, tiny_model_dir, capsys)
    _annotate(folder, runs, ["c"], out, tiny_model_dir, capsys, depth=2)
    meta = json.loads((out / "meta.json").read_text())
    before = udcg.reader_check(out)
    assert meta["containment"]["unjudged_contained"] == 0 and judge_command(out, meta).endswith(
        f"--unjudged judge --judge {tiny_model_dir}")
    command = judge_command(out, meta, "rules")
    assert command.count("udcg annotate") == 2 and "--unjudged judge --judge rules" in command  # one per depth
    for part in command.split(" && "):
        argv = shlex.split(part)
        assert argv[:2] == ["udcg", "annotate"] and main(argv[1:] + ["--no-progress"]) == 0
        err = capsys.readouterr().err
        assert "new pairs annotated: 0" in err and "(no model loaded)" in err
    after = udcg.reader_check(out)
    assert before.n_unjudged > 0 and after.n_unjudged == 0 and after.fragility is None
    sources = json.loads((out / "meta.json").read_text())["relevance_sources"]
    assert "unjudged-irrelevant" not in sources and sources.get("judge", 0) == before.n_unjudged
    assert after.mean_p_relevant * after.n_relevant + after.mean_p_judged_irrelevant * after.n_judged_irrelevant == \
        pytest.approx(before.mean_p_relevant * before.n_relevant + before.mean_p_unjudged * before.n_unjudged
                      + (before.mean_p_judged_irrelevant * before.n_judged_irrelevant))


def test_annotates_check_path_imports_no_sklearn_scipy_stats_pandas_or_pyarrow(beir, tmp_path, tiny_model_dir,  # noqa: F811
                                                                               capsys):
    """A second annotate (every pair cached) in a fresh process, then the check: none of
    scikit-learn, pandas or pyarrow is imported, and of scipy only what annotate imported before
    the check (``scipy.special``, for UDCG's logistic)."""
    folder, runs = beir
    out = tmp_path / "utilities"
    _annotate(folder, runs, ["a", "b"], out, tiny_model_dir, capsys)
    script = f"""
import json, sys
from udcg.cli import main
heavy = lambda: sorted(m for m in sys.modules if m.split(".")[0] in ("sklearn", "pandas", "scipy", "pyarrow"))
import udcg.flows.own_runs, udcg.flows.annotate, udcg.commands.annotate
before = heavy()
rc = main(["annotate", "--corpus", {str(folder)!r}, "--run", {str(runs / "a.trec")!r}, "--run", {str(runs / "b.trec")!r},
           "--depth", "3", "--model", {str(tiny_model_dir)!r}, "-o", {str(out)!r}, "--no-progress"])
import udcg
udcg.reader_check({str(out)!r}).lines()
print(json.dumps({{"rc": rc, "before": before, "after": heavy()}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["rc"] == 0 and "reader check (" in done.stderr and "new pairs annotated: 0" in done.stderr
    assert found["after"] == found["before"], set(found["after"]) - set(found["before"])
    assert not [m for m in found["after"] if not m.startswith("scipy")]
    assert "scipy.stats" not in found["after"] and "scipy.sparse" not in found["after"]


def test_the_confirmatory_figure_the_verdict_cites():
    """A passing verdict cites the confirmatory NQ run's reader: AUC 0.895 on its confirmatory
    questions 121-350 (docs/results/confirm-equivalence: inconclusive on the pre-registered statistic)."""
    rows = [json.loads(line) for line in gzip.open(RESULTS / "nq-qwen1.5b-confirm" / "data" / "annotations.jsonl.gz", "rt")]
    later = set(list(dict.fromkeys(r["qid"] for r in rows))[120:])
    check = _check([r for r in rows if r["qid"] in later], n_boot=100)
    assert check.verdict == "can" and f"{check.auc:.3f}" == "0.895" and "AUC 0.895" in check.verdict_text()
    assert "inconclusive" in (RESULTS / "confirm-equivalence" / "README.md").read_text()


# ---------------------------------------------------------------- make demo's folder, as issue #48 found it


@pytest.fixture()
def demo(tmp_path, monkeypatch, capsys):
    """``make demo``'s utilities folder (the packaged example, bm25 + dense + hybrid at depth 5, the
    0.5B reader) rebuilt by ``udcg annotate`` from that run's real annotation cache
    (tests/data/demo-annotations-0.5b.jsonl.gz): every pair cached, so no model is loaded."""
    monkeypatch.chdir(tmp_path)
    assert main(["example", "nq-example"]) == 0
    (tmp_path / "utilities").mkdir()
    (tmp_path / "utilities" / "annotations.jsonl").write_bytes(
        gzip.decompress((ROOT / "tests" / "data" / "demo-annotations-0.5b.jsonl.gz").read_bytes()))
    argv = ["annotate", "--corpus", "nq-example", *[a for r in ("bm25", "dense", "hybrid")
                                                     for a in ("--run", f"nq-example/runs/{r}.trec")],
            "--depth", "5", "--model", "qwen2.5-coder-0.5b", "-o", "utilities", "--no-progress"]
    assert main(argv) == 0
    return argv, capsys.readouterr().err


def test_make_demos_verdict_says_it_hangs_on_the_unjudged_labels(demo, capsys):
    """Issue #48's done-when: on the folder with 0 judged-irrelevant and 151 unjudged pairs the
    verdict says how far it depends on them and names the command that judges them; relabelling
    nq6 / nq-gold:73 relevant moves the AUC 0.766 -> 0.732 and flips it."""
    argv, err = demo
    assert "new pairs annotated: 0" in err and "(no model loaded)" in err
    check = udcg.reader_check("utilities")
    assert (check.n_relevant, check.n_judged_irrelevant, check.n_unjudged) == (20, 0, 151)
    assert (f"{check.auc:.3f}", f"{check.auc_low:.3f}", f"{check.auc_high:.3f}") == ("0.766", "0.663", "0.858")
    assert check.borderline and check.verdict == "can" and check.hangs_on_labels
    fr = check.fragility
    assert fr.flips_at == 1 and fr.pairs == (("nq2", "nq-gold:145"),) and f"{fr.auc_after:.3f}" == "0.728"
    lines = check.lines()
    command = shlex.join(["udcg", *argv[:-1], "--unjudged", "judge", "--judge", "rules"])
    assert "\n".join(check.lines()) in err  # annotate printed the same check
    assert check.judge_command == command
    assert lines[4] == ("  labels: 1 pair would turn it to cannot (AUC 0.728, answers from 31% of the irrelevant pairs), "
                        "relabelled relevant (highest p_abs first: nq2 nq-gold:145), of the 151 unjudged pairs taken as "
                        "irrelevant (0.7%); it hangs on them when at most max(3, 5% of them) = 7 do: the verdict hangs "
                        f"on the unjudged labels; judge them: {command} (151 pairs to judge: "
                        "--judge rules (answer containment) runs no model; --judge MODEL generates a label a pair (no "
                        "reader rate recorded in this folder to time it))")
    assert lines[5] == ("  judged pairs only: none of the irrelevant pairs is judged (0 judged-irrelevant), so the "
                        "check cannot be recomputed without the unjudged labels")
    assert main(["reader-check", "utilities"]) == 0 and "\n".join(lines) in capsys.readouterr().out
    # the pair: nq6 / nq-gold:73 (p_abs 0.912) relabelled relevant
    from dataclasses import replace

    from udcg.annotate.utilities import load_utilities
    from udcg.flows.reader_check import check_records

    records = load_utilities("utilities").records
    assert f"{records['nq6', 'nq-gold:73'].p_abs:.3f}" == "0.912"
    fixed = [replace(r, relevant=True, relevance_source="judge") if (r.qid, r.docid) == ("nq6", "nq-gold:73") else r
             for r in records.values()]
    relabelled = check_records(fixed, check.model, check.estimator)
    assert f"{relabelled.auc:.3f}" == "0.732" and relabelled.verdict == "cannot"
    # the command as printed: no model, the 151 pairs judged by containment (nq6's four Super Bowl passages)
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    assert "relevance of these pairs: judge 151, qrels 20" in capsys.readouterr().err
    judged = udcg.reader_check("utilities")
    assert (judged.n_relevant, judged.n_judged_irrelevant, judged.n_unjudged) == (24, 147, 0)
    assert {k for k, r in load_utilities("utilities").records.items() if r.relevance_source == "judge" and r.relevant} \
        == {("nq6", "nq-gold:73"), ("nq6", "nq-gold:111"), ("nq6", "nq-gold:148"), ("nq6", "nq-gold:272")}
