"""ops.reservoir against Vitter's algorithm R, item by item, on both paths.

draw_slots is checked against the law (filling slots exactly, acceptance probability
``capacity / k`` and uniform slots by chi-square), and insert against algorithm R applied
item by item with the very draws the insert made: the two together are the algorithm.
Items encode their stream position in every column (tests.helpers.encoded_batch).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from mindspore_rl_buffer.ops import draw_slots, plan_writes, random_state, reservoir_insert
from scipy.stats import chi2, chisquare

from tests.helpers import DTYPES, PATHS, SHAPES, apply_in_order, decode, encoded_batch, on_path, parameter

CAPACITY = 7
SEED = 17
I64 = ms.int64
NAMES = ("state", "action", "reward")


def algorithm_r(columns, seen: int, batch, slots, accepted) -> None:
    """Vitter's algorithm R, one item at a time, with the given coin flips and slot picks:
    item k (1-based over the stream) goes to slot k - 1 while k <= capacity; after that it
    replaces slot ``slots[j]`` if ``accepted[j]``. Writes ``columns`` in place."""
    capacity = len(columns[0])
    for j in range(len(batch[0])):
        k = seen + j + 1
        if k <= capacity:
            slot = k - 1
        elif accepted[j]:
            slot = slots[j]
        else:
            continue
        for column, values in zip(columns, batch):
            column[slot] = values[j]


# ------------------------------------------------------------------ draw_slots
def draw_slots_of(path, batch_size, capacity=CAPACITY, seed=0):
    def run(key, counter, seen):
        return draw_slots(seen, batch_size, capacity, (key, counter))
    return on_path(path, run, random_state(seed))


@pytest.mark.parametrize("path", PATHS)
def test_draw_slots_while_filling_give_the_next_slots_in_order(path):
    for seen, batch_size in [(0, 1), (0, 5), (3, 4), (0, CAPACITY)]:  # the last two fill exactly
        slots, accepted = draw_slots_of(path, batch_size, seed=1)(Tensor(seen, I64))
        assert slots.dtype == ms.int32 and accepted.dtype == ms.bool_
        assert slots.asnumpy().tolist() == list(range(seen, seen + batch_size))
        assert accepted.asnumpy().all()


@pytest.mark.parametrize("path", PATHS)
def test_draw_slots_crossing_the_end_of_filling_fill_first_then_draw(path):
    run = draw_slots_of(path, 6, seed=2)
    for _ in range(20):
        slots, accepted = (x.asnumpy() for x in run(Tensor(5, I64)))  # items 6 and 7 fill, 8 to 11 draw
        assert slots[:2].tolist() == [5, 6] and accepted[:2].all()
        assert ((slots >= 0) & (slots < CAPACITY)).all()


@pytest.mark.parametrize("path", PATHS)
def test_draw_slots_after_filling_accept_item_k_with_probability_capacity_over_k(path):
    # A reservoir of 100 just full, offered items k = 101 .. 6100 in one batch, three times:
    # P(accept) falls from 100/101 to 100/6100 along the batch.
    capacity, seen, batch_size, calls = 100, 100, 6000, 3
    run = draw_slots_of(path, batch_size, capacity, seed=3)
    accepted_counts, all_slots, accepted_slots = np.zeros(batch_size), [], []
    for _ in range(calls):
        slots, accepted = (x.asnumpy() for x in run(Tensor(seen, I64)))
        accepted_counts += accepted
        all_slots += slots.tolist()
        accepted_slots += slots[accepted].tolist()
    probability = capacity / np.arange(seen + 1, seen + batch_size + 1)
    # Acceptances are independent Bernoulli draws: per block of 500 consecutive items, the
    # count's squared deviation over its variance, summed over the 12 blocks, is chi-square
    # with 12 degrees of freedom (normal approximation: >= 75 acceptances expected per
    # block). Deterministic with fixed seeds; p < 1e-4 would mean a wrong law (the first
    # item's probability for the whole batch gives p ~ 0).
    blocks = np.arange(batch_size) // 500
    observed = np.bincount(blocks, accepted_counts)
    expected = calls * np.bincount(blocks, probability)
    variance = calls * np.bincount(blocks, probability * (1 - probability))
    assert chi2.sf((((observed - expected) ** 2) / variance).sum(), len(observed)) > 1e-4, (observed, expected)
    # Slots uniform over [0, capacity): all of them (180 expected per slot), and the
    # accepted ones alone (a slot that depended on the acceptance draw would favour some;
    # in 10 groups of 10 slots, >= 120 expected per group). Multinomial chi-square.
    assert chisquare(np.bincount(all_slots, minlength=capacity)).pvalue > 1e-4
    assert chisquare(np.bincount(np.array(accepted_slots) // 10, minlength=10)).pvalue > 1e-4


# ------------------------------------------------------------------ plan_writes
@pytest.mark.parametrize("path", PATHS)
def test_plan_writes_give_every_write_to_a_row_one_value(path):
    rng = np.random.default_rng(4)
    run = on_path(path, plan_writes)
    for accept_rate in (0.0, 0.3, 1.0):
        for _ in range(5):
            slots = rng.integers(0, 5, 12).astype(np.int32)
            accepted = rng.random(12) < accept_rate
            rows, source, keep_old = (x.asnumpy() for x in run(Tensor(slots), Tensor(accepted)))
            assert rows.dtype == source.dtype == np.int32 and keep_old.dtype == bool
            # Each write is (row, value): a batch item's value or the row's own.
            writes = {(int(row), -1 if old else int(item)) for row, item, old in zip(rows, source, keep_old)}
            assert len(writes) == len({row for row, _ in writes}), "two values written to one row"
            if accepted.any():
                assert not keep_old.any() and accepted[source].all()
                assert (slots[source] == rows).all()
            else:
                assert keep_old.all() and (rows == slots[0]).all()


def test_plan_writes_follows_algorithm_r_item_by_item_in_any_scatter_order():
    """On CPU the scatter applies repeats in order; the plan must not depend on that."""
    rng = np.random.default_rng(3)
    cases = [(rng.integers(0, 4, 16), rng.random(16) < 0.5) for _ in range(6)]
    cases += [(rng.integers(0, 4, 16), np.zeros(16, bool)), (rng.integers(0, 4, 16), np.ones(16, bool)),
              (np.array([2, 0, 2, 1]), np.array([True, True, True, False]))]
    for slots, accepted in cases:
        slots = slots.astype(np.int32)
        old, batch = np.arange(100, 104), np.arange(len(slots))
        want = old.copy()
        for j in range(len(slots)):  # algorithm R with these draws
            if accepted[j]:
                want[slots[j]] = batch[j]
        rows, source, keep_old = (x.asnumpy() for x in plan_writes(Tensor(slots), Tensor(accepted)))
        values = np.where(keep_old, old[rows], batch[source])
        for order in (range(len(slots)), range(len(slots) - 1, -1, -1), rng.permutation(len(slots))):
            np.testing.assert_array_equal(apply_in_order(old, rows, values, order), want)


# ------------------------------------------------------------------ insert
def _draws_and_insert(state, action, reward, key, counter, key_2, counter_2, seen, new_state, new_action, new_reward):
    """The batch's draws and the insert that makes them, from two generators in the same state
    (if their draws ever differ, the model comparison fails loudly)."""
    slots, accepted = draw_slots(seen, new_action.shape[0], CAPACITY, (key, counter))
    new_seen, count = reservoir_insert([state, action, reward], seen, [new_state, new_action, new_reward],
                                       (key_2, counter_2))
    return slots, accepted, new_seen, count


class Reservoir:
    """Columns as Parameters and the insert on one path, reporting the draws it made."""

    def __init__(self, path: str, columns) -> None:
        self.path = path
        self.columns = [parameter(column, name) for column, name in zip(columns, NAMES)]
        self.rngs = [*random_state(SEED, "draws"), *random_state(SEED, "insert")]
        self.draws_and_insert = on_path(path, _draws_and_insert, [*self.columns, *self.rngs])

    def offer(self, seen: int, batch, step: int):
        """``(slots, accepted, new seen, count)`` of inserting ``batch``; no draws for an empty one."""
        seen, batch = Tensor(seen, I64), [Tensor(x) for x in batch]
        slots, accepted, new_seen, count = self.draws_and_insert(seen, *batch)
        return slots.asnumpy(), accepted.asnumpy(), new_seen, count


# Batch sizes through a reservoir of 7, named for the boundary each crosses.
STREAM = [("from_empty", 3), ("nothing", 0), ("crosses_end_of_filling", 6), ("batch_equals_capacity", 7),
          ("larger_than_capacity", 16), ("single_item", 1), ("nothing_when_full", 0)]


@pytest.mark.parametrize("path", PATHS)
def test_insert_is_algorithm_r_item_by_item_with_its_draws(path):
    model = [np.zeros((CAPACITY, *shape), dtype) for shape, dtype in zip(SHAPES, DTYPES)]
    reservoir, seen = Reservoir(path, model), 0
    # The stream, then a stream that has seen more items than int32 counts (each item then
    # kept with probability ~3e-9).
    steps = [*STREAM, ("seen_past_int32", 3)]
    for step, (name, batch_size) in enumerate(steps):
        first = seen  # item numbers = stream positions, where the int32 column holds them
        if name == "seen_past_int32":
            seen, first = 2**31 + 5, 1000
        batch = encoded_batch(first, batch_size)
        slots, accepted, new_seen, count = reservoir.offer(seen, batch, step)
        assert len(slots) == len(accepted) == batch_size
        algorithm_r(model, seen, batch, slots, accepted)
        seen += batch_size
        assert new_seen.dtype == I64 and count.dtype == ms.int32
        assert (int(new_seen), int(count)) == (seen, min(seen, CAPACITY)), name
        for got, want in zip(reservoir.columns, model):
            np.testing.assert_array_equal(got.asnumpy(), want, err_msg=name)
        ids = decode(*(c.asnumpy()[:int(count)] for c in reservoir.columns))  # intact rows
        assert len(set(ids)) == len(ids) and (ids < seen).all(), name
