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


class PriorityModel(RingModel):
    """The ring plus one float64 priority per physical slot, from the paper's definitions.

    New items get the largest priority stored so far (1 at first); priorities are clamped
    below at ``floor``; of repeated indexes in one update the last wins; sampling
    probabilities are ``p ** alpha / sum(p ** alpha)`` over the stored slots ``[0, count)``.
    """

    def __init__(self, alpha: float, capacity: int, shapes, dtypes, floor: float = 1e-8) -> None:
        super().__init__(capacity, shapes, dtypes)
        self.alpha, self.floor = alpha, floor
        self.priorities = np.zeros(capacity)
        self.max_priority = 1.0

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            row = (self.head + self.count) % self.capacity
            super().insert([column[j:j + 1] for column in batch])
            self.priorities[row] = self.max_priority

    def update(self, indices, priorities) -> None:
        written = {}
        for index, priority in zip(indices, priorities):
            written[int(index)] = max(float(priority), self.floor)
        for index, priority in written.items():
            self.priorities[index] = priority
        self.max_priority = max([self.max_priority, *written.values()])

    def leaves(self) -> np.ndarray:
        """``p ** alpha`` for stored slots, 0 for the others."""
        stored = np.arange(self.capacity) < self.count
        return np.where(stored, self.priorities ** self.alpha, 0.0)

    def probabilities(self) -> np.ndarray:
        leaves = self.leaves()
        return leaves / leaves.sum()

    def weights(self, slots, beta: float) -> np.ndarray:
        """``(N * P(i)) ** -beta`` over its maximum across the stored items, for each slot."""
        probabilities = self.probabilities()[: self.count]
        return (self.count * probabilities[slots]) ** -beta / (self.count * probabilities.min()) ** -beta

    def reset(self) -> None:
        super().reset()
        self.priorities[:] = 0.0
        self.max_priority = 1.0


class ReservoirModel:
    """Vitter's algorithm R, one item at a time, with numpy's random generator."""

    def __init__(self, capacity: int, rng: np.random.Generator) -> None:
        self.capacity, self.rng = capacity, rng
        self.items = np.full(capacity, -1)
        self.seen = 0

    def offer(self, item: int) -> None:
        self.seen += 1
        if self.seen <= self.capacity:
            self.items[self.seen - 1] = item
        else:
            slot = self.rng.integers(self.seen)
            if slot < self.capacity:
                self.items[slot] = item


def apply_in_order(old: np.ndarray, rows, values, order) -> np.ndarray:
    """A scatter that applies its writes in ``order`` (to mimic any order a device takes)."""
    result = old.copy()
    for j in order:
        result[rows[j]] = values[j]
    return result
