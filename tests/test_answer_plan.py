"""udcg answer sized before it runs (issue #48, item 4): the prompts, the time and the difference in
correct rate its queries could detect, said before the first model call; --detect D plans the N."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ScriptedBackend
from udcg.cli import build_parser, main
from udcg.flows import answer_plan
from udcg.flows.answer import answer_run_files
from udcg.flows.answer_options import AnswerOptions
from udcg.llm import registry
from udcg.metrics.compare import CompareTests, compare_scores
from udcg.metrics.stats import t_noncentrality
from udcg.progress import duration


def test_the_detectable_difference_by_hand():
    # 2 runs: alpha 0.05; MDD = nc(9) * sqrt(0.5) / sqrt(10), nc the t noncentrality of 80% power
    assert answer_plan.detectable(10, 2) == pytest.approx(t_noncentrality(9, 0.05, 0.8) * math.sqrt(0.5) / math.sqrt(10))
    assert 0.65 < answer_plan.detectable(10, 2) < 0.72  # about 0.69: 10 queries see only big differences
    # 3 runs: compare's default Holm family is the 3 run pairs of the row: alpha 0.05 / 3 for the MDD
    assert answer_plan.pair_alpha(3) == pytest.approx(0.05 / 3)
    assert answer_plan.detectable(10, 3) > answer_plan.detectable(10, 2)
    assert math.isinf(answer_plan.detectable(3, 2))  # the exact test's p is at least 2 / 2^3: nothing is detectable
    assert math.isinf(answer_plan.detectable(1, 2))
    # 5 queries: no answers could be significant; 6 could, but no difference in [0, 1] has 80% power
    assert "smallest p is 0.0625" in answer_plan.floor_text(5, 2) and answer_plan.floor_text(6, 2) == ""
    assert math.isinf(answer_plan.detectable(6, 2)) and math.isfinite(answer_plan.detectable(7, 2))


def test_the_plan_uses_compares_test_power_and_mdd():
    """No second power formula: compare's MDD on 0/1 correct rates whose paired differences spread as
    the plan assumes is the plan's detectable difference."""
    parser = build_parser()
    compare = parser._subparsers._group_actions[0].choices["compare"]
    defaults = compare.get_default("config_defaults")  # the flags' defaults (None on the parser: --config may set them)
    assert (defaults["alpha"], defaults["power"], defaults["test"]) == (answer_plan.ALPHA, answer_plan.POWER,
                                                                        answer_plan.TEST)
    n = 40  # d = +1 on 10 queries, -1 on 10, 0 on 20: sd = sqrt(20 / 39), near the plan's sqrt(0.5)
    a = np.array([1.0] * 10 + [0.0] * 10 + [1.0] * 10 + [0.0] * 10)
    b = np.array([0.0] * 10 + [1.0] * 10 + [1.0] * 10 + [0.0] * 10)
    cmp = compare_scores({"r1": {"correct": a}, "r2": {"correct": b}}, tests=CompareTests(n_boot=200, n_resamples=200))
    pair = cmp.pairs[0]
    from udcg.metrics.stats import detectable_difference

    assert pair.mdd == pytest.approx(detectable_difference(float(np.std(a - b, ddof=1)), n, 0.05, 0.8))
    assert answer_plan.detectable(n, 2) == pytest.approx(detectable_difference(math.sqrt(0.5), n, 0.05, 0.8))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 3000), st.integers(2, 5))
def test_queries_for_inverts_the_detectable_difference(n, runs):
    mdd = answer_plan.detectable(n, runs)
    if math.isfinite(mdd):
        assert answer_plan.queries_for(mdd * (1 + 1e-9), runs) <= n
        assert answer_plan.queries_for(mdd * 0.999, runs) > n - 1 or n == 2


def test_rate_watch_says_the_measured_rate_once():
    said, inner = [], []

    class Inner:
        def update(self, n=1):
            inner.append(n)

        def close(self): ...
        def __enter__(self): return self
        def __exit__(self, *exc): ...

    with answer_plan.RateWatch(Inner(), total=10, cached=4, say=said.append) as watch:
        watch.update(4)  # the cache's part, reported at once
        assert said == []
        watch.update(2)
        watch.update(4)
    assert inner == [4, 2, 4] and len(said) == 1
    assert said[0].startswith("first 2 prompts: ") and said[0].endswith("for the other 4")


@pytest.fixture
def example(tmp_path):
    assert main(["example", str(tmp_path / "ex")]) == 0
    return tmp_path / "ex"


def test_answer_says_its_plan_before_the_first_prompt(example, tmp_path):
    events = []

    class Recording(ScriptedBackend):
        def generate(self, chats, params):
            events.append(("generate", len(chats)))
            return super().generate(chats, params)

    loads = []
    with registry.SCHEMES.scoped():
        registry.register_scheme("rec", lambda rest, **kw: loads.append(rest) or Recording(answer="Paris", name=rest),
                                 api=False)
        runs = [str(example / "runs" / "bm25.trec"), str(example / "runs" / "dense.trec")]
        out = tmp_path / "answers.jsonl"
        answer_run_files(str(example), runs, out, "rec:toy", AnswerOptions(sample=5), show_progress=False,
                    say=lambda line: events.append(("say", line)))
        first_call = next(i for i, e in enumerate(events) if e[0] == "generate")
        said = [e[1] for e in events[:first_call] if e[0] == "say"]
        plan = [line for line in said if line.startswith("plan: ")]
        assert len(plan) == 2, said
        assert plan[0].startswith("plan: 10 prompts to send (5 queries, 2 runs; 0 in the cache)")
        assert "unknown until the first prompts (no measured rate for toy)" in plan[0]
        mdd = answer_plan.detectable(5, 2)
        assert math.isinf(mdd) and "can detect no difference in correct rate between two runs" in plan[1]
        assert events[first_call] == ("generate", 4)  # the first prompts alone, then the rest
        later = [e[1] for e in events[first_call:] if e[0] == "say"]
        assert [line for line in later if line.startswith("first 4 prompts: ")][0].endswith("for the other 6")
        assert sum(n for kind, n in events if kind == "generate") == 10 and loads == ["toy"]  # one model
        events.clear()  # again: every answer from the cache, and the plan says so
        answer_run_files(str(example), runs, out, "rec:toy", AnswerOptions(sample=5), show_progress=False,
                    say=lambda line: events.append(("say", line)))
        assert not any(e[0] == "generate" for e in events)
        assert any("plan: 0 prompts to send (5 queries, 2 runs; 10 in the cache)" in e[1] for e in events)


def test_a_measured_rate_gives_the_time(monkeypatch):
    monkeypatch.setitem(answer_plan.RATES, "qwen2.5-coder-0.5b", 5.5)
    plan = answer_plan.AnswerPlan("qwen2.5-coder-0.5b", 20, 2, 40, 0,
                                  answer_plan.rate_of("qwen2.5-coder-0.5b", "auto", False), answer_plan.detectable(20, 2))
    rate = answer_plan.RATES["qwen2.5-coder-0.5b"]
    assert f"at {rate:g} s a prompt" in plan.lines()[0]
    assert answer_plan.rate_of("qwen2.5-coder-0.5b", "cuda", False) is None
    assert answer_plan.rate_of("qwen2.5-coder-0.5b", None, True) is None


def test_detect_plans_the_queries_without_a_model(example, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(answer_plan.RATES, "qwen2.5-coder-0.5b", 5.5)
    out = tmp_path / "answers.jsonl"
    argv = ["answer", "--corpus", str(example), "--run", str(example / "runs" / "bm25.trec"), "--run",
            str(example / "runs" / "dense.trec"), "--model", "qwen2.5-coder-0.5b", "-o", str(out), "--detect", "0.1"]
    assert main(argv) == 0
    line = capsys.readouterr().out.strip()
    n = int(answer_plan.queries_for(0.1, 2))
    assert line.startswith(f"detect 0.1: {n} queries (udcg answer --sample {n}), {2 * n} prompts, about "
                           f"{duration(2 * n * 5.5)} for qwen2.5-coder-0.5b")
    assert answer_plan.detectable(n, 2) <= 0.1 < answer_plan.detectable(n - 1, 2)
    assert not out.exists()
    assert main(argv[:-1] + ["0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--detect 0.0: must be a number in (0, 1]" in err
