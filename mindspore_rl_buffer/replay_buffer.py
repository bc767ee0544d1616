"""ReplayBuffer: a uniform FIFO replay buffer whose state lives on the device."""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from mindspore import nn

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import Launch, buffer_method
from mindspore_rl_buffer._graph_checks import check_ordered_graph
from mindspore_rl_buffer._validation import (
    check_bool,
    check_capacity,
    check_not_empty,
    check_ordered,
    check_seed,
    check_size,
)
from mindspore_rl_buffer.core import RingBuffer, reserved_names, taken_names
from mindspore_rl_buffer.ops import ring
from mindspore_rl_buffer.specs import check_batch_bytes, check_without_replacement


def _host_sample(self: ReplayBuffer, ordered: Any = None, with_indices: bool = False) -> Launch:
    ordered = check_ordered("sample", ordered, self._ordered)
    size = int(self.count)
    check_not_empty("sample", size)
    if not self._replace and self._sample_size > size:
        raise _errors.not_enough_error("sample", self._sample_size, size)
    return Launch(ordered, with_indices)


class ReplayBuffer(RingBuffer):
    """A uniform replay buffer whose columns and cursors live on the device.

    State: one ``Parameter`` per column of shape ``(capacity, *shape)`` and two int32
    cursors ``head`` and ``count``, as the cursor contract in :mod:`mindspore_rl_buffer.ops`
    states. Every method works called directly from Python (it checks its input on the
    host, then runs a graph compiled once per input signature) and inside a user's
    ``construct`` (it becomes part of the user's graph). Inside a ``construct`` write
    ``_ = self.buffer.insert(...)``: see :meth:`insert`.

    Args:
        sample_size (int): Items per :meth:`sample`.
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column (names such as ``'float32'``
            are accepted).
        ordered (bool): Whether :meth:`sample` returns its items oldest first by default.
            Default: ``False``.
        replace (bool): Whether :meth:`sample` draws with replacement. Default: ``True``.
        seed (int): Seed of the sampling operators, in ``[0, 2**31)``: it alone fixes the
            buffer's draws (two buffers built with the same seed draw the same indexes; see
            the seeding guide, ``docs/guides/seeding.md``). ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.
        names (list[str]): Column names, used for the Parameters and in errors.
            Default: ``None``, which names them ``column_0``, ``column_1``, ...

    Raises:
        TypeError: If a size is not an int, or ``shapes``/``types`` is not a list.
        ValueError: If a size is not positive, ``sample_size > capacity`` without
            replacement, ``shapes`` and ``types`` differ in length, or a dtype is unknown.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import ReplayBuffer
        >>> rb = ReplayBuffer(2, 3, [(2,), ()], [ms.float32, ms.int32])
        >>> rb.insert([np.zeros((4, 2), np.float32), np.arange(4, dtype=np.int32)])
        >>> int(rb.size()), bool(rb.full())
        (3, True)
        >>> [int(x) for x in (rb.get_item(0)[1], rb.get_item(-1)[1])]
        [1, 3]
        >>> [x.shape for x in rb.sample()]
        [(2, 2), (2,)]
    """

    def __init__(
        self,
        sample_size: int,
        capacity: int,
        shapes: Sequence[Any],
        types: Sequence[Any],
        *,
        ordered: bool = False,
        replace: bool = True,
        seed: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        op = type(self).__name__
        sample_size = check_size(op, "sample_size", sample_size)
        capacity = check_capacity(op, "capacity", capacity)
        check_bool(op, "ordered", ordered)
        check_bool(op, "replace", replace)
        if not replace:
            check_without_replacement(op, sample_size, capacity)
        seed = check_seed(op, seed)  # an int: a numpy integer would not go into the checkpoint's JSON
        super().__init__(capacity, shapes, types, names=names, seed=seed)
        check_batch_bytes(op, "sample_size", sample_size, self.specs)
        self._sample_size = sample_size
        self._ordered = ordered
        self._replace = replace
        self._seed = seed

    @property
    def sample_size(self) -> int:
        """Items per :meth:`sample`."""
        return self._sample_size

    # ------------------------------------------------------------------------- sample
    def sample(self, ordered=None):
        """Draw ``sample_size`` items uniformly from the stored ones.

        Args:
            ordered (bool): Return them oldest first; ``None`` takes the constructor's
                setting. Default: ``None``.

        Returns:
            Tuple of tensors, one per column, each with leading dimension ``sample_size``.

        Raises:
            TypeError: If ``ordered`` is not a bool or None, or inside a graph not a Python
                constant (a ``mindspore.mutable``, say).
            ValueError: If the buffer is empty, or holds fewer than ``sample_size`` items
                and draws without replacement (direct calls, checked on the host). Inside a graph
                the run fails with ``RuntimeError: assert failed`` instead (MindSpore prints the
                count), and that compiled graph cannot run again.
        """
        return self._sample(ordered, False)

    def sample_with_indices(self, ordered=None):
        """Like :meth:`sample`, and also return the logical indexes of the items drawn.

        Returns:
            Tuple of 2: an int32 tensor of shape ``(sample_size,)`` with the logical indexes
            (0 = oldest), and the tuple of column tensors.
        """
        return self._sample(ordered, True)

    @buffer_method(_host_sample)
    def _sample(self, ordered, with_indices, *, check=True):
        ordered = check_ordered_graph("sample", ordered, self._ordered)  # a constant: checked at compile time
        # A graph without the indexes among its outputs is compiled without their kernels.
        logical, items = ring.sample(self.columns, self.head, self.count, self._sample_size, ordered,
                                     self._replace, self.rng(), check)
        items = self.decode(items)
        return (logical, items) if with_indices else items

    def _settings(self) -> dict[str, Any]:
        return {"sample_size": self._sample_size, "ordered": self._ordered, "replace": self._replace,
                "seed": self._seed}


@functools.cache
def replay_buffer_attributes() -> frozenset[str]:
    """The names no column of a :class:`ReplayBuffer` may take: its attributes and methods
    (:func:`~mindspore_rl_buffer.core.taken_names`) and the names of its own state (``head``, ...)."""
    return taken_names(nn.Cell(), ReplayBuffer) | frozenset(reserved_names(ReplayBuffer))
