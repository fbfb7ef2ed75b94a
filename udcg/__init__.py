"""udcg: utility- and distraction-aware retrieval evaluation for RAG.

The Python API (``udcg.udcg``, ``udcg.udcg_many``, ``udcg.evaluate``, ``udcg.compare``,
``udcg.score_runs``, ``udcg.read_utilities``) is imported on first use, so ``import udcg`` and the
CLI stay fast.
"""

from udcg.version import __version__
__all__ = ["compare", "evaluate", "read_utilities", "score_runs", "udcg", "udcg_many", "__version__"]


def __getattr__(name: str):
    if name in ("compare", "evaluate", "read_utilities", "score_runs", "udcg", "udcg_many"):
        from udcg import api

        return getattr(api, name)
    raise AttributeError(f"module 'udcg' has no attribute {name!r}")
