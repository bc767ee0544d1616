"""TransitionReplayBuffer: each observation stored once; frame stacks and n-step returns sampled in the graph.

A ring of ``max_length = capacity // num_envs`` time rows, each holding one step of every
environment (time-major, as :class:`~mindspore_rl_buffer.TrajectoryReplayBuffer`'s segments,
so episodes of different environments never mix). ``storage``, a ``RingBuffer``, holds the
action, reward, ``terminated``, ``truncated`` and extra columns, ``(max_length, num_envs,
*shape)`` each, and the cursors; the buffer itself holds the observations once per step in
``frames`` (the same time-major layout, declared ``(max_length * num_envs, *obs_shape)`` so
that a sample gathers whole frames), and a rank and a start-table slot per row (4 bytes each)
for exact uniform sampling in one ``gather``.
``next_observation`` is not stored: it is the observation of the next row of the same episode,
and an episode's final observation is the row after its end (:mod:`mindspore_rl_buffer.ops.transition`
has the episode structure, the validity rule of a start and what a sample holds).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops
from mindspore.common.initializer import initializer

from mindspore_rl_buffer import _errors, contracts
from mindspore_rl_buffer._graph import BufferCell, Launch, buffer_method, plain_in_graph
from mindspore_rl_buffer._graph_checks import check_optional_size_graph
from mindspore_rl_buffer._validation import (
    check_batch_graph,
    check_capacity,
    check_final_rows,
    check_gamma,
    check_not_empty,
    check_ring_length,
    check_seed,
    check_size,
    given_columns,
    transition_of,
)
from mindspore_rl_buffer.checkpoint import Checkpointable, spec_record
from mindspore_rl_buffer.core import RingBuffer, host_insert, reserved_names, taken_names
from mindspore_rl_buffer.ops import stacks
from mindspore_rl_buffer.ops import transition as transition_ops
from mindspore_rl_buffer.ops._common import DTYPE, SHAPE, as_read, as_stored, each, guarded, leading_axis
from mindspore_rl_buffer.specs import (
    TensorSpec,
    check_batch_bytes,
    check_column_bytes,
    check_column_names,
    check_transition_layout,
    column_specs,
    spec_fields,
    storage_dtype,
    transition_names,
)
from mindspore_rl_buffer.tf_agents import BufferInfo
from mindspore_rl_buffer.writer import TransitionWriter


def _host_sample(self: TransitionReplayBuffer, batch_size: Any = None, with_info: bool = False) -> Launch:
    op = "sample"
    batch_size = self.sample_size if batch_size is None else check_size(op, "batch_size", batch_size)
    check_batch_bytes(op, "batch_size", batch_size, [self._frame], 2 * self.stack_size)  # its two stacks of frames
    stored = int(self.storage.count)
    check_not_empty(op, stored)

    def refuse_none_valid(outputs: Any) -> Any:
        if int(outputs[0]) == 0:  # no valid start: take back its batch_size draws (read only on this path)
            self.storage.rng_counter.copy_(Tensor(int(self.storage.rng_counter) - batch_size, ms.int64))
            raise _errors.no_valid_start_error(op, stored, self.num_envs, self.stack_size, self.n_step)
        return outputs

    return Launch(batch_size, with_info, finish=refuse_none_valid)


def _setting(name: str, doc: str) -> property:
    """A read-only property: the constructor's argument ``name``."""
    return property(lambda self: getattr(self, f"_{name}"), doc=doc)


class TransitionReplayBuffer(BufferCell, Checkpointable):
    """A replay buffer of environment steps that samples stacked, n-step transitions on the device.

    Each :meth:`insert` appends one time step of ``num_envs`` environments (or a batch of
    steps): ``[observation, action, reward, terminated, truncated, *extras]``, each with a
    leading ``num_envs``. Insert the steps as gymnasium's vector environments produce them
    with next-step autoreset: after a step that ends an episode (``terminated`` or
    ``truncated`` non-zero), the next row of that environment carries the episode's *final
    observation*, with flags 0 (its action and reward are never read); the row after it is
    the first of the next episode. So a truncated episode bootstraps from its own last
    observation. :meth:`sample` draws valid starts uniformly (see
    :mod:`mindspore_rl_buffer.ops.transition` for the rule) and returns
    ``(observation, action, reward, next_observation, discount, *extras)``.

    Args:
        sample_size (int): Transitions per :meth:`sample`.
        capacity (int): Rows the buffer holds, ``max_length * num_envs``; a multiple of ``num_envs``.
        shapes (list[tuple[int]]): Per environment and step: the observation's shape (one frame),
            the action's, ``()`` for reward, terminated and truncated, then any extra columns'.
        types (list[mindspore.dtype]): The dtype per column (names such as ``'uint8'`` are
            accepted). Flags are read as non-zero = true; rewards are summed in float32.
        num_envs (int): Environments stepped together. Default: ``1``.
        stack_size (int): Frames per sampled observation; 1 samples single frames without a
            stack axis. Default: ``1``.
        n_step (int): Steps per return. Default: ``1``.
        gamma (float): Discount per step, in ``[0, 1]``. Default: ``0.99``.
        names (list[str]): Column names. Default: ``None``, which names them
            ``observation, action, reward, terminated, truncated, extra_0, ...``.
        seed (int): Seed of the sampling operator; ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.

    Raises:
        TypeError: If a size or ``gamma`` has the wrong type, or ``shapes``/``types`` is not a list.
        ValueError: If a size is not positive, ``gamma`` is outside ``[0, 1]``, there are fewer
            than 5 columns, reward or a flag is not a scalar, ``capacity`` is not a multiple of
            ``num_envs`` or holds fewer than ``stack_size + n_step + 1`` steps, or a dtype is unknown.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import TransitionReplayBuffer
        >>> rb = TransitionReplayBuffer(4, 16, [(2,), (), (), (), ()],
        ...                             [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8],
        ...                             stack_size=2, n_step=2, gamma=0.5)
        >>> for t in range(5):  # one episode of 5 steps
        ...     rb.insert([np.full((1, 2), t, np.float32), np.array([t], np.int32), np.ones(1, np.float32),
        ...                np.zeros(1, np.uint8), np.zeros(1, np.uint8)])
        >>> int(rb.valid_starts())  # rows 2: stacks of rows 1-2 and bootstrap row 4
        1
        >>> observation, action, reward, next_observation, discount = rb.sample()
        >>> observation.shape, next_observation[0, :, 0].asnumpy().tolist(), float(reward[0]), float(discount[0])
        ((4, 2, 2), [3.0, 4.0], 1.5, 0.25)
    """

    BINDING_SETTINGS = ("num_envs", "stack_size", "n_step", "gamma")
    # Names of the buffer's own Parameters (its steps' ring adds its own), refused as column names.
    RESERVED_NAMES: tuple[str, ...] = ("ranks", "start_table", "last_ended", "finals")

    def __init__(self, sample_size: int, capacity: int, shapes: Sequence[Any], types: Sequence[Any], *,
                 num_envs: int = 1, stack_size: int = 1, n_step: int = 1, gamma: float = 0.99,
                 names: Sequence[str] | None = None, seed: int | None = None) -> None:
        super().__init__()
        op = type(self).__name__
        self._sample_size = check_size(op, "sample_size", sample_size)
        capacity = check_capacity(op, "capacity", capacity)
        self._num_envs = check_size(op, "num_envs", num_envs)
        self._stack_size = check_size(op, "stack_size", stack_size)
        self._n_step = check_size(op, "n_step", n_step)
        self._gamma = check_gamma(op, gamma)
        self._seed = check_seed(op, seed)
        if isinstance(shapes, (list, tuple)):  # else column_specs names the problem
            if names is None:
                names = transition_names(len(shapes))
            check_column_names(op, names, reserved_names(type(self), RingBuffer), taken_names(self, RingBuffer))
            check_column_names(op, names[1:], (), prefix="storage.")  # the ring holds all but the observation
        step_specs = column_specs(shapes, types, names, op)
        check_transition_layout(op, step_specs)
        self._max_length = check_ring_length(op, capacity, self._num_envs, self._stack_size, self._n_step)
        self._frame = frame = step_specs[0]  # of one environment
        check_column_bytes(op, self._max_length * self._num_envs, [frame])  # the frames; the ring: the rest
        check_batch_bytes(op, "sample_size", self._sample_size, [frame], 2 * self._stack_size)
        self._specs = tuple(TensorSpec((self._num_envs, *s.shape), s.dtype, s.name) for s in step_specs)
        self._names, self._shapes, self._dtypes = spec_fields(self._specs)
        rows = self._max_length * self._num_envs
        self.frames = Parameter(initializer("zeros", (rows, *frame.shape), storage_dtype(frame.dtype)),
                                name="frames", requires_grad=False)  # bool frames as uint8, as a ring's columns
        self._bools = tuple(spec.dtype == ms.bool_ for spec in step_specs)  # what a sample casts back
        self.ranks = Parameter(initializer("zeros", (rows,), ms.int32), name="ranks", requires_grad=False)
        # one slot per row and a spare one that final rows write (ops.select_starts)
        self.start_table = Parameter(initializer("zeros", (rows + 1,), ms.int32), name="start_table",
                                     requires_grad=False)
        self.last_ended = Parameter(Tensor(np.zeros(self._num_envs, np.int32)), name="last_ended", requires_grad=False)
        self.finals = Parameter(Tensor(0, ms.int32), name="finals", requires_grad=False)
        rest = self._specs[1:]
        self.storage = RingBuffer(self._max_length, [s.shape for s in rest], [s.dtype for s in rest],
                                  names=[s.name for s in rest], seed=self._seed)

    # ----------------------------------------------------------------- properties (host)
    @property
    def capacity(self) -> int:
        """Rows the buffer holds, ``max_length * num_envs``."""
        return self._max_length * self._num_envs

    max_length = _setting("max_length", "Time steps the buffer holds.")
    num_envs = _setting("num_envs", "Environments stepped together.")
    stack_size = _setting("stack_size", "Frames per sampled observation.")
    n_step = _setting("n_step", "Steps per return.")
    gamma = _setting("gamma", "Discount per step.")

    sample_size = _setting("sample_size", "Transitions per :meth:`sample`.")

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """One :class:`TensorSpec` per column, of one time step: shape ``(num_envs, *shape)``."""
        return self._specs

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """The shape of one time step per column, ``(num_envs, *shape)``."""
        return self._shapes

    @property
    def dtypes(self) -> tuple[Any, ...]:
        return self._dtypes

    # ------------------------------------------------------------------------- insert
    @buffer_method(host_insert, returns_self=True)
    def insert(self, *columns, exp=None, check=True):
        """Append one time step of every environment, or a batch of steps; the oldest are overwritten once full.

        Takes the forms :meth:`ReplayBuffer.insert <mindspore_rl_buffer.ReplayBuffer.insert>` takes (:meth:`push`
        is the same method); inside a ``construct`` write ``_ = self.buffer.insert(...)``, as there.

        Args:
            columns (Union[list[Tensor], tuple[Tensor], Tensor]): ``[observation, action, reward,
                terminated, truncated, *extras]``, each of shape ``(num_envs, *shape)`` for one
                step or ``(n, num_envs, *shape)`` for ``n`` steps, oldest first. The row after a
                step that ended an episode carries its final observation and flags 0.
            exp (Union[list[Tensor], tuple[Tensor]]): The same list, under MindSpore
                Reinforcement's name; give the columns one way only. Default: ``None``.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            TypeError: If ``transition`` is not a list or tuple, or a column is not a tensor.
            ValueError: If the number of columns, a shape or a dtype does not match, or a final
                row carries a flag (direct calls; inside a graph the run fails with
                ``RuntimeError: assert failed`` and writes nothing); the buffer is left unchanged.
        """
        transition = transition_of("insert", self.names, given_columns(columns, exp))
        batch_size, single = check_batch_graph("insert", self.names, self.shapes, self.dtypes, len(transition),
                                               each(SHAPE, transition), each(DTYPE, transition))
        if batch_size == 0:
            return self.storage.count
        batch = each(leading_axis, transition) if single else transition
        if check:
            ok = transition_ops.final_rows(self.last_ended, batch[3], batch[4])[1]
            batch = guarded(batch, ok, [self.last_ended])
        storage = self.storage
        self._before_insert(batch)
        last_ended, finals = transition_ops.insert_steps(self.frames, self.ranks, storage.head, storage.count,
                                                         self.last_ended, self.finals,
                                                         as_stored(batch[0], self._bools[0]), batch[3], batch[4],
                                                         self.start_table)
        _ = storage.insert(batch[1:])
        ops.assign(self.last_ended, last_ended)
        ops.assign(self.finals, finals)
        return storage.count

    def _before_insert(self, batch):
        """A subclass's work on the state before an insert of ``batch`` writes it (inside the insert's graph)."""

    push = RingBuffer.push
    destroy = RingBuffer.destroy

    def check_rows(self, op: str, tensors: Sequence[Any]) -> None:
        """A direct insert's final rows carry no flag (``RingBuffer.check_rows``)."""
        flags = (x.asnumpy().reshape(-1, self._num_envs) for x in tensors[3:5])
        check_final_rows(op, self.last_ended.asnumpy(), *flags)

    def writer(self, batch_size: int = 32) -> TransitionWriter:
        """A :class:`TransitionWriter` that stages time steps on the host and inserts ``batch_size``
        of them at a time (one step of ``num_envs`` environments is one staged item).

        Raises:
            TypeError: If ``batch_size`` is not an int.
            ValueError: If ``batch_size`` is not positive.
        """
        return TransitionWriter(self, batch_size)

    # ------------------------------------------------------------------------- sample
    def sample(self, batch_size=None):
        """Draw transitions uniformly from the valid starts (with replacement).

        Args:
            batch_size (int): Transitions to draw; ``None`` for ``sample_size``. Default: ``None``.

        Returns:
            Tuple ``(observation, action, reward, next_observation, discount, *extras)``, each with
            leading dimension ``B``: observations ``(B, stack_size, *obs_shape)`` (oldest frame
            first; ``(B, *obs_shape)`` for ``stack_size=1``), the action and extras of the start
            step, the n-step return (float32), and the bootstrap discount (float32; ``gamma^m``,
            0 if the episode terminated within the window).

        Raises:
            TypeError: If ``batch_size`` is not an int or None, or inside a graph not a Python
                constant (a ``mindspore.mutable``, say).
            ValueError: If ``batch_size`` is not positive, or no start is valid yet (direct calls).
                Inside a graph the run fails with ``RuntimeError: assert failed`` instead, and that
                compiled graph cannot run again.
        """
        return self._sample(batch_size, False)[1]

    def sample_with_info(self, batch_size=None):
        """Like :meth:`sample`, also returning ``BufferInfo(ids, probabilities)``.

        Returns:
            Tuple of 2: the items, and a ``BufferInfo`` whose ``ids`` (int32, ``(B,)``) are the
            starts' physical slots ``row * num_envs + env`` (stable while stored) and whose
            ``probabilities`` (float32, ``(B,)``) are ``1 / valid_starts()``. Inside a graph
            the info is the plain pair ``(ids, probabilities)``; unpacking it reads the same
            in both places.
        """
        _, items, (ids, probabilities) = self._sample(batch_size, True)
        return items, plain_in_graph(BufferInfo, ids, probabilities)

    @buffer_method(_host_sample)
    def _sample(self, batch_size, with_info, *, check=True):
        # A constant: checked at compile time, as a direct call checks it.
        batch_size = check_optional_size_graph("sample", "batch_size", batch_size)
        if batch_size is None:
            batch_size = self._sample_size
        storage = self.storage
        starts, total = transition_ops.draw_starts(self.ranks, storage.head, storage.count, batch_size,
                                                   self._max_length, self._stack_size, self._n_step, storage.rng(),
                                                   check, self.start_table)
        items = self._read(starts)
        if not with_info:
            return total, items
        probabilities = ops.ones((batch_size,), ms.float32) / total.astype(ms.float32)
        return total, items, (starts, probabilities)

    def _read(self, starts):
        """What a sample holds for the valid starts ``starts`` (flat physical rows, int32 ``(B,)``)."""
        storage, stack_size = self.storage, self._stack_size
        action, reward, terminated, truncated = storage.columns[:4]
        rows, next_rows, returns, discount = stacks.stacked_windows(
            reward, terminated, truncated, starts, stack_size, self._n_step, self._gamma)
        if stack_size == 1:  # no stack axis
            rows, next_rows = rows.reshape((-1,)), next_rows.reshape((-1,))
        index = stacks.column_index(starts, self._num_envs)
        frames, bools, num_envs = self.frames, self._bools, self._num_envs
        items = (as_read(ops.gather(frames, rows, 0), bools[0]), as_read(stacks.read_rows(action, index, num_envs),
                 bools[1]), returns, as_read(ops.gather(frames, next_rows, 0), bools[0]), discount)
        extras = storage.columns[4:]
        for i in range(len(extras)):  # no zip(), list or append to compile: see ops._common.each
            items = items + (as_read(stacks.read_rows(extras[i], index, num_envs), bools[5 + i]),)  # noqa: RUF005
        return items

    @buffer_method()
    def valid_starts(self, *, check=True):
        """How many valid starts the buffer holds (each is drawn with probability ``1 / valid_starts()``), int32."""
        storage = self.storage
        return transition_ops.count_starts(self.ranks, storage.head, storage.count, self._max_length,
                                           self._stack_size, self._n_step)

    # ------------------------------------------------------------- reset, size, full
    @buffer_method()
    def reset(self, *, check=True):
        """Empty the buffer: the state as constructed; nothing is re-allocated."""
        return self._clear()

    def _clear(self):
        self.storage.reset()
        for state in (self.ranks, self.start_table, self.last_ended, self.finals):
            ops.assign(state, ops.zeros_like(state))
        return self.storage.count

    @buffer_method()
    def size(self, *, check=True):
        """Rows stored (``num_envs`` per time step, final rows included), an int32 scalar tensor."""
        return self.storage.count * self._num_envs

    @buffer_method()
    def full(self, *, check=True):
        """Whether ``max_length`` time steps are stored, a bool scalar tensor."""
        return self.storage.count == self._max_length

    # ----------------------------------------------------------------------- records
    def _settings(self) -> dict[str, Any]:
        return {"sample_size": self._sample_size, "num_envs": self._num_envs, "stack_size": self._stack_size,
                "n_step": self._n_step, "gamma": self._gamma, "seed": self._seed}

    def checkpoint_record(self) -> dict[str, Any]:
        """See ``mindspore_rl_buffer.checkpoint.Checkpointable``."""
        return {"type": type(self).__name__, "capacity": self.capacity, "specs": spec_record(self._specs),
                "settings": self._settings()}

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The episode bookkeeping on the values ``read`` gives: ``last_ended`` and ``finals``
        agree with the stored flags, no final row carries a flag, the ranks are those
        :func:`~mindspore_rl_buffer.ops.insert_steps` writes and the start table holds every
        row a sample may read where it looks (the ring's cursors are checked by ``storage``'s
        own record)."""
        storage = self.storage
        head, count = int(read(storage.head)), int(read(storage.count))
        if contracts.ring_contract(head, count, self._max_length):
            return []
        terminated, truncated = (np.asarray(read(column)) for column in storage.columns[2:4])
        ended, ranks = (terminated != 0) | (truncated != 0), np.asarray(read(self.ranks))
        problems = contracts.episode_contract(head, count, np.asarray(read(self.last_ended)), int(read(self.finals)),
                                    ranks, ended)
        return problems or contracts.start_table_contract(head, count, ranks, ended, np.asarray(read(self.start_table)))

    def checkpoint_defaults(self, read: Any) -> dict[Any, np.ndarray]:
        """Files written before the start table existed: the table built from their ranks."""
        if read(self.start_table) is not None:
            return {}
        storage = self.storage
        head, count = (contracts.held_int(read(cursor)) for cursor in (storage.head, storage.count))
        return {self.start_table: contracts.start_table_default(head, count, read(self.ranks),
                                                                *(read(c) for c in storage.columns[2:4]),
                                                                self._max_length, self._num_envs)}

    def extend_repr(self) -> str:
        columns = ", ".join(f"{s.name}: {s.shape} {s.dtype}" for s in self._specs)
        return (f"sample_size={self._sample_size}, max_length={self._max_length}, num_envs={self._num_envs}, "
                f"stack_size={self._stack_size}, n_step={self._n_step}, gamma={self._gamma}, columns=[{columns}]")
