"""An independent numpy model of the ring buffer, written from the cursor contract.

Items go in one at a time, so batch inserts, wraparound and overflow are checked against
the plain definition rather than against the vectorised arithmetic of ``ops``.
"""
from __future__ import annotations

import numpy as np


class RingModel:
    """Columns of ``capacity`` rows plus ``head`` and ``count``, updated item by item."""

    def __init__(self, capacity: int, shapes, dtypes) -> None:
        self.capacity = capacity
        self.columns = [np.zeros((capacity, *shape), dtype) for shape, dtype in zip(shapes, dtypes)]
        self.head = 0
        self.count = 0

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            row = (self.head + self.count) % self.capacity
            for column, values in zip(self.columns, batch):
                column[row] = values[j]
            if self.count < self.capacity:
                self.count += 1
            else:
                self.head = (self.head + 1) % self.capacity

    def row(self, logical: int) -> int:
        if logical < 0:
            logical += self.count
        assert 0 <= logical < self.count
        return (self.head + logical) % self.capacity

    def item(self, logical: int):
        return [column[self.row(logical)] for column in self.columns]

    def reset(self) -> None:
        self.head = self.count = 0


def encoded_batch(start: int, n: int, single: bool = False):
    """Items ``start .. start+n-1`` whose every column encodes the item number ``i``.

    Columns: state ``(2,)`` float32 ``[i, -i]``, action ``()`` int32 ``i``, reward ``(1,)``
    float32 ``[i / 2]``. A sampled row is intact iff all three decode to the same ``i``.
    """
    ids = np.arange(start, start + n)
    batch = [np.stack([ids, -ids], 1).astype(np.float32), ids.astype(np.int32),
             (ids / 2).astype(np.float32).reshape(n, 1)]
    if single:
        return [column[0] for column in batch]
    return batch


SHAPES = [(2,), (), (1,)]
DTYPES = [np.float32, np.int32, np.float32]


def decode(state, action, reward) -> np.ndarray:
    """The item numbers of sampled rows; raises if a row is torn across columns."""
    state, action, reward = (np.asarray(x) for x in (state, action, reward))
    ids = action.astype(np.int64)
    assert np.array_equal(state[..., 0], ids) and np.array_equal(state[..., 1], -ids), "torn row"
    assert np.array_equal(reward[..., 0], (ids / 2).astype(np.float32)), "torn row"
    return ids
