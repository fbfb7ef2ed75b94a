"""The options of ``udcg reader-check`` and ``udcg.reader_check``, each declared once
(``udcg.options``): the command's flags and the API's keywords are made from ``ReaderCheckOptions``;
the flow (``flows/reader_check``: ``check_utilities``, ``check_all``, ``check_records``, which
``udcg annotate --run`` calls too) takes the object."""

from __future__ import annotations

from dataclasses import dataclass

from udcg.options import Options, option


@dataclass(frozen=True)
class ReaderCheckOptions(Options):
    """The AUC's bootstrap interval, and what the command writes besides its lines."""

    operation = "reader-check"

    n_boot: int = option(1000, "bootstrap resamples of the queries for the AUC's interval (default {default})", kind=int)
    seed: int = option(0, "", kind=int)
    json: bool = option(False, "print the checks as JSON", kind=bool, api=False)
    output: str | None = option(None, "write one row per query (TSV with a header: qid, relevant, irrelevant, "
                                "mean_p_abs_relevant, mean_p_abs_irrelevant, answered_irrelevant, abstained_relevant; a "
                                "leading utilities column with several folders)", short="-o", kind=str, api=False)
    plot: str | None = option(None, "write a figure (.png or .svg; needs matplotlib): p_abs of the relevant and "
                              "irrelevant pairs, the AUC in the title, one panel per folder", kind=str, metavar="FILE",
                              api=False)
