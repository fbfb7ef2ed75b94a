"""Reports as data (a list of rows with named columns) that render to Markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from udcg.io.files import atomic_write_text


def _fmt(v: object, digits: int) -> str:
    if isinstance(v, float):
        return "NA" if math.isnan(v) else f"{v:.{digits}f}"
    return "" if v is None else str(v)


@dataclass
class Table:
    columns: list[str]
    rows: list[dict] = field(default_factory=list)
    title: str = ""

    def add(self, **row: object) -> None:
        self.rows.append(row)

    def markdown(self, digits: int = 3) -> str:
        head = f"### {self.title}\n\n" if self.title else ""
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        for r in self.rows:
            lines.append("| " + " | ".join(_fmt(r.get(c), digits) for c in self.columns) + " |")
        return head + "\n".join(lines) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({c: ("" if isinstance(r.get(c), float) and math.isnan(r[c]) else r.get(c)) for c in self.columns})
        return buf.getvalue()

    def records(self) -> list[dict]:
        return [{c: (None if isinstance(r.get(c), float) and math.isnan(r[c]) else r.get(c)) for c in self.columns}
                for r in self.rows]

    def write(self, path: str | Path) -> None:
        """Write by suffix: .md, .csv or .json (atomically)."""
        path = Path(path)
        text = {".md": self.markdown, ".csv": self.csv}.get(path.suffix)
        atomic_write_text(path, text() if text else json.dumps(self.records(), indent=2) + "\n")
