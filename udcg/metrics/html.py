"""Text reports as HTML for notebooks (the ``_repr_html_`` of the API's results): the lines of a
Markdown report, each run of ``|``-table lines one HTML table (its cells as the text has them, bold
kept), every other line a paragraph; everything escaped."""

from __future__ import annotations

import html
import re

_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _cell(text: str) -> str:
    return _BOLD.sub(r"<b>\1</b>", html.escape(text.strip()))


def markdown_html(text: str) -> str:
    """``text`` (a Markdown report: tables and sentences) as one HTML fragment."""
    out, table = [], []

    def close() -> None:
        if table:
            head, *body = [row for row in table if not set(row.replace("|", "").strip()) <= {"-", ":"}]
            cells = [[c for c in row.strip().strip("|").split("|")] for row in [head, *body]]
            out.append("<table><thead><tr>" + "".join(f"<th>{_cell(c)}</th>" for c in cells[0]) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in cells[1:])
                       + "</tbody></table>")
            table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        close()
        if line.strip():
            out.append(f"<p>{_cell(line)}</p>")
    close()
    return "\n".join(out)
