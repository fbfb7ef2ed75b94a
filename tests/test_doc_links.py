"""Every relative link (and image) in the README and docs/ names a file of the repository, and every #anchor a
heading of its target, as GitHub slugs it: the front door and the guides stay true when a section
moves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, spaces,
    hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out, seen, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path):
    fenced = False
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced:
            for target in LINK.findall(line):
                if not re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
                    yield no, target


def test_slugs_as_github_makes_them():
    assert slug("From answers to UDCG_θ and metric validation, on your runs") == \
        "from-answers-to-udcg_θ-and-metric-validation-on-your-runs"
    assert slug("Pre-registration: equivalence within ±0.03 on NQ for the 1.5B reader (issue #38)") == \
        "pre-registration-equivalence-within-003-on-nq-for-the-15b-reader-issue-38"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc):
    broken = []
    for no, target in links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{doc.relative_to(ROOT)}:{no}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{doc.relative_to(ROOT)}:{no}: {target}: no such heading in {dest.name}")
    assert not broken, "\n".join(broken)
