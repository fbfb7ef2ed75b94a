"""HFBackend through its contract: order kept, batched = one-by-one = the authors' unbatched full
forward, greedy decoding = a naive argmax loop, seeded sampling deterministic, typed errors.

Fast tests use tiny random 2-layer models (Llama and Qwen2 architectures) built here from a config,
with SmolLM2's real tokenizer and chat template; ``slow`` tests load the real SmolLM2.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from tests import lazy

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = lazy.importorskip("torch")
transformers = lazy.importorskip("transformers")

from udcg.annotate.prompt import reader_chat  # noqa: E402
from udcg.errors import BackendError, InputError  # noqa: E402
from udcg.llm import offline  # noqa: E402
from udcg.llm.base import GenerationParams  # noqa: E402
from udcg.llm.hf import HFBackend  # noqa: E402
from udcg.llm.hf_load import has_system_role, locate  # noqa: E402

POPQA = Path(__file__).resolve().parents[2] / "shared/data/popqa-contriever-100/popqa_longtail_w_gs_example.jsonl"
PASSAGES = [
    "Dune is a 1965 epic science fiction novel by American author Frank Herbert.",
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
    "Paris",
    "Photosynthesis is the process by which plants use sunlight, water and carbon dioxide to create oxygen "
    "and energy in the form of sugar. It happens mostly in the leaves.",
    "Frank Herbert was born in Tacoma, Washington.",
]
QUESTIONS = ["who wrote Dune?", "where is the Eiffel Tower?", "what is the capital of France?",
             "how do plants make sugar?", "where was Frank Herbert born?"]
CHATS = [reader_chat(q, [p]) for q, p in zip(QUESTIONS, PASSAGES)]


@pytest.fixture(scope="session")
def smol_dir() -> Path:
    return offline.local_dir("smollm2-135m")  # converts once if the cache is empty


def _tiny(arch: str, smol_dir: Path, out: Path) -> Path:
    tokenizer = transformers.AutoTokenizer.from_pretrained(smol_dir)
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.3,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    config = transformers.LlamaConfig(**common) if arch == "llama" else transformers.Qwen2Config(**common, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_dir(request, smol_dir, tmp_path_factory) -> Path:
    return _tiny(request.param, smol_dir, tmp_path_factory.mktemp(f"tiny-{request.param}"))


@pytest.fixture(scope="session")
def tiny(tiny_dir) -> HFBackend:
    return HFBackend(str(tiny_dir), device="cpu", dtype="float32", batch_size=2)


def authors_first_token(backend: HFBackend, chat, target: str = "NO-RESPONSE") -> float:
    """The authors' loop: render, tokenise, one full forward with logits for every position, softmax
    of the last row, probability of the target's first token."""
    tok, model = backend.tokenizer, backend.model
    prompt = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    inputs = tok(prompt, return_tensors="pt", truncation=True)
    token = tok.encode(target, add_special_tokens=False)[0]
    with torch.no_grad():
        return torch.softmax(model(**inputs).logits[0, -1, :], dim=-1)[token].item()


def naive_continuation(backend: HFBackend, chat, text: str) -> list[float]:
    ids = backend.encode(chat)
    cont = backend.tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([ids + cont])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    return [logprobs[len(ids) - 1 + j, t].item() for j, t in enumerate(cont)]


def naive_greedy(backend: HFBackend, chat, max_new_tokens: int) -> str:
    ids = backend.encode(chat)
    new = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            t = int(backend.model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax())
            if t in backend.stop_ids:
                break
            new.append(t)
    return backend.tokenizer.decode(new, skip_special_tokens=True).strip()


# ---------------------------------------------------------------- scoring


def test_first_token_matches_authors_loop_and_one_by_one(tiny):
    batched = tiny.next_token_logprobs(CHATS, ["NO-RESPONSE", "Paris"])
    for chat, row in zip(CHATS, batched):
        alone = tiny.next_token_logprobs([chat], ["NO-RESPONSE", "Paris"])[0]
        assert row.keys() == {"NO-RESPONSE", "Paris"}
        assert math.exp(row["NO-RESPONSE"]) == pytest.approx(authors_first_token(tiny, chat), abs=1e-6)
        assert math.exp(row["Paris"]) == pytest.approx(authors_first_token(tiny, chat, "Paris"), abs=1e-6)
        for c in row:
            assert row[c] == pytest.approx(alone[c], abs=1e-5)


def test_one_tokenizer_call_gives_each_chats_own_ids(tiny):
    assert tiny._encode_all(CHATS) == [tiny.encode(chat) for chat in CHATS]


def test_candidates_sharing_a_first_token_read_the_same_column(tiny):
    rows = tiny.next_token_logprobs(CHATS, ["Paris", "NO-RESPONSE", "Paris is", "NO"])
    for chat, row in zip(CHATS, rows):
        assert row["Paris"] == row["Paris is"]
        assert math.exp(row["Paris"]) == pytest.approx(authors_first_token(tiny, chat, "Paris"), abs=1e-6)
        assert math.exp(row["NO-RESPONSE"]) == pytest.approx(authors_first_token(tiny, chat), abs=1e-6)


@pytest.mark.parametrize("batch_size, share_prefix", [(None, True), (1, False), (4, False), (3, True)])
def test_batching_options_agree(tiny_dir, tiny, batch_size, share_prefix):
    other = HFBackend(str(tiny_dir), device="cpu", dtype="float32", batch_size=batch_size, share_prefix=share_prefix)
    a = tiny.next_token_logprobs(CHATS, ["NO-RESPONSE"])
    b = other.next_token_logprobs(CHATS, ["NO-RESPONSE"])
    assert [r["NO-RESPONSE"] for r in a] == pytest.approx([r["NO-RESPONSE"] for r in b], abs=1e-5)


def test_order_is_kept(tiny):
    forward = tiny.next_token_logprobs(CHATS, ["NO-RESPONSE"])
    backward = tiny.next_token_logprobs(CHATS[::-1], ["NO-RESPONSE"])[::-1]
    assert [r["NO-RESPONSE"] for r in forward] == pytest.approx([r["NO-RESPONSE"] for r in backward], abs=1e-5)
    assert len({round(r["NO-RESPONSE"], 6) for r in forward}) == len(CHATS)  # the chats do differ


def test_continuation_matches_teacher_forced_full_forward(tiny):
    requests = [(chat, text) for chat, text in zip(CHATS, ["NO-RESPONSE", "Frank Herbert", "Paris", "x", "Tacoma, WA"])]
    got = tiny.continuation_logprobs(requests)
    for (chat, text), row in zip(requests, got):
        expected = naive_continuation(tiny, chat, text)
        assert len(row) == len(expected) == len(tiny.tokenizer(text, add_special_tokens=False)["input_ids"])
        assert row == pytest.approx(expected, abs=1e-5)
    assert tiny.continuation_logprobs([(CHATS[0], "")]) == [[]]


def test_first_token_of_continuation_is_next_token_logprob(tiny):
    cont = tiny.continuation_logprobs([(c, "NO-RESPONSE") for c in CHATS])
    first = tiny.next_token_logprobs(CHATS, ["NO-RESPONSE"])
    assert [row[0] for row in cont] == pytest.approx([r["NO-RESPONSE"] for r in first], abs=1e-5)


def test_empty_call_returns_empty(tiny):
    assert tiny.next_token_logprobs([], ["NO-RESPONSE"]) == []
    assert tiny.continuation_logprobs([]) == []
    assert tiny.generate([]) == []


# ---------------------------------------------------------------- generation


def test_greedy_equals_naive_argmax_loop_and_one_by_one(tiny):
    params = GenerationParams(max_new_tokens=5, n=2)
    batched = tiny.generate(CHATS[:4], params)
    for chat, answers in zip(CHATS, batched):
        assert answers[0] == answers[1] == naive_greedy(tiny, chat, 5)
        assert tiny.generate([chat], params) == [answers]


@pytest.mark.parametrize("share_prefix", [True, False])
def test_tight_prompt_batches_decode_together_as_if_alone(tiny_dir, share_prefix):
    """Auto batching: prompts of very different lengths get separate prompt batches, which are then
    joined (caches left-padded) into one decoding batch; every row must decode as it would alone."""
    auto = HFBackend(str(tiny_dir), device="cpu", dtype="float32", share_prefix=share_prefix)
    chats = CHATS + [reader_chat(QUESTIONS[0], PASSAGES[3:4] * 3)]  # one long prompt
    seqs = [auto.encode(c) for c in chats]
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    lengths = [len(s) for s in seqs]
    batches = auto._batches(order, lengths)
    assert len(batches) >= 3 and len(auto._waves(batches, lengths)) == 1  # the join is exercised
    greedy = auto.generate(chats, GenerationParams(max_new_tokens=6))
    assert greedy == [[naive_greedy(auto, c, 6)] for c in chats]
    assert auto.generate(chats, GenerationParams(max_new_tokens=6, n=2)) == [[g[0]] * 2 for g in greedy]


# ---------------------------------------------------------------- one prompt pass for three values

CONTINUATIONS = ["Paris", "", "the United States of America", "x", "politician and writer", "NO-RESPONSE"]


@pytest.mark.parametrize("batch_size,share_prefix", [(2, True), (None, True), (None, False), (1, False)])
def test_read_equals_the_three_separate_calls(tiny_dir, batch_size, share_prefix):
    """read(): first-token log-probabilities, greedy answer and continuation log-probabilities from
    one prompt pass (the continuation runs on the prompt's cache, which is then cut back) equal
    next_token_logprobs, generate and continuation_logprobs, with fixed and joined batches."""
    backend = HFBackend(str(tiny_dir), device="cpu", dtype="float32", batch_size=batch_size, share_prefix=share_prefix)
    chats = CHATS + [reader_chat(QUESTIONS[0], PASSAGES[3:4] * 3)]  # one long prompt: several prompt batches
    conts = (CONTINUATIONS * 2)[:len(chats)]
    readings = backend.read(chats, ["NO-RESPONSE", "Paris"], conts, max_new_tokens=6)
    first = backend.next_token_logprobs(chats, ["NO-RESPONSE", "Paris"])
    answers = backend.generate(chats, GenerationParams(max_new_tokens=6))
    continuations = backend.continuation_logprobs(list(zip(chats, conts)))
    assert len(readings) == len(chats)
    for r, f, a, c, chat, text in zip(readings, first, answers, continuations, chats, conts):
        assert r.first == pytest.approx(f, abs=1e-5)
        assert r.answer == a[0] == naive_greedy(backend, chat, 6)
        assert len(r.continuation) == len(c) and r.continuation == pytest.approx(c, abs=1e-4)
        assert r.continuation == pytest.approx(naive_continuation(backend, chat, text), abs=1e-4)


def test_read_edge_cases(tiny):
    assert tiny.read([], ["NO-RESPONSE"], []) == []
    only_empty = tiny.read(CHATS[:2], ["NO-RESPONSE"], ["", ""], max_new_tokens=3)  # no continuation pass at all
    assert [r.continuation for r in only_empty] == [[], []]
    assert [r.answer for r in only_empty] == [a[0] for a in tiny.generate(CHATS[:2], GenerationParams(max_new_tokens=3))]
    with pytest.raises(InputError, match="one per chat"):
        tiny.read(CHATS[:2], ["NO-RESPONSE"], ["a"])
    with pytest.raises(InputError, match="wrap it in a list"):
        tiny.read(CHATS[:1], "NO-RESPONSE", ["a"])
    with pytest.raises(InputError, match="must be a string"):
        tiny.read(CHATS[:1], ["NO-RESPONSE"], [None])


def test_waves_respect_rows_and_token_budget(tiny_dir):
    auto = HFBackend(str(tiny_dir), device="cpu", dtype="float32")
    lengths = [2000] * 3 + [100] * 70  # longest first, as _batches orders them
    batches = [[i] for i in range(73)]
    waves = auto._waves(batches, lengths)
    assert [sum(map(len, w)) for w in waves] == [8, 32, 32, 1]  # 8 x 2,000 <= 16,384 tokens; 32 rows at most
    assert sorted(i for w in waves for b in w for i in b) == list(range(73))
    fixed = HFBackend(str(tiny_dir), device="cpu", dtype="float32", batch_size=4)
    assert fixed._waves([[0, 1, 2, 3], [4, 5]], [10] * 6) == [[[0, 1, 2, 3]], [[4, 5]]]


def test_sampling_is_seeded_and_batch_independent(tiny):
    params = GenerationParams(max_new_tokens=4, temperature=1.0, n=3, seed=7)
    first = tiny.generate(CHATS[:3], params)
    assert tiny.generate(CHATS[:3], params) == first
    assert [tiny.generate([c], params)[0] for c in CHATS[:3]] == first
    assert all(len(a) == 3 for a in first)
    assert len({a for answers in first for a in answers}) > 3  # a random tiny model: the draws differ
    assert tiny.generate(CHATS[:3], GenerationParams(max_new_tokens=4, temperature=1.0, n=3, seed=8)) != first


def test_tiny_top_p_is_greedy(tiny):
    sampled = tiny.generate(CHATS[:2], GenerationParams(max_new_tokens=4, temperature=0.7, top_p=1e-9, n=2, seed=1))
    greedy = tiny.generate(CHATS[:2], GenerationParams(max_new_tokens=4))
    assert sampled == [[g[0], g[0]] for g in greedy]


def test_stop_strings_cut_the_answer(tiny):
    full = tiny.generate(CHATS[:1], GenerationParams(max_new_tokens=8))[0][0]
    assert len(full) > 2
    stop = full[1:3]
    cut = tiny.generate(CHATS[:1], GenerationParams(max_new_tokens=8, stop=(stop,)))[0][0]
    assert cut == full[: full.find(stop)].strip()


@pytest.mark.parametrize("params, match", [
    (GenerationParams(max_new_tokens=0), "max_new_tokens"),
    (GenerationParams(temperature=-1.0), "temperature"),
    (GenerationParams(top_p=0.0), "top_p"),
    (GenerationParams(n=0), "n must be"),
])
def test_bad_generation_params(tiny, params, match):
    with pytest.raises(InputError, match=match):
        tiny.generate(CHATS[:1], params)


# ---------------------------------------------------------------- templates, dtypes, errors


def test_template_without_system_role_merges_it_into_the_user_turn(tiny_dir):
    backend = HFBackend(str(tiny_dir), device="cpu", dtype="float32")
    assert backend.system_role and has_system_role(backend.tokenizer)
    backend.tokenizer.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}<turn>{{ m['role'] }}\n{{ m['content'] }}</turn>\n{% endfor %}<turn>assistant:")
    assert not has_system_role(backend.tokenizer)
    backend.system_role = has_system_role(backend.tokenizer)
    text = backend.render(CHATS[0])
    assert text == f"<turn>user\n{CHATS[0][0]['content']}\n\n{CHATS[0][1]['content']}</turn>\n<turn>assistant:"
    assert len(backend.next_token_logprobs(CHATS[:2], ["NO-RESPONSE"])) == 2


def test_template_that_drops_the_system_text_has_no_system_role(tiny):
    class Silent:
        chat_template = "x"

        def apply_chat_template(self, chat, **kw):
            return "".join(m["content"] for m in chat if m["role"] != "system")

    assert not has_system_role(Silent())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_runs_close_to_float32(tiny_dir, tiny, dtype):
    half = HFBackend(str(tiny_dir), device="cpu", dtype=dtype, batch_size=2)
    a = [math.exp(r["NO-RESPONSE"]) for r in tiny.next_token_logprobs(CHATS, ["NO-RESPONSE"])]
    b = [math.exp(r["NO-RESPONSE"]) for r in half.next_token_logprobs(CHATS, ["NO-RESPONSE"])]
    assert b == pytest.approx(a, rel=0.1, abs=1e-4)


def test_int8_quantisation_is_approximately_float32(tiny_dir, tiny):
    q = HFBackend(str(tiny_dir), device="cpu", dtype="float32", quantize="int8")
    candidates = ["NO-RESPONSE", "Paris", "Frank", "the"]
    a = [r[c] for r in tiny.next_token_logprobs(CHATS, candidates) for c in candidates]
    b = [r[c] for r in q.next_token_logprobs(CHATS, candidates) for c in candidates]
    assert b == pytest.approx(a, rel=0.1)  # int8 weights: close, not equal
    assert b != pytest.approx(a, rel=1e-6)


def test_auto_batches_respect_the_token_budget_and_limit_padding():
    auto = HFBackend.__new__(HFBackend)
    auto.batch_size, auto.device = None, "cpu"
    lengths = [1000, 950, 940, 400, 390, 380, 370, 100, 10, 10, 10]
    batches = auto._batches(list(range(len(lengths))), lengths)
    assert [i for b in batches for i in b] == list(range(len(lengths)))
    assert all(len(b) * lengths[b[0]] <= 2048 or len(b) == 1 for b in batches)
    assert all(lengths[b[0]] - lengths[b[-1]] <= 0.1 * lengths[b[0]] for b in batches)
    assert batches == [[0, 1], [2], [3, 4, 5, 6], [7], [8, 9, 10]]
    auto.batch_size = 4
    assert auto._batches(list(range(len(lengths))), lengths) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]


@pytest.mark.parametrize("chats, candidates, match", [
    ([[]], ["NO-RESPONSE"], "chat 0: expected a non-empty list"),
    (["just a string"], ["NO-RESPONSE"], "chat 0"),
    ([[{"role": "user"}]], ["NO-RESPONSE"], "message 0"),
    ([[{"role": "user", "content": "hi"}]], "NO-RESPONSE", "one string"),
    ([[{"role": "user", "content": "hi"}]], [""], "no tokens"),
])
def test_bad_requests(tiny, chats, candidates, match):
    with pytest.raises(InputError, match=match):
        tiny.next_token_logprobs(chats, candidates)


def test_too_long_chat_is_an_input_error(tiny):
    with pytest.raises(InputError, match="chat 1: .* more than the model's 512 positions"):
        tiny.next_token_logprobs([CHATS[0], reader_chat("q", ["word " * 600])], ["NO-RESPONSE"])


@pytest.mark.parametrize("name, match", [("./no/such/dir", "no such folder"), ("a/b/c", "no such folder")])
def test_unknown_model(name, match):
    with pytest.raises(InputError, match=match):
        locate(name)


def test_a_hub_id_without_a_hub_is_a_clear_error(monkeypatch):
    from udcg.errors import BackendError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendError, match="could not load model 'no-such-org/no-such-model'.*HF_HUB_OFFLINE=0"):
        HFBackend("no-such-org/no-such-model", device="cpu")


def test_bad_options(tiny_dir):
    for kw, match in [({"dtype": "float8"}, "dtype"), ({"device": "tpu"}, "device"), ({"batch_size": 0}, "batch size"),
                      ({"quantize": "int4"}, "quantize")]:
        with pytest.raises(InputError, match=match):
            HFBackend(str(tiny_dir), **kw)


# ---------------------------------------------------------------- the real SmolLM2


def _popqa_chats(n: int) -> list:
    rows = [json.loads(line) for line in POPQA.read_text().splitlines()[:3]]
    chats = [reader_chat(r["question"], [c["text"]]) for r in rows for c in r["ctxs"]]
    return chats[:n]


@pytest.fixture(scope="module")
def smollm2(smol_dir) -> HFBackend:
    return HFBackend("smollm2-135m", device="cpu", dtype="float32")


@pytest.mark.slow
def test_smollm2_parity_with_authors_loop(smollm2):
    backend = smollm2
    assert backend.name == "smollm2-135m" and backend.system_role
    chats = _popqa_chats(4) if POPQA.exists() else CHATS[:4]
    ours = [math.exp(r["NO-RESPONSE"]) for r in backend.next_token_logprobs(chats, ["NO-RESPONSE"])]
    theirs = [authors_first_token(backend, chat) for chat in chats]
    assert max(abs(a - b) for a, b in zip(ours, theirs)) <= 1e-5
    one_by_one = [math.exp(backend.next_token_logprobs([c], ["NO-RESPONSE"])[0]["NO-RESPONSE"]) for c in chats[:2]]
    assert ours[:2] == pytest.approx(one_by_one, abs=1e-6)


@pytest.mark.slow
def test_smollm2_generates_an_answer(smollm2):
    backend = smollm2
    chats = [CHATS[1], CHATS[4]]
    answers = backend.generate(chats, GenerationParams(max_new_tokens=12))
    assert "Paris" in answers[0][0] and "Tacoma" in answers[1][0]  # the passages say so; SmolLM2 copies them
    assert backend.generate(chats[1:], GenerationParams(max_new_tokens=12)) == answers[1:]  # batched = alone


# ---------------------------------------------------------------- the registry


def test_registry_loads_folders_and_registered_schemes(tiny_dir, monkeypatch):
    from udcg.llm import registry

    backend = registry.load_backend(str(tiny_dir), device="cpu", dtype="float32", batch_size=3)
    assert isinstance(backend, HFBackend) and backend.batch_size == 3 and backend.name == tiny_dir.name
    seen = []
    with registry.SCHEMES.scoped():
        registry.register_scheme("fake", lambda rest, **kw: seen.append((rest, kw)) or backend, api=True)
        assert registry.load_backend("fake:some/model:v1", timeout=3) is backend
        registry.register_scheme("bad", lambda rest, **kw: "backend", api=True)
        with pytest.raises(InputError, match="made a str, not a udcg.llm.base.BaseBackend"):
            registry.load_backend("bad:m")
    assert seen == [("some/model:v1", {"timeout": 3})]
    with pytest.raises(InputError, match="unknown backend scheme 'fake'"):  # gone after the block
        registry.load_backend("fake:m")
    with pytest.raises(InputError, match="unknown backend scheme 'nope'"):
        registry.load_backend("nope:model")
    with pytest.raises(InputError, match="non-empty"):
        registry.load_backend("  ")
    assert registry._scheme("C:/models/x") is None and registry._scheme("qwen2.5:0.5b") is None
    assert any(line.startswith("smollm2-135m: offline") for line in registry.describe())
