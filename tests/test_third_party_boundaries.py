"""Round five (issue 49, items 5, 6 and the tracebacks): three boundaries where what comes in is
someone else's. Credentials in a base URL, whatever characters they hold, are never printed (the
reader's "requests go to" line, the errors, both HTTP clients); a backend a third party provides (an
entry point of ``udcg.backends``, or ``register_scheme``) is checked as a server's reply is checked:
what its import, constructor and calls raise, and what its calls return; a data-set module named in
``$UDCG_IRDS_MODULES`` and the datasets it registers likewise. Every fault is one line naming the
plugin or module, the field and the fix, with the key masked. Servers: a closed port on 127.0.0.1.
The wider pass is ``scripts/adversarial_boundaries.py``."""

from __future__ import annotations

import math

import pytest

import udcg
from tests.test_api_client_faults import one_error_line, qa_file
from udcg.cli import main
from udcg.errors import BackendError, InputError
from udcg.io.sources import example_path
from udcg.llm import registry
from udcg.llm.base import BaseBackend, Capabilities

KEY = "sk-Zq8vX2mN4pL7wTkq"
CLIENTS = ["aiohttp", "httpx"]
EX = example_path()
RUN = EX / "runs" / "bm25.trec"


def _annotate(tmp_path, *extra: str) -> list[str]:
    return ["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / "o.json"), "--no-progress", *extra]


def _clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, text
        for i in range(len(secret) - 4):  # nor any 5 characters of it
            assert secret[i:i + 5] not in text, (secret[i:i + 5], text)


# ---------------------------------------------------------------- 5. credentials in a base URL

UNSENDABLE = {"space": "Pa ss99Word77", "tab": "Pa\tss99Word77", "dquote": 'Pa"ss99Word77', "lt": "Pa<ss99Word77",
              "gt": "Pa>ss99Word77", "backslash": "Pa\\ss99Word77", "question": "Pa?ss99Word77", "hash": "Pa#ss99Word77",
              "non-ascii": "Pä99Word77xy", "newline": "Pa\nss99Word77"}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", sorted(UNSENDABLE))
def test_a_password_no_url_can_carry_is_refused_without_quoting_it(case, client, tmp_path, capsys, monkeypatch):
    """A space, tab, '"', '<' or '>' was printed whole in the "requests go to" line and the error; a
    backslash (aiohttp) or a tab (httpx) gave a traceback; '?' and '#' leaked the password's start
    in a port error."""
    monkeypatch.setenv("UDCG_HTTP_CLIENT", client)
    password = UNSENDABLE[case]
    argv = _annotate(tmp_path, "--model", "m", "--api-base", f"http://user:{password}@127.0.0.1:9/v1", "--max-retries", "0")
    assert main(argv) == 2
    err = capsys.readouterr().err
    line = one_error_line(err, "annotate")
    _clean(err, password)
    assert line.startswith("udcg annotate: error: base URL 'http://***@127.0.0.1:9/v1'") and "percent-encoded" in line, line
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_quote_in_the_password_is_masked_in_the_reader_line_and_the_error(client, tmp_path, capsys, monkeypatch):
    """A "'" (a sub-delimiter a URL may hold) was printed in both lines: the mask stopped at it."""
    monkeypatch.setenv("UDCG_HTTP_CLIENT", client)
    password = "Pa'ss99Word77"
    assert main(_annotate(tmp_path, "--model", "m", "--api-base", f"http://user:{password}@127.0.0.1:9/v1",
                          "--max-retries", "0")) == 1
    err = capsys.readouterr().err
    _clean(err, password)
    assert "requests go to http://***@127.0.0.1:9/v1" in err and "POST http://***@127.0.0.1:9/v1/chat" in err, err


def test_a_comma_in_the_password_keeps_its_url_whole(tmp_path, capsys):
    """``--api-base`` was split at every comma: 'http://user:Pa+s' became a URL of its own, and its
    port error printed the password's start."""
    from udcg.llm.openai_target import split_urls

    assert split_urls("http://u:Pa+s,s=9@h/v1, https://b/v1,") == ["http://u:Pa+s,s=9@h/v1", "https://b/v1"]
    password = "Pa+s,s=99Word77"
    assert main(_annotate(tmp_path, "--model", "m", "--api-base", f"http://user:{password}@127.0.0.1:9/v1",
                          "--max-retries", "0")) == 1
    err = capsys.readouterr().err
    _clean(err, password)
    assert "requests go to http://***@127.0.0.1:9/v1" in err, err


def test_the_credentials_of_one_url_are_read_whatever_they_hold():
    from udcg.redact import mask_url, url_secrets, userinfo

    for password in [*UNSENDABLE.values(), "Pa'ss99Word77", "Pa@Word12345", "Pa/ss99Word77"]:
        url = f"http://user:{password}@127.0.0.1:9/v1?key=abcdefgh123"
        assert userinfo(url) == f"user:{password}"
        assert password in url_secrets(url) and "abcdefgh123" in url_secrets(url)
        assert mask_url(url) == "http://***@127.0.0.1:9/v1?key=***"
    assert userinfo("http://host:8000/v1") is None and mask_url("http://host:8000/v1") == "http://host:8000/v1"
    assert url_secrets("http://user:Pass99Word77@h/v1") == ["Pass99Word77"]  # the user name is no secret
    assert url_secrets("http://TOKEN123@h/v1") == ["TOKEN123"]


@pytest.mark.parametrize("url, fix", [("http://user:Pa ss99Word77@127.0.0.1:9/v1", "percent-encoded"),
                                      ("ftp://user:Pa ss99Word77@127.0.0.1:9/v1", "http:// or https://")])
def test_the_python_api_refuses_them_alike(url, fix, tmp_path):
    with pytest.raises(InputError, match=fix) as caught:
        udcg.annotate_runs(str(EX), [str(RUN)], str(tmp_path / "u"), udcg.ModelChoice("m", api_base=url), depth=1,
                           show_progress=False)
    _clean(str(caught.value), "Pa ss99Word77")


# ---------------------------------------------------------------- 6 and the tracebacks: backends of third parties


def _entry_point_plugin(root, name: str, source: str):
    """A package on the path that declares ``name`` in the ``udcg.backends`` group, as pip installs one."""
    root.mkdir(exist_ok=True)
    (root / f"{name}_backend.py").write_text(source)
    info = root / f"{name}_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[udcg.backends]\n{name} = {name}_backend:Plug\n")


IMPORT_FAULTS = {"r5raises": 'import os\nraise RuntimeError("the service refused the key " + os.environ["OPENAI_API_KEY"])\n',
                 "r5syntax": "def broken(:\n", "r5exits": "import sys\nsys.exit(3)\n"}


@pytest.mark.parametrize("name", sorted(IMPORT_FAULTS))
def test_a_plugin_that_raises_on_import_is_one_line_with_the_key_masked(name, tmp_path, capsys, monkeypatch):
    """A RuntimeError quoting the key escaped as a raw traceback, the key unmasked; a SyntaxError
    too; a plugin calling sys.exit ended udcg with no word."""
    _entry_point_plugin(tmp_path / "site", name, IMPORT_FAULTS[name])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with registry.SCHEMES.scoped():
        assert main(_annotate(tmp_path, "--model", f"{name}:m")) == 2
        err = capsys.readouterr().err
        line = one_error_line(err, "annotate")
        _clean(err, KEY)
        assert f"the '{name}' backend (entry point of {name}-pkg: {name}_backend:Plug) raised" in line, line
        assert "on import" in line and "fix, update or uninstall it" in line, line
        with pytest.raises(InputError, match="on import") as caught:  # the Python API: the same error, masked
            udcg.annotate_runs(str(EX), [str(RUN)], str(tmp_path / "u"), f"{name}:m", depth=1, show_progress=False)
        _clean(str(caught.value), KEY)


class Plug(BaseBackend):
    """A well-behaved plugin whose calls a test replaces."""

    capabilities = Capabilities(api=False)

    def __init__(self, model: str, **options: object) -> None:
        self.name = model

    def next_token_logprobs(self, chats, candidates):
        return [{c: -0.7 for c in candidates} for _ in chats]

    def generate(self, chats, params=None):
        return [["NO-RESPONSE"] * params.n for _ in chats]

    def continuation_logprobs(self, requests):
        return [[-0.1, -0.2] for _ in requests]


def _key_error(*args):
    raise RuntimeError(f"the service refused the key {KEY}")


BROKEN = {  # name -> (method replaced, what it does, estimator, the error's field)
    "logprob-string": ("next_token_logprobs", lambda self, chats, cands: [{c: "-0.7" for c in cands} for _ in chats],
                       "first-token", "result[0]['NO-RESPONSE'] is a str '-0.7', not a log-probability"),
    "missing-candidate": ("next_token_logprobs", lambda self, chats, cands: [{"other": -0.7} for _ in chats],
                          "first-token", "result[0] has no 'NO-RESPONSE'"),
    "logprob-nan": ("next_token_logprobs", lambda self, chats, cands: [{c: math.nan for c in cands} for _ in chats],
                    "first-token", "result[0]['NO-RESPONSE'] is nan"),
    "too-few": ("next_token_logprobs", lambda self, chats, cands: [{c: -0.7 for c in cands}], "first-token",
                "1 results for 4 requests"),
    "logprob-raises-key": ("next_token_logprobs", lambda self, chats, cands: _key_error(), "first-token",
                           "next_token_logprobs raised RuntimeError: the service refused the key ***"),
    "generate-ints": ("generate", lambda self, chats, params: [[1] * params.n for _ in chats], "sampling",
                      "generate: result[0][0] is 1, not an answer string"),
    "generate-none": ("generate", lambda self, chats, params: None, "sampling",
                      "generate: the result is a NoneType None, not a list of 4 results"),
    "continuation-strings": ("continuation_logprobs", lambda self, reqs: [["-0.3"] for _ in reqs], "sequence",
                             "continuation_logprobs: result[0][0] is a str '-0.3'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_what_a_plugin_returns_is_checked_like_a_servers_reply(case, tmp_path, capsys, monkeypatch):
    """A string log-probability, a missing candidate, ``generate`` giving ints or None: TypeError /
    KeyError tracebacks (a NaN: an error naming no plugin); a plugin raising with the key: a raw
    traceback, the key in it."""
    method, broken, estimator, field = BROKEN[case]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cls = type("Broken", (Plug,), {method: broken})
    with registry.SCHEMES.scoped():
        registry.register_scheme("r5plug", cls, api=False)
        assert main(_annotate(tmp_path, "--model", "r5plug:m", "--estimator", estimator)) == 1
    err = capsys.readouterr().err
    line = one_error_line(err, "annotate")
    _clean(err, KEY)
    assert "the 'r5plug' backend (register_scheme)" in line and field in line, line
    assert not (tmp_path / "o.json").exists()


def test_a_plugin_that_keeps_the_contract_is_used_as_it_is(tmp_path, capsys):
    with registry.SCHEMES.scoped():
        registry.register_scheme("r5plug", Plug, api=False)
        backend = registry.load_backend("r5plug:m")
        assert backend.name == "m" and backend.capabilities == Plug.capabilities
        assert main(_annotate(tmp_path, "--model", "r5plug:m")) == 0, capsys.readouterr().err
    assert '"no_res_prob": 0.4965' in (tmp_path / "o.json").read_text()  # exp(-0.7), as the plugin says


@pytest.mark.parametrize("api", [True, False])
def test_a_plugin_whose_constructor_takes_no_options_is_one_line(api, tmp_path, capsys):
    """``api=True`` with ``__init__(self, model)`` was a TypeError traceback (udcg passes the API options)."""
    class NoOptions(Plug):
        capabilities = Capabilities(api=api)

        def __init__(self, model: str) -> None:
            self.name = model

    with registry.SCHEMES.scoped():
        registry.register_scheme("r5plug", NoOptions, api=api)
        assert main(_annotate(tmp_path, "--model", "r5plug:m")) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "cannot be built with the options udcg passes" in line and "def __init__(self, model, **options)" in line, line


def test_a_plugin_raising_inside_a_call_of_the_api_is_a_backend_error_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with registry.SCHEMES.scoped():
        registry.register_scheme("r5plug", type("Broken", (Plug,), {"next_token_logprobs": lambda *a: _key_error()}),
                                 api=False)
        with pytest.raises(BackendError, match="the service refused the key") as caught:
            udcg.annotate_runs(str(EX), [str(RUN)], str(tmp_path / "u"), "r5plug:m", depth=1, show_progress=False)
    _clean(str(caught.value), KEY)


# ---------------------------------------------------------------- the tracebacks: ModelChoice


@pytest.mark.parametrize("kw, said", [({"api_base": 123}, "api_base = 123: must be a string or None, not an int"),
                                      ({"tokenizer": 5}, "tokenizer = 5: must be a string or None"),
                                      ({"api_base": ["http://127.0.0.1:9/v1"]}, "several base URLs: one string"),
                                      ({"scoring": "bogus"}, "scoring = 'bogus': choose one of auto, completions"),
                                      ({"api_key_env": ""}, "must name the environment variable")])
def test_a_model_choice_of_the_wrong_type_is_refused_where_it_is_made(kw, said):
    """``ModelChoice(api_base=123)`` was an AttributeError when used, ``tokenizer=5`` a TypeError
    only when the model loaded."""
    with pytest.raises(InputError, match=said.replace("(", r"\(")):
        udcg.ModelChoice("m", **kw)
    with pytest.raises(InputError, match="model = None: must be a non-empty string"):
        udcg.ModelChoice(None)


# ---------------------------------------------------------------- 6 and the tracebacks: data-set modules

DATASET = '''
import os
import ir_datasets
files = ir_datasets.create_dataset(docs_tsv={folder!r} + "/docs.tsv", queries_tsv={folder!r} + "/queries.tsv",
                                   qrels_trec={folder!r} + "/qrels.trec")
{body}
'''
WRAPPED = '''
class Wrapped:
    def __init__(self, inner):
        self.inner = inner
    def __getattr__(self, name):
        return getattr(self.inner, name)
    def qrels_iter(self):
        for q in self.inner.qrels_iter():
            yield q._replace({change})
ir_datasets.registry.register("r5/{name}", Wrapped(files))
'''
MODULE_FAULTS = {
    "r5irds_raises": ('raise RuntimeError("the service refused the key " + os.environ["OPENAI_API_KEY"])',
                      "the module 'r5irds_raises' raised RuntimeError on import: the service refused the key ***"),
    "r5irds_syntax": ("def broken(:", "the module 'r5irds_syntax' raised SyntaxError on import"),
    "r5irds_relevance": (WRAPPED.format(change="relevance='x'", name="r5irds_relevance"),
                         "has relevance 'x', not a finite number"),
    "r5irds_docid": (WRAPPED.format(change="doc_id=None", name="r5irds_docid"), "a qrel's doc_id is None"),
}


@pytest.mark.parametrize("module", sorted(MODULE_FAULTS))
def test_a_dataset_module_that_raises_or_registers_bad_records_is_one_line(module, tmp_path, capsys, monkeypatch):
    """A module raising (with the key in its message) or with a SyntaxError escaped as a traceback,
    and the Python API let a RuntimeError through; a relevance 'x' was a ValueError traceback, a
    doc_id None read as the document 'None'."""
    pytest.importorskip("ir_datasets")
    body, said = MODULE_FAULTS[module]
    folder = tmp_path / "irds"
    folder.mkdir()
    (folder / "docs.tsv").write_text("d1\tsome text\n")
    (folder / "queries.tsv").write_text("nq0\ta question\n")
    qrels = "".join(f"{line.split()[0]} 0 {line.split()[1]} {line.split()[2]}\n"
                    for line in (EX / "qrels" / "test.tsv").read_text().splitlines()[1:])
    (folder / "qrels.trec").write_text(qrels)
    (folder / f"{module}.py").write_text(DATASET.format(folder=str(folder), body=body))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("UDCG_IRDS_MODULES", module)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    source = f"irds:r5/{module}"
    assert main(["score", "--run", str(RUN), "--qrels", source, "--metrics", "nDCG@5", "-o", str(tmp_path / "s.tsv")]) == 2
    err = capsys.readouterr().err
    line = one_error_line(err, "score")
    _clean(err, KEY)
    assert said in line, line
    assert not (tmp_path / "s.tsv").exists()
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace("*", r"\*")) as caught:
        udcg.evaluate(str(RUN), source, metrics="nDCG@5")
    _clean(str(caught.value), KEY)


def test_a_document_without_text_is_named_with_its_dataset(tmp_path, capsys, monkeypatch):
    """A docstore giving ``text=None`` surfaced as ``reader prompt: passage 0 must be text``, naming
    neither the dataset nor the document (found by the adversarial pass)."""
    pytest.importorskip("ir_datasets")
    folder = tmp_path / "irds"
    folder.mkdir()
    (folder / "docs.tsv").write_text("".join(f"{line.split()[2]}\tsome text\n" for line in RUN.read_text().splitlines()))
    (folder / "queries.tsv").write_text("".join(f"nq{i}\ta question\n" for i in range(20)))
    (folder / "qrels.trec").write_text("nq0 0 x 1\n")
    body = '''
class Wrapped:
    def __init__(self, inner):
        self.inner = inner
    def __getattr__(self, name):
        return getattr(self.inner, name)
    def docs_store(self):
        inner = self.inner.docs_store()
        class Store:
            def get_many(self, ids):
                return {k: v._replace(text=None) for k, v in inner.get_many(ids).items()}
        return Store()
ir_datasets.registry.register("r5/notext", Wrapped(files))
'''
    (folder / "r5irds_notext.py").write_text(DATASET.format(folder=str(folder), body=body))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("UDCG_IRDS_MODULES", "r5irds_notext")
    assert main(["annotate", "--corpus", "irds:r5/notext", "--run", str(RUN), "--depth", "2", "--model", "m", "--api-base",
                 "http://127.0.0.1:9/v1", "-o", str(tmp_path / "u"), "--no-progress"]) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert line.startswith("udcg annotate: error: irds:r5/notext: document ") and "has no text (its text is None" in line, line


@pytest.mark.parametrize("change, said", [({"__init__": lambda self, model, **kw: setattr(self, "name", None)},
                                           "whose name is None, not a non-empty string"),
                                          ({"capabilities": "api"}, "whose capabilities are a str")])
def test_a_plugin_backend_without_a_name_or_capabilities_is_one_line(change, said, tmp_path, capsys):
    """Found by the adversarial pass: a backend whose ``name`` is None ran, recording the model None."""
    with registry.SCHEMES.scoped():
        registry.register_scheme("r5plug", type("Nameless", (Plug,), change), api=False)
        assert main(_annotate(tmp_path, "--model", "r5plug:m")) == 2
    assert said in one_error_line(capsys.readouterr().err, "annotate")
