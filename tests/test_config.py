"""The validate config: defaults, the shipped configs, every kind of user error, overrides, paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from udcg.cli import main
from udcg.errors import InputError
from udcg.experiment.config import Config, demo_config_path, from_dict, load_config, to_yaml

ROOT = Path(__file__).resolve().parents[1]  # the checkout under test (udcg itself knows no such folder)
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error(raw: dict) -> str:
    with pytest.raises(InputError) as e:
        from_dict(raw, "cfg.yaml")
    return str(e.value)


def test_empty_config_gives_the_paper_defaults():
    cfg = from_dict({})
    assert (cfg.contexts.k, cfg.contexts.n_contexts, cfg.contexts.balance) == (5, 10, 0.5)
    assert cfg.pool.size == 25 and cfg.metrics.gamma == pytest.approx(1 / 3)
    assert cfg.theta.C == "auto" and cfg.theta.cv_folds == 5 and cfg.theta.cv_score == "spearman"  # issue 16: C by CV
    assert cfg.contexts.order == "pool"  # the published runs' order
    assert cfg.grading.require_relevant_context and cfg.grading.judge == "rules"
    assert cfg.output.endswith(str(Path("runs") / "validate"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.name == path.stem
    assert cfg.data.data_dir is None  # the shared data folder comes from $UDCG_DATA_DIR when the data are loaded


def test_the_shipped_configs_are_there_and_demo_is_packaged():
    assert {"smoke", "demo", "popqa-qwen0.5b", "nq-qwen0.5b", "squad-qwen0.5b"} <= {p.stem for p in CONFIGS}
    assert demo_config_path().read_text() == (ROOT / "configs" / "demo.yaml").read_text()
    demo = load_config(demo_config_path())
    assert demo.reader.model == "qwen2.5-coder-0.5b" and demo.contexts.k == 3 and demo.pool.size == 10


def test_smoke_config_is_tiny():
    cfg = load_config(ROOT / "configs" / "smoke.yaml")
    assert cfg.reader.model == "smollm2-135m" and cfg.data.limit <= 4 and cfg.contexts.k == 3 and cfg.pool.size <= 8
    assert cfg.data.questions == "popqa-sample"


@pytest.mark.parametrize("raw, words", [
    ({"contextz": {}}, ["unknown key 'contextz'", "contexts", "studies"]),
    ({"contexts": {"kk": 3}}, ["unknown key 'contexts.kk'", "k, n_contexts, balance"]),
    ({"reader": {"modle": "x"}}, ["'reader.modle'", "model"]),
])
def test_unknown_keys_are_named_with_the_known_ones(raw, words):
    msg = error(raw)
    assert msg.startswith("cfg.yaml: ")
    for w in words:
        assert w in msg


@pytest.mark.parametrize("raw, words", [
    ({"contexts": {"k": "five"}}, ["contexts.k", "an integer", "'five'"]),
    ({"contexts": {"k": True}}, ["contexts.k", "an integer"]),
    ({"contexts": {"balance": "half"}}, ["contexts.balance", "a number"]),
    ({"grading": {"require_relevant_context": "yes"}}, ["grading.require_relevant_context", "true/false"]),
    ({"studies": {"k_values": "1,3"}}, ["studies.k_values[0]", "an integer"]),
    ({"contexts": 3}, ["section 'contexts'", "mapping"]),
    ({"pool": {"source": "splade"}}, ["pool.source", "dataset, bm25, dense"]),
    ({"grading": {"match": "fuzzy"}}, ["grading.match", "contains, exact, f1"]),
    ({"contexts": {"k": 0}}, ["contexts.k = 0", "positive"]),
    ({"contexts": {"k": 30}}, ["contexts.k = 30", "pool.size = 25"]),
    ({"contexts": {"balance": 1.5}}, ["contexts.balance", "[0, 1]"]),
    ({"studies": {"k_values": [1, 40]}}, ["studies.k_values holds 40"]),
    ({"metrics": {"names": ["UDCG", "nDGC"]}}, ["metrics.names", "unknown measure 'nDGC'"]),
    ({"metrics": {"names": []}}, ["metrics.names is empty"]),
    ({"metrics": {"names": ["UDCG", "udcg"]}}, ["twice"]),
    ({"metrics": {"names": ["nDCG"], "baseline": "UDCG"}}, ["metrics.baseline", "not in metrics.names"]),
    ({"theta": {"C": 0}}, ["theta.C"]),
    ({"theta": {"C": "best"}}, ["theta.C = 'best'", "auto"]),
    ({"theta": {"C_grid": [0.1, -1]}}, ["theta.C_grid", "> 0"]),
    ({"theta": {"cv_folds": 1}}, ["theta.cv_folds", ">= 2"]),
    ({"theta": {"cv_score": "ndcg"}}, ["theta.cv_score", "spearman, pairwise"]),
    ({"contexts": {"order": "random"}}, ["contexts.order", "pool, shuffled"]),
    ({"theta": {"from_run": "/no/such/run"}}, ["theta.from_run", "no such run folder"]),
    ({"data": {"questions": "no-such-file.jsonl"}}, ["data.questions", "no-such-file.jsonl", "popqa"]),
    ({"data": {"data_dir": "/no/such/dir"}}, ["data.data_dir", "no such folder"]),
    ({"seed": -1}, ["seed"]),
])
def test_bad_values_name_the_key_and_the_fix(raw, words):
    msg = error(raw)
    for w in words:
        assert w in msg, msg


def test_metric_names_are_canonicalised():
    cfg = from_dict({"metrics": {"names": ["udcg", "ndcg@3", "map", "hits"], "baseline": "udcg"}})
    assert cfg.metrics.names == ("UDCG", "nDCG@3", "AP", "Success") and cfg.metrics.baseline == "UDCG"


def test_a_single_value_stands_for_a_one_element_list():
    assert from_dict({"studies": {"k_values": 3}}).studies.k_values == (3,)


def test_overrides_and_output(tmp_path):
    path = write(tmp_path, "name: t\ncontexts:\n  k: 4\n")
    cfg = load_config(path, ["contexts.k=3", "studies.k_values=[1, 2]", "grading.judge=rules", "data.limit=null"],
                      output=str(tmp_path / "out"))
    assert cfg.contexts.k == 3 and cfg.studies.k_values == (1, 2) and cfg.data.limit is None
    assert cfg.output == str((tmp_path / "out").resolve())
    with pytest.raises(InputError, match="expected KEY=VALUE"):
        load_config(path, ["contexts.k"])
    with pytest.raises(InputError, match="unknown key 'contexts.q'"):
        load_config(path, ["contexts.q=1"])


def test_yaml_errors_are_located(tmp_path):
    with pytest.raises(InputError, match=r"c.yaml:2: invalid YAML"):
        load_config(write(tmp_path, "name: t\nseed: @1\n"))
    with pytest.raises(InputError, match="must be a mapping of sections"):
        load_config(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(InputError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_relative_data_paths_resolve_beside_the_config_then_in_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "mine.jsonl").write_text((ROOT / "udcg" / "data" / "popqa-sample.jsonl").read_text())
    cfg = load_config(write(tmp_path, "data:\n  questions: mine.jsonl\n"))
    assert cfg.data.questions == str((tmp_path / "mine.jsonl").resolve())
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "q.jsonl").write_text("")
    monkeypatch.chdir(work)
    cfg = load_config(write(tmp_path, "data:\n  questions: data/q.jsonl\n  data_dir: data\n"))  # not beside the config
    assert cfg.data.questions == str((work / "data" / "q.jsonl").resolve()) and cfg.data.data_dir == str(work / "data")
    cfg = load_config(write(tmp_path, f"data:\n  questions: popqa\n  data_dir: {tmp_path}\n"))
    assert cfg.data.questions == "popqa" and cfg.data.data_dir == str(tmp_path.resolve())
    with pytest.raises(InputError, match="data.questions = 'udcg/data/popqa-sample.jsonl' is neither a known data set"):
        load_config(write(tmp_path, "data:\n  questions: udcg/data/popqa-sample.jsonl\n"))  # no checkout is searched


def test_data_names_stay_names_and_the_data_folder_is_not_guessed(tmp_path, monkeypatch):
    monkeypatch.delenv("UDCG_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    import udcg.experiment.config as config

    assert not hasattr(config, "REPO_ROOT")
    cfg = from_dict({"data": {"questions": "nq"}, "pool": {"corpus": ["nq", "nq-pon"]}})
    assert (cfg.data.questions, cfg.pool.corpus, cfg.data.data_dir) == ("nq", ("nq", "nq-pon"), None)
    assert from_dict({"data": {"questions": "hf:someone/questions"}}).data.questions == "hf:someone/questions"
    assert from_dict({"data": {"questions": "popqa-sample"}}).data.questions == "popqa-sample"


def test_the_resolved_config_round_trips_through_yaml():
    cfg = load_config(ROOT / "configs" / "nq-qwen0.5b.yaml")
    again = from_dict(yaml.safe_load(to_yaml(cfg)))
    assert again == cfg and isinstance(again, Config)


def test_fingerprint_follows_the_named_sections_only():
    a = from_dict({})
    assert a.fingerprint("data", "pool") == from_dict({"studies": {"k_values": [2]}}).fingerprint("data", "pool")
    assert a.fingerprint("data", "pool") != from_dict({"pool": {"size": 20}}).fingerprint("data", "pool")


def test_cli_reports_a_config_error_on_one_line(tmp_path, capsys):
    path = write(tmp_path, "name: t\nreader:\n  model: smollm2-135m\n  temprature: 0\n")
    assert main(["validate", str(path), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown key 'reader.temprature'" in err and "max_new_tokens" in err
    assert not (tmp_path / "run").exists()


def test_a_data_path_beside_the_working_directory_resolves(tmp_path, monkeypatch):
    shared = ROOT.parent / "shared" / "data" / "popqa-contriever-100"
    if not shared.is_dir():
        pytest.skip("no ../shared/data beside the checkout")
    monkeypatch.chdir(ROOT)
    cfg = load_config(write(tmp_path, "data:\n  questions: ../shared/data/popqa-contriever-100\n"))
    assert cfg.data.questions == str(shared.resolve())


def test_demo_command_is_registered(capsys):
    with pytest.raises(SystemExit) as e:
        main(["demo", "--help"])
    assert e.value.code == 0 and "packaged demo config" in capsys.readouterr().out


def test_theta_C_is_a_number_or_auto():
    assert from_dict({"theta": {"C": 0.5}}).theta.C == 0.5
    assert from_dict({"theta": {"C": 2}}).theta.C == 2.0
    assert from_dict({"theta": {"C": "auto", "C_grid": [1, 10]}}).theta.C_grid == (1.0, 10.0)


def test_the_published_config_holds_no_absolute_path_and_reads_back(tmp_path, monkeypatch):
    from udcg.experiment.config import portable, read_run_config

    monkeypatch.chdir(ROOT)  # paths are published relative to the working directory
    cfg = from_dict({"output": str(ROOT / "runs" / "x"), "data": {"questions": "udcg/data/popqa-sample.jsonl",
                                                                   "data_dir": "udcg/data"}})
    assert Path(cfg.output).is_absolute() and Path(cfg.data.questions).is_absolute()
    pub = portable(cfg)
    assert pub.output == str(Path("runs") / "x") and pub.data.questions == str(Path("udcg/data/popqa-sample.jsonl"))
    assert pub.data.data_dir == str(Path("udcg/data"))
    beside = from_dict({"data": {"data_dir": str(ROOT.parent)}})  # the folder that holds the working directory
    assert portable(beside).data.data_dir == ".."
    assert portable(from_dict({})).data.data_dir is None  # $UDCG_DATA_DIR is this machine's, never published
    elsewhere = from_dict({"output": str(tmp_path / "run")})
    assert portable(elsewhere).output == str((tmp_path / "run").resolve())  # outside the working directory: kept
    path = write(tmp_path, to_yaml(pub), "config.yaml")
    assert read_run_config(path) == pub  # read back as written: nothing looked up
    assert load_config(path).data.questions == cfg.data.questions  # and it still resolves


@pytest.mark.parametrize("name", ["popqa-qwen0.5b", "nq-qwen0.5b"])
def test_the_committed_results_configs_are_portable(name):
    text = (ROOT / "docs" / "results" / name / "config.yaml").read_text()
    raw = yaml.safe_load(text)
    assert not Path(raw["output"]).is_absolute() and raw["data"]["data_dir"] is None  # names only: nq, popqa
    assert str(ROOT) not in text
