"""Progress bars for the CLI (stderr, off when stderr is not a terminal unless UDCG_PROGRESS=1)."""

from __future__ import annotations

import os
import sys


def bar(total: int, desc: str, unit: str = "item", enabled: bool = True):
    """A tqdm bar on stderr; ``enabled=False`` (a command's --no-progress) turns it off."""
    from tqdm import tqdm

    force = os.environ.get("UDCG_PROGRESS")
    disable = not enabled or (force == "0") or (force != "1" and not sys.stderr.isatty())
    return tqdm(total=total, desc=desc, unit=unit, disable=disable, file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
