"""udcg inside the tools IR experiments run in (the ``ir`` extra: ``pip install -e '.[ir]'``):
``measure`` (``udcg.ir_measure``: UDCG as an ir_measures measure, for ``ir_measures`` and
``pt.Experiment``) and ``pyterrier`` (``udcg.pyterrier.Utility``: a transformer adding each
retrieved passage's utility). ranx and DataFrame inputs are read by ``udcg.io.frames``, ir_datasets
names by ``udcg.io.irds``. The libraries are imported only when used (``udcg.extras``)."""
