"""ReservoirReplayBuffer against algorithm R: filling, the batch law, uniform inclusion, both paths."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn
from scipy.stats import chisquare

from mindspore_rl_buffer import ReservoirReplayBuffer, create_buffer
from tests.helpers import (
    DTYPES,
    MS_DTYPES,
    NAMES,
    SHAPES,
    ReservoirModel,
    RingModel,
    decode,
    encoded_batch,
)


def make(capacity=7, sample_size=5, **kwargs) -> ReservoirReplayBuffer:
    return ReservoirReplayBuffer(capacity, sample_size, SHAPES, MS_DTYPES, names=NAMES, **kwargs)


def stored_ids(rrb: ReservoirReplayBuffer) -> np.ndarray:
    """The item numbers in slots ``[0, count)``; raises if a row is torn across columns."""
    count = int(rrb.count)
    return decode(*(column.asnumpy()[:count] for column in rrb.columns))


def assert_valid(rrb: ReservoirReplayBuffer, seen: int, first: int = 0) -> np.ndarray:
    """Cursors follow ``seen``; stored items are distinct items of the stream, intact."""
    capacity = rrb.capacity
    assert (int(rrb.seen), int(rrb.count), int(rrb.head)) == (seen, min(seen, capacity), 0)
    assert (int(rrb.size()), bool(rrb.full())) == (min(seen, capacity), seen >= capacity)
    ids = stored_ids(rrb)
    assert len(set(ids)) == len(ids) and ((ids >= first) & (ids < first + seen)).all()
    return ids


def test_filling_phase_stores_items_in_order_like_the_ring():
    rrb, model, start = make(), RingModel(7, SHAPES, DTYPES), 0
    for kind, n in [("single", 1), ("batch", 3), ("batch", 0), ("batch", 2), ("single", 1)]:
        rrb.insert(encoded_batch(start, n, single=kind == "single"))
        model.insert(encoded_batch(start, n))
        start += n
        np.testing.assert_array_equal(assert_valid(rrb, start), np.arange(start))
        for got, want in zip(rrb.columns, model.columns):
            np.testing.assert_array_equal(got.asnumpy(), want)
    np.testing.assert_array_equal(decode(*rrb.get_item(np.arange(7, dtype=np.int32))), np.arange(7))


def test_batch_crossing_the_end_of_filling_and_larger_than_capacity():
    ms.set_seed(1)
    rrb = make(capacity=5)
    rrb.insert(encoded_batch(0, 3))
    rrb.insert(encoded_batch(3, 4))  # items 3, 4 fill slots 3, 4; items 5, 6 may replace any slot
    ids = assert_valid(rrb, 7)
    for slot, item in enumerate(ids):
        assert item == slot or item in (5, 6)
    rrb.insert(encoded_batch(7, 12))
    assert_valid(rrb, 19)


# Batch sizes of one stream of 40 items into 8 slots: a batch crossing the end of filling,
# one larger than capacity, one equal to it.
STREAM = [5, 7, 20, 8]


def inclusion_counts(offer_stream, streams: int, length: int) -> np.ndarray:
    counts = np.zeros(length)
    for _ in range(streams):
        counts[offer_stream()] += 1
    return counts


@pytest.mark.slow
def test_inclusion_probabilities_are_uniform_over_many_streams():
    ms.set_seed(8)
    capacity, length, streams = 8, sum(STREAM), 150
    rrb = make(capacity=capacity, sample_size=1)

    def device_stream():
        rrb.reset()
        start = 0
        for n in STREAM:
            rrb.insert(encoded_batch(start, n))
            start += n
        ids = rrb.columns[1].asnumpy()  # full: every slot holds a distinct item of the stream
        assert len(set(ids)) == capacity
        return ids

    model = ReservoirModel(capacity, np.random.default_rng(8))

    def model_stream():
        model.seen = 0
        for item in range(length):
            model.offer(item)
        return model.items

    # Each item is kept with probability 8/40, so 30 of 150 streams are expected to keep it.
    # Inclusions in one stream are negatively correlated (exactly 8 items), which makes the
    # counts vary less than the multinomial the chi-square assumes: the bound is
    # conservative. With a fixed seed the test is deterministic; p < 1e-4 would mean the
    # batch law is off (measured: letting the earlier of two colliding items win gives
    # p ~ 1e-26, drawing the whole batch with its first item's probability p ~ 1e-57).
    for counts in (inclusion_counts(device_stream, streams, length), inclusion_counts(model_stream, streams, length)):
        assert counts.sum() == streams * capacity
        assert chisquare(counts).pvalue > 1e-4, counts


def test_reset_restarts_the_stream():
    rrb = make()
    rrb.insert(encoded_batch(0, 30))
    assert_valid(rrb, 30)
    rrb.reset()
    assert (int(rrb.seen), int(rrb.count), int(rrb.head), int(rrb.size()), bool(rrb.full())) == (0, 0, 0, 0, False)
    rrb.insert(encoded_batch(100, 3))
    np.testing.assert_array_equal(assert_valid(rrb, 3, first=100), [100, 101, 102])


def test_seen_counts_past_int32():
    rrb = make(capacity=4)
    rrb.seen.set_data(Tensor(2**31 + 5, ms.int64))  # before any graph has run (see the NOTES)
    rrb.count.set_data(Tensor(4, ms.int32))
    rrb.insert(encoded_batch(0, 50))
    assert (int(rrb.seen), int(rrb.count)) == (2**31 + 55, 4)
    # Each item is kept with probability ~2e-9: the slots almost surely keep their zeros.
    np.testing.assert_array_equal(stored_ids(rrb), [0, 0, 0, 0])


class Collector(nn.Cell):
    """A user's Cell: insert, then sample and read the reservoir, in one compiled graph."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, reward):
        _ = self.buffer.insert([state, action, reward])
        return self.buffer.sample(), self.buffer.size(), self.buffer.full(), self.buffer.get_item(0)


def test_inside_a_cell_insert_then_sample_sees_a_valid_reservoir():
    ms.set_seed(5)
    rrb, start = make(capacity=7), 0
    collector = Collector(rrb)
    for _ in range(6):
        batch = encoded_batch(start, 3)
        sampled, size, full, first = collector(*(Tensor(x) for x in batch))
        start += 3
        ids = assert_valid(rrb, start)
        assert (int(size), bool(full)) == (min(start, 7), start >= 7)
        assert set(decode(*sampled)) <= set(ids)
        assert decode(*first) == ids[0]
        if start <= 7:
            np.testing.assert_array_equal(ids, np.arange(start))


def test_reset_inside_a_cell():
    class Restarter(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, state, action, reward):
            _ = self.buffer.insert([state, action, reward])
            self.buffer.reset()
            _ = self.buffer.insert([state, action, reward])
            return self.buffer.size()

    rrb = make(capacity=3)
    rrb.insert(encoded_batch(0, 10))
    assert int(Restarter(rrb)(*(Tensor(x) for x in encoded_batch(50, 2)))) == 2
    np.testing.assert_array_equal(assert_valid(rrb, 2, first=50), [50, 51])


@pytest.mark.parametrize("call, error, message", [
    (lambda b: b.insert([encoded_batch(0, 2)[0].astype(np.float64), *encoded_batch(0, 2)[1:]]), ValueError,
     "dtype of column 'state' must be Float32"),
    (lambda b: b.insert(encoded_batch(0, 2)[:2]), ValueError, "must have 3 columns"),
    (lambda b: b.get_item(9), IndexError, r"\[-9, 9\) .* but got 9"),
], ids=["insert a wrong dtype", "insert too few columns", "get_item past the stored"])
def test_bad_call_raises_and_leaves_the_reservoir_unchanged(call, error, message):
    rrb = make(capacity=9)
    rrb.insert(encoded_batch(0, 12))
    before = [c.asnumpy().copy() for c in rrb.columns], int(rrb.seen), int(rrb.count)
    with pytest.raises(error, match=message):
        call(rrb)
    after = [c.asnumpy().copy() for c in rrb.columns], int(rrb.seen), int(rrb.count)
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]


def test_create_buffer_builds_it_from_a_config_entry():
    rrb = create_buffer({"number": 1, "type": "ReservoirReplayBuffer", "capacity": 100, "data_shape": [(4,)],
                         "data_type": [ms.float32], "sample_size": 16, "seed": 1})
    assert isinstance(rrb, ReservoirReplayBuffer) and (rrb.capacity, rrb.sample_size) == (100, 16)
    with pytest.raises(ValueError, match="the key 'replace' does not apply to ReservoirReplayBuffer"):
        create_buffer({"type": ReservoirReplayBuffer, "capacity": 100, "data_shape": [(4,)],
                       "data_type": [ms.float32], "sample_size": 16, "replace": False})
