"""Issue #50 item 7: names and output a new user stumbled on. `score` printed its means unrounded
(`0.18000000000000005`); its file has no header and, with several runs, a leading run column (the
documented layout, unchanged: readers of the old files keep working); `models list` said
"installed no, cached yes" of a model ready to load; `udcg demo` (the paper's validation) and
`make demo` (the quickstart) shared a name: the first is now `udcg validate-demo`, the second also
`make quickstart`, the old names still work."""

from __future__ import annotations

import re
from pathlib import Path

from udcg.cli import main
from udcg.io.sources import example_path

ROOT = Path(__file__).resolve().parents[1]
EX = example_path()


def test_score_prints_rounded_means_and_writes_every_digit_without_a_header(tmp_path, capsys):
    out = tmp_path / "pq.tsv"
    assert main(["score", "--run", str(EX / "runs" / "bm25.trec"), "--run", str(EX / "runs" / "dense.trec"), "--qrels",
                 str(EX / "qrels" / "test.tsv"), "--metrics", "P@5,nDCG@5", "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["bm25\tall\tP@5\t0.18", "bm25\tall\tnDCG@5\t0.9"]  # before: 0.18000000000000005
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows[0][:3] == ["bm25", "nq0", "P@5"] and {len(r) for r in rows} == {4}  # run, qid, measure, value
    mean = sum(float(v) for run, _, m, v in rows if run == "bm25" and m == "P@5") / 20
    assert abs(mean - 0.18) < 1e-12 and f"{mean!r}" != "0.18"  # the file's digits, the display's rounding


def test_models_list_says_ready_for_a_converted_model(capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.match(r"alias +ready +wheels +GGUF MB +model", out[0])
    assert "installed" not in out[0] and any(line.startswith("ready: converted in the cache") for line in out)


def test_the_validation_demo_has_its_own_name_and_the_old_one_works(capsys):
    for name in ("validate-demo", "demo"):
        try:
            main([name, "--help"])
        except SystemExit as e:
            assert e.code == 0
        assert "usage: udcg validate-demo" in capsys.readouterr().out
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo: quickstart$", makefile, re.M) and re.search(r"^quickstart: models$", makefile, re.M)
    assert re.search(r"^demo-validate: validate-demo$", makefile, re.M)
    assert "\t$(UDCG) validate-demo" in makefile
