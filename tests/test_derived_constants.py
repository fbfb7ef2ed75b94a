"""A constant two modules need is declared once and read by the other, not copied and held equal by a
test: the largest cutoff and the largest gamma are ``udcg.bounds``' (the measure grammar and the
UDCG kernel read them: metrics import only the errors and this table), and a validate config's
choices for the scoring and the answer rules are the API backend's and the rules' own tuples."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from udcg import bounds
from udcg.errors import InputError

PACKAGE = Path(__file__).resolve().parents[1] / "udcg"


def _assigned(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}


def test_the_largest_cutoff_and_gamma_are_declared_once_in_bounds():
    from udcg.metrics import measures, udcg as kernel

    assert "MAX_CUTOFF" not in _assigned(PACKAGE / "metrics" / "measures.py")
    assert "MAX_GAMMA" not in _assigned(PACKAGE / "metrics" / "udcg.py")
    assert measures.MAX_CUTOFF is bounds.MAX_CUTOFF and kernel.MAX_GAMMA is bounds.MAX_GAMMA
    copies = [f"{p.relative_to(PACKAGE.parent)}: {name}" for p in sorted(PACKAGE.rglob("*.py")) if p.name != "bounds.py"
              for name in ("MAX_CUTOFF", "MAX_GAMMA") if name in _assigned(p)]
    assert not copies, copies


def test_the_grammar_and_the_kernel_refuse_past_the_bounds_they_read():
    from udcg.metrics.measures import parse_measure
    from udcg.metrics.udcg import udcg_matrix

    assert parse_measure(f"P@{bounds.MAX_CUTOFF}").cutoff == bounds.MAX_CUTOFF
    with pytest.raises(InputError, match=f"1..{bounds.MAX_CUTOFF}"):
        parse_measure(f"P@{bounds.MAX_CUTOFF + 1}")
    assert udcg_matrix([[1.0, -1.0]], gamma=bounds.MAX_GAMMA).shape == (1,)
    with pytest.raises(InputError, match=r"must be a number in \[0, 100\]"):
        udcg_matrix([[1.0, -1.0]], gamma=bounds.MAX_GAMMA * 1.01)


def test_the_config_choices_are_the_backends_and_the_rules_own():
    from udcg.experiment.config import CHOICES
    from udcg.grade.rules import MATCHES
    from udcg.llm.openai_target import SCORING

    assert CHOICES["reader.scoring"] is SCORING and CHOICES["grading.match"] is MATCHES
