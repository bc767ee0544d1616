"""RingBuffer: the ring core every device buffer is built on.

State: one ``Parameter`` per column, of shape ``(capacity, *spec.shape)``, and the int32
cursors ``head`` and ``count``, under the cursor contract of :mod:`mindspore_rl_buffer.ops`.
The core's public methods (``insert``, ``get_item``, ``reset``, ``size``, ``full``,
``writer``, ``save``, ``load``) are made with :func:`~mindspore_rl_buffer._graph.buffer_method`,
so each works called directly and compiled into a user's graph.

The interface for the buffers built on the core, in the manner of TF-Agents' public
``add_batch`` over an overridable ``_add_batch``:

* subclasses (:class:`~mindspore_rl_buffer.ReplayBuffer`,
  :class:`~mindspore_rl_buffer.PriorityReplayBuffer`, ...) override the graph hooks
  :meth:`RingBuffer._write` (store a checked batch, move the cursors, return the rows
  written) and :meth:`RingBuffer._clear` (the state as constructed), and the record hooks
  :meth:`RingBuffer._settings` and :meth:`RingBuffer.checkpoint_cursors`;
* buffers that hold a core as ``storage`` (:class:`~mindspore_rl_buffer.TrajectoryReplayBuffer`,
  :class:`~mindspore_rl_buffer.ShardedReplayBuffer`) use only its public methods and its public
  state (``columns``, ``head``, ``count``, ``capacity``, ``specs``), which they may pass to
  the operators of :mod:`mindspore_rl_buffer.ops`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, ops
from mindspore.common.initializer import initializer

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import BufferCell, Launch, buffer_method, destroy, insert_plan
from mindspore_rl_buffer._graph_checks import Variable, graph_check
from mindspore_rl_buffer._validation import (
    check_batch_graph,
    check_capacity,
    check_logical_index,
    check_tensor_arg_graph,
    check_transition,
    given_columns,
    transition_of,
)
from mindspore_rl_buffer.checkpoint import RECORD, Checkpointable, spec_record
from mindspore_rl_buffer.contracts import ring_contract
from mindspore_rl_buffer.ops import ring
from mindspore_rl_buffer.ops._common import DTYPE, SHAPE, as_read, as_stored, each, leading_axis
from mindspore_rl_buffer.ops.rng import random_state, state_problems
from mindspore_rl_buffer.specs import (
    TensorSpec,
    check_column_bytes,
    check_column_names,
    column_specs,
    spec_fields,
    storage_dtype,
)
from mindspore_rl_buffer.writer import BufferWriter


@graph_check
def _index_constant(index, capacity):
    """``get_item``'s index inside a graph, when it is not a tensor: a Python int constant as an int32
    tensor constant, or ``None`` for an int the graph knows only when it runs (a ``mindspore.mutable``)."""
    if isinstance(index, Variable):
        if index.type_name != "int":
            raise _errors.type_error("get_item", "index", "an int or an int tensor", index, index.type_name)
        return None
    if isinstance(index, bool) or not isinstance(index, int):  # a bool is an int to isinstance, as in a direct call
        raise _errors.type_error("get_item", "index", "an int or an int tensor", index)
    if not -capacity <= index < capacity:  # never in [-count, count): refused as it is, before any int32 cast
        raise IndexError(f"For 'get_item', 'index' must be in [-count, count) for a buffer of capacity "
                         f"{capacity}, so in [-{capacity}, {capacity}), but got {index}.")
    return Tensor(index, ms.int32)


def host_insert(self: RingBuffer, *columns: Any, exp: Any = None) -> Launch | None:
    """The host check of ``insert(*columns, exp=...)`` of a ring-backed buffer: the columns, then
    ``self.check_rows`` (a buffer's rule on the rows' values), then the launch plan."""
    transition = transition_of("insert", self.names, given_columns(columns, exp))
    if not isinstance(transition, (list, tuple)):
        raise TypeError(f"For 'insert', 'transition' must be a list or tuple of tensors, one per column, or one "
                        f"tensor per column as separate arguments ({len(self.names)}: {self.names}), but got "
                        f"one {type(transition).__name__}.")
    tensors, batch_size = check_transition("insert", self.names, self.shapes, self.dtypes, transition)
    if batch_size:
        self.check_rows("insert", tensors)
    return insert_plan(self, tensors, batch_size)


def _host_get_item(self: RingBuffer, index: Any) -> Launch:
    return Launch(Tensor(check_logical_index("get_item", index, int(self.count))))


def reserved_names(*classes: type) -> tuple[str, ...]:
    """The names ``classes`` (and their bases) keep their own state under (``RESERVED_NAMES``), sorted."""
    return tuple(sorted({name for cls in classes for base in cls.__mro__
                         for name in getattr(base, "RESERVED_NAMES", ())}))


def taken_names(cell: Any, *classes: type) -> frozenset[str]:
    """The attributes and methods of the buffer Cell ``cell`` and of ``classes``: no column may take their names."""
    return frozenset(vars(cell)).union(dir(type(cell)), *map(dir, classes))


class RingBuffer(BufferCell, Checkpointable):
    """The ring core: columns and cursors on the device, with insert, get_item, reset, size, full.

    Args:
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column (names such as ``'float32'``
            are accepted).
        names (list[str]): Column names, used for the Parameters and in errors.
            Default: ``None``, which names them ``column_0``, ``column_1``, ...
        seed (int): Seed of the buffer's random generator, whose state (``rng_key``,
            ``rng_counter``) the buffers built on the core draw from and save; ``None`` follows
            ``mindspore.set_seed`` (see :func:`~mindspore_rl_buffer.ops.rng.initial_key`).
            Default: ``None``.

    Raises:
        TypeError: If ``capacity`` is not an int, ``shapes``/``types`` is not a list, or a name
            is not a str.
        ValueError: If ``capacity`` is not in ``[1, 2**30]`` (the largest capacity whose int32
            cursor arithmetic is exact), ``shapes`` and ``types`` differ in length, a dtype is
            unknown or unsupported (bfloat16), or a name is empty, repeated or one the
            buffer keeps its own state under (``head``, ``count``, and those of subclasses).

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.core import RingBuffer
        >>> ring = RingBuffer(3, [(2,), ()], [ms.float32, ms.int32], names=['state', 'step'])
        >>> ring.insert([np.zeros((4, 2), np.float32), np.arange(4, dtype=np.int32)])
        >>> int(ring.size()), bool(ring.full()), int(ring.get_item(0)[1]), int(ring.get_item(-1)[1])
        (3, True, 1, 3)
    """

    # Names of the buffer's own Parameters (subclasses add theirs), refused as column names.
    RESERVED_NAMES: tuple[str, ...] = ("head", "count", "rng_key", "rng_counter", RECORD)

    def __init__(self, capacity: int, shapes: Sequence[Any], types: Sequence[Any], *,
                 names: Sequence[str] | None = None, seed: int | None = None) -> None:
        super().__init__()
        op = type(self).__name__
        self._capacity = check_capacity(op, "capacity", capacity)
        if names is not None:
            check_column_names(op, names, reserved_names(type(self)), taken_names(self))
        self._specs = column_specs(shapes, types, names, op)
        self._names, self._shapes, self._dtypes = spec_fields(self._specs)
        self._has_bool = any(dtype == ms.bool_ for dtype in self._dtypes)  # else encode() changes nothing
        check_column_bytes(op, self._capacity, self._specs)
        # A bool column is stored as uint8 (no bool ScatterUpdate); encode/decode convert.
        self.columns = ParameterTuple(
            Parameter(initializer("zeros", (self._capacity, *spec.shape), storage_dtype(spec.dtype)),
                      name=spec.name, requires_grad=False)
            for spec in self._specs
        )
        self.head = Parameter(Tensor(0, ms.int32), name="head", requires_grad=False)
        self.count = Parameter(Tensor(0, ms.int32), name="count", requires_grad=False)
        self.rng_key, self.rng_counter = random_state(seed)

    def rng(self):
        """The generator state the buffer's draws take and advance: ``(rng_key, rng_counter)``."""
        return self.rng_key, self.rng_counter

    # ----------------------------------------------------------------- properties (host)
    @property
    def capacity(self) -> int:
        """Items the buffer holds."""
        return self._capacity

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """One :class:`TensorSpec` per column."""
        return self._specs

    @property
    def names(self) -> tuple[str, ...]:
        """The column names."""
        return self._names

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """The shape of one item, per column."""
        return self._shapes

    @property
    def dtypes(self) -> tuple[Any, ...]:
        """The dtype per column."""
        return self._dtypes

    # ------------------------------------------------------------------------- insert
    @buffer_method(host_insert, returns_self=True)
    def insert(self, *columns, exp=None, check=True):
        """Append one transition or a batch of them; the oldest are overwritten once full.

        The transition is one list or tuple of tensors, ``insert([state, action])``, or one
        tensor per column as separate arguments, ``insert(state, action)``, as MindSpore
        Reinforcement's buffers take it (``push`` is the same method); ``insert(exp=[state,
        action])`` names it as MindSpore Reinforcement's ``UniformReplayBuffer.insert(exp)`` did.

        Inside a ``construct`` write ``_ = self.buffer.insert(...)``: MindSpore's graph
        parser rewrites a bare ``self.buffer.insert(...)`` statement into
        ``self.buffer = self.buffer.insert(...)`` (it takes ``insert`` for a list method),
        after which the buffer's later calls in that graph would read stale data. The
        rebinding is caught and raised as a ``TypeError`` naming the fix, when the graph
        first runs.

        Args:
            columns (Union[list[Tensor], tuple[Tensor], Tensor]): One tensor (or numpy array,
                for direct calls) per column: of the column's shape for one item, or with a
                leading batch dimension ``n`` (0 is allowed; of ``n > capacity`` items only
                the newest ``capacity`` are kept). Dtypes must match the columns (a bool
                column takes bool tensors).

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            TypeError: If ``transition`` is not a list or tuple, or a column is not a tensor.
            ValueError: If the number of columns, a shape or a dtype does not match; the
                buffer is left unchanged.
        """
        transition = transition_of("insert", self.names, given_columns(columns, exp))
        batch_size, single = check_batch_graph("insert", self.names, self.shapes, self.dtypes, len(transition),
                                               each(SHAPE, transition), each(DTYPE, transition))
        if batch_size == 0:
            return self.count
        # `single` is a compile-time constant: only one branch reaches the graph.
        batch = each(leading_axis, transition) if single else transition
        return self._write(self.encode(batch))

    def check_rows(self, op: str, tensors: Sequence[Any]) -> None:
        """Host hook of a direct insert: refuse rows of valid shapes and dtypes that break a rule of the buffer."""

    def push(self, *columns, exp=None):
        """:meth:`insert`, under the name MindSpore Reinforcement 0.6 gave it (``push(state, action)``)."""
        return self.insert(*columns, exp=exp)

    def encode(self, values):
        """Column values as stored: a bool column's as uint8. Runs on the host and in graphs."""
        if not self._has_bool:  # a constant of the graph: no code to compile for the columns
            return values
        stored, dtypes = (), self.dtypes
        for i in range(len(dtypes)):  # no zip(), list or append to compile: see ops._common.each
            stored = stored + (as_stored(values[i], dtypes[i] == ms.bool_),)  # noqa: RUF005 (graph code: see ops._common.each)
        return stored

    def decode(self, values):
        """Stored column values as the columns' dtypes: a bool column's back to bool. Runs on the
        host and in graphs; buffers reading ``columns`` with the operators apply it."""
        read, dtypes = (), self.dtypes
        for i in range(len(dtypes)):  # no zip(), list or append to compile: see ops._common.each
            read = read + (as_read(values[i], dtypes[i] == ms.bool_),)  # noqa: RUF005 (graph code: see ops._common.each)
        return read

    def _write(self, batch):
        """Graph hook: store ``batch`` (a leading dimension on every column, checked) and move the
        cursors; return the physical rows written. Overridden by buffers that store more."""
        rows, head, count = ring.insert(self.columns, self.head, self.count, batch)
        ops.assign(self.head, head)
        ops.assign(self.count, count)
        return rows

    def writer(self, batch_size: int = 32) -> BufferWriter:
        """A :class:`~mindspore_rl_buffer.writer.BufferWriter` that stages transitions on the
        host and inserts them ``batch_size`` at a time: the fast way to insert from a Python
        loop (a launch costs the same for 1 row as for 32). Staged transitions reach the
        buffer when a batch fills and on ``flush()`` (or the end of a ``with`` block).

        Raises:
            TypeError: If ``batch_size`` is not an int.
            ValueError: If ``batch_size`` is not positive.
        """
        return BufferWriter(self, batch_size)

    # ----------------------------------------------------------------------- get_item
    @buffer_method(_host_get_item)
    def get_item(self, index, *, check=True):
        """Read stored items by logical index: 0 is the oldest, ``-1`` the newest.

        Args:
            index (Union[int, Tensor]): An int, or an int tensor (scalar or 1-D) of indexes,
                each in ``[-size(), size())``. Inside a graph, a ``mindspore.mutable`` int is
                read as a 0-d int64 index tensor.

        Returns:
            Tuple of tensors, one per column: one row of the column's shape, or for a 1-D
            index the rows stacked along a leading dimension.

        Raises:
            TypeError: If ``index`` is not an int or an int tensor (a bool or float is not).
            ValueError: If an index tensor has more than one dimension.
            IndexError: If an index is out of range (direct calls, checked on the host), or if a
                constant index inside a graph is outside ``[-capacity, capacity)`` (when the graph
                compiles). An index tensor out of range inside a graph fails the run with
                ``RuntimeError: assert failed`` instead (MindSpore prints the index and the count),
                and that compiled graph cannot run again.
        """
        if isinstance(index, Tensor):  # its dtype and rank are known when the graph compiles
            check_tensor_arg_graph("get_item", "index", index.dtype, index.shape, "int", "an int or an int tensor",
                                   (0, 1))
        else:  # a constant, checked when the graph compiles; a mutable int is read as a 0-d int64 tensor
            constant = _index_constant(index, self._capacity)
            index = ops.scalar_to_tensor(index, ms.int64) if constant is None else constant
        return self.decode(ring.get_item(self.columns, self.head, self.count, index, check))

    # ------------------------------------------------------------- reset, size, full
    @buffer_method()
    def reset(self, *, check=True):
        """Empty the buffer: the state as constructed; nothing is re-allocated."""
        return self._clear()

    def _clear(self):
        """Graph hook: put the state back where construction put it; return ``count``."""
        ops.assign(self.head, ops.zeros_like(self.head))
        ops.assign(self.count, ops.zeros_like(self.count))
        return self.count

    @buffer_method()
    def size(self, *, check=True):
        """Return how many items are stored, as an int32 scalar tensor."""
        return self.count + 0

    @buffer_method()
    def full(self, *, check=True):
        """Return whether the buffer holds ``capacity`` items, as a bool scalar tensor."""
        return self.count == self._capacity

    def destroy(self) -> None:
        """Empty the buffer and release its compiled direct-call graphs; every later direct call
        raises a ``RuntimeError`` (MindSpore Reinforcement's ``destroy()`` freed its native buffer).
        The columns' device memory is returned when the buffer, and any of your graphs compiled
        with it, are garbage-collected; graphs compiled before ``destroy()`` keep working on the
        emptied buffer."""
        destroy(self)

    # ----------------------------------------------------------------------- records
    def _settings(self) -> dict[str, Any]:
        """Record hook: the constructor's settings beyond capacity and columns."""
        return {}

    def checkpoint_record(self) -> dict[str, Any]:
        """See ``mindspore_rl_buffer.checkpoint.Checkpointable``."""
        return {"type": type(self).__name__, "capacity": self._capacity, "specs": spec_record(self._specs),
                "settings": self._settings()}

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The ring's cursor contract, on the values ``read`` gives for ``head`` and ``count``."""
        problem = ring_contract(int(read(self.head)), int(read(self.count)), self._capacity)
        return [problem] if problem else []

    def checkpoint_random(self, read: Any) -> list[str]:
        """Problems with the generator state ``read`` gives: a key and a counter in ``[0, 2**62)``."""
        return state_problems(read(self.rng_key), read(self.rng_counter))

    def checkpoint_defaults(self, read: Any) -> dict[Any, np.ndarray]:
        """Files written before the generator state was saved: the buffer keeps its own state."""
        if read(self.rng_key) is not None or read(self.rng_counter) is not None:
            return {}
        return {self.rng_key: self.rng_key.asnumpy(), self.rng_counter: self.rng_counter.asnumpy()}

    def extend_repr(self) -> str:
        settings = "".join(f"{key}={value}, " for key, value in self._settings().items())
        columns = ", ".join(f"{s.name}: {s.shape} {s.dtype}" for s in self._specs)
        return f"{settings}capacity={self._capacity}, columns=[{columns}]"
