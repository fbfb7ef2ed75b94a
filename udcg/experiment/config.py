"""The configuration of ``udcg validate``: a YAML file of sections, checked once, into frozen records.

Every key has a default (the paper's setting where it has one), so a config names only what it
changes. An unknown key, a value of the wrong type or out of range raises ``InputError`` naming
the file, the key and the fix. ``--set section.key=value`` overrides any key from the command line.

Paths: a data set is a packaged sample name (``popqa-sample``), a shared-data name or alias
(``popqa``, ``nq``, ``nq-pon``, ``squad`` …, found under ``data.data_dir``, default
``$UDCG_DATA_DIR`` or ``../shared/data`` beside the repository), or a file/folder path. A relative
path is looked up beside the config file, then in the repository root, then in the working
directory. ``output`` and ``theta.from_run`` are relative to the working directory. A run writes
its config with paths relative to the repository root (``udcg.experiment.paths.portable``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udcg.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_CONFIG_BYTES = 1024**2  # a config is a few dozen lines
METRIC_CHOICES_NOTE = "e.g. UDCG, UDCG_theta, nDCG, RR, AP, P, Success, eRAG, ANSWER_PROB, RA-nWG"


@dataclass(frozen=True)
class DataConfig:
    questions: str = "popqa-sample"  # data set: sample name, shared name/alias, or path
    limit: int | None = None  # number of questions (None = all)
    select: str = "first"  # first | random (seeded): which `limit` questions
    data_dir: str | None = None  # folder of the shared data sets (None: $UDCG_DATA_DIR or ../shared/data)


@dataclass(frozen=True)
class PoolConfig:
    source: str = "dataset"  # dataset (the data set's own ranking) | bm25 | dense (MiniLM)
    size: int = 25  # candidate passages per question
    corpus: tuple[str, ...] = ()  # data sets pooled into the retrieval corpus (default: the questions' set)
    corpus_relevant_only: bool = False  # keep only passages labelled relevant (NQ: the gold passages)
    with_title: bool = True  # index title + text
    relevance: str = "labels+containment"  # labels | containment | labels+containment
    relevance_judge: str | None = None  # a model alias: LLM relevance judge instead of the rule


@dataclass(frozen=True)
class ReaderConfig:
    model: str = "qwen2.5-coder-0.5b"  # offline alias, HF id or local folder
    device: str = "auto"
    dtype: str = "float32"
    batch_size: int | None = None  # rows per forward pass (None: the backend's token budget)
    threads: int | None = None  # CPU threads for torch (None: torch's default; 1 helps on a busy machine)
    prompt_version: str = "udcg-code-v1"
    max_new_tokens: int = 32  # answer budget (greedy)
    chunk_size: int = 32  # requests per cached unit of work


@dataclass(frozen=True)
class AnnotationConfig:
    estimator: str = "first-token"  # first-token | sequence


@dataclass(frozen=True)
class ContextsConfig:
    k: int = 5
    n_contexts: int = 10
    balance: float = 0.5  # share of contexts holding >= 1 relevant passage
    order: str = "pool"  # pool (pool rank order inside a context) | shuffled (seeded, per context)


@dataclass(frozen=True)
class GradingConfig:
    judge: str = "rules"  # rules | a model alias (LLM answer judge)
    match: str = "contains"  # rules: contains | exact | f1
    f1_threshold: float = 0.5
    require_relevant_context: bool = True  # paper §6.2: "correct" needs a relevant passage in the context
    prompt_version: str = "v1"  # LLM judge prompt version
    max_new_tokens: int = 128


@dataclass(frozen=True)
class MetricsConfig:
    names: tuple[str, ...] = ("UDCG", "UDCG_theta", "nDCG", "RR", "AP", "P", "Success", "eRAG", "ANSWER_PROB", "RA-nWG")
    baseline: str = "UDCG"  # paired permutation-test p-values (Holm-corrected too) against this metric
    gamma: float = 1.0 / 3.0
    n_relevant: str = "pool"  # pool | context: the relevant count behind nDCG's ideal, AP and recall
    erag_score: str = "f1"  # f1 (token F1) | contains: score of a single-passage answer
    grades: str = "rules"  # rules (relevant -> 5, else 2) | a model alias (5-point LLM grade judge)
    constant_metric: str = "zero"  # zero | drop
    n_boot: int = 10_000


@dataclass(frozen=True)
class ThetaConfig:
    train_share: float = 0.5  # share of questions UDCG_theta is trained on (Table 3 uses the rest)
    C: float | str = "auto"  # SVM-rank's C, or auto: chosen from C_grid by cross-validation grouped by question
    C_grid: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
    cv_folds: int = 5  # GroupKFold folds over the training questions (fewer when there are fewer questions)
    cv_score: str = "spearman"  # spearman | pairwise: held-out mean per-question score that picks C
    from_run: str | None = None  # a finished run folder: use its theta/*.json, train nothing, test on all


@dataclass(frozen=True)
class StudiesConfig:
    k_values: tuple[int, ...] = (1, 3, 5)  # Fig. 2: correlation against k
    positions: bool = True  # Fig. 1: one relevant passage moved through the k positions
    oracle: bool = True  # Table 2: oracle choice of oracle_k passages of the pool
    oracle_k: int = 5


@dataclass(frozen=True)
class Config:
    name: str = "validate"
    seed: int = 0
    output: str | None = None  # run folder (default: runs/<name>)
    data: DataConfig = field(default_factory=DataConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    annotation: AnnotationConfig = field(default_factory=AnnotationConfig)
    contexts: ContextsConfig = field(default_factory=ContextsConfig)
    grading: GradingConfig = field(default_factory=GradingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    theta: ThetaConfig = field(default_factory=ThetaConfig)
    studies: StudiesConfig = field(default_factory=StudiesConfig)

    def to_dict(self) -> dict:
        return _plain(dataclasses.asdict(self))

    def fingerprint(self, *sections: str) -> str:
        """A short hash of the named sections (what a step's output depends on)."""
        d = self.to_dict()
        blob = json.dumps({s: d[s] for s in sections}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


CHOICES = {
    "data.select": ("first", "random"),
    "pool.source": ("dataset", "bm25", "dense"),
    "pool.relevance": ("labels", "containment", "labels+containment"),
    "annotation.estimator": ("first-token", "sequence"),
    "grading.match": ("contains", "exact", "f1"),
    "metrics.n_relevant": ("pool", "context"),
    "metrics.erag_score": ("f1", "contains"),
    "metrics.constant_metric": ("zero", "drop"),
    "contexts.order": ("pool", "shuffled"),
    "theta.cv_score": ("spearman", "pairwise"),
}


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


# ---------------------------------------------------------------- typed construction


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return f"a list of {typing.get_args(hint)[0].__name__}"
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return f"{_type_name(args[0])} or null"
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string"}.get(hint, str(hint))


def _short(value: Any, limit: int = 80) -> str:
    """A value for a message, cut: a config value may be huge (never print it whole)."""
    import reprlib

    text = reprlib.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        if value is None and type(None) in typing.get_args(hint):
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        for option in options[:-1]:  # e.g. float | str: a number, else a string
            with contextlib.suppress(InputError):
                return _coerce(value, option, where)
        hint = options[-1]
        origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if isinstance(value, (str, int)) and not isinstance(value, bool) and item in (str, int):
            value = [value]  # a single value stands for a one-element list
        if not isinstance(value, list):
            raise InputError(f"{where}: expected {_type_name(hint)}, got {_short(value)}")
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    ok = (isinstance(value, bool) if hint is bool else
          isinstance(value, int) and not isinstance(value, bool) if hint is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if hint is float else
          isinstance(value, str) if hint is str else False)
    if not ok:
        raise InputError(f"{where}: expected {_type_name(hint)}, got {_short(value)}")
    if hint is float and not math.isfinite(float(value)):  # .inf / .nan would fail only after the model work
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return float(value) if hint is float else value


def _build(cls: type, raw: Any, where: str, prefix: str) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: section {prefix.rstrip('.') or 'top level'!r} must be a mapping of keys, got {raw!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in known:
            raise InputError(f"{where}: unknown key '{prefix}{key}' (known keys{' of ' + prefix.rstrip('.') if prefix else ''}: "
                             f"{', '.join(known)})")
    values = {}
    for name in known:
        if name not in raw:
            continue
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = _build(hint, raw[name], where, f"{prefix}{name}.")
        else:
            values[name] = _coerce(raw[name], hint, f"{where}: {prefix}{name}")
    return cls(**values)


# ---------------------------------------------------------------- value checks


def _positive(value: Any, key: str, where: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or value < 1:
        raise InputError(f"{where}: {key} = {value!r} must be a positive integer")


def _check(cfg: Config, where: str) -> None:
    d = cfg.to_dict()
    for key, choices in CHOICES.items():
        section, name = key.split(".")
        if d[section][name] not in choices:
            raise InputError(f"{where}: {key} = {d[section][name]!r} is not one of: {', '.join(choices)}")
    _positive(cfg.data.limit, "data.limit", where, allow_none=True)
    _positive(cfg.pool.size, "pool.size", where)
    _positive(cfg.reader.batch_size, "reader.batch_size", where, allow_none=True)
    _positive(cfg.reader.threads, "reader.threads", where, allow_none=True)
    _positive(cfg.reader.max_new_tokens, "reader.max_new_tokens", where)
    _positive(cfg.reader.chunk_size, "reader.chunk_size", where)
    _positive(cfg.contexts.k, "contexts.k", where)
    _positive(cfg.contexts.n_contexts, "contexts.n_contexts", where)
    _positive(cfg.studies.oracle_k, "studies.oracle_k", where)
    _positive(cfg.grading.max_new_tokens, "grading.max_new_tokens", where)
    _positive(cfg.metrics.n_boot, "metrics.n_boot", where)
    if not 0 <= cfg.seed < 2**32:
        raise InputError(f"{where}: seed = {str(cfg.seed)[:40]} must be an integer in 0..{2**32 - 1}")
    if cfg.contexts.k > cfg.pool.size:
        raise InputError(f"{where}: contexts.k = {cfg.contexts.k} is larger than pool.size = {cfg.pool.size} "
                         "(a context is drawn from the pool: lower contexts.k or raise pool.size)")
    for k in cfg.studies.k_values:
        if not 1 <= k <= cfg.pool.size:
            raise InputError(f"{where}: studies.k_values holds {k}: every k must be in 1..pool.size ({cfg.pool.size})")
    for key, value in (("contexts.balance", cfg.contexts.balance), ("theta.train_share", cfg.theta.train_share)):
        if not 0.0 <= value <= 1.0:
            raise InputError(f"{where}: {key} = {value} must be a share in [0, 1]")
    if not 0.0 < cfg.grading.f1_threshold <= 1.0:
        raise InputError(f"{where}: grading.f1_threshold = {cfg.grading.f1_threshold} must be in (0, 1]")
    if not cfg.metrics.gamma >= 0:
        raise InputError(f"{where}: metrics.gamma = {cfg.metrics.gamma} must be >= 0 (the paper uses 1/3)")
    if not (cfg.theta.C == "auto" or not isinstance(cfg.theta.C, str) and cfg.theta.C > 0):
        raise InputError(f"{where}: theta.C = {cfg.theta.C!r} must be a number > 0 (SVM-rank's default is 0.01) "
                         "or auto (chosen by cross-validation over theta.C_grid)")
    if not cfg.theta.C_grid or not all(c > 0 for c in cfg.theta.C_grid):
        raise InputError(f"{where}: theta.C_grid = {list(cfg.theta.C_grid)} must list numbers > 0")
    if cfg.theta.cv_folds < 2:
        raise InputError(f"{where}: theta.cv_folds = {cfg.theta.cv_folds} must be an integer >= 2")
    _check_metrics(cfg, where)


def _check_metrics(cfg: Config, where: str) -> None:
    from udcg.metrics.contexts import parse_metric

    if not cfg.metrics.names:
        raise InputError(f"{where}: metrics.names is empty (list the metrics to compare, {METRIC_CHOICES_NOTE})")
    try:
        names = [str(parse_metric(n, where=f"{where}: metrics.names")) for n in cfg.metrics.names]
    except InputError as e:
        raise InputError(str(e)) from None
    if len(set(names)) != len(names):
        raise InputError(f"{where}: metrics.names lists a metric twice ({', '.join(names)})")
    proc = [n for n in names if n.split("@")[0] in ("PROC", "%PROC")]
    if proc:  # the experiment grades its retrieval pool only: the labelled corpus is the pool, PROC would be 1
        raise InputError(f"{where}: metrics.names lists {proc[0]}, which needs a labelled corpus beyond the retrieval "
                         "pool; a validate run grades its pool only (drop it; score a contexts file with 'pool_grades')")
    if str(parse_metric(cfg.metrics.baseline)) not in names:
        raise InputError(f"{where}: metrics.baseline = {cfg.metrics.baseline!r} is not in metrics.names (add it)")


# ---------------------------------------------------------------- loading


def _set_override(raw: dict, assignment: str) -> None:
    import yaml

    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise InputError(f"--set {assignment!r}: expected KEY=VALUE, e.g. --set contexts.k=3")
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise InputError(f"--set {assignment!r}: {part!r} is not a section")
    try:
        node[parts[-1]] = safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise InputError(f"--set {assignment!r}: the value is not valid YAML ({problem})") from None
    except ValueError as e:  # an integer too long to read
        raise InputError(f"--set {assignment[:80]!r}: {e} (give a value a config can hold)") from None


def safe_load(text: str):
    """yaml.safe_load without aliases (``*name``): a config needs none, and a few nested aliases
    expand to billions of values (an alias bomb). A refused alias is a YAMLError with its line."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.MarkedYAMLError(problem=f"alias *{event.anchor} (aliases are not allowed in a config; "
                                           "write the value out)", problem_mark=event.start_mark)
            return super().compose_node(parent, index)

    loader = NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such config file (give a YAML file, e.g. configs/smoke.yaml)")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InputError(f"{path}: {path.stat().st_size:,} bytes, too large for a config (at most {MAX_CONFIG_BYTES:,})")
    try:
        raw = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line, whatever the parser wrote
        raise InputError(f"{path}{line}: invalid YAML: {problem} (fix the syntax)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (re-save the config as UTF-8)") from None
    except (ValueError, RecursionError) as e:  # an integer too long to read, nesting too deep
        why = "an integer of more than 4,300 digits" if "digits" in str(e) else \
            "lists or mappings nested too deeply" if isinstance(e, RecursionError) else str(e)[:120]
        raise InputError(f"{path}: a value cannot be read: {why} (fix the value)") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e} (check the file's permissions)") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: the config must be a mapping of sections (data:, reader:, …), got {type(raw).__name__}")
    return raw


def from_dict(raw: dict, where: str = "config", base_dir: Path | None = None) -> Config:
    """A checked Config from a (parsed YAML) dict; relative data paths resolved against base_dir."""
    from udcg.metrics.contexts import parse_metric

    cfg = _build(Config, raw, where, "")
    _check(cfg, where)
    metrics = dataclasses.replace(cfg.metrics, names=tuple(str(parse_metric(n)) for n in cfg.metrics.names),
                                  baseline=str(parse_metric(cfg.metrics.baseline)))
    from udcg.experiment.paths import resolve_paths

    return resolve_paths(dataclasses.replace(cfg, metrics=metrics), where, base_dir)


def load_config(path: str | Path, overrides: list[str] | None = None, output: str | None = None) -> Config:
    """Read, override (``section.key=value`` strings), check and resolve a config file."""
    raw = read_yaml(path)
    for assignment in overrides or []:
        _set_override(raw, assignment)
    if output is not None:
        raw["output"] = output
    return from_dict(raw, str(path), Path(path).resolve().parent)


def read_run_config(path: str | Path) -> Config:
    """A run's ``config.yaml``, checked but with its paths left as written (nothing is looked
    up: the report of a run needs no data set on this machine)."""
    cfg = _build(Config, read_yaml(path), str(path), "")
    _check(cfg, str(path))
    return cfg


def to_yaml(cfg: Config) -> str:
    import yaml

    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True, default_flow_style=False)


def demo_config_path() -> Path:
    """The demo config shipped inside the package."""
    from importlib import resources

    return Path(str(resources.files("udcg") / "data" / "demo.yaml"))
