"""PyUniformReplayBuffer: the TF-Agents API over numpy arrays, for collection on the host."""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from mindspore_rl_buffer._validation import check_sample_args, check_size, check_stored
from mindspore_rl_buffer.checkpoint import Checkpointable, ring_contract, spec_record
from mindspore_rl_buffer.host_ring import NumpyRing
from mindspore_rl_buffer.nest import FlatSpec
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.specs import TensorSpec, numpy_dtype
from mindspore_rl_buffer.tf_agents import BufferInfo, TFAgentsAPI


class PyUniformReplayBuffer(TFAgentsAPI, Checkpointable):
    """TF-Agents' ``PyUniformReplayBuffer``: a flat ring of ``capacity`` items in numpy arrays.

    No MindSpore graph is needed to add or read; :meth:`to_device` hands the contents to an
    on-device :class:`ReplayBuffer` in one call. Safe to share between threads: every method
    holds the buffer's lock. The items live in a
    :class:`~mindspore_rl_buffer.host_ring.NumpyRing`, under the same cursor contract as the
    device buffers (see :mod:`mindspore_rl_buffer.ops`); item ids are physical rows.

    Args:
        data_spec: A :class:`TensorSpec` or any nest of them.
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        seed (int): Seed of the numpy random generator. Default: ``None``.

    Examples:
        >>> import numpy as np
        >>> from mindspore_rl_buffer import PyUniformReplayBuffer, TensorSpec
        >>> rb = PyUniformReplayBuffer({'obs': TensorSpec([2], 'float32')}, capacity=4, seed=0)
        >>> rb.add_batch({'obs': np.arange(10, dtype=np.float32).reshape(5, 2)})  # 5 items, in order
        >>> rb.gather_all()['obs'][0, :, 0].tolist()   # the newest 4, oldest first
        [2.0, 4.0, 6.0, 8.0]
        >>> items, info = rb.get_next(sample_batch_size=3, num_steps=2)
        >>> items['obs'].shape, info.probabilities.tolist()
        ((3, 2, 2), [0.3333333432674408, 0.3333333432674408, 0.3333333432674408])
    """

    _YIELDS_TENSORS = False

    def __init__(self, data_spec: Any, capacity: int, *, seed: int | None = None) -> None:
        self._capacity = check_size(type(self).__name__, "capacity", capacity)
        self._flat = FlatSpec.of(data_spec)
        self._data_spec = data_spec
        self._ring = NumpyRing(self._capacity, [spec.shape for spec in self._flat.specs],
                               [numpy_dtype(spec.dtype) for spec in self._flat.specs])
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._lock = threading.RLock()

    @property
    def data_spec(self) -> Any:
        return self._data_spec

    @property
    def capacity(self) -> int:
        return self._capacity

    def num_frames(self) -> int:
        """Items stored."""
        return self._ring.count

    def add_batch(self, items: Any) -> None:
        """Append items with an outer dimension (1 in TF-Agents; a larger one is appended in order).

        Raises:
            ValueError: If the structure, a shape or a dtype does not match the spec, naming
                the leaf path; nothing is written.
        """
        leaves = [leaf.asnumpy() for leaf in self._flat.flatten("add_batch", items, (None,))]
        with self._lock:
            self._ring.insert(leaves)

    def get_next(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                 time_stacked: bool = True) -> tuple[Any, BufferInfo]:
        """Sample items uniformly; ``num_steps`` windows are consecutive items that never cross
        the write position. Same arguments and results as
        :meth:`TrajectoryReplayBuffer.get_next`, as numpy arrays."""
        op = "get_next"
        check_sample_args(op, sample_batch_size, num_steps, time_stacked)
        picks = 1 if sample_batch_size is None else sample_batch_size
        steps = 1 if num_steps is None else num_steps
        with self._lock:
            check_stored(op, num_steps, self._ring.count, self._capacity)
            rows = self._ring.window_rows(self._rng, picks, steps)
            probabilities = np.full(picks, 1.0 / (self._ring.count - steps + 1), np.float32)
            leaves = [column[rows] for column in self._ring.columns]
        ids = rows.astype(np.int32)
        if num_steps is None:
            leaves, ids = [x[:, 0] for x in leaves], ids[:, 0]
        if sample_batch_size is None:
            leaves, ids, probabilities = [x[0] for x in leaves], ids[0], probabilities[0]
        if num_steps is not None and not time_stacked:
            axis = 0 if sample_batch_size is None else 1
            items = tuple(self._flat.unflatten([np.take(x, t, axis) for x in leaves]) for t in range(steps))
            return items, BufferInfo(tuple(np.take(ids, t, axis) for t in range(steps)), probabilities)
        return self._flat.unflatten(leaves), BufferInfo(ids, probabilities)

    def gather_all(self) -> Any:
        """Every stored item, oldest first, as leaves of shape ``[1, time, ...]``."""
        with self._lock:
            return self._flat.unflatten([column[None] for column in self._ring.ordered()])

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        with self._lock:
            rows = self._ring.ordered_rows()
            return [column[rows][None] for column in self._ring.columns], rows[None].astype(np.int32)

    def clear(self) -> None:
        """Empty the buffer (cursors back to 0)."""
        with self._lock:
            self._ring.clear()

    def to_device(self, buffer: ReplayBuffer | None = None, *, sample_size: int = 1) -> ReplayBuffer:
        """Hand every stored item, oldest first, to an on-device :class:`ReplayBuffer` in one insert.

        Args:
            buffer (ReplayBuffer): The target, whose columns match the spec's leaves; ``None``
                creates one of the same capacity. Default: ``None``.
            sample_size (int): The new buffer's ``sample_size``. Default: ``1``.

        Returns:
            The buffer the items went into.

        Raises:
            ValueError: If ``buffer``'s columns do not match the spec's leaves.
        """
        specs = self._flat.specs
        if buffer is None:
            buffer = ReplayBuffer(sample_size, self._capacity, [s.shape for s in specs], [s.dtype for s in specs],
                                  names=self._flat.column_names())
        got = [(s.shape, s.dtype) for s in buffer.specs]
        want = [(s.shape, s.dtype) for s in specs]
        if got != want:
            raise ValueError(f"For 'to_device', the buffer's columns must be {want}, but got {got}.")
        with self._lock:
            stored = self._ring.ordered() if self._ring.count else None
        if stored is not None:
            buffer.insert(stored)
        return buffer

    # ------------------------------------------------------------------------- records
    def save(self, path: Any) -> Any:
        """See :meth:`~mindspore_rl_buffer.checkpoint.Checkpointable.save`; holds the lock while writing."""
        with self._lock:
            return super().save(path)

    def load(self, path: Any) -> None:
        """See :meth:`~mindspore_rl_buffer.checkpoint.Checkpointable.load`; holds the lock while restoring."""
        with self._lock:
            super().load(path)

    def checkpoint_record(self) -> dict[str, Any]:
        """See :class:`~mindspore_rl_buffer.checkpoint.Checkpointable`."""
        specs = tuple(TensorSpec(spec.shape, spec.dtype, name)
                      for spec, name in zip(self._flat.specs, self._flat.column_names()))
        return {"type": type(self).__name__, "capacity": self._capacity, "specs": spec_record(specs),
                "settings": {"seed": self._seed}}

    def checkpoint_tensors(self) -> dict[str, np.ndarray]:
        """Every column (``columns.<name>``) and both cursors, as numpy arrays."""
        state = {f"columns.{name}": column for name, column in zip(self._flat.column_names(), self._ring.columns)}
        state["head"] = np.array(self._ring.head, np.int32)
        state["count"] = np.array(self._ring.count, np.int32)
        return state

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The ring's cursor contract, on the checkpoint's ``head`` and ``count``."""
        problem = ring_contract(int(read("head")), int(read("count")), self._capacity)
        return [problem] if problem else []

    def restore_checkpoint(self, values: Mapping[str, np.ndarray]) -> None:
        """Copy validated checkpoint values into the ring."""
        for name, column in zip(self._flat.column_names(), self._ring.columns):
            column[...] = values[f"columns.{name}"]
        self._ring.head, self._ring.count = int(values["head"]), int(values["count"])

    def __repr__(self) -> str:
        return (f"PyUniformReplayBuffer(capacity={self._capacity}, stored={self._ring.count}, "
                f"data_spec={self._data_spec})")
