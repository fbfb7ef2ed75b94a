"""``udcg.llm.batching``: the local backend's grouping of requests, on token lengths alone (no
model): shared prefixes, prompt batches by count or token budget, decoding waves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from udcg.llm.batching import decoding_waves, prompt_batches, shared_prefix


def test_shared_prefix():
    assert shared_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert shared_prefix([[5, 6], [5, 6]]) == 2
    assert shared_prefix([[7, 8, 9]]) == 3
    assert shared_prefix([[1, 2], [2, 1]]) == 0
    assert shared_prefix([[1, 2, 3], [], [1]]) == 0


def test_a_batch_size_cuts_by_count_in_order():
    order = [3, 0, 2, 1, 4]
    assert prompt_batches(order, [5, 4, 3, 9, 1], 2, cuda=False) == [[3, 0], [2, 1], [4]]
    assert decoding_waves([[3, 0], [2, 1], [4]], [5, 4, 3, 9, 1], 2, cuda=False) == [[[3, 0]], [[2, 1]], [[4]]]


def test_cpu_batches_close_before_padding_passes_a_tenth_of_the_longest_row():
    lengths = [100, 95, 89, 50]  # longest first
    # 95 pads 5 <= 10 tokens of 100; 89 would pad 11; 50 would pad 39 of 89
    assert prompt_batches([0, 1, 2, 3], lengths, None, cuda=False) == [[0, 1], [2], [3]]
    # on a GPU a quarter of the longest row may be padding
    assert prompt_batches([0, 1, 2, 3], lengths, None, cuda=True) == [[0, 1, 2], [3]]


def test_cpu_batches_keep_to_the_token_budget_and_the_row_cap():
    assert prompt_batches(list(range(5)), [1000] * 5, None, cuda=False) == [[0, 1], [2, 3], [4]]  # 2 x 1000 <= 2048
    assert [len(b) for b in prompt_batches(list(range(40)), [10] * 40, None, cuda=False)] == [32, 8]
    assert [len(b) for b in prompt_batches(list(range(300)), [10] * 300, None, cuda=True)] == [256, 44]


def test_waves_join_batches_up_to_the_row_and_token_limits():
    batches = [[i] for i in range(40)]
    assert [sum(map(len, w)) for w in decoding_waves(batches, [10] * 40, None, cuda=False)] == [32, 8]
    lengths = [8192, 8192, 10, 10]  # two rows of 8192 fill the CPU budget of 16384 tokens
    assert decoding_waves([[0], [1], [2], [3]], lengths, None, cuda=False) == [[[0], [1]], [[2], [3]]]


@given(st.lists(st.integers(1, 3000), min_size=1, max_size=120), st.booleans())
def test_batches_and_waves_partition_the_requests_in_order_within_their_limits(raw, cuda):
    order = sorted(range(len(raw)), key=lambda i: -raw[i])
    batches = prompt_batches(order, raw, None, cuda)
    assert [i for b in batches for i in b] == order
    budget, cap, slack = (32768, 256, 0.25) if cuda else (2048, 32, 0.1)
    for b in batches:
        head = raw[b[0]]
        assert len(b) <= cap
        assert len(b) == 1 or (len(b) * head <= budget and all(head - raw[i] <= slack * head for i in b))
    waves = decoding_waves(batches, raw, None, cuda)
    assert [b for w in waves for b in w] == batches
    max_rows, wave_budget = (256, 131072) if cuda else (32, 16384)
    for w in waves:
        rows = sum(map(len, w))
        assert len(w) == 1 or (rows <= max_rows and rows * raw[w[0][0]] <= wave_budget)
