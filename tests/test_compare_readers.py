"""scripts/compare_readers.py's door: where its output may go (its figures are rebuilt in
test_published_results.py)."""

from __future__ import annotations

import pytest

from tests.conftest import load_script


@pytest.mark.parametrize("inside", ["a", "b"])
def test_out_inside_a_run_folder_is_refused(tmp_path, capsys, inside):
    """Either run's files are rebuilt by udcg report: the comparison goes beside them, never among them."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    out = tmp_path / inside / "paired"
    with pytest.raises(SystemExit) as exit_:
        load_script("compare_readers").main(["--pair", "NQ", str(a), str(b), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"inside the run folder {tmp_path / inside}" in err
    assert not out.exists()
