"""udcg: utility- and distraction-aware retrieval evaluation for RAG.

The Python API (``udcg.udcg``, ``udcg.udcg_many``, ``udcg.evaluate``, ``udcg.compare``,
``udcg.score_runs``, ``udcg.read_utilities``, ``udcg.reader_check``; the model flows ``udcg.annotate_runs``, ``udcg.answer_runs``,
``udcg.judge``, ``udcg.fit_theta``, ``udcg.correlate``) is imported on first use, so ``import udcg``
and the CLI stay fast. In the IR tools (the ``ir`` extra): ``udcg.ir_measure("UDCG@5", utilities=...)``
is an ir_measures measure (``pt.Experiment``, ``ir_measures.calc_aggregate``), named by what changes
its value, and ``ir_measures.parse_measure("UDCG@5")`` knows it once udcg is imported (whichever is
imported first); ``udcg.pyterrier.Utility`` is a PyTerrier transformer adding a ``utility`` column.
"""

from udcg.extras import after_import
from udcg.version import __version__

after_import("ir_measures", "udcg.integrations.measure:register_measures")  # ir_measures.parse_measure("UDCG@5")

_API = ("ModelChoice", "annotate_runs", "answer_runs", "compare", "correlate", "evaluate", "fit_theta", "judge", "read_utilities",
        "reader_check", "score_runs", "udcg", "udcg_many")
__all__ = [*_API, "ir_measure", "__version__"]


def __getattr__(name: str):
    if name in _API:
        from udcg import api

        return getattr(api, name)
    if name == "ir_measure":
        from udcg.integrations.measure import ir_measure

        return ir_measure
    if name == "pyterrier":
        import importlib

        return importlib.import_module("udcg.integrations.pyterrier")
    raise AttributeError(f"module 'udcg' has no attribute {name!r}")
