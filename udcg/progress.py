"""Progress bars for the CLI (stderr, off when stderr is not a terminal unless UDCG_PROGRESS=1)."""

from __future__ import annotations

import os
import sys


def shown(enabled: bool = True) -> bool:
    """Whether bars are drawn: not turned off by the command (--no-progress) or UDCG_PROGRESS=0, and
    stderr is a terminal (UDCG_PROGRESS=1 forces them on)."""
    force = os.environ.get("UDCG_PROGRESS")
    return enabled and force != "0" and (force == "1" or sys.stderr.isatty())


def bar(total: int, desc: str, unit: str = "item", enabled: bool = True):
    """A tqdm bar on stderr; ``enabled=False`` (a command's --no-progress) turns it off."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not shown(enabled), file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def follow_libraries(enabled: bool = True) -> None:
    """Give the model libraries' own bars (transformers' "Loading weights") the same on/off as ours.
    Call before a model loads; works whether or not transformers is imported yet."""
    if shown(enabled):
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when transformers is first imported
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
