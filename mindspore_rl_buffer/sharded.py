"""ShardedReplayBuffer: one replay buffer sharded over the ranks of a MindSpore distributed job.

Each rank of a job started with ``msrun`` holds a shard, a :class:`ReplayBuffer` of its own
(``self.storage``), and inserts into it without communicating. Sampling is either local
(each rank from its own shard, the usual data-parallel learner) or global (every rank gets
the same batch, drawn uniformly over the union of the shards, gathered with MindSpore's
collectives inside the compiled graph: :mod:`mindspore_rl_buffer.ops.sharded`). Without a
distributed job the buffer is a :class:`ReplayBuffer` of ``world_size == 1``.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import mindspore as ms

from mindspore_rl_buffer import _errors, shard_files
from mindspore_rl_buffer._graph import BufferCell, Launch, buffer_method, destroy, insert_plan
from mindspore_rl_buffer._graph_checks import check_ordered_graph
from mindspore_rl_buffer._validation import (
    check_bool,
    check_capacity,
    check_choice,
    check_not_empty,
    check_ordered,
    check_seed,
    check_size,
    check_transition,
    given_columns,
    transition_of,
)
from mindspore_rl_buffer.checkpoint import Checkpointable, spec_record
from mindspore_rl_buffer.core import reserved_names
from mindspore_rl_buffer.ops import sharded as sharded_ops
from mindspore_rl_buffer.replay_buffer import ReplayBuffer, replay_buffer_attributes
from mindspore_rl_buffer.specs import TensorSpec, check_column_names

SAMPLING = ("local", "global")


def current_world() -> tuple[int, int, str | None]:
    """This process's ``(rank, world_size, group)`` in MindSpore's world communication group.

    Initialises ``mindspore.communication`` if the process was started by ``msrun`` (which
    sets ``MS_ROLE``) and nobody has yet; outside a distributed job returns ``(0, 1, None)``.
    ``msrun`` also runs the script in its scheduler process (``MS_ROLE=MS_SCHED``), where
    ``init()`` serves the job and does not return to the script.
    """
    from mindspore.communication import GlobalComm, get_group_size, get_rank, init

    if not GlobalComm.INITED:
        if "MS_ROLE" not in os.environ:
            return 0, 1, None
        init()
    return get_rank(), get_group_size(), GlobalComm.WORLD_COMM_GROUP


def shard_capacities(capacity: int, world_size: int) -> list[int]:
    """Rows per shard: ``capacity // world_size``, plus one on the first ``capacity % world_size`` ranks.

    The shards add up to exactly ``capacity``, and no two differ by more than one row.

    Examples:
        >>> shard_capacities(10, 4)
        [3, 3, 2, 2]
    """
    base, extra = divmod(capacity, world_size)
    return [base + (1 if rank < extra else 0) for rank in range(world_size)]


def _host_insert(self: ShardedReplayBuffer, *columns: Any, exp: Any = None) -> Launch | None:
    storage = self.storage
    transition = transition_of("insert", storage.names, given_columns(columns, exp))
    tensors, batch_size = check_transition("insert", storage.names, storage.shapes, storage.dtypes, transition)
    return insert_plan(self, tensors, batch_size)


def _host_sample(self: ShardedReplayBuffer, ordered: Any = None, with_indices: bool = False) -> Launch:
    op = "sample"
    ordered = check_ordered(op, ordered, self._ordered)
    local = int(self.storage.count)
    if self._world_size == 1:
        check_not_empty(op, local)
        return Launch(ordered, with_indices)
    if self._sampling == "local":
        if local == 0:
            raise _errors.empty_shard_error(op, self._rank)
        return Launch(ordered, with_indices)

    def checked(outputs: Any) -> Any:
        # Every rank reads the same total, so every rank raises alike (no rank is left
        # waiting in a collective). The graph ran unguarded, so it stays usable.
        drawn, values, total = outputs
        check_not_empty(op, int(total))
        return (drawn, values) if with_indices else values

    return Launch(ordered, with_indices, finish=checked)


class ShardedReplayBuffer(BufferCell, Checkpointable):
    """A uniform replay buffer sharded over the data-parallel ranks of a distributed job.

    Create it on every rank of a job started with ``msrun`` (``mindspore.communication`` is
    initialised if it is not yet). Rank ``r`` holds a shard of ``capacity // world_size``
    rows, one more on the first ``capacity % world_size`` ranks, so the shards add up to
    ``capacity``; the shard is a :class:`ReplayBuffer`, ``self.storage``, and
    :meth:`insert` writes to it with no communication. Outside a distributed job
    ``world_size == 1`` and the buffer behaves exactly like a :class:`ReplayBuffer` with the
    same arguments: the same checks, state and samples.

    Collective calls: with ``world_size > 1``, :meth:`size`, :meth:`full`, :meth:`save`,
    :meth:`load` and, with ``sampling='global'``, :meth:`sample` communicate. Every rank must call them, in the same
    order, including ranks whose shard is empty, or the job hangs. Their checks agree on
    every rank (an empty union raises on every rank alike), so no rank leaves a collective
    that another has entered.

    Args:
        sample_size (int): Items per :meth:`sample`.
        capacity (int): Items the whole buffer holds, over all shards; at least
            ``world_size``.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column (names such as ``'float32'``
            are accepted).
        sampling (str): ``'local'``: each rank samples its own shard (a rank with an empty
            shard gets an error, on that rank only). ``'global'``: every rank gets the
            same batch, drawn uniformly over the union of the shards, so a shard's share of
            the batch follows its share of the items. Default: ``'local'``.
        ordered (bool): Whether :meth:`sample` returns its items oldest first by default;
            globally: shard by shard in rank order, oldest first within each. Default: ``False``.
        seed (int): Seed of the sampling operator; ``None`` follows ``mindspore.set_seed``.
            Global draws are made on rank 0 and shared, so they agree even if the ranks are
            seeded differently. Default: ``None``.
        names (list[str]): Column names. Default: ``None``, which names them ``column_0``, ...

    Raises:
        TypeError: If a size is not an int or ``sampling`` is not a str.
        ValueError: If a size is not positive, ``capacity < world_size``, ``sampling`` is
            unknown, the columns are (as :class:`ReplayBuffer`), or ``sampling='global'`` with
            a float64 or uint64 column (no exact way to move it between ranks: see
            ``encode_words`` in :mod:`mindspore_rl_buffer.ops.sharded`).

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import ShardedReplayBuffer
        >>> rb = ShardedReplayBuffer(2, 3, [(2,), ()], [ms.float32, ms.int32], sampling='global')
        >>> rb.world_size, rb.local_capacity
        (1, 3)
        >>> rb.insert([np.zeros((4, 2), np.float32), np.arange(4, dtype=np.int32)])
        >>> int(rb.size()), int(rb.local_size()), bool(rb.full())
        (3, 3, True)
        >>> [x.shape for x in rb.sample()]
        [(2, 2), (2,)]
    """

    BINDING_SETTINGS = ("world_size", "rank", "local_capacity")

    def __init__(
        self,
        sample_size: int,
        capacity: int,
        shapes: Sequence[Any],
        types: Sequence[Any],
        *,
        sampling: str = "local",
        ordered: bool = False,
        seed: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        op = type(self).__name__
        check_size(op, "sample_size", sample_size)
        capacity = check_capacity(op, "capacity", capacity)
        check_choice(op, "sampling", sampling, SAMPLING)
        rank, world_size, group = current_world()
        if capacity < world_size:
            raise ValueError(f"For '{op}', 'capacity' ({capacity}) must be at least the world size "
                             f"({world_size}): every rank holds at least one row.")
        self._rank, self._world_size, self._group = rank, world_size, group
        self._collective_twins = world_size > 1  # direct calls run their graphs as Cells (_graph._TwinCell)
        self._capacity = capacity
        self._sampling = sampling
        self._ordered = check_bool(op, "ordered", ordered)
        self._seed = check_seed(op, seed)  # an int: a numpy integer would not go into the checkpoint's JSON
        if names is not None:  # the shard ``storage`` registers its columns as 'storage.<name>'
            check_column_names(op, names, reserved_names(ReplayBuffer), replay_buffer_attributes(), prefix="storage.")
        try:
            self.storage = ReplayBuffer(sample_size, shard_capacities(capacity, world_size)[rank], shapes, types,
                                        ordered=ordered, seed=self._seed, names=names)
        except (TypeError, ValueError) as error:  # its checks of the columns, under this buffer's name
            raise type(error)(str(error).replace("For 'ReplayBuffer'", f"For '{op}'", 1)) from None
        self._sample_size = self.storage.sample_size
        if sampling == "global":
            # Refused whatever the world size, so a script that runs on a laptop runs on a cluster.
            for spec in self.storage.specs:
                if spec.dtype in sharded_ops.UNMOVABLE:
                    raise _errors.unmovable_dtype_error(op, spec.name, spec.dtype)

    # ----------------------------------------------------------------- properties (host)
    @property
    def capacity(self) -> int:
        """Items the whole buffer holds, over all shards."""
        return self._capacity

    @property
    def local_capacity(self) -> int:
        """Items this rank's shard holds."""
        return self.storage.capacity

    @property
    def sample_size(self) -> int:
        """Items per :meth:`sample`."""
        return self._sample_size

    @property
    def sampling(self) -> str:
        """``'local'`` or ``'global'``."""
        return self._sampling

    @property
    def rank(self) -> int:
        """This process's rank; 0 outside a distributed job."""
        return self._rank

    @property
    def world_size(self) -> int:
        """Ranks sharing the buffer; 1 outside a distributed job."""
        return self._world_size

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """One :class:`TensorSpec` per column."""
        return self.storage.specs

    # ------------------------------------------------------------------------- insert
    def writer(self, batch_size: int = 32):
        """A writer inserting into this rank's shard ``batch_size`` items at a time: :meth:`ReplayBuffer.writer`."""
        return self.storage.writer(batch_size)

    @buffer_method(_host_insert, returns_self=True)
    def insert(self, *columns, exp=None, check=True):
        """Append one transition or a batch of them to this rank's shard; no communication.

        Inside a ``construct`` write ``_ = self.buffer.insert(...)`` (see :meth:`ReplayBuffer.insert`).

        Args:
            columns (Union[list[Tensor], tuple[Tensor], Tensor]): As :meth:`ReplayBuffer.insert`.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            TypeError: If ``transition`` is not a list or tuple, or a column is not a tensor.
            ValueError: If the number of columns, a shape or a dtype does not match; the shard is left unchanged.
        """
        _ = self.storage.insert(transition_of("insert", self.storage.names, given_columns(columns, exp)))
        return self.storage.count

    def push(self, *columns, exp=None):
        """:meth:`insert`, under the name MindSpore Reinforcement 0.6 gave it."""
        return self.insert(*columns, exp=exp)

    # ------------------------------------------------------------------------- sample
    def sample(self, ordered=None):
        """Draw ``sample_size`` items: from this shard, or over all shards (see ``sampling``).

        With ``sampling='global'`` and ``world_size > 1`` this is a collective call.

        Args:
            ordered (bool): Return them oldest first; ``None`` takes the constructor's
                setting. Default: ``None``.

        Returns:
            Tuple of tensors, one per column, each with leading dimension ``sample_size``;
            with ``sampling='global'`` the same on every rank.

        Raises:
            TypeError: If ``ordered`` is not a bool or None, or inside a graph not a Python
                constant (a ``mindspore.mutable``, say).
            ValueError: With ``sampling='local'``, if this rank's shard is empty (raised on
                this rank only); with ``sampling='global'``, if every shard is empty (raised on
                every rank); direct calls, checked on the host. Inside a graph the run fails with
                ``RuntimeError: assert failed`` instead, and that compiled graph cannot run again.
        """
        return self._sample(ordered, False)

    def sample_with_indices(self, ordered=None):
        """Like :meth:`sample`, and also return the indexes of the items drawn.

        Returns:
            Tuple of 2: an int32 tensor of shape ``(sample_size,)`` and the tuple of column
            tensors. Locally the indexes are logical indexes in this shard (0 = oldest);
            globally they index the union, shard 0's items first: see
            :mod:`mindspore_rl_buffer.ops.sharded`.
        """
        return self._sample(ordered, True)

    @buffer_method(_host_sample)
    def _sample(self, ordered, with_indices, *, check=True):
        ordered = check_ordered_graph("sample", ordered, self._ordered)  # a constant: checked at compile time
        if self._world_size == 1 or self._sampling == "local":
            if with_indices:
                return self.storage.sample_with_indices(ordered)
            return self.storage.sample(ordered)
        storage = self.storage
        total, drawn, values = sharded_ops.sample_global(storage.columns, storage.head, storage.count,
                                                         self._sample_size, self._rank, self._group, ordered,
                                                         self.storage.rng(), check)
        values = storage.decode(values)
        if not check:
            # A direct call: the host checks the total after the launch (see _host_sample).
            return drawn, values, total
        return (drawn, values) if with_indices else values

    # ------------------------------------------------------------- reset, size, full
    @buffer_method()
    def reset(self, *, check=True):
        """Empty this rank's shard (both cursors back to 0); no communication.

        Every rank resets its own shard: call it on every rank to empty the whole buffer.
        """
        return self.storage.reset()

    def local_size(self):
        """Items in this rank's shard, as an int32 scalar tensor; no communication."""
        return self.storage.size()

    @buffer_method()
    def size(self, *, check=True):
        """Items in all shards together, as an int32 scalar tensor; a collective call."""
        if self._world_size == 1:
            return self.storage.size()
        return sharded_ops.gather_counts(self.storage.count, self._group).sum().astype(ms.int32)

    @buffer_method()
    def full(self, *, check=True):
        """Whether every shard is full (the total is ``capacity``), a bool scalar tensor; a collective call."""
        if self._world_size == 1:
            return self.storage.full()
        return sharded_ops.gather_counts(self.storage.count, self._group).sum().astype(ms.int32) == self._capacity

    # ------------------------------------------------------------------ save, load
    def checkpoint_record(self) -> dict[str, Any]:
        """See ``mindspore_rl_buffer.checkpoint.Checkpointable``."""
        return {"type": type(self).__name__, "capacity": self._capacity, "specs": spec_record(self.specs),
                "settings": {"world_size": self._world_size, "rank": self._rank,
                             "local_capacity": self.local_capacity, "sampling": self._sampling,
                             "sample_size": self._sample_size, "ordered": self._ordered, "seed": self._seed}}

    def get_item(self, index):
        """Items of this rank's shard by logical index, 0 its oldest (``storage.get_item``): with
        one rank, the buffer's, as :meth:`ReplayBuffer.get_item`."""
        return self.storage.get_item(index)

    def destroy(self) -> None:
        """As :meth:`ReplayBuffer.destroy`, for this rank's shard."""
        destroy(self)

    def save(self, path: str | os.PathLike) -> str:
        """Write this rank's shard to its own file, ``<path>.rank<r>-of-<n>.safetensors`` (or ``.ckpt``,
        as ``path`` ends; ``.ckpt`` if it ends in neither).

        Written in the one checkpoint format of every buffer
        (:func:`~mindspore_rl_buffer.save_checkpoint`): the shard's columns and cursors and the
        record :meth:`load` checks. With several ranks, a collective call, all or nothing: each
        rank writes a pending file, and renames it over its rank file only if every rank wrote
        (``mindspore_rl_buffer.shard_files``).

        Args:
            path (Union[str, os.PathLike]): The checkpoint's name; its ``.safetensors`` or
                ``.ckpt`` ending goes after the rank suffix.

        Returns:
            str, the file written.

        Raises:
            RuntimeError: If the buffer was destroyed (on any rank, with several).
            ValueError: If a rank file's path is a folder or lies under a file; files are kept.
            OSError: If a rank file cannot be written; every rank keeps its earlier file.
        """
        return shard_files.save_shard(self, path, self._group)

    def load(self, path: str | os.PathLike) -> None:
        """Restore this rank's shard, in place (so graphs compiled before, a user's ``construct``
        included, see the restored state), from the file :meth:`save` wrote.

        With one rank, a file that plain ``mindspore.save_checkpoint(buffer, path)`` wrote at
        ``path`` itself loads too, when no rank file lies beside it. With several, a collective
        call, all or nothing: every rank validates its own file before any shard changes; if
        one fails, every rank raises (the others naming the failing ranks and their causes)
        and every shard is left unchanged (``mindspore_rl_buffer.shard_files``).

        Args:
            path (Union[str, os.PathLike]): The name given to :meth:`save`.

        Raises:
            RuntimeError: If the buffer was destroyed (on any rank, with several).
            ValueError: If the checkpoint was saved by a job of another world size, or its
                rank, capacities or columns differ from this buffer's, or its cursors break
                the contract (on any rank); nothing is changed.
            FileNotFoundError: If there is no checkpoint for this rank (for any rank) at all.
        """
        shard_files.load_shard(self, path, self._group)

    def extend_repr(self) -> str:
        return (f"sampling={self._sampling!r}, rank={self._rank}, world_size={self._world_size}, "
                f"capacity={self._capacity}, local_capacity={self.local_capacity}")
