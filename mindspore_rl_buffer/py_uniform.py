"""PyUniformReplayBuffer: the TF-Agents API over numpy arrays, for collection on the host."""
from __future__ import annotations

from typing import Any

import numpy as np

from mindspore_rl_buffer.nest import FlatSpec
from mindspore_rl_buffer.replay_buffer import ReplayBuffer, check_size
from mindspore_rl_buffer.specs import numpy_dtype
from mindspore_rl_buffer.trajectory import BufferInfo, TFAgentsAPI, check_sample_args, check_stored


def ring_insert(columns: list[np.ndarray], head: int, count: int, batch: list[np.ndarray]) -> tuple[int, int]:
    """Append ``batch`` (leading dimension ``n``) to numpy ``columns`` in place: the numpy twin of
    :func:`mindspore_rl_buffer.ops.insert`, under the same cursor contract. Returns the new cursors."""
    capacity, n = len(columns[0]), len(batch[0])
    kept = min(n, capacity)
    rows = (head + count + (n - kept) + np.arange(kept)) % capacity
    for column, values in zip(columns, batch):
        column[rows] = values[n - kept:]
    total = count + n
    new_count = min(total, capacity)
    return (head + total - new_count) % capacity, new_count


class PyUniformReplayBuffer(TFAgentsAPI):
    """TF-Agents' ``PyUniformReplayBuffer``: a flat ring of ``capacity`` items in numpy arrays.

    No MindSpore graph is needed to add or read; :meth:`to_device` hands the contents to an
    on-device :class:`ReplayBuffer` in one call. The ring keeps the same cursor contract as
    the device buffers (see :mod:`mindspore_rl_buffer.ops`); item ids are physical rows.

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

    def __init__(self, data_spec: Any, capacity: int, *, seed: int | None = None) -> None:
        op = type(self).__name__
        self._capacity = check_size(op, "capacity", capacity)
        self._flat = FlatSpec.of(data_spec)
        self._data_spec = data_spec
        self._columns = [np.zeros((self._capacity, *spec.shape), numpy_dtype(spec.dtype))
                         for spec in self._flat.specs]
        self._head = 0
        self._count = 0
        self._rng = np.random.default_rng(seed)

    @property
    def data_spec(self) -> Any:
        return self._data_spec

    @property
    def capacity(self) -> int:
        return self._capacity

    def num_frames(self) -> int:
        """Items stored."""
        return self._count

    def add_batch(self, items: Any) -> None:
        """Append items with an outer dimension (1 in TF-Agents; a larger one is appended in order).

        Raises:
            ValueError: If the structure, a shape or a dtype does not match the spec, naming
                the leaf path; nothing is written.
        """
        leaves = [leaf.asnumpy() for leaf in self._flat.flatten("add_batch", items, (None,))]
        self._head, self._count = ring_insert(self._columns, self._head, self._count, leaves)

    def get_next(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                 time_stacked: bool = True) -> tuple[Any, BufferInfo]:
        """Sample items uniformly; ``num_steps`` windows are consecutive items that never cross
        the write position. Same arguments and results as
        :meth:`TrajectoryReplayBuffer.get_next`, as numpy arrays."""
        op = "get_next"
        check_sample_args(op, sample_batch_size, num_steps, time_stacked)
        check_stored(op, num_steps, self._count, self._capacity)
        picks = 1 if sample_batch_size is None else sample_batch_size
        steps = 1 if num_steps is None else num_steps
        starts = self._rng.integers(0, self._count - steps + 1, size=(picks, 1))
        rows = (self._head + starts + np.arange(steps)) % self._capacity
        probabilities = np.full(picks, 1.0 / (self._count - steps + 1), np.float32)
        leaves = [column[rows] for column in self._columns]
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

    def _ordered_rows(self) -> np.ndarray:
        return (self._head + np.arange(self._count)) % self._capacity

    def gather_all(self) -> Any:
        """Every stored item, oldest first, as leaves of shape ``[1, time, ...]``."""
        rows = self._ordered_rows()
        return self._flat.unflatten([column[rows][None] for column in self._columns])

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        rows = self._ordered_rows()
        return [column[rows][None] for column in self._columns], rows[None].astype(np.int32)

    @staticmethod
    def _wrap(arrays: list[np.ndarray]) -> list[np.ndarray]:
        return arrays

    def clear(self) -> None:
        """Empty the buffer (cursors back to 0)."""
        self._head = self._count = 0

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
        if self._count:
            rows = self._ordered_rows()
            buffer.insert([column[rows] for column in self._columns])
        return buffer

    def _describe(self) -> str:
        columns = ", ".join(f"{n}: {s.shape} {s.dtype}" for n, s in zip(self._flat.column_names(), self._flat.specs))
        return f"PyUniformReplayBuffer(capacity={self._capacity}, columns=[{columns}])"

    def _host_state(self) -> dict[str, np.ndarray]:
        state = {f"columns.{name}": column for name, column in zip(self._flat.column_names(), self._columns)}
        state["head"] = np.array(self._head, np.int32)
        state["count"] = np.array(self._count, np.int32)
        return state

    def _restore_host_state(self, state: dict[str, np.ndarray]) -> None:
        for name, column in zip(self._flat.column_names(), self._columns):
            column[...] = state[f"columns.{name}"]
        self._head, self._count = int(state["head"]), int(state["count"])

    def save(self, path: Any) -> Any:
        """Write every column and both cursors to ``path`` (``.safetensors`` or ``.ckpt``), atomically
        (see :func:`mindspore_rl_buffer.save_checkpoint`)."""
        from mindspore_rl_buffer.checkpoint import save_checkpoint

        return save_checkpoint(self, path)

    def load(self, path: Any) -> None:
        """Restore from ``path``; refuses a checkpoint of another capacity, shape or dtype."""
        from mindspore_rl_buffer.checkpoint import load_checkpoint

        load_checkpoint(path, self)

    def __repr__(self) -> str:
        return f"PyUniformReplayBuffer(capacity={self._capacity}, stored={self._count}, data_spec={self._data_spec})"

