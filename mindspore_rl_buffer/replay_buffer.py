"""ReplayBuffer: a uniform FIFO replay buffer whose state lives on the device."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, jit, ops
from mindspore.common.initializer import initializer

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import DIRECT_CALLS, BufferCell, in_graph
from mindspore_rl_buffer.ops import ring
from mindspore_rl_buffer.specs import TensorSpec, column_specs

if TYPE_CHECKING:
    from mindspore_rl_buffer.writer import BufferWriter

_INT_DTYPES = (ms.int8, ms.int16, ms.int32, ms.int64, ms.uint8, ms.uint16, ms.uint32, ms.uint64)


def check_size(op: str, arg: str, value: Any, minimum: int = 1) -> int:
    """Return ``value`` if it is an int ``>= minimum`` (not a bool); raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _errors.type_error(op, arg, "an int", value)
    if value < minimum:
        raise _errors.value_error(op, arg, f"an int >= {minimum}", value)
    return int(value)


def check_batch(op, names, shapes, dtypes, got_count, got_shapes, got_dtypes):
    """Check one transition or a batch against the columns; return ``(batch_size, single)``.

    A transition has each column's shape; a batch has a leading dimension ``n`` on every
    column. Runs on the host for direct calls and, as ``_check_batch_graph``, when a graph is
    compiled.
    """
    if got_count != len(names):
        raise ValueError(f"For '{op}', the transition must have {len(names)} columns "
                         f"{tuple(names)}, but got {got_count}.")
    batch_size, single = None, None
    for name, shape, dtype, got_shape, got_dtype in zip(names, shapes, dtypes, got_shapes, got_dtypes):
        got_shape = tuple(got_shape)
        if got_dtype != dtype:
            raise _errors.column_error(op, name, "dtype", dtype, got_dtype)
        if got_shape == tuple(shape):
            this_single, this_size = True, 1
        elif len(got_shape) == len(shape) + 1 and got_shape[1:] == tuple(shape):
            this_single, this_size = False, got_shape[0]
        else:
            expected = f"{tuple(shape)} (one item) or {('n', *shape)} (a batch)".replace("'n'", "n")
            raise _errors.column_error(op, name, "shape", expected, got_shape)
        if batch_size is None:
            batch_size, single = this_size, this_single
        elif (this_single, this_size) != (single, batch_size):
            raise ValueError(f"For '{op}', every column must hold the same number of items, but column "
                             f"'{names[0]}' has shape {tuple(got_shapes[0])} and column '{name}' "
                             f"has shape {got_shape}.")
    return batch_size, single


_check_batch_graph = ops.constexpr(check_batch)


@ops.constexpr
def _index_constant(index):
    return Tensor(index, ms.int32)


def _host_tensor(op: str, names: tuple[str, ...], i: int, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return Tensor(np.asarray(value))
    raise _errors.not_an_array_error(op, names, i, value)


class ReplayBuffer(BufferCell):
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
        seed (int): Seed of the sampling operator; ``None`` follows ``mindspore.set_seed``.
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

    _LIST_NAMED = ("insert",)

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
        super().__init__()
        op = type(self).__name__
        sample_size = check_size(op, "sample_size", sample_size)
        capacity = check_size(op, "capacity", capacity)
        for arg, flag in (("ordered", ordered), ("replace", replace)):
            if not isinstance(flag, bool):
                raise _errors.type_error(op, arg, "a bool", flag)
        if not replace and sample_size > capacity:
            raise ValueError(f"For '{op}' without replacement, 'sample_size' ({sample_size}) must not "
                             f"exceed 'capacity' ({capacity}).")
        if seed is not None:
            check_size(op, "seed", seed, minimum=0)
        specs = column_specs(shapes, types, names)
        self._specs = specs
        self._names = tuple(spec.name for spec in specs)
        self._shapes = tuple(spec.shape for spec in specs)
        self._dtypes = tuple(spec.dtype for spec in specs)
        self._capacity = capacity
        self._sample_size = sample_size
        self._ordered = ordered
        self._replace = replace
        self._seed = seed
        self.columns = ParameterTuple(
            Parameter(initializer("zeros", (capacity, *spec.shape), spec.dtype), name=spec.name,
                      requires_grad=False)
            for spec in specs
        )
        self.head = Parameter(Tensor(0, ms.int32), name="head", requires_grad=False)
        self.count = Parameter(Tensor(0, ms.int32), name="count", requires_grad=False)

    # ----------------------------------------------------------------- properties (host)
    @property
    def capacity(self) -> int:
        """Items the buffer holds."""
        return self._capacity

    @property
    def sample_size(self) -> int:
        """Items per :meth:`sample`."""
        return self._sample_size

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """One :class:`TensorSpec` per column."""
        return self._specs

    # ------------------------------------------------------------------------- insert
    def insert(self, transition):
        """Append one transition or a batch of them; the oldest are overwritten once full.

        Inside a ``construct`` write ``_ = self.buffer.insert(...)``: MindSpore's graph
        parser rewrites a bare ``self.buffer.insert(...)`` statement into
        ``self.buffer = self.buffer.insert(...)`` (it takes ``insert`` for a list method),
        after which the buffer's later calls in that graph would read stale data. The
        rebinding is caught and raised as a ``TypeError`` naming the fix, when the graph
        first runs.

        Args:
            transition (Union[list[Tensor], tuple[Tensor]]): One tensor (or numpy array, for
                direct calls) per column: of the column's shape for one item, or with a
                leading batch dimension ``n`` (0 is allowed; of ``n > capacity`` items only
                the newest ``capacity`` are kept). Dtypes must match the columns.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            TypeError: If ``transition`` is not a list or tuple, or a column is not a tensor.
            ValueError: If the number of columns, a shape or a dtype does not match; the
                buffer is left unchanged.
        """
        if in_graph():
            self._write(transition)
            return self
        op = "insert"
        if not isinstance(transition, (list, tuple)):
            raise _errors.type_error(op, "transition", "a list or tuple of tensors, one per column",
                                     transition)
        tensors = [_host_tensor(op, self._names, i, value) for i, value in enumerate(transition)]
        batch_size, _ = check_batch(op, self._names, self._shapes, self._dtypes, len(tensors),
                                    [t.shape for t in tensors], [t.dtype for t in tensors])
        if batch_size:
            with DIRECT_CALLS:
                self._insert_compiled(*tensors)
        return None

    def writer(self, batch_size: int = 32) -> BufferWriter:
        """A :class:`~mindspore_rl_buffer.writer.BufferWriter` that stages transitions on the
        host and inserts them ``batch_size`` at a time: the fast way to insert from a Python
        loop (a launch costs the same for 1 row as for 32). Staged transitions reach the
        buffer when a batch fills and on ``flush()`` (or the end of a ``with`` block).

        Raises:
            TypeError: If ``batch_size`` is not an int.
            ValueError: If ``batch_size`` is not positive.
        """
        from mindspore_rl_buffer.writer import BufferWriter

        return BufferWriter(self, batch_size)

    def _batch(self, transition):
        """``(batch_size, batch)``: the transition with a leading dimension on every column,
        checked against the columns when the graph is compiled."""
        batch_size, single = _check_batch_graph(
            "insert", self._names, self._shapes, self._dtypes, len(transition),
            [x.shape for x in transition], [x.dtype for x in transition])
        # `single` is a compile-time constant: only one branch reaches the graph.
        return batch_size, [ops.expand_dims(x, 0) for x in transition] if single else transition

    def _write(self, transition):
        batch_size, batch = self._batch(transition)
        if batch_size > 0:
            _, head, count = ring.insert(self.columns, self.head, self.count, batch)
            ops.assign(self.head, head)
            ops.assign(self.count, count)
        return batch_size

    @jit
    def _insert_compiled(self, *transition):
        return self._write(transition)

    # ----------------------------------------------------------------------- get_item
    def get_item(self, index):
        """Read stored items by logical index: 0 is the oldest, ``-1`` the newest.

        Args:
            index (Union[int, Tensor]): An int, or an int tensor (scalar or 1-D) of indexes,
                each in ``[-size(), size())``.

        Returns:
            Tuple of tensors, one per column: one row of the column's shape, or for a 1-D
            index the rows stacked along a leading dimension.

        Raises:
            TypeError: If ``index`` is not an int or an int tensor (a bool or float is not).
            ValueError: If an index tensor has more than one dimension.
            IndexError: If an index is out of range (direct calls, checked on the host). Inside a
                graph the run fails with ``RuntimeError: assert failed`` instead (MindSpore prints
                the index and the count), and that compiled graph cannot run again.
        """
        if in_graph():
            if isinstance(index, int):
                index = _index_constant(index)
            return ring.get_item(self.columns, self.head, self.count, index.astype(ms.int32), True)
        op = "get_item"
        if isinstance(index, (bool, np.bool_)):
            raise _errors.type_error(op, "index", "an int or an int tensor", index)
        if isinstance(index, (int, np.integer)):
            values = np.asarray(index, np.int64)
        elif isinstance(index, (Tensor, np.ndarray)):
            is_int = index.dtype in _INT_DTYPES if isinstance(index, Tensor) else index.dtype.kind in "iu"
            if not is_int:
                raise TypeError(f"For '{op}', 'index' must be an int or an int tensor, but got a tensor "
                                f"of dtype {index.dtype}.")
            values = index.asnumpy() if isinstance(index, Tensor) else index
            if values.ndim > 1:
                raise _errors.value_error(op, "index", "a scalar or 1-D tensor", f"shape {values.shape}")
        else:
            raise _errors.type_error(op, "index", "an int or an int tensor", index)
        size = int(self.count)
        if values.size and (values.min() < -size or values.max() >= size):
            bad = values[(values < -size) | (values >= size)]
            raise _errors.index_error(op, bad.tolist()[0] if bad.ndim else int(bad), size)
        logical = np.where(values < 0, values + size, values).astype(np.int32)
        with DIRECT_CALLS:
            return self._get_item_compiled(Tensor(logical))

    @jit
    def _get_item_compiled(self, index):
        return ring.get_item(self.columns, self.head, self.count, index, False)

    # ------------------------------------------------------------------------- sample
    def sample(self, ordered=None):
        """Draw ``sample_size`` items uniformly from the stored ones.

        Args:
            ordered (bool): Return them oldest first; ``None`` takes the constructor's
                setting. Default: ``None``.

        Returns:
            Tuple of tensors, one per column, each with leading dimension ``sample_size``.

        Raises:
            TypeError: If ``ordered`` is not a bool or None.
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

    def _sample(self, ordered, with_indices):
        if ordered is None:
            ordered = self._ordered
        if in_graph():
            logical, items = ring.sample(self.columns, self.head, self.count, self._sample_size, ordered,
                                         self._replace, self._seed, True)
            return (logical, items) if with_indices else items
        op = "sample"
        if not isinstance(ordered, bool):
            raise _errors.type_error(op, "ordered", "a bool or None", ordered)
        size = int(self.count)
        if size == 0:
            raise _errors.empty_error(op)
        if not self._replace and self._sample_size > size:
            raise _errors.not_enough_error(op, self._sample_size, size)
        with DIRECT_CALLS:
            return self._sample_compiled(ordered, with_indices)

    @jit
    def _sample_compiled(self, ordered, with_indices):
        # A graph without the indexes among its outputs is compiled without their kernels.
        logical, items = ring.sample(self.columns, self.head, self.count, self._sample_size, ordered,
                                     self._replace, self._seed, False)
        return (logical, items) if with_indices else items

    # ------------------------------------------------------------- reset, size, full
    def reset(self):
        """Empty the buffer: both cursors back to 0, as constructed; nothing is re-allocated."""
        if in_graph():
            return self._reset_graph()
        with DIRECT_CALLS:
            return self._reset_compiled()

    def _reset_graph(self):
        ops.assign(self.head, ops.zeros_like(self.head))
        ops.assign(self.count, ops.zeros_like(self.count))
        return self.count

    @jit
    def _reset_compiled(self):
        return self._reset_graph()

    def size(self):
        """Return how many items are stored, as an int32 scalar tensor."""
        if in_graph():
            return self.count + 0
        with DIRECT_CALLS:
            return self._size_compiled()

    @jit
    def _size_compiled(self):
        return self.count + 0

    def full(self):
        """Return whether the buffer holds ``capacity`` items, as a bool scalar tensor."""
        if in_graph():
            return self.count == self._capacity
        with DIRECT_CALLS:
            return self._full_compiled()

    @jit
    def _full_compiled(self):
        return self.count == self._capacity

    def extend_repr(self) -> str:
        columns = ", ".join(f"{s.name}: {s.shape} {s.dtype}" for s in self._specs)
        return (f"sample_size={self._sample_size}, capacity={self._capacity}, ordered={self._ordered}, "
                f"replace={self._replace}, columns=[{columns}]")
