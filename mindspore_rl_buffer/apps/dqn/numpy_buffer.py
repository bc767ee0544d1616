"""The host-side baseline buffer: sampled on the host, the batch converted for the learn graph."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np

from mindspore_rl_buffer.py_uniform import ring_insert
from mindspore_rl_buffer.specs import numpy_dtype


class NumpyReplayBuffer:
    """A FIFO replay buffer in numpy with the ring layout of :mod:`mindspore_rl_buffer.ops`.

    The host-side baseline: :meth:`sample` draws uniformly with replacement on the host.

    Args:
        sample_size (int): Items per sample.
        capacity (int): Items held; the oldest are overwritten.
        shapes (Sequence[tuple[int]]): Item shape per column.
        types (Sequence): Dtype per column (MindSpore or numpy).
        seed (int): Seed of the sampling generator. Default: ``None``.
    """

    def __init__(self, sample_size: int, capacity: int, shapes: Sequence[Any], types: Sequence[Any],
                 seed: int | None = None):
        dtypes = [numpy_dtype(t) if isinstance(t, ms.dtype.Type) else np.dtype(t) for t in types]
        self.columns = [np.zeros((capacity, *shape), dtype) for shape, dtype in zip(shapes, dtypes)]
        self.sample_size = sample_size
        self.capacity = capacity
        self.head = 0
        self.count = 0
        self._rng = np.random.default_rng(seed)

    def insert(self, batch: Sequence[np.ndarray]) -> None:
        """Append a batch (leading dimension ``n`` on every column)."""
        self.head, self.count = ring_insert(self.columns, self.head, self.count, list(batch))

    def sample(self) -> tuple[np.ndarray, ...]:
        """Draw ``sample_size`` stored items uniformly with replacement."""
        if self.count == 0:
            raise ValueError("For 'sample', the buffer is empty: insert at least one item first.")
        rows = self._rng.integers(0, self.count, self.sample_size)
        return tuple(column[rows] for column in self.columns)

    def size(self) -> int:
        """Items stored."""
        return self.count
