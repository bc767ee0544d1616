"""The MindSpore Reinforcement face: its buffer names and spellings, over the same core.

MindSpore Reinforcement (``mindspore_rl`` 0.6-0.7) named its FIFO buffer
``UniformReplayBuffer(sample_size, capacity, shapes, types)`` (0.6 spelt the first argument
``batch_size``). :class:`UniformReplayBuffer` is a :class:`~mindspore_rl_buffer.ReplayBuffer`
that takes those spellings too and exposes the columns under its name, ``buffer``. Its
``PriorityReplayBuffer`` and ``ReservoirReplayBuffer`` are this library's classes of the same
names, which take ``seed0``/``seed1`` and ``dtypes`` as it did; every buffer takes
``insert(state, action)`` (one tensor per column) and ``push``, as its priority and reservoir
buffers did, and has ``destroy()``. The migration guide (``docs/migrating/mindspore-rl.md``)
lists what is the same and what differs, and why.
"""
from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from mindspore_rl_buffer._validation import check_types
from mindspore_rl_buffer.replay_buffer import ReplayBuffer


class UniformReplayBuffer(ReplayBuffer):
    """MindSpore Reinforcement's ``UniformReplayBuffer``: a :class:`ReplayBuffer` under its name.

    Args:
        sample_size (int): Items per :meth:`sample` (``batch_size=`` is accepted too, as
            MindSpore Reinforcement 0.6 named it).
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column (``dtypes=`` is accepted too).
        ordered, replace, seed, names: As :class:`ReplayBuffer`.

    Raises:
        TypeError: If a required argument is missing or given twice under both its names.
        ValueError: As :class:`ReplayBuffer`.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import UniformReplayBuffer
        >>> urb = UniformReplayBuffer(2, 4, [(2,), ()], [ms.float32, ms.int32])
        >>> urb.insert(np.ones(2, np.float32), np.int32(7))   # one tensor per column, as mindspore_rl's
        >>> urb.insert([np.zeros((2, 2), np.float32), np.arange(2, dtype=np.int32)])
        >>> int(urb.size()), [x.shape for x in urb.sample()], urb.buffer[1].shape
        (3, [(2, 2), (2,)], (4,))
    """

    def __init__(
        self,
        sample_size: int | None = None,
        capacity: int | None = None,
        shapes: Sequence[Any] | None = None,
        types: Sequence[Any] | None = None,
        *,
        ordered: bool = False,
        replace: bool = True,
        seed: int | None = None,
        names: Sequence[str] | None = None,
        batch_size: int | None = None,
        dtypes: Sequence[Any] | None = None,
    ) -> None:
        op = type(self).__name__
        if sample_size is not None and batch_size is not None:
            raise TypeError(f"For '{op}', give the sample size once, as 'sample_size' or 'batch_size', but got both.")
        sample_size = batch_size if sample_size is None else sample_size
        for arg, value in (("sample_size", sample_size), ("capacity", capacity), ("shapes", shapes)):
            if value is None:
                raise TypeError(f"For '{op}', the argument '{arg}' is required, but it was not given.")
        super().__init__(sample_size, capacity, shapes, check_types(op, types, dtypes), ordered=ordered,
                         replace=replace, seed=seed, names=names)

    @property
    def buffer_sample(self) -> Any:
        """What MindSpore Reinforcement's algorithms read of its ``BufferSample`` primitive: its
        ``batch_size`` (GAIL sizes its discriminator's targets by it). Sample with :meth:`sample`."""
        return types.SimpleNamespace(batch_size=self.sample_size)

    def buffer_append(self, buffer: Any, exp: Any, count: Any, head: Any) -> Any:
        """MindSpore Reinforcement's ``BufferAppend`` primitive as its buffers called it on their
        own state, ``self.buffer_append(self.buffer, exp, self.count, self.head)`` (MAPPO's
        buffer subclass does): inserts ``exp``, as :meth:`insert`. Only this buffer's own
        ``buffer``, ``count`` and ``head`` may be passed; they are not read."""
        return self.insert(exp)

    @property
    def buffer(self):
        """The columns under MindSpore Reinforcement's name (``self.buffer``), in their dtypes: the
        Parameters, and a bool column (stored as uint8) cast back to bool, as it held them."""
        return self.decode(self.columns)
