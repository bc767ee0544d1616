"""NumpyRing: the ring buffer's cursor contract on the host, in numpy arrays.

The one numpy ring of the library: :class:`~mindspore_rl_buffer.PyUniformReplayBuffer`
stores its items in it, the trajectory buffer reads its logical order with
:func:`logical_rows`, and applications use it for host-side baselines. It keeps the cursor
contract of :mod:`mindspore_rl_buffer.ops` (``0 <= count <= capacity``, ``0 <= head <
capacity``, ``head`` moves only once full, logical index ``i`` at row ``(head + i) %
capacity``), so its state can be handed to a device buffer as it is.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def logical_rows(head: int, logical: Any, capacity: int) -> np.ndarray:
    """Physical rows of logical indexes (0 = oldest): ``(head + logical) % capacity``.

    Examples:
        >>> logical_rows(3, np.arange(4), 5).tolist()
        [3, 4, 0, 1]
    """
    return (head + np.asarray(logical)) % capacity


class NumpyRing:
    """``capacity`` rows per column in numpy arrays, with ``head`` and ``count`` cursors.

    Args:
        capacity (int): Rows per column.
        shapes (Sequence[tuple[int]]): The shape of one item, per column.
        dtypes (Sequence[numpy.dtype]): The numpy dtype per column.

    Examples:
        >>> ring = NumpyRing(3, [(2,)], [np.float32])
        >>> ring.insert([np.arange(8, dtype=np.float32).reshape(4, 2)]).tolist()  # rows written
        [1, 2, 0]
        >>> ring.head, ring.count, ring.ordered()[0][:, 0].tolist()
        (1, 3, [2.0, 4.0, 6.0])
    """

    def __init__(self, capacity: int, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any]) -> None:
        self.capacity = int(capacity)
        self.columns = [np.zeros((self.capacity, *shape), dtype) for shape, dtype in zip(shapes, dtypes)]
        self.head = 0
        self.count = 0

    def insert(self, batch: Sequence[np.ndarray]) -> np.ndarray:
        """Append a batch (leading dimension ``n`` on every column) in place; FIFO once full.

        Of a batch larger than ``capacity`` only the newest ``capacity`` items are kept.

        Returns:
            The physical rows written, oldest item first.
        """
        n = len(batch[0])
        kept = min(n, self.capacity)
        rows = logical_rows(self.head, self.count + (n - kept) + np.arange(kept), self.capacity)
        for column, values in zip(self.columns, batch):
            column[rows] = values[n - kept:]
        total = self.count + n
        new_count = min(total, self.capacity)
        self.head = (self.head + total - new_count) % self.capacity
        self.count = new_count
        return rows

    def rows(self, logical: Any) -> np.ndarray:
        """Physical rows of logical indexes in ``[0, count)``."""
        return logical_rows(self.head, logical, self.capacity)

    def ordered_rows(self) -> np.ndarray:
        """The physical rows of every stored item, oldest first."""
        return self.rows(np.arange(self.count))

    def ordered(self) -> list[np.ndarray]:
        """Every stored item, oldest first: one array per column (a copy)."""
        rows = self.ordered_rows()
        return [column[rows] for column in self.columns]

    def sample_rows(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` physical rows drawn uniformly, with replacement, from the stored items."""
        return rng.integers(0, self.count, size)

    def window_rows(self, rng: np.random.Generator, picks: int, steps: int) -> np.ndarray:
        """``picks`` windows of ``steps`` consecutive stored items that never cross the write
        position: physical rows of shape ``(picks, steps)``; starts uniform over the valid ones."""
        starts = rng.integers(0, self.count - steps + 1, size=(picks, 1))
        return self.rows(starts + np.arange(steps))

    def clear(self) -> None:
        """Empty the ring: both cursors back to 0."""
        self.head = self.count = 0


# The state of numpy's PCG64 generator as ten int64 words, for checkpoints: the 128-bit
# state and increment in 32-bit words (least significant first), then ``has_uint32`` and
# ``uinteger`` (a cached half of a 64-bit draw).
GENERATOR_WORDS = 10


def generator_words(rng: np.random.Generator) -> np.ndarray:
    """The state of ``rng`` (PCG64) as :data:`GENERATOR_WORDS` int64 words."""
    state = rng.bit_generator.state
    words = [(value >> (32 * i)) & 0xFFFFFFFF for value in (state["state"]["state"], state["state"]["inc"])
             for i in range(4)]
    return np.array([*words, state["has_uint32"], state["uinteger"]], np.int64)


def generator_problems(words: Any) -> list[str]:
    """What keeps ``words`` from being a PCG64 state (empty if nothing)."""
    words = np.asarray(words)
    if (words.shape != (GENERATOR_WORDS,) or not ((words >= 0) & (words <= 0xFFFFFFFF)).all()
            or words[8] not in (0, 1) or words[4] % 2 != 1):
        return [f"the numpy generator's state must be {GENERATOR_WORDS} words in [0, 2**32) with an odd "
                f"increment and has_uint32 in {{0, 1}}, but got {words.tolist()}"]
    return []


def generator_of(words: Any) -> np.random.Generator:
    """A PCG64 generator in the state ``words`` (checked by :func:`generator_problems`)."""
    w = [int(x) for x in np.asarray(words)]
    bit_generator = np.random.PCG64()
    bit_generator.state = {"bit_generator": "PCG64",
                           "state": {"state": sum(w[i] << (32 * i) for i in range(4)),
                                     "inc": sum(w[4 + i] << (32 * i) for i in range(4))},
                           "has_uint32": w[8], "uinteger": w[9]}
    return np.random.Generator(bit_generator)
