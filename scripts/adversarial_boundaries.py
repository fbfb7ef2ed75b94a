"""An adversarial pass over three boundaries of udcg: credentials inside base URLs, backends that
third parties provide (``udcg.backends`` entry points), and data-set modules (``$UDCG_IRDS_MODULES``).

    python scripts/adversarial_boundaries.py [--only PREFIX] [--jobs 2] [-v]

Every case runs udcg in a fresh process (``python -m udcg ...`` or a few lines of the Python API),
with an API key in the environment (``OPENAI_API_KEY``) that the faulty code puts in its messages.
A case is clean when: no traceback; the exit code is the one expected (0 for a good input, 2 for
the user's setup, 1 for a backend that fails at run time); a failure is one line (``udcg CMD:
error: ...`` on the command line, one typed udcg error in Python); and no secret (the key, a URL's
password or a distinctive piece of either) is in anything printed. Servers: a closed port on
127.0.0.1 and ``scripts/instant_openai_server.py``. It prints one line per case and the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "udcg" / "data" / "nq-example"
RUN = EXAMPLE / "runs" / "bm25.trec"
KEY = "sk-Zq8vX2mN4pL7wTkq"
KEY_PIECES = (KEY, "Zq8vX2mN", "4pL7wT")
DEAD = "127.0.0.1:9"


@dataclass
class Case:
    name: str
    argv: list[str] | None = None  # a udcg command line, or
    code: str | None = None  # Python (prints "RAISED <class>: <message>" for a udcg error)
    expect: tuple[int, ...] = (2,)
    secrets: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path under the case's folder -> text
    raised: tuple[str, ...] = ("InputError",)  # for code: the udcg error classes expected


# ---------------------------------------------------------------- credentials in base URLs

PASSWORDS = {  # name -> password; "ok" ones are URLs a client can send, the others must be refused
    "space": ("Pa ss99Word77", False), "tab": ("Pa\tss99Word77", False), "dquote": ('Pa"ss99Word77', False),
    "squote": ("Pa'ss99Word77", True), "lt": ("Pa<ss99Word77", False), "gt": ("Pa>ss99Word77", False),
    "backslash": ("Pa\\ss99Word77", False), "question": ("Pa?ss99Word77", False), "hash": ("Pa#ss99Word77", False),
    "pct-bad": ("Pa%zzss99Word77", False), "non-ascii": ("Pä99Word77xy", False), "newline": ("Pa\nss99Word77", False),
    "pipe": ("Pa|ss99Word77", False), "brace": ("Pa{ss99Word77", False), "caret": ("Pa^ss99Word77", False),
    "backtick": ("Pa`ss99Word77", False), "bracket": ("Pa[ss99Word77", False), "slash": ("Pa/ss99Word77", False),
    "at": ("Pa@ss99Word77", True), "semicolon": ("Pa;ss99Word77", True), "bang": ("Pa!ss99Word77", True),
    "dollar-amp": ("Pa$s&s99Word77", True), "paren-star": ("Pa(s*s)99Word77", True), "plus-comma": ("Pa+s,s=99Word77", True),
    "tilde": ("Pa~ss99Word77", True), "pct-ok": ("Pa%20ss99Word77", True), "colon": ("Pa:ss99Word77", True),
    "short": ("a b", False), "quote-at-end": ("Pass99Word77'", True), "only-space": (" ", False),
}


def _pieces(password: str) -> tuple[str, ...]:
    """What must never be printed of a password: itself, and every 5 characters of it."""
    if len(password.strip()) < 6:
        return (password,) if password.strip() else ()
    return (password, *(password[i:i + 5] for i in range(len(password) - 4)))


def url_cases(qa: str, server: str) -> list[Case]:
    cases = []
    host = server.removeprefix("http://").removesuffix("/v1")
    for name, (password, sendable) in PASSWORDS.items():
        for client in ("aiohttp", "httpx"):
            target = host if sendable else DEAD
            url = f"http://user:{password}@{target}/v1"
            cases.append(Case(f"url/{name}/{client}", ["-v", "annotate", qa, "-o", "{out}/o.json", "--model", "m", "--api-base",
                                                      url, "--max-retries", "0", "--no-progress"],
                              expect=(0,) if sendable else (2,), secrets=_pieces(password),
                              env={"UDCG_HTTP_CLIENT": client}))
    for name in ("space", "dquote", "backslash", "question", "squote"):  # the other doors
        password, sendable = PASSWORDS[name]
        url = f"http://user:{password}@{DEAD}/v1"
        expect = (1, 2) if sendable else (2,)  # sent: the request fails (1), or validate refuses the config (2)
        cases.append(Case(f"url-env/{name}", ["annotate", qa, "-o", "{out}/o.json", "--model", "openai:m", "--max-retries",
                                              "0", "--no-progress"], expect=expect, secrets=_pieces(password),
                          env={"UDCG_OPENAI_BASE_URLS": url}))
        cases.append(Case(f"url-api/{name}", code=f"""
            import udcg
            udcg.annotate_runs({str(EXAMPLE)!r}, [{str(RUN)!r}], "{{out}}/u", udcg.ModelChoice("m", api_base={url!r},
                               max_retries=0), depth=1, show_progress=False)""", expect=(0,), secrets=_pieces(password),
                          raised=("BackendError",) if sendable else ("InputError",)))
        cases.append(Case(f"url-config/{name}", ["validate", "{out}/c.yaml", "-o", "{out}/v", "--no-progress"],
                          expect=expect, secrets=_pieces(password),
                          files={"c.yaml": f"data:\n  questions: popqa-sample\n  limit: 2\nreader:\n  model: m\n"
                                           f"  api_base: {json.dumps(url)}\n  max_retries: 0\n"}))
    cases.append(Case("url-user/space", ["annotate", qa, "-o", "{out}/o.json", "--model", "m", "--api-base",
                                         f"http://us er99Name:pw@{DEAD}/v1", "--no-progress"], secrets=("us er99Name",)))
    cases.append(Case("url-fleet/second", ["annotate", qa, "-o", "{out}/o.json", "--model", "m", "--api-base",
                                           f"{server},http://user:Pa ss99Word77@{DEAD}/v1", "--no-progress"],
                      secrets=_pieces("Pa ss99Word77")))
    return cases


# ---------------------------------------------------------------- third parties' backends

PLUGIN = '''
import math, os
from udcg.llm.base import BaseBackend, Capabilities
KEY = os.environ.get("OPENAI_API_KEY", "")
{on_import}

class Plug(BaseBackend):
    capabilities = {capabilities}

    def __init__(self, model{init_args}):
        {init}
        self.name = model

    def next_token_logprobs(self, chats, candidates):
        {first}
        return [{{c: -0.7 for c in candidates}} for _ in chats]

    def generate(self, chats, params=None):
        {generate}
        return [["NO-RESPONSE"] * params.n for _ in chats]

    def continuation_logprobs(self, requests):
        {continuation}
        return [[-0.1, -0.2] for _ in requests]
{extra}
'''

RAISE_KEY = 'raise RuntimeError(f"the service refused the key {KEY}")'
PLUGIN_CASES = {  # name -> (template fields, estimator, expected exit)
    "good": ({}, "first-token", 0),
    "good-sampling": ({}, "sampling", 0),
    "good-sequence": ({}, "sequence", 0),
    "import-raises-key": ({"on_import": RAISE_KEY}, "first-token", 2),
    "import-syntax-error": ({"on_import": "def broken(:"}, "first-token", 2),
    "import-value-error": ({"on_import": "int('x')"}, "first-token", 2),
    "import-sys-exit": ({"on_import": "import sys; sys.exit(3)"}, "first-token", 2),
    "import-missing-dependency": ({"on_import": "import r49b_no_such_dependency"}, "first-token", 2),
    "import-zero-division": ({"on_import": "1 / 0"}, "first-token", 2),
    "init-raises-key": ({"init": RAISE_KEY}, "first-token", 2),
    "init-takes-no-options-api": ({"init_args": "", "capabilities": "Capabilities(api=True)"}, "first-token", 2),
    "init-takes-no-options-local": ({"init_args": ""}, "first-token", 2),
    "init-key-error": ({"init": "options['nope']"}, "first-token", 2),
    "name-none": ({"init": "model = None"}, "first-token", 2),
    "name-int": ({"init": "model = 5"}, "first-token", 2),
    "capabilities-string": ({"capabilities": "'api'"}, "first-token", 2),
    "capabilities-none": ({"capabilities": "None"}, "first-token", 2),
    "logprob-string": ({"first": "return [{c: '-0.7' for c in candidates} for _ in chats]"}, "first-token", 1),
    "logprob-missing-candidate": ({"first": "return [{'other': -0.7} for _ in chats]"}, "first-token", 1),
    "logprob-nan": ({"first": "return [{c: math.nan for c in candidates} for _ in chats]"}, "first-token", 1),
    "logprob-positive": ({"first": "return [{c: 3.0 for c in candidates} for _ in chats]"}, "first-token", 1),
    "logprob-bool": ({"first": "return [{c: True for c in candidates} for _ in chats]"}, "first-token", 1),
    "logprob-none": ({"first": "return [{c: None for c in candidates} for _ in chats]"}, "first-token", 1),
    "logprob-row-list": ({"first": "return [[-0.7] for _ in chats]"}, "first-token", 1),
    "logprob-too-few": ({"first": "return [{c: -0.7 for c in candidates} for _ in chats][1:]"}, "first-token", 1),
    "logprob-too-many": ({"first": "return [{c: -0.7 for c in candidates} for _ in list(chats) * 2]"}, "first-token", 1),
    "logprob-returns-none": ({"first": "return None"}, "first-token", 1),
    "logprob-returns-dict": ({"first": "return {c: -0.7 for c in candidates}"}, "first-token", 1),
    "logprob-raises-key": ({"first": RAISE_KEY}, "first-token", 1),
    "logprob-api-logprobs-string": ({"first": "return [{c: '-0.7' for c in candidates} for _ in chats]"}, "api-logprobs", 1),
    "logprob-api-logprobs-raises": ({"first": RAISE_KEY}, "api-logprobs", 1),
    "generate-ints": ({"generate": "return [[1] * params.n for _ in chats]"}, "sampling", 1),
    "generate-none": ({"generate": "return None"}, "sampling", 1),
    "generate-answers-none": ({"generate": "return [None for _ in chats]"}, "sampling", 1),
    "generate-too-few-answers": ({"generate": "return [['NO-RESPONSE'] for _ in chats]"}, "sampling", 1),
    "generate-a-string": ({"generate": "return [('NO-RESPONSE' * params.n) for _ in chats]"}, "sampling", 1),
    "generate-raises-key": ({"generate": RAISE_KEY}, "sampling", 1),
    "generate-memory-error": ({"generate": "raise MemoryError()"}, "sampling", 1),
    "continuation-float": ({"continuation": "return [-0.3 for _ in requests]"}, "sequence", 1),
    "continuation-strings": ({"continuation": "return [['-0.3'] for _ in requests]"}, "sequence", 1),
    "continuation-positive": ({"continuation": "return [[0.5, 2.0] for _ in requests]"}, "sequence", 1),
    "continuation-raises-key": ({"continuation": RAISE_KEY}, "sequence", 1),
    "concurrency-zero": ({"extra": "    concurrent_requests = 0\n", "capabilities": "Capabilities(api=True)",
                          "init_args": ", **options"}, "first-token", 1),
}


def _plugin_files(tag: str, fields: dict[str, str]) -> dict[str, str]:
    values = {"on_import": "", "capabilities": "Capabilities(api=False)", "init_args": ", **options", "init": "pass",
              "first": "pass", "generate": "pass", "continuation": "pass", "extra": "", **fields}
    module = f"r49b_plug_{tag}"
    info = f"site/r49b_plug_{tag}-1.0.dist-info"
    return {f"site/{module}.py": PLUGIN.format(**values),
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: r49b-plug-{tag}\nVersion: 1.0\n",
            f"{info}/entry_points.txt": f"[udcg.backends]\nplug{tag} = {module}:Plug\n"}


def plugin_cases(qa: str) -> list[Case]:
    cases = []
    for i, (name, (fields, estimator, expect)) in enumerate(PLUGIN_CASES.items()):
        tag = f"p{i}"
        argv = ["annotate", qa, "-o", "{out}/o.json", "--model", f"plug{tag}:m", "--estimator", estimator, "--no-progress"]
        cases.append(Case(f"plugin/{name}", argv, expect=(expect,), secrets=KEY_PIECES, files=_plugin_files(tag, fields)))
    for name in ("import-raises-key", "init-raises-key", "logprob-string", "generate-ints", "logprob-raises-key"):
        fields, estimator, expect = PLUGIN_CASES[name]
        tag = f"a{len(cases)}"
        raised = ("InputError",) if expect == 2 else ("BackendError",)
        cases.append(Case(f"plugin-api/{name}", code=f"""
            import udcg
            udcg.annotate_runs({str(EXAMPLE)!r}, [{str(RUN)!r}], "{{out}}/u", "plug{tag}:m", depth=1, show_progress=False,
                               estimator={estimator!r})""", expect=(0,), raised=raised, secrets=KEY_PIECES,
                          files=_plugin_files(tag, fields)))
    for name in ("generate-ints", "generate-raises-key", "generate-none"):  # the judge and answer commands
        fields, _, _ = PLUGIN_CASES[name]
        tag = f"j{len(cases)}"
        cases.append(Case(f"plugin-judge/{name}", ["judge", "relevance", qa, "-o", "{out}/j.jsonl", "--judge",
                                                   f"plug{tag}:m", "--no-progress"], expect=(1,), secrets=KEY_PIECES,
                          files=_plugin_files(tag, fields)))
        tag = f"w{len(cases)}"
        cases.append(Case(f"plugin-answer/{name}", ["answer", "--corpus", str(EXAMPLE), "--run", str(RUN), "--k", "2",
                                                    "--limit", "2", "--model", f"plug{tag}:m", "-o", "{out}/a.jsonl",
                                                    "--no-progress"], expect=(1,), secrets=KEY_PIECES,
                          files=_plugin_files(tag, fields)))
    return cases


# ---------------------------------------------------------------- data-set modules

DATASET = '''
import math, os
import ir_datasets
KEY = os.environ.get("OPENAI_API_KEY", "")
FOLDER = {folder!r}
{on_import}
files = ir_datasets.create_dataset(docs_tsv=FOLDER + "/docs.tsv", queries_tsv=FOLDER + "/queries.tsv",
                                   qrels_trec=FOLDER + "/qrels.trec")
{dataset}
ir_datasets.registry.register("r49b/{tag}", dataset)
'''

WRAP = '''
class Wrapped:
    def __init__(self, inner):
        self.inner = inner
    def __getattr__(self, name):
        return getattr(self.inner, name)
{methods}
dataset = Wrapped(files)
'''

DATASET_CASES = {  # name -> (on_import, dataset code, expected exit for score / annotate)
    "good": ("", "dataset = files", 0),
    "import-raises-key": (RAISE_KEY, "dataset = files", 2),
    "import-syntax-error": ("def broken(:", "dataset = files", 2),
    "import-sys-exit": ("import sys; sys.exit(4)", "dataset = files", 2),
    "import-type-error": ("len(5)", "dataset = files", 2),
    "import-missing-dependency": ("import r49b_no_such_dependency", "dataset = files", 2),
    "registers-a-string": ("", "dataset = 'not a dataset'", 2),
    "registers-none": ("", "dataset = None", 2),
    "qrels-iter-raises-key": ("", WRAP.format(methods="    def qrels_iter(self):\n        " + RAISE_KEY), 2),
    "docs-iter-raises-key": ("", WRAP.format(methods="    def docs_store(self):\n        " + RAISE_KEY), 2),
    "queries-iter-raises-key": ("", WRAP.format(methods="    def queries_iter(self):\n        " + RAISE_KEY), 2),
    "qrel-relevance-string": ("", WRAP.format(methods="    def qrels_iter(self):\n        for q in self.inner.qrels_iter():"
                                                     "\n            yield q._replace(relevance='x')"), 2),
    "qrel-relevance-nan": ("", WRAP.format(methods="    def qrels_iter(self):\n        for q in self.inner.qrels_iter():"
                                                  "\n            yield q._replace(relevance=math.nan)"), 2),
    "qrel-doc-id-none": ("", WRAP.format(methods="    def qrels_iter(self):\n        for q in self.inner.qrels_iter():"
                                                "\n            yield q._replace(doc_id=None)"), 2),
    "qrel-query-id-int": ("", WRAP.format(methods="    def qrels_iter(self):\n        for q in self.inner.qrels_iter():"
                                                 "\n            yield q._replace(query_id=7)"), 0),
    "query-id-none": ("", WRAP.format(methods="    def queries_iter(self):\n        for q in self.inner.queries_iter():"
                                             "\n            yield q._replace(query_id=None)"), 2),
    "qrels-records-strings": ("", WRAP.format(methods="    def qrels_iter(self):\n        yield 'nq0 0 d 1'"), 2),
    "queries-records-ints": ("", WRAP.format(methods="    def queries_iter(self):\n        yield 5"), 2),
    "docstore-get-many-raises": ("", WRAP.format(methods="    def docs_store(self):\n        class S:\n"
                                                        "            def get_many(self, ids):\n                "
                                                        + RAISE_KEY + "\n        return S()"), 2),
    "docstore-returns-list": ("", WRAP.format(methods="    def docs_store(self):\n        class S:\n"
                                                     "            def get_many(self, ids):\n                return [1]\n"
                                                     "        return S()"), 2),
    "doc-text-none": ("", WRAP.format(methods="    def docs_store(self):\n        inner = self.inner.docs_store()\n"
                                             "        class S:\n            def get_many(self, ids):\n"
                                             "                return {k: v._replace(text=None) for k, v in "
                                             "inner.get_many(ids).items()}\n        return S()"), 2),
}


def _dataset_files(tag: str, on_import: str, dataset: str, folder: Path) -> dict[str, str]:
    return {f"site/r49b_irds_{tag}.py": DATASET.format(folder=str(folder), on_import=on_import, dataset=dataset, tag=tag)}


def _dataset_source(folder: Path) -> None:
    docs = [json.loads(line) for line in (EXAMPLE / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (EXAMPLE / "queries.jsonl").open()]
    (folder / "docs.tsv").write_text("".join(f"{d['_id']}\t{d['text']}\n" for d in docs))
    (folder / "queries.tsv").write_text("".join(f"{q['_id']}\t{q['text']}\n" for q in queries))
    rows = [line.split("\t") for line in (EXAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    (folder / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in rows))


def dataset_cases(server: str, folder: Path) -> list[Case]:
    cases = []
    for i, (name, (on_import, code, expect)) in enumerate(DATASET_CASES.items()):
        tag = f"d{i}"
        files = _dataset_files(tag, on_import, code, folder)
        env = {"UDCG_IRDS_MODULES": f"r49b_irds_{tag}"}
        score_expect = expect if name.startswith(("import", "registers", "qrel")) else 0  # score reads the qrels only
        cases.append(Case(f"dataset-score/{name}", ["score", "--run", str(RUN), "--qrels", f"irds:r49b/{tag}", "--metrics",
                                                    "nDCG@5", "-o", "{out}/s.tsv"], expect=(score_expect,), secrets=KEY_PIECES, env=env,
                          files=files))
        if not name.startswith("qrel"):  # annotate --run reads no qrels
            annotate_expect = 0 if name in ("good", "qrel-query-id-int") else expect
            cases.append(Case(f"dataset-annotate/{name}", ["annotate", "--corpus", f"irds:r49b/{tag}", "--run", str(RUN),
                                                           "--depth", "2", "--model", "m", "--api-base", server, "-o",
                                                           "{out}/u", "--no-progress"], expect=(annotate_expect,),
                              secrets=KEY_PIECES, env=env, files=files))
        if name.startswith(("import", "registers", "qrels-iter")):
            cases.append(Case(f"dataset-api/{name}", code=f"""
                import udcg
                udcg.evaluate({str(RUN)!r}, "irds:r49b/{tag}", metrics="nDCG@5")""", expect=(0,),
                              raised=("InputError",) if expect else (), secrets=KEY_PIECES, env=env, files=files))
    for name, modules in (("empty-entries", ",, ,"), ("dashed-name", "r49b-no-such"), ("relative-name", ".r49b_x"),
                          ("dotted-missing", "os.r49b_no_such"), ("a-path", "/tmp/r49b.py"), ("colon", "os:path")):
        cases.append(Case(f"dataset-modules/{name}", ["score", "--run", str(RUN), "--qrels", "irds:r49b/none", "--metrics",
                                                      "nDCG@5", "-o", "{out}/s.tsv"], expect=(2,), env={"UDCG_IRDS_MODULES": modules}))
    return cases


# ---------------------------------------------------------------- ModelChoice values

CHOICES = {  # ModelChoice keywords -> the udcg error expected from ModelChoice(...).spec().load() (None: none)
    "api_base='http://127.0.0.1:9/v1'": None, "api_base='http://127.0.0.1:9/v1', tokenizer='t', scoring='auto'": None,
    "api_base='http://127.0.0.1:9/v1', api_key_env=''": "InputError", "api_base=''": "BackendError",  # no server: local
    "api_base=' , '": "BackendError"}
CHOICES.update(dict.fromkeys(["api_base=123", "api_base=['http://127.0.0.1:9/v1']", "api_base=b'http://127.0.0.1:9/v1'", "tokenizer=5",
           "device=0", "dtype=16", "api_key_env=5", "scoring=5", "scoring='bogus'", "concurrency='8'", "concurrency=True",
           "rpm='x'", "timeout='1'", "max_retries=1.5", "batch_size='2'", "model=None", "model=5", "model=''",
           "api_base='ftp://user:Pa ss99Word77@127.0.0.1:9/v1'", "api_base='http://user:Pa ss99Word77@127.0.0.1:9/v1'",
           "api_base='http://127.0.0.1:9/v1', scoring='bogus'", "api_base='http://127.0.0.1:9/v1', concurrency=0",
           "api_base='http://127.0.0.1:9/v1', timeout=float('nan')", "api_base='http://127.0.0.1:9/v1,ftp://x/v1'",
           "api_base='http://127.0.0.1:0/v1'", "api_base='http://127.0.0.1:9/v1#frag'", "api_base='http://:9/v1'"],
                             "InputError"))


def choice_cases() -> list[Case]:
    cases = []
    for expr, raised in CHOICES.items():
        kw = expr if expr.startswith("model=") else f"model='m', {expr}"
        cases.append(Case(f"choice/{expr[:60]}", code=f"""
            import udcg
            choice = udcg.ModelChoice({kw})
            choice.spec().load()""", expect=(0,), secrets=_pieces("Pa ss99Word77"), raised=(raised,) if raised else ()))
    return cases


# ---------------------------------------------------------------- running

PY = """
import sys
from udcg.errors import UdcgError
try:
{body}
except UdcgError as e:
    print(f"RAISED {{type(e).__name__}}: {{e}}")
"""


def run(case: Case, tmp: Path, verbose: bool) -> tuple[bool, str]:
    folder = tmp / case.name.replace("/", "_")
    folder.mkdir(parents=True)
    for rel, text in case.files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder / "site"), str(ROOT)]), "HF_HUB_OFFLINE": "1",
           "OPENAI_API_KEY": KEY, **case.env}
    if case.argv is not None:
        cmd = [sys.executable, "-m", "udcg", *(a.replace("{out}", str(folder)) for a in case.argv)]
    else:
        body = textwrap.indent(textwrap.dedent(case.code).strip().replace("{out}", str(folder)), "    ")
        cmd = [sys.executable, "-c", PY.format(body=body)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=folder)
    except subprocess.TimeoutExpired:
        return False, "timed out after 180 s"
    shown = done.stdout + done.stderr
    problems = []
    if "Traceback" in shown:
        problems.append("traceback: " + shown.strip().splitlines()[-1][:160])
    leaked = [s for s in (*case.secrets, *KEY_PIECES) if s and s in shown]
    if leaked:
        problems.append(f"leaked {leaked[0]!r}")
    if case.argv is not None:
        if done.returncode not in case.expect:
            problems.append(f"exit {done.returncode}, expected {case.expect}")
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        command = next(a for a in case.argv if not a.startswith("-"))
        if done.returncode and not (lines and lines[-1].startswith(f"udcg {command}: error: ")):
            problems.append("no one-line error")
    else:
        raised = [line for line in done.stdout.splitlines() if line.startswith("RAISED ")]
        if case.raised:
            if not raised or not any(raised[0].startswith(f"RAISED {c}:") for c in case.raised):
                problems.append(f"expected {'/'.join(case.raised)}, got {(raised or [shown.strip()[-160:]])[0]!r}")
        elif raised or done.returncode:
            problems.append(f"expected success, got {(raised or [shown.strip()[-160:]])[0]!r}")
    detail = (done.stderr.strip().splitlines() or [""])[-1][:200] if verbose else ""
    return not problems, "; ".join(problems) or detail


def cases(server: str, tmp: Path) -> list[Case]:
    qa = tmp / "qa.jsonl"
    qa.write_text("".join(json.dumps({"example_id": f"q{i}", "question": f"Where is thing {i}?", "answers": ["Paris"],
                                      "passages": [{"doc_id": f"d{i}-{j}", "text": f"Passage {j} about thing {i}.",
                                                    "relevance": j % 2} for j in range(2)]}) + "\n" for i in range(2)))
    source = tmp / "irds-source"
    source.mkdir()
    _dataset_source(source)
    return [*url_cases(str(qa), server), *plugin_cases(str(qa)), *dataset_cases(server, source), *choice_cases()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run only the cases whose name starts with this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-v", "--verbose", action="store_true", help="print each case's last line")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    from instant_openai_server import Process

    with tempfile.TemporaryDirectory(prefix="udcg-adversarial-") as tmp, Process(0.0) as server:
        todo = [c for c in cases(server.url, Path(tmp)) if c.name.startswith(args.only)]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda c: (c, *run(c, Path(tmp), args.verbose)), todo))
    for case, clean, why in results:
        print(f"{'clean' if clean else 'NOT CLEAN'}  {case.name}" + (f"  ({why})" if why else ""))
    bad = [c.name for c, clean, _ in results if not clean]
    groups: dict[str, list[bool]] = {}
    for case, clean, _ in results:
        groups.setdefault(case.name.split("/")[0], []).append(clean)
    for group, marks in groups.items():
        print(f"{group}: {sum(marks)} of {len(marks)} clean")
    print(f"total: {len(results) - len(bad)} of {len(results)} clean, {len(bad)} not clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
