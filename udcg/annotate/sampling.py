"""The `sampling` abstention estimator (paper App. D), for black-box models.

Draw answers at temperature T, judge each one, and report the share of abstentions with a Wilson
score interval. Sampling goes in rounds of ``batch`` answers per chat; a chat stops early once its
interval is narrower than ``target_width`` (or when it has ``n`` answers).

Round r of the whole run uses the seed ``seed + r`` (same for every chat of that round), so a
rerun with the same arguments asks the backend for exactly the same answers, and no two rounds
repeat each other's draws with a seeded backend.

What the estimate estimates: the probability that an answer drawn at temperature T is judged an
abstention. With ``starts_with_no_response`` that is the probability of every answer starting
with NO-RESPONSE in any spelling and tokenisation, so it is not the `first-token` estimator's
softmax(logits)[first token of NO-RESPONSE], nor the `sequence` estimator's product, even at T = 1:
Qwen2.5-Coder-0.5B often writes "No-RESPONSE" (first token "No"), which only sampling counts. The
tests check the estimator against the exact probability of what it samples: one-token answers
judged by their text, against the softmax(logits / T) mass of the matching tokens.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from udcg.llm.base import Backend, Chat, GenerationParams

log = logging.getLogger(__name__)

# "NO-RESPONSE", "no response", "**No_Response.**", "  'NO-RESPONSE'" ... but not "No, response".
_LEADING_NOISE = re.compile(r"^[\W_]+")
_NO_RESPONSE = re.compile(r"no[\s\-_]*response\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SampledEstimate:
    """Share ``p = k / n`` of sampled answers judged abstentions, with its Wilson interval."""

    p: float
    low: float
    high: float
    n: int  # answers drawn
    k: int  # answers judged abstentions

    @property
    def width(self) -> float:
        return self.high - self.low


def starts_with_no_response(answer: str) -> bool:
    """True when the answer starts with NO-RESPONSE, ignoring case, leading whitespace and
    punctuation (quotes, markdown stars, brackets) and the separator between the two words
    (hyphen, underscore, spaces)."""
    return _NO_RESPONSE.match(_LEADING_NOISE.sub("", answer)) is not None


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion with k successes in n trials.

    The interval is the set of p whose score test ``|k/n - p| / sqrt(p(1-p)/n) <= z`` accepts;
    unlike the normal (Wald) interval it stays inside [0, 1] and is not degenerate at k = 0 or n.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer number of trials, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer between 0 and n={n}, got {k!r}")
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"z must be a positive finite number, got {z!r}")
    p_hat = k / n
    z2n = z * z / n
    denom = 1.0 + z2n
    centre = (p_hat + z2n / 2.0) / denom
    half = z / denom * math.sqrt(p_hat * (1.0 - p_hat) / n + z2n / (4.0 * n))
    # At k = 0 (k = n) the low (high) bound is exactly 0 (1); clamp the rounding error.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def estimate(k: int, n: int, z: float = 1.96) -> SampledEstimate:
    low, high = wilson_interval(k, n, z)
    return SampledEstimate(p=k / n, low=low, high=high, n=n, k=k)


@dataclass(frozen=True, slots=True)
class SamplingPlan:
    """How the answers are drawn: up to ``n`` per chat at ``temperature`` and ``top_p``, in rounds of
    ``batch`` (None: all ``n`` in one round, i.e. no early stop), round r seeded ``seed + r``; a chat
    stops once its Wilson interval (at ``z``) is narrower than ``target_width`` (None: never early).
    ``max_new_tokens`` only needs to cover what the judge of an answer looks at (NO-RESPONSE is a few
    tokens); a judge reading the whole answer needs more. Checked when made (``ValueError``)."""

    n: int
    temperature: float
    seed: int
    target_width: float | None = None
    batch: int | None = None
    z: float = 1.96
    max_new_tokens: int = 16
    top_p: float = 1.0

    def __post_init__(self) -> None:
        n, batch, temperature, target_width = self.n, self.batch, self.temperature, self.target_width
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer (answers per chat), got {n!r}")
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
            raise ValueError(f"batch must be a positive integer (answers per chat per round), got {batch!r}")
        if not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be > 0 for sampling (0 is greedy: one answer, no spread), got {temperature!r}")
        if target_width is not None and not (0 < target_width <= 1):
            raise ValueError(f"target_width must be in (0, 1] or None, got {target_width!r}")

    @property
    def round_size(self) -> int:
        """Answers per chat per round."""
        return self.n if self.batch is None else self.batch


def sample_abstention(backend: Backend, chats: Sequence[Chat], plan: SamplingPlan,
                      is_abstention: Callable[[str], bool] = starts_with_no_response) -> list[SampledEstimate]:
    """Estimate, per chat, the probability that the model's answer is an abstention (judged by
    ``is_abstention``), drawing answers as ``plan`` says. Results are in input order."""
    n, batch, z, target_width = plan.n, plan.round_size, plan.z, plan.target_width
    counts = [[0, 0] for _ in chats]  # [abstentions, answers] per chat
    active = list(range(len(chats)))
    round_no = 0
    while active:
        size = min(batch, n - counts[active[0]][1])  # every active chat has the same count
        params = GenerationParams(max_new_tokens=plan.max_new_tokens, temperature=plan.temperature, top_p=plan.top_p,
                                  n=size, seed=plan.seed + round_no)
        answers = backend.generate([chats[i] for i in active], params)
        if len(answers) != len(active):
            raise ValueError(f"backend {backend.name!r} returned {len(answers)} answer lists for {len(active)} chats")
        still = []
        for i, drawn in zip(active, answers, strict=True):
            if len(drawn) != size:
                raise ValueError(f"backend {backend.name!r} returned {len(drawn)} answers, asked for n={size}")
            counts[i][0] += sum(bool(is_abstention(a)) for a in drawn)
            counts[i][1] += size
            k, m = counts[i]
            done = m >= n or (target_width is not None and _width(k, m, z) < target_width)
            if not done:
                still.append(i)
        log.debug("sampling round %d: %d of %d chats still sampling", round_no, len(still), len(chats))
        active = still
        round_no += 1
    return [estimate(k, m, z) for k, m in counts]


def _width(k: int, n: int, z: float) -> float:
    low, high = wilson_interval(k, n, z)
    return high - low
