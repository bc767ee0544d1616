"""The TF-Agents face: data-spec nests, ``add_batch``, ``get_next``, ``as_dataset``, ``gather_all``.

:class:`TrajectoryReplayBuffer` is the counterpart of TF-Agents' ``TFUniformReplayBuffer``
over the same core as :class:`ReplayBuffer`: it *is* a ring buffer whose item is one time
step of every segment (column ``c`` of shape ``(max_length, batch_size, *spec_c.shape)``),
with ``head``/``count`` cursors over time, read through the operators of
:mod:`mindspore_rl_buffer.ops`.
"""
from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, jit, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import DIRECT_CALLS, BufferCell, in_graph
from mindspore_rl_buffer.nest import FlatSpec, check_leaves_graph, leaf_at, rebuild
from mindspore_rl_buffer.ops import ring
from mindspore_rl_buffer.replay_buffer import ReplayBuffer, check_size

BufferInfo = collections.namedtuple("BufferInfo", ["ids", "probabilities"])
BufferInfo.__doc__ = """What :meth:`get_next` drew: the items' ids and each pick's sampling probability."""

_ZERO = Tensor(0, ms.int32)


def check_sample_args(op: str, sample_batch_size: Any, num_steps: Any, time_stacked: Any = True) -> None:
    """Host check of the arguments shared by ``get_next`` and ``as_dataset``."""
    for arg, value in (("sample_batch_size", sample_batch_size), ("num_steps", num_steps)):
        if value is not None:
            check_size(op, arg, value)
    if not isinstance(time_stacked, bool):
        raise _errors.type_error(op, "time_stacked", "a bool", time_stacked)


def check_stored(op: str, num_steps: int | None, stored: int, max_length: int) -> None:
    """Refuse to sample an empty buffer, or windows longer than what is stored."""
    steps = 1 if num_steps is None else num_steps
    if steps > max_length:
        raise ValueError(f"For '{op}', 'num_steps' ({steps}) must not exceed the {max_length} time steps "
                         f"the buffer can hold.")
    if stored == 0:
        raise _errors.empty_error(op)
    if steps > stored:
        raise ValueError(f"For '{op}', 'num_steps' ({steps}) must not exceed the {stored} time steps stored.")


def deterministic_pass(leaves: list[np.ndarray], ids: np.ndarray, sample_batch_size: int | None,
                       num_steps: int | None) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
    """Every stored item once, in order: segment by segment, oldest first (as TF-Agents).

    ``leaves`` are ``[segments, time, ...]`` in logical order. With ``num_steps`` the time
    axis is cut into consecutive, non-overlapping windows (a last partial window is
    dropped); with ``sample_batch_size`` segments are read in groups of that many, the last
    group possibly smaller, all segments of a group stepping through time together.
    """
    segments, length = ids.shape
    steps = 1 if num_steps is None else num_steps
    starts = range(0, length - steps + 1, steps)
    group = 1 if sample_batch_size is None else sample_batch_size
    for first in range(0, segments, group):
        chosen = slice(first, first + group)
        for start in starts:
            time = start if num_steps is None else slice(start, start + steps)
            if sample_batch_size is None:
                yield [leaf[first, time] for leaf in leaves], ids[first, time]
            else:
                yield [leaf[chosen, time] for leaf in leaves], ids[chosen, time]


class TFAgentsAPI:
    """``as_dataset`` and ``as_mindspore_dataset`` over ``get_next`` and ``_gather_numpy``."""

    _flat: FlatSpec

    def as_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                   num_parallel_calls: int | None = None, single_deterministic_pass: bool = False):
        """An iterable of ``(items, BufferInfo)`` for training loops.

        Args:
            sample_batch_size (int): Items per element; ``None`` for single items. Default: ``None``.
            num_steps (int): Consecutive time steps per item; ``None`` for single steps.
                Default: ``None``.
            num_parallel_calls (int): Accepted for TF-Agents compatibility; calls are made one
                at a time. Default: ``None``.
            single_deterministic_pass (bool): Walk every stored item once in order (segment by
                segment, oldest first) instead of sampling forever. Default: ``False``.

        Returns:
            An iterable; sampling is endless, the deterministic pass ends after the last item.
        """
        op = "as_dataset"
        check_sample_args(op, sample_batch_size, num_steps)
        if num_parallel_calls is not None:
            check_size(op, "num_parallel_calls", num_parallel_calls)
        if not isinstance(single_deterministic_pass, bool):
            raise _errors.type_error(op, "single_deterministic_pass", "a bool", single_deterministic_pass)
        if single_deterministic_pass:
            return _DeterministicPass(self, sample_batch_size, num_steps)
        return _Sampler(self, sample_batch_size, num_steps)

    def as_mindspore_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                             single_deterministic_pass: bool = False, num_samples: int | None = None):
        """The same stream as :meth:`as_dataset`, as a ``mindspore.dataset.GeneratorDataset``.

        Columns: one per leaf of the data spec (named as the buffer's columns), then ``ids``
        and, when sampling, ``probabilities``. The pipeline reads in a thread of its own; the
        buffer serialises its compiled calls with a lock, and MindSpore's prefetch means a
        sampled batch may be a few batches older than the newest ``add_batch``.

        Args:
            num_samples (int): Stop after this many elements; ``None`` samples without end.
                Default: ``None``.
        """
        import mindspore.dataset as ds

        if num_samples is not None:
            check_size("as_mindspore_dataset", "num_samples", num_samples)
        dataset = self.as_dataset(sample_batch_size, num_steps, None, single_deterministic_pass)
        names = [*self._flat.column_names(), "ids"] + ([] if single_deterministic_pass else ["probabilities"])

        def rows():
            for n, (items, info) in enumerate(dataset):
                if num_samples is not None and n >= num_samples:
                    return
                leaves = [np.asarray(_host(x)) for x in self._flat.leaves(items)]
                extra = [np.asarray(_host(info.ids))]
                if not single_deterministic_pass:
                    extra.append(np.asarray(_host(info.probabilities)))
                yield tuple(leaves + extra)

        return ds.GeneratorDataset(rows, column_names=names, shuffle=False, num_parallel_workers=1,
                                   python_multiprocessing=False)


def _host(x: Any) -> Any:
    return x.asnumpy() if isinstance(x, Tensor) else x


class _Sampler:
    def __init__(self, buffer: Any, sample_batch_size: int | None, num_steps: int | None) -> None:
        self.buffer, self.sample_batch_size, self.num_steps = buffer, sample_batch_size, num_steps

    def __iter__(self):
        while True:
            yield self.buffer.get_next(self.sample_batch_size, self.num_steps)


class _DeterministicPass:
    def __init__(self, buffer: Any, sample_batch_size: int | None, num_steps: int | None) -> None:
        self.buffer, self.sample_batch_size, self.num_steps = buffer, sample_batch_size, num_steps

    def __iter__(self):
        leaves, ids = self.buffer._gather_numpy()
        if ids.shape[1] == 0:
            raise _errors.empty_error("as_dataset")
        for chunk, chunk_ids in deterministic_pass(leaves, ids, self.sample_batch_size, self.num_steps):
            yield self.buffer._flat.unflatten(self.buffer._wrap(chunk)), BufferInfo(
                self.buffer._wrap([chunk_ids])[0], ())


class TrajectoryReplayBuffer(BufferCell, TFAgentsAPI):
    """TF-Agents' ``TFUniformReplayBuffer`` on the device: ``batch_size`` segments of ``max_length`` steps.

    Each :meth:`add_batch` appends one time step to every segment (one per environment);
    once ``max_length`` steps are stored the oldest step is overwritten. Storage: column
    ``c`` of shape ``(max_length, batch_size, *spec_c.shape)`` with ``head``/``count``
    cursors over time, the same core and operators as :class:`ReplayBuffer`.

    Item ids (``BufferInfo.ids``) are physical slots, ``row * batch_size + segment``: stable
    while the item stays stored.

    Args:
        data_spec: A :class:`TensorSpec` or any nest of them (tuple, list, dict, namedtuple).
        batch_size (int): Parallel segments; every leaf added has this outer dimension.
        max_length (int): Time steps per segment.
        seed (int): Seed of the sampling operators; ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.

    Raises:
        TypeError: If a leaf of ``data_spec`` is not a TensorSpec or a size is not an int.
        ValueError: If a size is not positive.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import TensorSpec, TrajectoryReplayBuffer
        >>> spec = (TensorSpec([3], ms.float32, 'action'), {'reward': TensorSpec([], ms.float32)})
        >>> rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=10)
        >>> for t in range(4):
        ...     rb.add_batch((np.full((2, 3), t, np.float32), {'reward': np.full(2, t, np.float32)}))
        >>> (action, reward), info = rb.get_next(sample_batch_size=5, num_steps=2)
        >>> action.shape, reward['reward'].shape, info.ids.shape, info.probabilities.shape
        ((5, 2, 3), (5, 2), (5, 2), (5,))
        >>> rb.gather_all()[1]['reward'].shape
        (2, 4)
    """

    _LIST_NAMED = ("clear",)

    def __init__(self, data_spec: Any, batch_size: int, max_length: int, *, seed: int | None = None) -> None:
        super().__init__()
        op = type(self).__name__
        self._batch_size = check_size(op, "batch_size", batch_size)
        self._max_length = check_size(op, "max_length", max_length)
        self._flat = FlatSpec.of(data_spec)
        self._data_spec = data_spec
        self._paths = self._flat.paths
        self._template = self._flat.template
        self._descriptions = self._flat.descriptions()
        self._leaf_shapes = self._flat.shapes((self._batch_size,))
        self._leaf_dtypes = self._flat.dtypes()
        self._seed = seed
        self._segment_seed = None if seed is None else seed + 1
        self._segments = Tensor(self._batch_size, ms.int32)
        self.storage = ReplayBuffer(1, self._max_length, list(self._leaf_shapes), list(self._leaf_dtypes),
                                    names=self._flat.column_names(), seed=seed)

    @property
    def data_spec(self) -> Any:
        """The nest of :class:`TensorSpec` items have."""
        return self._data_spec

    @property
    def capacity(self) -> int:
        """Items the buffer holds: ``batch_size * max_length``."""
        return self._batch_size * self._max_length

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def max_length(self) -> int:
        return self._max_length

    def num_frames(self):
        """Items stored (``batch_size`` times the time steps stored), an int32 scalar tensor."""
        return self.storage.size() * self._batch_size

    # ------------------------------------------------------------------------ add_batch
    def add_batch(self, items):
        """Append one time step to every segment.

        Args:
            items: A nest like ``data_spec``; every leaf has outer dimension ``batch_size``.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            ValueError: If the structure, a shape or a dtype does not match the spec; the
                message names the leaf path, e.g. ``items[1][0] 'lidar': expected shape
                (32, 5), got (32, 4)``; nothing is written.
            TypeError: If a leaf is not a tensor or numpy array.
        """
        if in_graph():
            leaves = [leaf_at(items, path) for path in self._paths]
            check_leaves_graph("add_batch", self._descriptions, self._leaf_shapes, self._leaf_dtypes,
                               [x.shape for x in leaves], [x.dtype for x in leaves])
            self.storage._write(leaves)
            return self
        leaves = self._flat.flatten("add_batch", items, (self._batch_size,))
        with DIRECT_CALLS:
            self.storage._insert_compiled(*leaves)
        return None

    # ------------------------------------------------------------------------- get_next
    def get_next(self, sample_batch_size=None, num_steps=None, time_stacked=True):
        """Sample items: random (segment, time) picks, optionally ``num_steps`` long.

        A pick of ``num_steps`` steps stays within one segment and never crosses the write
        position (no mix of the newest and the oldest steps).

        Args:
            sample_batch_size (int): Picks; ``None`` for one pick without a batch dimension.
                Default: ``None``.
            num_steps (int): Consecutive steps per pick; ``None`` for one step without a time
                dimension. Default: ``None``.
            time_stacked (bool): Stack the steps into leaves of shape
                ``[sample_batch_size, num_steps, ...]``; otherwise return a tuple of
                ``num_steps`` items. Default: ``True``.

        Returns:
            ``(items, BufferInfo(ids, probabilities))``; ``ids`` has the leading shape of the
            items, ``probabilities`` (float32) one entry per pick.

        Raises:
            ValueError: If the buffer is empty or ``num_steps`` exceeds the steps stored
                (direct calls). Inside a graph the run fails with ``RuntimeError: assert failed``
                instead, and that compiled graph cannot run again.
        """
        if in_graph():
            return self._get_next_graph(sample_batch_size, num_steps, time_stacked, True)
        op = "get_next"
        check_sample_args(op, sample_batch_size, num_steps, time_stacked)
        check_stored(op, num_steps, int(self.storage.count), self._max_length)
        with DIRECT_CALLS:
            leaves, ids, probabilities = self._get_next_compiled(sample_batch_size, num_steps)
        return self._shape_output(leaves, ids, probabilities, sample_batch_size, num_steps, time_stacked)

    def _draw(self, sample_batch_size, num_steps, check):
        picks = 1 if sample_batch_size is None else sample_batch_size
        steps = 1 if num_steps is None else num_steps
        rows, _ = ring.sample_windows(self.storage.head, self.storage.count, picks, steps, self._max_length,
                                      self._seed, check)
        segments = ops.uniform((picks, 1), _ZERO, self._segments, seed=self._segment_seed, dtype=ms.int32)
        segments = ops.broadcast_to(segments, (picks, steps))
        index = ops.stack((rows, segments), -1)
        leaves = [ops.gather_nd(column, index) for column in self.storage.columns]
        ids = rows * self._batch_size + segments
        valid = ((self.storage.count - steps + 1) * self._batch_size).astype(ms.float32)
        probabilities = ops.ones((picks,), ms.float32) / valid
        if num_steps is None:
            leaves = [x[:, 0] for x in leaves]
            ids = ids[:, 0]
        if sample_batch_size is None:
            leaves = [x[0] for x in leaves]
            ids = ids[0]
            probabilities = probabilities[0]
        return leaves, ids, probabilities

    @jit
    def _get_next_compiled(self, sample_batch_size, num_steps):
        return self._draw(sample_batch_size, num_steps, False)

    def _get_next_graph(self, sample_batch_size, num_steps, time_stacked, check):
        leaves, ids, probabilities = self._draw(sample_batch_size, num_steps, check)
        time_axis = 0 if sample_batch_size is None else 1
        if num_steps is not None and not time_stacked:
            items = tuple(rebuild(self._template, [ops.gather(x, t, time_axis) for x in leaves])
                          for t in range(num_steps))
            return items, BufferInfo(tuple(ops.gather(ids, t, time_axis) for t in range(num_steps)),
                                     probabilities)
        return rebuild(self._template, leaves), BufferInfo(ids, probabilities)

    def _shape_output(self, leaves, ids, probabilities, sample_batch_size, num_steps, time_stacked):
        if num_steps is None or time_stacked:
            return self._flat.unflatten(leaves), BufferInfo(ids, probabilities)

        def step(x, t):
            return x[t] if sample_batch_size is None else x[:, t]

        items = tuple(self._flat.unflatten([step(x, t) for x in leaves]) for t in range(num_steps))
        return items, BufferInfo(tuple(step(ids, t) for t in range(num_steps)), probabilities)

    # ----------------------------------------------------------------------- gather_all
    def gather_all(self):
        """Every stored item, as leaves of shape ``[batch_size, time, ...]``, oldest first.

        Inside a graph the time dimension is ``max_length`` (shapes are static there): the
        first ``size()`` steps are the stored ones.
        """
        if in_graph():
            return rebuild(self._template, self._gather_graph())
        stored = int(self.storage.count)
        with DIRECT_CALLS:
            leaves = self._gather_compiled()
        return self._flat.unflatten([x[:, :stored] for x in leaves])

    def _gather_graph(self):
        return [ops.swapaxes(x, 0, 1) for x in ring.gather_ordered(self.storage.columns, self.storage.head)]

    @jit
    def _gather_compiled(self):
        return self._gather_graph()

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        stored, head = int(self.storage.count), int(self.storage.head)
        with DIRECT_CALLS:
            leaves = [x.asnumpy()[:, :stored] for x in self._gather_compiled()]
        rows = (head + np.arange(stored)) % self._max_length
        ids = rows[None, :] * self._batch_size + np.arange(self._batch_size)[:, None]
        return leaves, ids.astype(np.int32)

    @staticmethod
    def _wrap(arrays: list[np.ndarray]) -> list[Tensor]:
        return [Tensor(np.array(a, copy=True)) for a in arrays]

    # --------------------------------------------------------------------------- clear
    def clear(self):
        """Empty the buffer (cursors back to 0; nothing is re-allocated).

        A bare ``self.buffer.clear()`` statement works inside a ``construct``: although
        ``clear`` is on the list of names MindSpore's parser treats as list methods, MindSpore
        2.10 was measured to leave that statement alone (tested). Should a later MindSpore
        rebind the buffer as it does for ``insert(...)``, the buffer raises the same error
        naming the fix.
        """
        if in_graph():
            self.storage._reset_graph()
            return self
        self.storage.reset()
        return None
