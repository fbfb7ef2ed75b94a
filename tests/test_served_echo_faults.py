"""Round five (issue 49, items 1 and 2, and the served-reader pass): exact scoring through
``/v1/completions`` trusts an echo by its tokens, not its length; an echo that scored nothing is
refused; ``udcg serve`` answers with descriptors past 1023. Servers are real: the tiny model through
``udcg serve`` on 127.0.0.1 behind ``tests.faultproxy.FaultProxy``, which rewrites its replies
(``tests/served_faults.py`` holds the cases; every one runs here as a test)."""

from __future__ import annotations

import json
import os
import resource
import urllib.request

import pytest
import yaml

from tests.served_faults import ECHO, KEY, Pass, cases, clean
from tests.test_api_client_faults import one_error_line, qa_file
from tests.test_validate_api import TINY
from udcg.cli import main
from udcg.errors import BackendError

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MODEL = "smollm2-135m"  # the tiny model, served under the name of the tokenizer it shares


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    from udcg.llm.hf import HFBackend

    run = Pass(HFBackend(str(tiny_model_dir), name=MODEL), MODEL)
    yield run
    run.close()


def _shape(served, name):
    served.proxy.reshape = ECHO[name][0]


@pytest.fixture
def reset(served):
    yield served
    served.proxy.reshape = None


# ---------------------------------------------------------------- 1. a shifted echo


def test_a_bos_the_server_put_in_front_is_a_clear_fault_not_neighbouring_values(reset):
    """Every p_abs was read from its neighbour's token, exit 0 (all pairs differed from the
    well-formed server's); now the echo is matched to the prompt's tokens and refused."""
    from tests.served_faults import CANDIDATES, CHATS, _backend

    _shape(reset, "bos-front")
    backend = _backend(reset.proxy.url, MODEL, MODEL, "completions")
    with pytest.raises(BackendError) as e:
        backend.first_token_scores(CHATS, CANDIDATES)
    backend.close()
    message = str(e.value)
    assert "echoed token 0 is '<s>'" in message and "1 token(s) the server put in front" in message, message
    assert "\n" not in message


def test_the_auto_probe_refuses_a_shifted_echo_and_reads_the_top_list(reset):
    from tests.served_faults import CANDIDATES, CHATS, _backend

    _shape(reset, "bos-front")
    backend = _backend(reset.proxy.url, MODEL, MODEL, "auto")
    scores = backend.first_token_scores(CHATS, CANDIDATES)
    backend.close()
    assert backend.scorer() is None and not any(s.exact for s in scores)
    assert "no exact scoring" in backend.notes["scoring"] and "put in front" in backend.notes["scoring"]


def test_a_fleet_member_with_a_shifted_echo_is_passed_over_for_one_that_scores_right(reset):
    from tests.served_faults import CANDIDATES, CHATS, call

    reference = call("first", reset.server_url, MODEL, MODEL)
    _shape(reset, "bos-front")
    backend = _backend_pair(reset)
    try:
        scores = backend.first_token_scores(CHATS * 3, CANDIDATES)
    finally:
        backend.close()
    assert [s.logprobs for s in scores] == reference * 3 and all(s.exact for s in scores)
    assert any(e.path == "/v1/completions" for e in reset.proxy.events)  # the bad member was asked, and passed over


def _backend_pair(served):
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings, ReadSettings

    return OpenAIBackend(MODEL, ClientSettings([served.proxy.url, served.server_url], max_retries=1, timeout=60),
                         ReadSettings(tokenizer=MODEL, scoring="completions"))


def _annotate_fails(served, name, tmp_path, capsys) -> str:
    """``annotate --scoring completions`` through the case ``name``: exit 1, one line (returned), no output."""
    _shape(served, name)
    out = tmp_path / "out.json"
    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(out), "--model", MODEL, "--api-base", served.proxy.url,
            "--scoring", "completions", "--estimator", "first-token", "--max-retries", "0", "--no-progress"]
    assert main(argv) == 1
    assert not out.exists()
    return one_error_line(capsys.readouterr().err, "annotate")


def test_annotate_with_scoring_completions_fails_in_one_line_on_a_shifted_echo(reset, tmp_path, capsys):
    assert "put in front" in _annotate_fails(reset, "bos-front", tmp_path, capsys)


def test_validate_with_a_reader_api_base_refuses_a_shifted_echo_before_any_model_work(reset, tmp_path, capsys):
    """The probe used to accept the shifted reply, and validate scored every pair from it."""
    _shape(reset, "bos-front")
    config = tmp_path / "api.yaml"
    config.write_text(yaml.safe_dump({**TINY, "reader": {"model": MODEL, "api_base": reset.proxy.url}}))
    before = len(reset.proxy.events)
    assert main(["validate", str(config), "-o", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "metrics.names holds ANSWER_PROB" in err and "put in front" in err, err
    assert [e.path for e in reset.proxy.events[before:]] == ["/v1/completions"]  # the probe, nothing more
    assert not (tmp_path / "run" / "pools.jsonl").exists()


# ---------------------------------------------------------------- 2. an echo that scored nothing


@pytest.mark.parametrize("name", ["all-minus-inf", "all-floor", "all-zero"])
def test_an_echo_whose_every_value_is_the_same_is_refused(reset, name, tmp_path, capsys):
    """Every log-probability -Infinity gave p_abs 0.0 for every pair, exit 0."""
    assert "the server did not score the text" in _annotate_fails(reset, name, tmp_path, capsys)


def test_parse_scores_reads_a_well_formed_echo_by_its_tokens():
    from udcg.llm.openai_scoring import parse_scores

    texts = {7: "Hello", 8: " world", 9: "!"}
    echo = {"tokens": ["Hello", " world", "!", " X"], "token_logprobs": [None, -1.0, -2.0, -0.5],
            "text_offset": [0, 5, 11, 12]}
    body = {"choices": [{"index": 0, "logprobs": echo}]}
    assert parse_scores(body, [[7, 8, 9]], [(1, 3)], texts.get) == [[-1.0, -2.0]]
    shifted = {"tokens": ["<s>", *echo["tokens"]], "token_logprobs": [None, -3.0, -1.0, -2.0, -0.5],
               "text_offset": [0, 3, 8, 14, 15]}
    with pytest.raises(BackendError, match=r"echoed token 0 is '<s>', not the prompt's 'Hello'"):
        parse_scores({"choices": [{"index": 0, "logprobs": shifted}]}, [[7, 8, 9]], [(1, 3)], texts.get)


# ---------------------------------------------------------------- udcg serve past descriptor 1023


def test_serve_answers_when_its_descriptors_are_past_1023(tiny_server):
    """The client-gone check used select(), which raises ValueError for a descriptor past 1023: every
    request of a busy server (many connections or files open) failed with HTTP 500."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    spare = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        payload = {"messages": [{"role": "user", "content": "q"}], "max_tokens": 2, "logprobs": True, "top_logprobs": 2}
        request = urllib.request.Request(f"http://127.0.0.1:{tiny_server.server_address[1]}/v1/chat/completions",
                                         json.dumps(payload).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert reply.status == 200 and json.loads(reply.read())["choices"]
    finally:
        for fd in spare:
            os.close(fd)


# ---------------------------------------------------------------- the pass, every case


def test_the_pass_has_enough_cases():
    assert len(cases()) >= 120


@pytest.mark.parametrize("mode, name", cases(), ids=[f"{m}-{n}" for m, n in cases()])
def test_a_served_reader_case_is_clean(served, mode, name):
    got = served.run(mode, name)
    assert clean(mode, name, got, served.references[mode]), f"{got.kind}: {got.detail}"
    assert KEY not in got.detail
