"""ShardedReplayBuffer: one replay buffer sharded over the ranks of a MindSpore distributed job.

Each rank of a job started with ``msrun`` holds a shard, a :class:`ReplayBuffer` of its own
(``self.storage``), and inserts into it without communicating. Sampling is either local
(each rank from its own shard, the usual data-parallel learner) or global (every rank gets
the same batch, drawn uniformly over the union of the shards, gathered with MindSpore's
collectives inside the compiled graph: :mod:`mindspore_rl_buffer.ops.sharded`). Without a
distributed job the buffer is a :class:`ReplayBuffer` of ``world_size == 1``.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, jit, nn, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import DIRECT_CALLS, BufferCell, in_graph
from mindspore_rl_buffer.checkpoint import write_atomically
from mindspore_rl_buffer.ops import sharded as sharded_ops
from mindspore_rl_buffer.replay_buffer import ReplayBuffer, check_size
from mindspore_rl_buffer.specs import TensorSpec

SAMPLING = ("local", "global")
_CHECKPOINT_FORMAT = 1


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


def shard_path(path: str | os.PathLike, rank: int, world_size: int) -> str:
    """The file of rank ``rank``: ``<path>.rank<r>-of-<n>.ckpt`` (a ``.ckpt`` ending of ``path`` is dropped first).

    Examples:
        >>> shard_path('run/buffer.ckpt', 1, 2)
        'run/buffer.rank1-of-2.ckpt'
    """
    stem = os.fspath(path)
    if stem.endswith(".ckpt"):
        stem = stem[: -len(".ckpt")]
    return f"{stem}.rank{rank}-of-{world_size}.ckpt"


def _saved_world_sizes(path: str | os.PathLike) -> set[int]:
    """World sizes of the shard files saved under ``path``, by their names."""
    stem = Path(shard_path(path, 0, 1))
    prefix = stem.name[: -len(".rank0-of-1.ckpt")]
    pattern = re.compile(re.escape(prefix) + r"\.rank\d+-of-(\d+)\.ckpt")
    if not stem.parent.is_dir():
        return set()
    return {int(match.group(1)) for name in os.listdir(stem.parent) if (match := pattern.fullmatch(name))}


class _GlobalSample(nn.Cell):
    """The graph a direct global :meth:`ShardedReplayBuffer.sample` runs: unguarded, returning the total.

    An ``nn.Cell`` rather than a ``@jit`` method: with collectives inside, a ``@jit`` method
    call was measured 3 times slower than the same graph run as a Cell (NOTES-shard.md).
    ``auto_prefix=False`` leaves the shard's Parameter names alone.
    """

    def __init__(self, storage: ReplayBuffer, rank: int, group: str, ordered: bool, seed: int | None) -> None:
        super().__init__(auto_prefix=False)
        self.storage = storage
        self._rank, self._group, self._ordered, self._seed = rank, group, ordered, seed

    def construct(self):
        return sharded_ops.sample_global(self.storage.columns, self.storage.head, self.storage.count,
                                         self.storage.sample_size, self._rank, self._group, self._ordered,
                                         self._seed, False)


class _GlobalCount(nn.Cell):
    """The graph a direct :meth:`ShardedReplayBuffer.size` runs (a Cell, as :class:`_GlobalSample`)."""

    def __init__(self, storage: ReplayBuffer, group: str) -> None:
        super().__init__(auto_prefix=False)
        self.storage = storage
        self._group = group

    def construct(self):
        return sharded_ops.gather_counts(self.storage.count, self._group).sum().astype(ms.int32)


class ShardedReplayBuffer(BufferCell):
    """A uniform replay buffer sharded over the data-parallel ranks of a distributed job.

    Create it on every rank of a job started with ``msrun`` (``mindspore.communication`` is
    initialised if it is not yet). Rank ``r`` holds a shard of ``capacity // world_size``
    rows, one more on the first ``capacity % world_size`` ranks, so the shards add up to
    ``capacity``; the shard is a :class:`ReplayBuffer`, ``self.storage``, and
    :meth:`insert` writes to it with no communication. Outside a distributed job
    ``world_size == 1`` and the buffer behaves exactly like a :class:`ReplayBuffer` with the
    same arguments: the same checks, state and samples.

    Collective calls: with ``world_size > 1``, :meth:`size`, :meth:`full` and, with
    ``sampling='global'``, :meth:`sample` communicate. Every rank must call them, in the same
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
            :func:`mindspore_rl_buffer.ops.sharded.encode_words`).

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

    _LIST_NAMED = ("insert",)

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
        capacity = check_size(op, "capacity", capacity)
        if not isinstance(sampling, str):
            raise _errors.type_error(op, "sampling", "'local' or 'global'", sampling)
        if sampling not in SAMPLING:
            raise ValueError(f"For '{op}', 'sampling' must be 'local' or 'global', but got {sampling!r}"
                             f"{_errors.did_you_mean(sampling, SAMPLING)}")
        rank, world_size, group = current_world()
        if capacity < world_size:
            raise ValueError(f"For '{op}', 'capacity' ({capacity}) must be at least the world size "
                             f"({world_size}): every rank holds at least one row.")
        self._rank, self._world_size, self._group = rank, world_size, group
        self._capacity = capacity
        self._sampling = sampling
        self._ordered = ordered
        self._seed = seed
        self.storage = ReplayBuffer(sample_size, shard_capacities(capacity, world_size)[rank], shapes, types,
                                    ordered=ordered, seed=seed, names=names)
        self._sample_size = self.storage.sample_size
        if sampling == "global":
            # Refused whatever the world size, so a script that runs on a laptop runs on a cluster.
            for spec in self.storage.specs:
                if spec.dtype in sharded_ops.UNMOVABLE:
                    raise _errors.unmovable_dtype_error(op, spec.name, spec.dtype)
        # Graphs of the direct collective calls, built on first use; a dict, so that they are
        # not sub-cells of the buffer (they share its shard).
        self._direct_graphs: dict[Any, nn.Cell] = {}

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
        """A :class:`~mindspore_rl_buffer.writer.BufferWriter` inserting into this rank's
        shard ``batch_size`` transitions at a time; see :meth:`ReplayBuffer.writer`."""
        from mindspore_rl_buffer.writer import BufferWriter

        return BufferWriter(self, batch_size)

    def insert(self, transition):
        """Append one transition or a batch of them to this rank's shard; no communication.

        Inside a ``construct`` write ``_ = self.buffer.insert(...)`` (see
        :meth:`ReplayBuffer.insert`).

        Args:
            transition (Union[list[Tensor], tuple[Tensor]]): As :meth:`ReplayBuffer.insert`.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            TypeError: If ``transition`` is not a list or tuple, or a column is not a tensor.
            ValueError: If the number of columns, a shape or a dtype does not match; the
                shard is left unchanged.
        """
        if in_graph():
            self.storage._write(transition)
            return self
        return self.storage.insert(transition)

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
            TypeError: If ``ordered`` is not a bool or None.
            ValueError: With ``sampling='local'``, if this rank's shard is empty (raised on
                this rank only); with ``sampling='global'``, if every shard is empty (raised on
                every rank); direct calls, checked on the host. Inside a graph the run fails with
                ``RuntimeError: assert failed`` instead, and that compiled graph cannot run again.
        """
        return self.sample_with_indices(ordered)[1]

    def sample_with_indices(self, ordered=None):
        """Like :meth:`sample`, and also return the indexes of the items drawn.

        Returns:
            Tuple of 2: an int32 tensor of shape ``(sample_size,)`` and the tuple of column
            tensors. Locally the indexes are logical indexes in this shard (0 = oldest);
            globally they index the union, shard 0's items first: see
            :mod:`mindspore_rl_buffer.ops.sharded`.
        """
        if in_graph():
            if self._world_size == 1 or self._sampling == "local":
                return self.storage.sample_with_indices(ordered)
            if ordered is None:
                ordered = self._ordered
            _, drawn, values = sharded_ops.sample_global(
                self.storage.columns, self.storage.head, self.storage.count, self._sample_size, self._rank,
                self._group, ordered, self._seed, True)
            return drawn, values
        if self._world_size == 1:
            return self.storage.sample_with_indices(ordered)
        op = "sample"
        if ordered is None:
            ordered = self._ordered
        if not isinstance(ordered, bool):
            raise _errors.type_error(op, "ordered", "a bool or None", ordered)
        if self._sampling == "local":
            if int(self.storage.count) == 0:
                raise _errors.empty_shard_error(op, self._rank)
            return self.storage.sample_with_indices(ordered)
        with DIRECT_CALLS:
            total, drawn, values = self._direct_graph(("sample", ordered))()
        # Every rank reads the same total, so every rank raises alike (no rank is left
        # waiting in a collective). The graph was run unguarded, so it stays usable.
        if int(total) == 0:
            raise _errors.empty_error(op)
        return drawn, values

    def _direct_graph(self, key: Any) -> nn.Cell:
        if key not in self._direct_graphs:
            if key[0] == "sample":
                graph = _GlobalSample(self.storage, self._rank, self._group, key[1], self._seed)
            else:
                graph = _GlobalCount(self.storage, self._group)
            self._direct_graphs[key] = graph
        return self._direct_graphs[key]

    # ------------------------------------------------------------- reset, size, full
    def reset(self):
        """Empty this rank's shard (both cursors back to 0); no communication.

        Every rank resets its own shard: call it on every rank to empty the whole buffer.
        """
        if in_graph():
            return self.storage._reset_graph()
        return self.storage.reset()

    def local_size(self):
        """Items in this rank's shard, as an int32 scalar tensor; no communication."""
        return self.storage.size()

    def size(self):
        """Items in all shards together, as an int32 scalar tensor; a collective call."""
        if self._world_size == 1:
            return self.storage.size()
        if in_graph():
            return self._total()
        with DIRECT_CALLS:
            return self._direct_graph(("count",))()

    def _total(self):
        return sharded_ops.gather_counts(self.storage.count, self._group).sum().astype(ms.int32)

    def full(self):
        """Whether every shard is full (the total is ``capacity``), a bool scalar tensor; a collective call."""
        if self._world_size == 1:
            return self.storage.full()
        if in_graph():
            return self._total() == self._capacity
        with DIRECT_CALLS:
            return self._direct_graph(("count",))() == self._capacity

    # ------------------------------------------------------------------ save, load
    def _metadata(self) -> dict[str, Any]:
        return {"format": _CHECKPOINT_FORMAT, "world_size": self._world_size, "rank": self._rank,
                "capacity": self._capacity, "local_capacity": self.local_capacity,
                "columns": [[s.name, list(s.shape), str(s.dtype)] for s in self.specs]}

    def save(self, path: str | os.PathLike) -> str:
        """Write this rank's shard to its own file, ``<path>.rank<r>-of-<n>.ckpt``; no communication.

        Written atomically (temporary file, fsync, rename). The file holds the shard's columns
        and cursors (``mindspore.save_checkpoint``) and the
        metadata :meth:`load` checks: world size, rank, capacities, column names, shapes
        and dtypes. Call it on every rank.

        Args:
            path (Union[str, os.PathLike]): The checkpoint's name; a ``.ckpt`` ending is
                allowed and dropped before the rank suffix.

        Returns:
            str, the file written.
        """
        file = shard_path(path, self._rank, self._world_size)
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        storage = self.storage
        params = [{"name": f"column/{name}", "data": column} for name, column in zip(storage._names, storage.columns)]
        params += [{"name": "head", "data": storage.head}, {"name": "count", "data": storage.count}]
        # Atomic, like every buffer's save: a crash mid-write leaves the previous file intact.
        write_atomically(params, Path(file), "ckpt", append_dict={"metadata": json.dumps(self._metadata())})
        return file

    def load(self, path: str | os.PathLike) -> None:
        """Restore this rank's shard, in place, from the file :meth:`save` wrote; no communication.

        The Parameters are written through a compiled graph, so graphs that already use
        the buffer (a user's compiled ``construct`` included) see the restored state.

        Args:
            path (Union[str, os.PathLike]): The name given to :meth:`save`.

        Raises:
            ValueError: If the checkpoint was saved by a job of another world size, or its
                rank, capacities or columns differ from this buffer's; nothing is changed.
            FileNotFoundError: If there is no checkpoint for this rank at all.
        """
        op = "load"
        file = shard_path(path, self._rank, self._world_size)
        if not os.path.isfile(file):
            saved = sorted(_saved_world_sizes(path) - {self._world_size})
            if saved:
                raise _errors.world_size_error(op, os.fspath(path), saved[0], self._world_size)
            raise _errors.missing_shard_error(op, file)
        data = ms.load_checkpoint(file)
        metadata = json.loads(str(data.get("metadata", "{}")))
        expected = self._metadata()
        if metadata.get("world_size") != self._world_size:
            raise _errors.world_size_error(op, file, metadata.get("world_size"), self._world_size)
        for key in ("format", "rank", "capacity", "local_capacity", "columns"):
            if metadata.get(key) != expected[key]:
                raise _errors.checkpoint_error(op, file, key, expected[key], metadata.get(key))
        storage = self.storage
        columns = [data[f"column/{name}"] for name in storage._names]
        for name, spec, value in zip(storage._names, self.specs, columns):
            if tuple(value.shape) != (self.local_capacity, *spec.shape) or value.dtype != spec.dtype:
                raise _errors.checkpoint_error(op, file, f"column '{name}'",
                                               f"{(self.local_capacity, *spec.shape)} {spec.dtype}",
                                               f"{tuple(value.shape)} {value.dtype}")
        head, count = (int(np.asarray(data[key].asnumpy())) for key in ("head", "count"))
        if not (0 <= count <= self.local_capacity and 0 <= head < self.local_capacity
                and (head == 0 or count == self.local_capacity)):
            raise _errors.checkpoint_error(op, file, "cursors", "within the cursor contract",
                                           f"head={head}, count={count}")
        with DIRECT_CALLS:
            self._restore_compiled(Tensor(head, ms.int32), Tensor(count, ms.int32),
                                   *(Tensor(value.asnumpy()) for value in columns))

    @jit
    def _restore_compiled(self, head, count, *columns):
        for parameter, value in zip(self.storage.columns, columns):
            ops.assign(parameter, value)
        ops.assign(self.storage.head, head)
        ops.assign(self.storage.count, count)
        return count

    def extend_repr(self) -> str:
        return (f"sampling={self._sampling!r}, rank={self._rank}, world_size={self._world_size}, "
                f"capacity={self._capacity}, local_capacity={self.local_capacity}")
