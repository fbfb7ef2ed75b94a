"""Issue #51's pre-registered run (docs/results/README.md, "Pre-registration: does the reader check
predict where UDCG helps? (issue #51)"): its two configs, and their questions disjoint from every
published run's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from udcg.experiment.config import load_config
from udcg.experiment.reporting import question_order

ROOT = Path(__file__).resolve().parents[1]
CONFIGS, RESULTS = ROOT / "configs", ROOT / "docs" / "results"
TARGET = 200  # the plan's questions per arm


def _yaml(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def test_the_arms_are_the_published_configs_but_their_names_and_skip():
    """Arm A is nq-qwen1.5b-confirm's config, arm B nq-qwen0.5b-pool15's, each but its name and data.skip;
    the two arms differ only in the reader (so they answer identical contexts)."""
    for arm, published in (("nq-qwen1.5b-readercheck", "nq-qwen1.5b-confirm"), ("nq-qwen0.5b-readercheck", "nq-qwen0.5b-pool15")):
        new, old = _yaml(arm), _yaml(published)
        assert (new.pop("name"), old.pop("name")) == (arm, published)
        assert new["data"].pop("skip") == 350 and (new["data"].pop("limit"), old["data"].pop("limit")) == (5, 50)
        assert new == old
    a, b = _yaml("nq-qwen1.5b-readercheck"), _yaml("nq-qwen0.5b-readercheck")
    assert (a["reader"].pop("model"), b["reader"].pop("model")) == ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    assert {**a, "name": ""} == {**b, "name": ""}


def test_the_questions_are_unseen_by_every_published_run():
    """The arms' first 200 questions (the plan's target; a chunk's limit only cuts them) are the 351st to 550th
    of the seed-0 order, and none is a question of any published validate run (NQ or not)."""
    from udcg.experiment import questions
    from udcg.io.sources import default_data_dir, load_dataset

    data_dir = default_data_dir()
    if data_dir is None or not (data_dir / "nq-open-gold").is_dir():
        pytest.skip("no shared NQ data: set $UDCG_DATA_DIR to the folder holding nq-open-gold/")
    picked = {}
    for arm in ("nq-qwen1.5b-readercheck", "nq-qwen0.5b-readercheck"):
        cfg = load_config(CONFIGS / f"{arm}.yaml", [f"data.limit={TARGET}", f"data.data_dir={data_dir}"])
        picked[arm] = [q.qid for q in questions.select(load_dataset(cfg.data.questions, data_dir=cfg.data.data_dir), cfg)]
    a, b = picked.values()
    assert a == b and len(set(a)) == TARGET  # the same questions, in the same order, for both readers
    confirm = load_config(CONFIGS / "nq-qwen1.5b-confirm.yaml", [f"data.limit={350 + TARGET}", f"data.data_dir={data_dir}"])
    assert [q.qid for q in questions.select(load_dataset("nq", data_dir=confirm.data.data_dir), confirm)][350:] == a
    published = {folder.parent.parent.name: set(question_order(folder.parent.parent))
                 for folder in RESULTS.glob("*/data/pools.jsonl.gz") if not folder.parent.parent.name.endswith("-readercheck")}
    assert len(published) >= 8 and published["nq-qwen1.5b-confirm"] and all(s for s in published.values())
    assert {name: sorted(s & set(a)) for name, s in published.items() if s & set(a)} == {}
