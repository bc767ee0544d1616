"""The app's numpy baseline buffer against a tiny independent model: a list of the newest items.

Item ``i`` is encoded in every column (state ``[i, -i]``, action ``[i]``, reward ``[i / 2]``),
so each row read back can be checked intact across columns and named. Items are numbered
from 1: a row never written holds zeros, which decode as item 0, never stored.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer

CAPACITY = 7
SHAPES = [(2,), (1,), (1,)]
TYPES = [ms.float32, ms.int32, ms.float32]


def _batch(first: int, n: int) -> list[np.ndarray]:
    items = np.arange(first, first + n)
    return [np.stack([items, -items], 1).astype(np.float32), items.reshape(-1, 1).astype(np.int32),
            (items / 2).reshape(-1, 1).astype(np.float32)]


def _decode(columns) -> np.ndarray:
    """The item number of every row; fails unless all columns agree on it."""
    state, action, reward = columns
    items = action[:, 0]
    np.testing.assert_array_equal(state, np.stack([items, -items], 1))
    np.testing.assert_array_equal(reward[:, 0], items / 2)
    return items


class ListModel:
    """The definition of a FIFO buffer: the newest ``capacity`` items, oldest first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: list[int] = []

    def insert(self, first: int, n: int) -> None:
        self.items = (self.items + list(range(first, first + n)))[-self.capacity:]


@pytest.mark.parametrize(
    "batches",
    [[1, 1, 1], [3, 4], [7], [5, 5], [10], [2, 0, 6, 9, 1, 1, 13]],
    ids=["_from_empty", "_when_full", "_batch_equals_capacity", "_batch_crosses_end_before_full",
         "_batch_larger_than_capacity", "_wraps"],
)
def test_inserts_agree_with_the_model_after_every_step(batches):
    buffer, model = NumpyReplayBuffer(64, CAPACITY, SHAPES, TYPES, seed=0), ListModel(CAPACITY)
    first = 1
    for n in batches:
        buffer.insert(_batch(first, n))
        model.insert(first, n)
        first += n
        assert buffer.size() == len(model.items)
        assert _decode(buffer.ring.ordered()).tolist() == model.items
        # The ring's cursor contract: head moves only once full, so count < capacity implies head == 0.
        assert 0 <= buffer.ring.head < CAPACITY and (buffer.ring.count == CAPACITY or buffer.ring.head == 0)


@pytest.mark.parametrize("inserted", [1, 4, CAPACITY, 3 * CAPACITY + 2], ids=["_one", "_partly_full", "_full",
                                                                             "_wrapped"])
def test_samples_draw_only_stored_items_and_all_of_them(inserted):
    buffer, model = NumpyReplayBuffer(64, CAPACITY, SHAPES, TYPES, seed=1), ListModel(CAPACITY)
    for first in range(1, inserted + 1, 3):
        n = min(3, inserted + 1 - first)
        buffer.insert(_batch(first, n))
        model.insert(first, n)
    drawn = np.concatenate([_decode(buffer.sample()) for _ in range(50)])
    assert len(drawn) == 50 * 64
    # 3,200 uniform draws over at most 7 items: a stored item is missed with probability
    # (6/7)^3200 < 1e-200, so every stored item shows up, and nothing else may.
    assert set(drawn.tolist()) == set(model.items)


def test_the_same_seed_draws_the_same_samples():
    buffers = [NumpyReplayBuffer(16, CAPACITY, SHAPES, TYPES, seed=5) for _ in range(2)]
    for buffer in buffers:
        buffer.insert(_batch(1, 12))
    for _ in range(3):
        np.testing.assert_array_equal(_decode(buffers[0].sample()), _decode(buffers[1].sample()))


def test_sampling_an_empty_buffer_is_refused_and_the_buffer_stays_usable():
    buffer = NumpyReplayBuffer(4, CAPACITY, SHAPES, TYPES)
    with pytest.raises(ValueError, match="For 'sample', the buffer is empty"):
        buffer.sample()
    buffer.insert(_batch(1, 2))
    assert set(_decode(buffer.sample()).tolist()) <= {1, 2}


def test_columns_take_the_declared_dtypes_from_mindspore_or_numpy_types():
    from_mindspore = NumpyReplayBuffer(4, CAPACITY, SHAPES, TYPES)
    from_numpy = NumpyReplayBuffer(4, CAPACITY, SHAPES, [np.float32, "int32", np.dtype("float32")])
    for buffer in (from_mindspore, from_numpy):
        assert [column.dtype for column in buffer.ring.columns] == [np.float32, np.int32, np.float32]
        assert [column.shape for column in buffer.ring.columns] == [(CAPACITY, 2), (CAPACITY, 1), (CAPACITY, 1)]
