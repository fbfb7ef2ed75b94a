"""The everyday flows, one home for the commands and the Python API alike (both call these; the
commands parse, call and print):

- ``annotate``: utilities of a QA file's passages, or of the union of retrieval runs' top documents;
- ``answer``: the reader's answer to each run's top-k context (``own_runs`` builds the contexts);
- ``judge``: relevance, grades or answer outcomes, by rules or an LLM judge;
- ``scoring``: every metric of every context of a contexts file; ``run_scores``: runs against qrels
  and utilities (``run_tables`` joins the columns); ``run_compare``: runs side by side, tested;
- ``theta``: fit UDCG_theta on judged contexts, and its model files;
- ``correlate``: which metric follows the answer outcomes;
- ``reading``: the cached reader calls (answers, log-likelihoods) that ``answer`` and the paper's
  validation (``udcg.experiment``) share.

The floor sits above annotate/grade/metrics and below ``udcg.experiment``, which keeps the paper's
validation only and may use these flows.
"""
