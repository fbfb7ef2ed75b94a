"""The allowed range of every numeric parameter and config value, each declared once.

A ``Bound`` is a value (integer or real, its lowest and highest value, each end included or not);
``check(value, bound, label)`` returns the value or raises an ``InputError`` naming the parameter
and its range. ``PARAMETERS`` holds each public operation's bounded parameters, one entry read by
both doors: the command line checks every parsed option against it right after parsing
(``check_options``, called by ``udcg.cli``: ``--n-boot 50: must be ...``), the Python API every
argument at its door (``udcg.api_args``: ``n_boot = 50: must be ...``), before any file is read or
model loaded, so a value one refuses the other refuses with the same range and reason; the flows
behind them check no bound again. A ``udcg validate`` config checks its keys through ``CONFIG``
(``udcg.experiment.config``), the same ``Bound`` values by config key. The measure grammar and the
UDCG kernel read ``MAX_CUTOFF`` and ``MAX_GAMMA`` from here (metrics import only this table and
the errors of udcg).

The highest values are far above any real use and far below what exhausts a machine: a cutoff of
10^11 allocated terabytes, 10^10 bootstrap resamples tens of gigabytes, before these bounds.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from udcg.errors import InputError

MAX_CUTOFF = 1_000_000  # k, --depth, @k: documents per ranking or context
MAX_RESAMPLES = 1_000_000  # --n-boot, --n-resamples
MIN_BOOTSTRAP = 100  # --n-boot: resamples of a 95% interval (BOOTSTRAP)
MAX_SAMPLES = 10_000  # --samples: answers per passage (annotate), contexts per query (answer)
MAX_RETRIES = 100
# gamma, the largest weight of the distracting passages: UDCG's score (sum u+ + gamma sum u-) / k then stays in
# [-MAX_GAMMA, 1], where the sigmoid neither overflows nor rounds to 0 (1e308 gave UDCG = 0 everywhere).
MAX_GAMMA = 100.0  # udcg.metrics.udcg reads it
MAX_SEED = 2**32 - 1  # numpy's SeedSequence accepts any, the API servers 32-bit seeds


@dataclass(frozen=True)
class Bound:
    """The values allowed: integers (``integer``) or finite reals from ``low`` to ``high``;
    ``low_open`` / ``high_open`` exclude that end; ``words``: strings allowed besides (``'auto'``)."""

    low: float
    high: float = math.inf
    integer: bool = True
    low_open: bool = False
    high_open: bool = False
    why: str = ""  # the reason for a bound that is not plain, said after the range
    words: tuple[str, ...] = ()

    def describe(self) -> str:
        """What the bound allows, in words: ``an integer >= 1 and <= 1000000 (1..1000000, a positive integer)``."""
        low, high = _number(self.low), _number(self.high)
        why = "".join(f" or {word!r}" for word in self.words) + (f" ({self.why})" if self.why else "")
        if self.integer:
            text = f"an integer >= {low}" + ("" if self.high == math.inf else f" and <= {high}")
            span = f"{low}.." + ("" if self.high == math.inf else high)
            return f"{text} ({span}{', a positive integer' if self.low == 1 else ''}){why}"
        if self.high == math.inf:
            return f"a finite number {'>' if self.low_open else '>='} {low}{why}"
        return f"a number in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}{why}"

    def allows(self, value: Any) -> bool:
        if isinstance(value, str):
            return value in self.words
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        try:
            if not self.integer and not math.isfinite(value):
                return False
        except OverflowError:  # an integer too large for a float (10**400)
            return False
        low_ok = value > self.low if self.low_open else value >= self.low
        high_ok = value < self.high if self.high_open else value <= self.high
        return bool(low_ok and high_ok)


def _number(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else f"{x:g}"


def kind(value: Any) -> str:
    """A value's type for a message: "a list", "an int", "None"."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def short(value: Any, limit: int = 40) -> str:
    """A value for a message, cut (a 5,000-digit integer is never printed whole)."""
    if isinstance(value, int) and abs(value).bit_length() > 4 * limit:  # str() of a huge int is slow, or refused
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1:,} digits"
    text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check(value: Any, bound: Bound, label: str) -> Any:
    """``value`` if ``bound`` allows it, else an ``InputError``: ``{label}: must be {range}``."""
    if not bound.allows(value):
        raise InputError(f"{label}: must be {bound.describe()}")
    return value if isinstance(value, str) else int(value) if bound.integer else float(value)


def check_option(flag: str, value: Any, bound: Bound) -> Any:
    """A command-line option: ``--seed -1: must be an integer >= 0 ...``."""
    return check(value, bound, f"{flag} {short(value)}")


def check_value(name: str, value: Any, bound: Bound, where: str = "") -> Any:
    """A config key or API argument: ``config.yaml: seed = -1: must be ...`` / ``n_boot = 0: must be ...``."""
    return check(value, bound, f"{where + ': ' if where else ''}{name} = {short(value)}")


CUTOFF = Bound(1, MAX_CUTOFF)
COUNT = Bound(1, 10**9)  # questions, contexts
SKIP = Bound(0, 10**9)  # questions left out before a selection
RESAMPLES = Bound(1, MAX_RESAMPLES)  # random sign flips: p = (count + 1) / (flips + 1) is valid at any count
BOOTSTRAP = Bound(MIN_BOOTSTRAP, MAX_RESAMPLES,  # resamples of a 95% percentile interval
                  why="fewer leave under 2.5 resampled means beyond each end of a 95% interval")
SAMPLES = Bound(1, MAX_SAMPLES)
RETRIES = Bound(0, MAX_RETRIES)
SEED = Bound(0, MAX_SEED)
BATCH = Bound(1, 100_000)  # prompts per forward pass
CHUNK = Bound(1, 1_000_000)  # requests per cached unit of work
TOKENS = Bound(1, 1_000_000)  # new tokens per answer or reply
CONCURRENCY = Bound(1, 10_000)  # API requests in flight
DEFAULT_CONCURRENCY = 64  # requests in flight: a vLLM/SGLang server batches them; a rate-limited API answers 429s, retried
THREADS = Bound(1, 4096)
FOLDS = Bound(2, 1000)
PORT = Bound(0, 65535)
MIN_TIMEOUT = 0.001  # seconds: a millisecond, under the round trip of a request to this very machine
SECONDS = Bound(MIN_TIMEOUT, 7 * 86400, integer=False,  # a timeout: finite, at most a week
                why="a timeout under a millisecond is one no request can meet")
MIN_RPM = 0.01  # one request every 100 minutes: 100 pairs then take about a week, the longest timeout allowed
RATE = Bound(MIN_RPM, 1e9, integer=False,  # requests per minute
             why="one request every 100 minutes at the slowest: a slower pace could not finish a run of 100 pairs in a week")
SAMPLING_TEMPERATURE = Bound(0, 100, integer=False, low_open=True)  # 0 draws one answer n times: no spread
WEIGHT = Bound(0, MAX_GAMMA, integer=False)  # gamma: in [0, 100] (a larger one rounds UDCG to 0)
SHARE = Bound(0, 1, integer=False)
OPEN_SHARE = Bound(0, 1, integer=False, low_open=True)  # (0, 1]: f1 threshold, target width
LEVEL = Bound(0, 1, integer=False, low_open=True, high_open=True)  # alpha, power
POSITIVE = Bound(0, integer=False, low_open=True)  # a C of theta.C_grid
SVM_C = Bound(0, integer=False, low_open=True, words=("auto",),  # C of UDCG_theta's SVM
              why="SVM-rank's default is 0.01; auto: chosen by cross-validation grouped by question")

# ---------------------------------------------------------------- every bounded parameter, once

# The options of the model, the same wherever a model runs (annotate, answer, judge).
MODEL: dict[str, Bound] = {
    "batch_size": BATCH, "chunk_size": CHUNK, "concurrency": CONCURRENCY, "rpm": RATE, "timeout": SECONDS,
    "max_retries": RETRIES,
}
# Each public operation's bounded parameters: the command (``udcg compare --n-boot``) and the Python
# API function that runs it (``udcg.compare(n_boot=...)``, ``@checked("compare")`` in ``udcg.api``)
# read the same entry. A parameter is named as the API names it; the command line spells it
# ``--with-dashes``. A test fails for any int/float option of any command that is not here.
PARAMETERS: dict[str, dict[str, Bound]] = {
    "score": {"k": CUTOFF, "gamma": WEIGHT},
    "compare": {"n_boot": BOOTSTRAP, "n_resamples": RESAMPLES, "seed": SEED, "alpha": LEVEL, "power": LEVEL,
                "gamma": WEIGHT, "digits": Bound(1, 12, why="decimals of the table's numbers; 0 would print every p as < 1")},
    "correlate": {"n_boot": BOOTSTRAP, "n_resamples": RESAMPLES, "seed": SEED, "gamma": WEIGHT,
                  "equivalence": Bound(0, 2, integer=False, low_open=True,  # a margin for a difference of two rhos
                                       why="a margin for a difference of two Spearman rhos, which lies in [-2, 2]")},
    "reader-check": {"n_boot": BOOTSTRAP, "seed": SEED},
    "fit-theta": {"k": CUTOFF, "cv_folds": FOLDS, "seed": SEED, "C": SVM_C},
    "annotate": {**MODEL, "depth": CUTOFF, "limit": COUNT, "samples": SAMPLES, "seed": SEED,
                 "temperature": SAMPLING_TEMPERATURE,  # used by --estimator sampling only
                 "target_width": OPEN_SHARE},
    "answer": {**MODEL, "k": CUTOFF, "depth": CUTOFF, "limit": COUNT, "sample": COUNT, "seed": SEED,
               "samples": Bound(0, MAX_SAMPLES),  # 0: the top-k contexts only
               "max_new_tokens": TOKENS, "detect": OPEN_SHARE},  # detect: a difference in correct rate
    "judge": {**MODEL, "max_new_tokens": TOKENS, "retries": RETRIES, "f1_threshold": OPEN_SHARE},
    "serve": {"batch_size": BATCH, "port": PORT, "max_request_tokens": Bound(1, 10_000_000), "max_request_seconds": SECONDS},
}

# ``udcg validate`` config keys (section.key; a tuple's items each): the same bounds, by config key.
CONFIG: dict[str, Bound] = {
    "seed": SEED, "data.limit": COUNT, "data.skip": SKIP, "pool.size": CUTOFF, "contexts.k": CUTOFF, "contexts.n_contexts": COUNT,
    "contexts.balance": SHARE, "grading.f1_threshold": OPEN_SHARE, "grading.max_new_tokens": TOKENS,
    "metrics.gamma": WEIGHT, "metrics.n_boot": BOOTSTRAP, "theta.train_share": SHARE, "theta.C": SVM_C,
    "theta.C_grid": POSITIVE, "theta.cv_folds": FOLDS, "studies.k_values": CUTOFF, "studies.oracle_k": CUTOFF,
    "reader.threads": THREADS, "reader.max_new_tokens": TOKENS,
    **{f"reader.{name}": MODEL[name] for name in ("batch_size", "chunk_size", "concurrency", "timeout", "rpm",
                                                  "max_retries")},
}


def option_bound(operation: str | None, name: str) -> Bound | None:
    """The bound of an operation's parameter (``PARAMETERS``), or None (not a bounded number)."""
    return PARAMETERS.get(operation or "", {}).get(name)


# Where a command's flag is not the parameter's name (answer's --subsets, the old --samples, is ``samples``).
FLAGS = {"answer": {"samples": "--subsets"}}


def check_options(command: str | None, options: dict[str, Any], declared: Iterable[str] = ()) -> None:
    """The command line's door: every bounded option of a parsed command line (``vars(args)``; None:
    not given), ``--n-boot 50: must be ...``; but the ``declared`` ones, which their options object
    checks as it is built (``udcg.options``: one check, not two)."""
    skip = set(declared)
    for name, bound in PARAMETERS.get(command or "", {}).items():
        value = options.get(name)
        if value is not None and name not in skip:
            check_option(FLAGS.get(command or "", {}).get(name, f"--{name.replace('_', '-')}"), value, bound)


def check_arguments(operation: str, arguments: dict[str, Any]) -> None:
    """The Python API's door (and that of ``udcg.pyterrier``): every bounded argument given,
    ``n_boot = 50: must be ...``, with the range the command line gives."""
    table = PARAMETERS.get(operation, {})
    for name, value in arguments.items():
        bound = table.get(name)
        if bound is not None and value is not None:
            check_value(name, value, bound)
