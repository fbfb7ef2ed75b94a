"""``udcg.llm.decoding``: the model-free decoding pieces of the local backend: stop strings,
parameter checks, per-answer seeds, and the next-token draw on hand-made logits."""

from __future__ import annotations

import math

import pytest

from tests import lazy

from udcg.errors import InputError
from udcg.llm.base import GenerationParams
from udcg.llm.decoding import answer_seed, check_params, cut_at_stop, pick_tokens


def test_cut_at_the_earliest_stop_string():
    assert cut_at_stop("Paris.\nQuestion: next", ["Question:", "\n"]) == ("Paris.", True)
    assert cut_at_stop("Paris", ["\n", ""]) == ("Paris", False)  # an empty stop string never matches
    assert cut_at_stop("", ["x"]) == ("", False)
    assert cut_at_stop("stop at once", ["stop"]) == ("", True)


def test_default_params_pass_the_check():
    check_params(GenerationParams())
    check_params(GenerationParams(max_new_tokens=1, temperature=1.5, top_p=0.01, n=8, seed=-3))


@pytest.mark.parametrize("field, value", [
    ("max_new_tokens", 0), ("max_new_tokens", 2.0), ("temperature", -0.1), ("temperature", math.nan),
    ("temperature", math.inf), ("top_p", 0.0), ("top_p", 1.5), ("n", 0), ("n", "2"), ("seed", 1.0),
])
def test_bad_params_are_named(field, value):
    with pytest.raises(InputError, match=f"^{field} must be"):
        check_params(GenerationParams(**{field: value}))


def test_answer_seeds_are_fixed_and_independent_of_the_batch():
    s = answer_seed(0, [1, 2, 3], 0)
    assert s == answer_seed(0, [1, 2, 3], 0) and 0 <= s < 2**63
    others = {answer_seed(1, [1, 2, 3], 0), answer_seed(0, [1, 2, 3], 1), answer_seed(0, [1, 2], 0),
              answer_seed(0, [12, 3], 0)}
    assert s not in others and len(others) == 4  # seed, answer index and the prompt's ids all count


# ---------------------------------------------------------------- the next-token draw (torch)

torch = lazy.importorskip("torch")


def _gens(seed: int, n: int) -> list:
    return [torch.Generator().manual_seed(seed + i) for i in range(n)]


def test_greedy_is_the_argmax_of_each_row():
    logits = torch.tensor([[0.1, 2.0, -1.0], [5.0, 0.0, 0.0]])
    assert pick_tokens(logits, _gens(0, 2), GenerationParams(temperature=0.0)) == [1, 0]


def test_sampling_is_seeded_by_each_rows_generator_and_never_picks_a_zero_probability_token():
    logits = torch.tensor([[0.0, 0.0, -math.inf, 0.0]] * 64)
    params = GenerationParams(temperature=1.0)
    first = pick_tokens(logits, _gens(7, 64), params)
    assert first == pick_tokens(logits, _gens(7, 64), params)
    assert set(first) == {0, 1, 3}  # 64 uniform draws over 3 tokens reach each, never the masked one
    alone = pick_tokens(logits[:1], _gens(7, 1), params)
    assert alone == first[:1]  # a row's draw does not depend on the other rows


def test_a_small_top_p_keeps_only_the_most_likely_token():
    logits = torch.tensor([[1.0, 3.0, 2.9, 0.0]] * 16)
    assert pick_tokens(logits, _gens(0, 16), GenerationParams(temperature=1.0, top_p=0.01)) == [1] * 16
    nucleus = set(pick_tokens(logits, _gens(0, 16), GenerationParams(temperature=1.0, top_p=0.9)))
    # probabilities 0.479 (token 1), 0.433 (2), 0.065 (0), 0.024 (3): tokens 1 and 2 make up 0.9
    assert nucleus == {1, 2}
