"""Progress bars: ours and the model libraries' follow the same switch (--no-progress, UDCG_PROGRESS,
a terminal or not)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from udcg.progress import shown

CHECK = """
import sys
from udcg.progress import follow_libraries
if sys.argv[1] == "before":
    import transformers.utils.logging
follow_libraries(sys.argv[2] == "on")
from transformers.utils import logging
print(logging.is_progress_bar_enabled())
"""


def _library_bars(when: str, flag: str, progress_env: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("UDCG_PROGRESS", "HF_HUB_DISABLE_PROGRESS_BARS")}
    if progress_env is not None:
        env["UDCG_PROGRESS"] = progress_env
    out = subprocess.run([sys.executable, "-c", CHECK, when, flag], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("when", ["before", "after"])  # transformers imported before / after the call
def test_library_bars_follow_ours(when):
    pytest.importorskip("transformers")
    assert _library_bars(when, "off", "1") == "False"  # --no-progress wins over UDCG_PROGRESS=1
    assert _library_bars(when, "on", None) == "False"  # stderr is a pipe here: no bars anywhere
    assert _library_bars(when, "on", "1") == "True"


def test_shown_rules(monkeypatch):
    monkeypatch.setenv("UDCG_PROGRESS", "1")
    assert shown() and not shown(False)
    monkeypatch.setenv("UDCG_PROGRESS", "0")
    assert not shown()
    monkeypatch.delenv("UDCG_PROGRESS")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert shown() and not shown(False)
