"""The configuration of ``udcg validate``: a YAML file of sections, checked once, into frozen records.

Every key has a default (the paper's setting where it has one), so a config names only what it
changes. An unknown key, a value of the wrong type or out of range raises ``InputError`` naming
the file, the key and the fix. ``--set section.key=value`` overrides any key from the command line.

Data: ``data.questions`` names a data set packaged with udcg (``popqa-sample``), a shared data set
by name or alias (``popqa``, ``nq``, ``nq-pon``, ``squad`` …, a folder under ``data.data_dir``,
else ``$UDCG_DATA_DIR``: there is no default folder), a Hugging Face data set (``hf:NAME``), an
ir_datasets dataset (``irds:NAME``: its queries with answers and their judged documents), or a
file/folder path. A relative path is looked up beside the config file, then in the working
directory. ``output`` and ``theta.from_run`` are relative to the working directory. A run writes
its config with paths relative to the working directory (``portable``; the rules for one path:
``udcg.experiment.paths``).
YAML reading and typed construction: ``udcg.io.typed_yaml``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udcg.annotate.prompt import DEFAULT_VERSION
from udcg.bounds import CONFIG as CONFIG_BOUNDS, DEFAULT_CONCURRENCY, check_value
from udcg.errors import InputError
from udcg.experiment.paths import data_folder, dataset_ref, portable_path, run_folder
from udcg.grade.rules import MATCHES
from udcg.io.typed_yaml import build_dataclass, read_yaml, set_override
from udcg.llm.openai_target import SCORING
from udcg.metrics.constants import CONSTANT, CONSTANT_METRIC, CV_SCORES, GAMMA, N_BOOT
METRIC_CHOICES_NOTE = "e.g. UDCG, UDCG_theta, nDCG, RR, AP, P, Success, eRAG, ANSWER_PROB, RA-nWG"


@dataclass(frozen=True)
class DataConfig:
    questions: str = "popqa-sample"  # data set: packaged sample, shared name/alias, hf:NAME, irds:NAME, or path
    limit: int | None = None  # number of questions (None = all)
    select: str = "first"  # first | random (seeded): which `limit` questions
    skip: int = 0  # leave out the first `skip` questions of that order (a run disjoint from one cut at `skip`)
    data_dir: str | None = None  # folder of the shared data sets (None: $UDCG_DATA_DIR when loading)


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
    prompt_version: str = DEFAULT_VERSION
    max_new_tokens: int = 32  # answer budget (greedy)
    chunk_size: int = 32  # requests per cached, fsynced unit of every model step (the reader's and the LLM judges')
    # An API reader (openai:MODEL, or any model name with api_base): the settings of `udcg annotate`'s flags.
    api_base: str | None = None  # OpenAI-compatible base URL(s), comma-separated (None: $UDCG_OPENAI_BASE_URLS, ...)
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key (unset: no key sent)
    concurrency: int = DEFAULT_CONCURRENCY  # API requests in flight
    timeout: float = 60.0  # seconds for one API response
    rpm: float | None = None  # API requests per minute (None: no limit)
    max_retries: int = 5  # retries per API request after the first attempt
    tokenizer: str | None = None  # the served model's tokenizer, for exact scoring (None: the served model's name)
    scoring: str = "auto"  # auto | completions | top-logprobs: exact p_abs through /v1/completions, or a top list


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
    match: str = "contains"  # rules: contains (the published runs' rule) | span (judge answer's default) | exact | f1
    f1_threshold: float = 0.5
    require_relevant_context: bool = True  # paper §6.2: "correct" needs a relevant passage in the context
    prompt_version: str = "v1"  # LLM judge prompt version
    max_new_tokens: int = 128


@dataclass(frozen=True)
class MetricsConfig:
    names: tuple[str, ...] = ("UDCG", "UDCG_theta", "nDCG", "RR", "AP", "P", "Success", "eRAG", "ANSWER_PROB", "RA-nWG")
    baseline: str = "UDCG"  # paired permutation-test p-values (Holm-corrected too) against this metric
    gamma: float = GAMMA
    n_relevant: str = "pool"  # pool | context: the relevant count behind nDCG's ideal, AP and recall
    erag_score: str = "f1"  # f1 (token F1) | contains: score of a single-passage answer
    grades: str = "rules"  # rules (relevant -> 5, else 2) | a model alias (5-point LLM grade judge)
    constant_metric: str = CONSTANT  # zero | drop
    n_boot: int = N_BOOT


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
    "reader.scoring": SCORING,  # the API backend's
    "grading.match": MATCHES,  # the answer rules' (validate's default stays contains: published runs)
    "metrics.n_relevant": ("pool", "context"),
    "metrics.erag_score": ("f1", "contains"),
    "metrics.constant_metric": CONSTANT_METRIC,
    "contexts.order": ("pool", "shuffled"),
    "theta.cv_score": CV_SCORES,  # UDCG_theta's
}


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


# ---------------------------------------------------------------- value checks


def _check(cfg: Config, where: str) -> None:
    d = cfg.to_dict()
    for key, choices in CHOICES.items():
        section, name = key.split(".")
        if d[section][name] not in choices:
            raise InputError(f"{where}: {key} = {d[section][name]!r} is not one of: {', '.join(choices)}")
    for key, bound in CONFIG_BOUNDS.items():  # every number in its range (udcg.bounds)
        value = d
        for part in key.split("."):
            value = value[part]
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                check_value(key, item, bound, where)
    if cfg.contexts.k > cfg.pool.size:
        raise InputError(f"{where}: contexts.k = {cfg.contexts.k} is larger than pool.size = {cfg.pool.size} "
                         "(a context is drawn from the pool: lower contexts.k or raise pool.size)")
    for k in cfg.studies.k_values:
        if not 1 <= k <= cfg.pool.size:
            raise InputError(f"{where}: studies.k_values holds {k}: every k must be in 1..pool.size ({cfg.pool.size})")
    if not cfg.theta.C_grid:
        raise InputError(f"{where}: theta.C_grid is empty (list numbers > 0, e.g. [0.01, 0.1, 1])")
    _check_metrics(cfg, where)
    if cfg.reader.scoring == "top-logprobs":
        needs = exact_needs(cfg)
        if needs:
            raise InputError(f"{where}: {needs[0]}, which a reader read from the chat top list (reader.scoring: "
                             "top-logprobs) cannot give: drop it, or set reader.scoring: auto for a server that scores "
                             "text (/v1/completions: vLLM, SGLang, udcg serve)")


def exact_needs(cfg: Config) -> list[str]:
    """What the config asks of the reader that only exact scoring of given text gives (an API reader
    needs a server that scores text: ``/v1/completions`` with echo and logprobs)."""
    names = {n.split("@")[0] for n in cfg.metrics.names}
    return (["metrics.names holds ANSWER_PROB (log P(reference answer | passage))"] if "ANSWER_PROB" in names else []) + (
        ["annotation.estimator is sequence (P(whole NO-RESPONSE))"] if cfg.annotation.estimator == "sequence" else [])


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


def from_dict(raw: dict, where: str = "config", base_dir: Path | None = None) -> Config:
    """A checked Config from a (parsed YAML) dict; relative data paths resolved against base_dir."""
    from udcg.metrics.contexts import parse_metric

    cfg = build_dataclass(Config, raw, where)
    _check(cfg, where)
    metrics = dataclasses.replace(cfg.metrics, names=tuple(str(parse_metric(n)) for n in cfg.metrics.names),
                                  baseline=str(parse_metric(cfg.metrics.baseline)))
    return resolve_paths(dataclasses.replace(cfg, metrics=metrics), where, base_dir)


def resolve_paths(cfg: Config, where: str, base_dir: Path | None) -> Config:
    """The config with its data paths absolute (looked up beside the config file, then in the
    working directory; data set names stay names), ``output`` and ``theta.from_run`` absolute."""
    data = dataclasses.replace(cfg.data, data_dir=data_folder(cfg.data.data_dir, where, base_dir),
                               questions=dataset_ref(cfg.data.questions, "data.questions", where, base_dir))
    corpus = tuple(dataset_ref(c, "pool.corpus", where, base_dir) for c in cfg.pool.corpus)
    output = cfg.output or str(Path("runs") / cfg.name)
    from_run = cfg.theta.from_run
    theta = dataclasses.replace(cfg.theta, from_run=run_folder(from_run, where, "theta.from_run") if from_run else None)
    return dataclasses.replace(cfg, data=data, pool=dataclasses.replace(cfg.pool, corpus=corpus),
                               output=str(Path(output).expanduser().resolve()), theta=theta)


def portable(cfg: Config) -> Config:
    """The config as a run publishes it (``config.yaml``): ``output`` and ``theta.from_run``
    relative to the working directory when inside it; ``data.data_dir``, ``data.questions`` and
    ``pool.corpus`` also when beside it (``../data``). Data set names stay names."""
    data = dataclasses.replace(cfg.data, data_dir=portable_path(cfg.data.data_dir, beside=True),
                               questions=portable_path(cfg.data.questions, beside=True))
    pool = dataclasses.replace(cfg.pool, corpus=tuple(portable_path(c, beside=True) for c in cfg.pool.corpus))
    theta = dataclasses.replace(cfg.theta, from_run=portable_path(cfg.theta.from_run))
    return dataclasses.replace(cfg, output=portable_path(cfg.output), data=data, pool=pool, theta=theta)


def load_config(path: str | Path, overrides: list[str] | None = None, output: str | None = None) -> Config:
    """Read, override (``section.key=value`` strings), check and resolve a config file."""
    raw = read_yaml(path)
    for assignment in overrides or []:
        set_override(raw, assignment)
    if output is not None:
        raw["output"] = output
    return from_dict(raw, str(path), Path(path).resolve().parent)


def read_run_config(path: str | Path) -> Config:
    """A run's ``config.yaml``, checked but with its paths left as written (nothing is looked
    up: the report of a run needs no data set on this machine)."""
    cfg = build_dataclass(Config, read_yaml(path), str(path))
    _check(cfg, str(path))
    return cfg


def to_yaml(cfg: Config) -> str:
    import yaml

    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True, default_flow_style=False)


def demo_config_path() -> Path:
    """The demo config shipped inside the package."""
    from importlib import resources

    return Path(str(resources.files("udcg") / "data" / "demo.yaml"))
