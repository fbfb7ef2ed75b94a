"""Issue #50 item 11: `udcg compare --config FILE`: the options from a YAML file, one key per option
as its flag is spelled (runs: for the repeated --run), checked as the flags are, a flag on the
command line overriding its key; the shipped example under configs/compare/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from udcg.cli import build_parser, main
from udcg.io.sources import example_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    shutil.copytree(example_path(), tmp_path / "nq-example")
    monkeypatch.chdir(tmp_path)
    return tmp_path


RUNS = ["nq-example/runs/bm25.trec", "nq-example/runs/dense.trec", "nq-example/runs/hybrid.trec"]
FLAGS = [*[a for r in RUNS for a in ("--run", r)], "--qrels", "nq-example/qrels/test.tsv", "--metrics", "P@5,nDCG@5",
         "--test", "t", "--correction", "table", "--n-boot", "1000"]
CONFIG = """runs:
  - nq-example/runs/bm25.trec
  - nq-example/runs/dense.trec
  - nq-example/runs/hybrid.trec
qrels: nq-example/qrels/test.tsv
metrics: [P@5, nDCG@5]
test: t
correction: table
n_boot: 1000
"""


def _out(capsys, argv) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_config_gives_what_its_flags_give_and_a_flag_overrides_its_key(folder, capsys):
    (folder / "c.yaml").write_text(CONFIG)
    flags = _out(capsys, ["compare", *FLAGS])
    assert flags[0] == 0 and "paired t-test" in flags[1]
    assert _out(capsys, ["compare", "--config", "c.yaml"]) == flags
    permutation = _out(capsys, ["compare", *FLAGS, "--test", "permutation"])
    assert permutation != flags and _out(capsys, ["compare", "--config", "c.yaml", "--test", "permutation"]) == permutation
    two = _out(capsys, ["compare", "--config", "c.yaml", "--run", RUNS[0], "--run", RUNS[1]])  # the flags' runs only
    assert two[0] == 0 and "hybrid" not in two[1] and "hybrid" in flags[1]


@pytest.mark.parametrize("text, message", [
    ("runz: [a, b]\n", "c.yaml: unknown key 'runz' (known keys: runs, qrels,"),
    ("test: anova\n", "c.yaml: test: 'anova': choose one of permutation, t, wilcoxon"),
    ("n_boot: 50\n", "c.yaml: n_boot 50: must be"),
    ("n_boot: many\n", "c.yaml: n_boot: 'many' is not int"),
    ("judged_only: yes please\n", "c.yaml: judged_only: expected true or false"),
    ("metrics: {a: 1}\n", "c.yaml: metrics: expected a value as the command line takes it"),
    ("- a\n- b\n", "c.yaml: the config must be a mapping"),
])
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_key(folder, capsys, text, message):
    (folder / "c.yaml").write_text(text)
    rc, out, err = _out(capsys, ["compare", "--config", "c.yaml", "-o", "t.md"])
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (folder / "t.md").exists()


def test_the_shipped_example_names_only_compare_options():
    from udcg.flows.compare_config import read_options

    path = ROOT / "configs" / "compare" / "quickstart.yaml"
    args = build_parser().parse_args(["compare"])
    values = read_options(str(path), args.config_options)
    assert values["run"] == RUNS and values["metrics"] == "UDCG@5,nDCG@5,P@5" and values["ties"] == "nDCG@5"
    assert set(values) <= set(args.config_defaults)
