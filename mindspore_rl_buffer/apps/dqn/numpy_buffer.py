"""The host-side baseline buffer: sampled on the host, the batch converted for the learn graph.

It stores its items in the library's one numpy ring,
:class:`mindspore_rl_buffer.host_ring.NumpyRing`, which keeps the device buffers' cursor
contract; this class adds only the sampling generator and the baseline's interface.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np

from mindspore_rl_buffer.host_ring import NumpyRing


def _numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype of a MindSpore dtype, or of anything ``numpy.dtype`` takes."""
    return np.dtype(ms.dtype_to_nptype(dtype) if isinstance(dtype, ms.dtype.Type) else dtype)


class NumpyReplayBuffer:
    """A FIFO replay buffer in numpy arrays, sampled uniformly with replacement on the host.

    The baseline that ``mindspore-rl-buffer train --buffer numpy`` and the learn-step
    benchmark compare the device buffer with.

    Args:
        sample_size (int): Items per sample.
        capacity (int): Items held; the oldest are overwritten.
        shapes (Sequence[tuple[int]]): Item shape per column.
        types (Sequence): Dtype per column (MindSpore or numpy).
        seed (int): Seed of the sampling generator. Default: ``None``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
        >>> rb = NumpyReplayBuffer(4, 3, [(2,), (1,)], [ms.float32, ms.int32], seed=0)
        >>> rb.insert([np.arange(8, dtype=np.float32).reshape(4, 2), np.arange(4, dtype=np.int32).reshape(4, 1)])
        >>> rb.size(), rb.ring.ordered()[1][:, 0].tolist()   # the newest 3, oldest first
        (3, [1, 2, 3])
        >>> state, index = rb.sample()
        >>> state.shape, bool(np.isin(index, [1, 2, 3]).all())
        ((4, 2), True)
    """

    def __init__(self, sample_size: int, capacity: int, shapes: Sequence[Any], types: Sequence[Any],
                 seed: int | None = None) -> None:
        self.sample_size = int(sample_size)
        self.ring = NumpyRing(capacity, shapes, [_numpy_dtype(dtype) for dtype in types])
        self.rng = np.random.default_rng(seed)

    @property
    def capacity(self) -> int:
        """Items the buffer holds."""
        return self.ring.capacity

    def insert(self, batch: Sequence[np.ndarray]) -> None:
        """Append a batch (leading dimension ``n`` on every column); FIFO once full."""
        self.ring.insert(list(batch))

    def sample(self) -> tuple[np.ndarray, ...]:
        """Draw ``sample_size`` stored items uniformly with replacement.

        Raises:
            ValueError: If the buffer is empty.
        """
        if self.ring.count == 0:
            raise ValueError("For 'sample', the buffer is empty: insert at least one item first.")
        rows = self.ring.sample_rows(self.rng, self.sample_size)
        return tuple(column[rows] for column in self.ring.columns)

    def size(self) -> int:
        """Items stored."""
        return self.ring.count
