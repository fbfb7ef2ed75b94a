"""Turn a model choice (``ModelChoice``: a model string and its options) into a ``ModelSpec``,
and a spec into a backend (``ModelSpec.load``).

- an offline alias (``smollm2-135m``, ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``), a local
  transformers model folder or a hub id: a local model, ``HFBackend`` (transformers, in-process);
- ``SCHEME:rest``: that scheme's factory, called with ``rest``. ``openai`` is built in (the
  OpenAI-compatible client, an API scheme); more come from the ``udcg.backends`` entry points of
  installed packages or ``register_scheme`` (``udcg.llm.schemes``), each an API or a local scheme;
- any other name with ``base_urls``: ``openai:NAME``, the model a server behind that URL serves.

``resolve`` is the one place that decides what a model string is: local or API, the name its
results record, and which options its backend takes. Every command, validate and the API go
through it, so one string means one model everywhere.

Schemes are imported lazily (``udcg.llm.schemes.SCHEMES``: ``module:object`` entries imported
when a backend of that scheme is loaded). The dependency runs one way: backend modules never
import the registry. Nothing heavy is imported until a backend is loaded.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from udcg.bounds import MODEL as MODEL_BOUNDS, check_value, kind, short
from udcg.errors import BackendError, InputError
from udcg.llm.base import BaseBackend
from udcg.llm.schemes import SCHEMES, register_scheme
from udcg.progress import note

__all__ = ["API_ONLY", "LOCAL_ONLY", "SCHEMES", "ModelChoice", "ModelSpec", "api_options", "describe", "load_backend",
           "register_scheme", "resolve", "scheme_lines", "where_it_goes"]

# What a kind of model needs beyond the core install (by scheme; "local": a transformers model in-process).
NEEDS = {"local": ("torch", "transformers"), "openai": ("openai",)}
# The extra that brings them (udcg is installed from its checkout: there is no udcg on the package index).
INSTALL = {"local": "pip install -e '.[llm]' in the udcg checkout",
           "openai": "pip install -e '.[api]' in the udcg checkout (openai and aiohttp, no torch)"}
INSTALL_LLM = INSTALL["local"]


def _importable(module: str) -> bool:
    """Whether ``module`` can be found, without importing it (torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # an import hook refusing it, or a half-removed package
        return False

# Options of a local model that an API model refuses: option -> why (the message names it as a flag).
LOCAL_ONLY = {"batch_size": "it has no forward pass to batch (set the cached unit of work with --chunk-size)",
              "device": "the server chooses its device (leave out --device)",
              "dtype": "the server chooses its dtype (leave out --dtype)"}
# Options of an API model, left out for a local one (the commands give them defaults).
API_ONLY = ("base_urls", "api_key_env", "max_concurrency", "requests_per_minute", "timeout", "max_retries", "tokenizer",
            "scoring")


def api_options(api_base: str | None = None, api_key_env: str | None = None, concurrency: int | None = None,
                rpm: float | None = None, timeout: float | None = None, max_retries: int | None = None,
                tokenizer: str | None = None, scoring: str | None = None) -> dict[str, Any]:
    """The backend options of an API model from the settings every command and a validate config
    share (``--api-base`` / ``reader.api_base`` ...: a comma-separated list of base URLs, the key's
    environment variable, requests in flight, requests per minute, seconds per response, retries,
    the served model's tokenizer and the scoring route). None: not given (the backend's default);
    ``resolve`` leaves them out for a local model, and a name with ``api_base`` becomes ``openai:NAME``."""
    from udcg.llm.openai_target import split_urls

    urls = split_urls(api_base) if api_base else None
    return {"base_urls": urls or None, "api_key_env": api_key_env, "max_concurrency": concurrency,
            "requests_per_minute": rpm, "timeout": timeout, "max_retries": max_retries, "tokenizer": tokenizer,
            "scoring": scoring}


_TEXT = ("device", "dtype", "api_base", "api_key_env", "tokenizer", "scoring")  # ModelChoice's string options


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model as the user chose it: its name and its options, None where not given (the backend's
    default). One value from the command line (``udcg.commands._parser.add_model_options`` and
    ``model_choice``), a validate config's ``reader`` and the Python API alike; ``spec()`` turns it
    into the ``ModelSpec`` that loads. ``api_base``: one base URL or several, comma-separated."""

    model: str
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None
    rpm: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    tokenizer: str | None = None
    scoring: str | None = None

    def __post_init__(self) -> None:
        """Every text a string (``model`` a non-empty one) and every number in its range
        (``udcg.bounds.MODEL``, the bounds the command line and the API door check), so a choice built
        in Python refuses what ``--concurrency 0`` refuses, here rather than when the model is used."""
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(f"model = {self.model!r}: must be a non-empty string (an offline alias, a model folder, "
                             "a hub id or SCHEME:MODEL)")
        for name in _TEXT:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                from udcg.redact import redact, url_secrets

                several = " (several base URLs: one string, separated by commas)" if name == "api_base" else ""
                kind = type(value).__name__
                secrets = [s for u in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(u, str)
                           for s in url_secrets(u)]
                raise InputError(redact(f"{name} = {value!r}: must be a string or None, not "
                                        f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}{several}", secrets))
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise InputError("api_key_env = '': must name the environment variable that holds the API key (or be None: "
                             "OPENAI_API_KEY)")
        from udcg.llm.openai_target import SCORING

        if self.scoring is not None and self.scoring not in SCORING:
            raise InputError(f"scoring = {self.scoring!r}: choose one of {', '.join(SCORING)}")
        for name, bound in MODEL_BOUNDS.items():
            value = getattr(self, name, None)
            if value is not None:
                check_value(name, value, bound)

    @classmethod
    def of(cls, model: str | ModelChoice, api: Mapping[str, Any] | None = None, **given: Any) -> ModelChoice:
        """``model`` (a name, or a choice) with the options ``given`` and those of ``api`` (the Python
        API's dict of more of them: ``{"api_base": ..., "timeout": ...}``) that are not None. An
        ``api`` that is no dict, a key it does not have or one given twice is one ``InputError`` line."""
        known = [f.name for f in fields(cls) if f.name != "model"]
        if api is not None:
            if not isinstance(api, Mapping):
                raise InputError(f"api: give a dict of the model's options ({{'api_base': ..., 'timeout': ...}}) or None, "
                                 f"got {kind(api)} ({short(api)})")
            for key, value in api.items():
                if key not in known:
                    raise InputError(f"api: unknown option {short(key)} (a model's options: {', '.join(known)})")
                if value is not None and given.get(key) is not None:
                    raise InputError(f"api: {key!r} is given twice (as the keyword {key} and in api); give it once")
            given = {**given, **{k: v for k, v in api.items() if v is not None}}
        for key in given:
            if key not in known:
                raise InputError(f"ModelChoice.of(): unknown option {short(key)} (a model's options: {', '.join(known)})")
        given = {k: v for k, v in given.items() if v is not None}
        return replace(model, **given) if isinstance(model, ModelChoice) else cls(model, **given)

    @classmethod
    def split(cls, model: str | ModelChoice, keywords: Mapping[str, Any]) -> tuple[ModelChoice, dict[str, Any]]:
        """``model`` with those of ``keywords`` that are a choice's options or ``api`` (``of``), and the
        others (a flow's own: ``udcg.annotate_runs``' keywords are both)."""
        names = {f.name for f in fields(cls)} - {"model"} | {"api"}
        return (cls.of(model, **{k: v for k, v in keywords.items() if k in names}),
                {k: v for k, v in keywords.items() if k not in names})

    def options(self) -> dict[str, Any]:
        """The backend options it gives (``resolve``'s keywords; None: not given)."""
        return {"device": self.device, "dtype": self.dtype, "batch_size": self.batch_size,
                **api_options(self.api_base, self.api_key_env, self.concurrency, self.rpm, self.timeout,
                              self.max_retries, self.tokenizer, self.scoring)}

    def spec(self, defaults: Mapping[str, Any] | None = None) -> ModelSpec:
        """Resolved once: ``resolve(self.model, **self.options(), defaults=defaults)``."""
        return resolve(self.model, defaults=defaults, **self.options())


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model string resolved once (``resolve``): ``load`` builds its backend without resolving again."""

    model: str  # what is loaded: an alias, a folder, a hub id, or SCHEME:rest
    scheme: str | None  # None: a transformers model loaded in-process
    api: bool  # served through an API: no forward pass, device or dtype of ours; requests run in parallel
    name: str  # the name every result, cache and output records (known without loading the model)
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)  # for the backend
    server: str = field(default="", compare=False)  # what set an openai: model's base_urls (``settled``); "": not yet

    def settled(self) -> ModelSpec:
        """This spec with an ``openai:`` model's server settled, once (``openai_target.target``: the
        given URLs, else the environment's, else OpenAI's API, refused without a key), so that the line
        naming it (``where_it_goes``) and the backend (``load``) read one answer; any other spec as it is."""
        if self.scheme != "openai" or self.server:
            return self
        from udcg.llm.openai_target import target

        urls, source = target(self.options.get("base_urls"), self.options.get("api_key_env") or "OPENAI_API_KEY")
        return replace(self, options=MappingProxyType({**self.options, "base_urls": urls}), server=source)

    def load(self) -> BaseBackend:
        """The backend (``load_backend(self)``: built from this spec, not resolved again)."""
        return load_backend(self)

    def check_installed(self) -> None:
        """An InputError, in one line before any work, when a package this model needs is missing
        (a core install: ``pip install udcg`` without the ``llm`` extra)."""
        needs = NEEDS.get("local" if self.scheme is None else self.scheme, ())
        missing = [module for module in needs if not _importable(module)]
        if missing:
            kind = "a local model" if self.scheme is None else f"an {self.scheme}: model" if self.api else "this model"
            raise InputError(f"model {self.model!r} is {kind} and needs {' and '.join(missing)}, which "
                             f"{'is' if len(missing) == 1 else 'are'} not installed: "
                             f"{INSTALL.get('local' if self.scheme is None else self.scheme, INSTALL_LLM)}")


def _scheme(name: str, served: bool = False) -> tuple[str, str] | None:
    """(scheme, rest) of ``SCHEME:rest``; None for a name without a scheme, or with ``served`` (a
    name given with base_urls, such as ``llama3:8b``) one whose head is no known scheme."""
    head, sep, rest = name.partition(":")
    if not sep or not head.isidentifier() or len(head) == 1:  # "C:\\models" is a Windows path, not a scheme
        return None
    if SCHEMES.get(head) is None:
        if served:
            return None
        raise InputError(f"model {name!r}: unknown backend scheme {head!r} (known: {', '.join(SCHEMES.names()) or 'none'}; "
                         f"or give an offline alias, a model folder or a hub id)")
    return head, rest


def resolve(model: str, *, defaults: Mapping[str, Any] | None = None, **options: Any) -> ModelSpec:
    """``model`` resolved once: its scheme, local or API, the name its results record, and the
    backend options that apply to it.

    The recorded name: the alias, the folder's name, the hub id, or the model after ``scheme:``
    (``openai:gpt-4o-mini`` records ``gpt-4o-mini``, as the loaded backend does); a ``name`` option
    overrides it. ``options`` (None = not given): an API model refuses a given ``LOCAL_ONLY`` one
    (``InputError`` naming the flag); a local model leaves out the ``API_ONLY`` ones, and a local
    scheme refuses ``base_urls``; ``base_urls`` makes a name without a scheme ``openai:NAME``.
    ``defaults``: options used where not given, kept only when they apply to the model's kind
    (never refused: a config's device for a judge that may be an API model)."""
    if not isinstance(model, str) or not model.strip():
        raise InputError(f"model name must be a non-empty string, got {model!r}")
    given = {k: v for k, v in options.items() if v is not None}
    target = _scheme(model, served="base_urls" in given)
    if target is None and "base_urls" in given:
        target = ("openai", model)  # the name a server behind base_urls serves
    if target is None:
        path = Path(model).expanduser()
        scheme, rest, api, name = None, model, False, path.name if path.is_dir() else model
    else:
        (scheme, rest), api = target, SCHEMES.is_api(target[0], model)
        if not rest:
            raise InputError(f"model {model!r}: give the served model name after the colon (e.g. {scheme}:MODEL)")
        name = rest
    for key, value in given.items():
        if api and key in LOCAL_ONLY:
            raise InputError(f"--{key.replace('_', '-')} {value}: {model!r} is an API model, {LOCAL_ONLY[key]}")
        if not api and scheme is not None and key == "base_urls":
            raise InputError(f"--api-base: {model!r} is a local model (scheme {scheme!r} is registered as local; "
                             "leave out --api-base)")
    wrong = LOCAL_ONLY if api else API_ONLY
    kept = {k: v for k, v in {**(defaults or {}), **given}.items() if v is not None and k not in wrong}
    return ModelSpec(model if scheme is None else f"{scheme}:{rest}", scheme, api, kept.get("name") or name,
                     MappingProxyType(kept))


def where_it_goes(spec: ModelSpec) -> str:
    """One line naming where a model runs: in this process, or the server(s) its requests go to and
    what set them (an ``openai:`` model without a server refuses without a key: ``InputError``; a
    flow settles the spec first, ``ModelSpec.settled``, and loads that one)."""
    if not spec.api:
        return f"reader {spec.name}: local model ({spec.model})"
    if spec.scheme != "openai":
        return f"reader {spec.name}: {spec.scheme} API"
    from udcg.llm.openai_wire import check_url
    from udcg.redact import mask_url, redact, url_secrets

    spec = spec.settled()  # a flow that settled it already (and loads that spec) asks the environment once
    urls, source = spec.options["base_urls"], spec.server
    for url in urls:  # a URL that cannot work fails here, in one line, as the backend would
        check_url(url)
    line = f"reader {spec.name}: requests go to {', '.join(map(mask_url, urls))}" + ("" if source == "given" else f" ({source})")
    return redact(line, [s for u in urls for s in url_secrets(u)])


def load_backend(model: str | ModelSpec, **kw: Any) -> BaseBackend:
    """The backend of a spec (``ModelSpec.load``), or of a model name resolved once with ``kw``
    (``resolve(model, **kw)``): the scheme's factory called with the model after ``scheme:`` and the
    options, or ``HFBackend`` for a local model (device, dtype, batch_size, quantize, share_prefix, name)."""
    spec = model if isinstance(model, ModelSpec) and not kw else resolve(model, **kw)
    spec.check_installed()
    if spec.scheme is None:
        from udcg.llm.hf import HFBackend

        note(f"loading {spec.name} ...")
        t0 = time.perf_counter()
        backend = HFBackend(spec.model, **spec.options)
        note(f"{spec.name} loaded in {time.perf_counter() - t0:.1f} s on {backend.device}")
        return backend
    factory, entry = SCHEMES.factory(spec.scheme, spec.model), SCHEMES.get(spec.scheme)
    if entry is not None and entry.origin != "built in":  # a third party's: built and answering under checks
        from udcg.llm.plugin import build

        return build(factory, spec.model.partition(":")[2], spec.options, spec.scheme, entry.origin)
    backend = factory(spec.model.partition(":")[2], **spec.options)
    if not isinstance(backend, BaseBackend):
        raise BackendError(f"model {spec.model!r}: the {spec.scheme!r} backend made a {type(backend).__name__}, "
                           "not a udcg.llm.base.BaseBackend (derive the backend class from it)")
    return backend


def scheme_lines() -> list[str]:
    """One line per backend scheme, the ``udcg.backends`` entry points' included: API or local, and
    where it comes from (an entry point not imported yet says neither)."""
    lines = []
    for name in SCHEMES.names():
        entry = SCHEMES.get(name)
        kind = "an API" if entry.api else "a local" if entry.api is False else "a"
        lines.append(f"{name}:MODEL ({kind} backend, {entry.origin})")
    return lines


def describe() -> list[str]:
    """Human-readable list of what ``load_backend`` accepts."""
    from udcg.llm import offline

    lines = [f"{alias}: offline ({m.source})" for alias, m in offline.ALIASES.items()]
    lines.append("a local transformers model folder, or a hub id like 'org/name' (needs a model hub)")
    return lines + scheme_lines()
