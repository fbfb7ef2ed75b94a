"""What an answer check will cost and what it can show, said before any model call (issue #48): the
prompts ``udcg answer`` will send, an estimate of the time, and the difference in correct rate
between two runs that its queries could detect; or, for a difference the user names (``--detect``),
the queries that would detect it.

The detectable difference is ``compare``'s MDD (``metrics.stats.detectable_difference``: the paired
test compare uses by default, its default alpha and power, alpha split over the run pairs as its
default Holm family does), on the paired 0/1 differences of two runs' correct answers per query.
Before any answer is judged their spread is unknown; the plan assumes ``PLANNING_SD`` = √0.5, the
spread of two runs whose answers are correct independently, half the time each (d = ±1 with
probability 1/2): the largest spread under independence. Runs that succeed on the same queries
spread less, so the figures err on the side of more queries. ``compare --answers`` gives the MDD
from the judged answers themselves.

The time: seconds per prompt from ``RATES`` (measured on this project's CPU, k = 5, 32 new
tokens), else unknown until the first prompts; ``RateWatch`` says the measured rate of the first
prompts and the time left once they are answered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from udcg.flows.run_options import CompareOptions
from udcg.progress import duration

PLANNING_SD = math.sqrt(0.5)
ALPHA, POWER, TEST = CompareOptions.alpha, CompareOptions.power, CompareOptions.test  # udcg compare's defaults

# Seconds per answered prompt (k = 5 documents, 32 new tokens) of the offline models on the project's
# 2-core CPU shared with other jobs: qwen2.5-coder-0.5b answered 135 prompts of the packaged example in
# 22 min 9 s (docs/guide.md, "From answers to UDCG_theta"). A model without a measured rate: none.
RATES: dict[str, float] = {"qwen2.5-coder-0.5b": round((22 * 60 + 9) / 135, 1)}


def pair_alpha(runs: int, alpha: float = ALPHA) -> float:
    """alpha per run pair in compare's default Holm family (the pairs of one row): alpha / pairs."""
    pairs = runs * (runs - 1) // 2
    return alpha / pairs if pairs > 1 else alpha


def detectable(queries: int, runs: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The difference in correct rate two of ``runs`` runs answered on ``queries`` queries could
    detect (compare's MDD at the planning spread); inf beyond the rate's range (1) or where the test
    cannot be significant on so few queries (``floor_text``)."""
    from udcg.metrics.stats import detectable_difference

    if floor_text(queries, runs, alpha):  # no answers on so few queries could be significant
        return math.inf
    mdd = detectable_difference(PLANNING_SD, queries, pair_alpha(max(runs, 2), alpha), power, TEST)
    return math.inf if mdd > 1 else mdd


def floor_text(queries: int, runs: int, alpha: float = ALPHA) -> str:
    """Where compare's test cannot be significant on ``queries`` at all (``metrics.p_floor``): why, and
    the queries it needs; else ""."""
    from udcg.metrics.p_floor import can_reach, queries_to_reach, smallest_p
    from udcg.metrics.stats import DEFAULT_RESAMPLES, EXACT_MAX_N

    level = pair_alpha(max(runs, 2), alpha)
    if queries < 1 or can_reach(queries, level, TEST, EXACT_MAX_N, DEFAULT_RESAMPLES):
        return ""
    floor = smallest_p(queries, TEST, EXACT_MAX_N, DEFAULT_RESAMPLES)
    needed = int(queries_to_reach(level, TEST, EXACT_MAX_N, DEFAULT_RESAMPLES))
    return (f"no difference in correct rate between two runs: on {queries} queries the exact sign-flip test's smallest "
            f"p is {floor:.4g}, not below alpha {level:.3g} per run pair, whatever the answers (at least {needed} "
            "queries needed)")


def queries_for(difference: float, runs: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The queries at which that difference in correct rate between two runs would be detected."""
    from udcg.metrics.planning import queries_to_detect

    return queries_to_detect(PLANNING_SD, difference, pair_alpha(max(runs, 2), alpha), power, TEST)


def rate_of(model: str, device: str | None, api: bool) -> float | None:
    """The measured seconds per prompt of a model, where ``RATES`` has it (a local model on the CPU)."""
    if api or device not in (None, "auto", "cpu"):
        return None
    return RATES.get(model)


@dataclass(frozen=True)
class AnswerPlan:
    model: str
    queries: int
    runs: int
    prompts: int  # distinct prompts the model will be sent (the cache holds the rest)
    cached: int
    seconds_per_prompt: float | None  # None: no measured rate for this model
    mdd: float  # the difference in correct rate two runs on these queries could detect

    def lines(self) -> list[str]:
        time_ = (f"about {duration(self.prompts * self.seconds_per_prompt)} at {self.seconds_per_prompt:g} s a prompt "
                 f"(measured for {self.model} on a 2-core CPU; refined after the first prompts)"
                 if self.seconds_per_prompt is not None and self.prompts else
                 "no model call (every answer is in the cache)" if not self.prompts else
                 f"unknown until the first prompts (no measured rate for {self.model})")
        runs = f"{self.runs} runs" if self.runs > 1 else "1 run (compare needs two)"
        detect = (floor_text(self.queries, self.runs) or "no difference in correct rate between two runs (its MDD "
                  "exceeds 1)" if math.isinf(self.mdd) else
                  "no difference (fewer than 2 queries)" if math.isnan(self.mdd) else
                  f"a difference in correct rate of {self.mdd:.2f} between two runs, no smaller")
        return [f"plan: {self.prompts} prompts to send ({self.queries} queries, {runs}; {self.cached} in the cache); "
                f"time: {time_}",
                f"plan: {self.queries} queries can detect {detect} (compare --answers' MDD at {POWER:.0%} power, "
                f"{TEST} test, alpha {pair_alpha(max(self.runs, 2)):.3g} per run pair, assuming a spread of "
                f"{PLANNING_SD:.2f}: two runs correct independently half the time); --detect D gives the queries for D"]


def detect_lines(difference: float, runs: int, prompts_per_query: int, model: str, seconds: float | None) -> list[str]:
    """What ``--detect D`` prints: the queries (and prompts, time) that would detect D, in (0, 1]."""
    n = queries_for(difference, runs)
    if math.isinf(n):
        return [f"detect {difference:g}: no number of queries reaches it"]
    n = int(n)
    prompts = n * prompts_per_query
    time_ = f", about {duration(prompts * seconds)} for {model}" if seconds is not None else ""
    return [f"detect {difference:g}: {n} queries (udcg answer --sample {n}), {prompts} prompts{time_} "
            f"({TEST} test, {POWER:.0%} power, alpha {pair_alpha(max(runs, 2)):.3g} per run pair, spread "
            f"{PLANNING_SD:.2f} assumed)"]


class RateWatch:
    """A progress bar that, once the first prompts are answered (the ``cached`` units before them come
    from the cache), says their measured rate and the time the rest will take."""

    def __init__(self, inner, total: int, cached: int, say: Callable[[str], None]) -> None:
        self._inner, self._total, self._cached, self._say = inner, total, cached, say
        self._start, self._done, self._told = time.perf_counter(), 0, False

    def update(self, n: int = 1) -> None:
        self._inner.update(n)
        self._done += n
        if not self._told and self._done > self._cached:
            self._told = True
            answered, elapsed = self._done - self._cached, time.perf_counter() - self._start
            left = max(0, self._total - self._done)
            self._say(f"first {answered} prompts: {duration(elapsed)} ({elapsed / answered:.1f} s a prompt); "
                      f"about {duration(left * elapsed / answered)} for the other {left}")

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> RateWatch:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(*exc)
