"""PyUniformReplayBuffer: TF-Agents' numpy buffer, for collection on the host."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

import mindspore as ms
import numpy as np

from mindspore_rl_buffer._validation import check_capacity, check_seed
from mindspore_rl_buffer.checkpoint import Checkpointable, spec_record
from mindspore_rl_buffer.contracts import ring_contract
from mindspore_rl_buffer.host_ring import NumpyRing, generator_of, generator_problems, generator_words
from mindspore_rl_buffer.nest import FlatSpec
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.specs import TensorSpec, check_column_bytes, numpy_dtype
from mindspore_rl_buffer.tf_agents import (
    BufferInfo,
    TFAgentsAPI,
    add_counter_contract,
    added_default,
    check_sample_args,
    check_stored,
    item_ids,
)


class PyUniformReplayBuffer(TFAgentsAPI, Checkpointable):
    """TF-Agents' ``PyUniformReplayBuffer``: a flat ring of ``capacity`` items in numpy arrays.

    As in TF-Agents, :meth:`get_next` and :meth:`as_dataset` return **the items alone**;
    :meth:`get_next_with_info` returns ``(items, BufferInfo(ids, probabilities))`` like the
    device buffer's ``get_next``. No MindSpore graph is needed to add or read;
    :meth:`to_device` hands the contents to an on-device :class:`ReplayBuffer` in one call.
    Safe to share between threads: every method holds the buffer's lock. The items live in
    a ``NumpyRing`` (``mindspore_rl_buffer.host_ring``), under the same cursor contract as
    the device buffers (see :mod:`mindspore_rl_buffer.ops`). An item's id (int64) is the
    number of items added before it since construction or the last :meth:`clear`, as
    TF-Agents counts them.

    Args:
        data_spec: A :class:`TensorSpec` or any nest of them.
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        seed (int): Seed of the numpy random generator, in ``[0, 2**31)``; ``None`` takes
            ``mindspore.set_seed``'s seed if one is set when the buffer is built, else fresh
            entropy. Default: ``None``.

    Raises:
        TypeError: If a leaf of ``data_spec`` is not a TensorSpec or ``capacity`` is not an int.
        ValueError: If ``capacity`` is not positive.

    Supported Platforms:
        ``CPU`` (host memory; :meth:`to_device` feeds a buffer on any device)

    Examples:
        >>> import numpy as np
        >>> from mindspore_rl_buffer import PyUniformReplayBuffer, TensorSpec
        >>> rb = PyUniformReplayBuffer({'obs': TensorSpec([2], 'float32')}, capacity=4, seed=0)
        >>> rb.add_batch({'obs': np.arange(10, dtype=np.float32).reshape(5, 2)})  # 5 items, in order
        >>> rb.gather_all()['obs'][0, :, 0].tolist()   # the newest 4, oldest first
        [2.0, 4.0, 6.0, 8.0]
        >>> rb.size
        4
        >>> first, second = rb.get_next(num_steps=2, time_stacked=False)   # the items alone
        >>> second['obs'][0] - first['obs'][0]
        2.0
        >>> items, info = rb.get_next_with_info(sample_batch_size=3, num_steps=2)
        >>> items['obs'].shape, info.ids.shape, info.probabilities.tolist()
        ((3, 2, 2), (3, 2), [0.3333333432674408, 0.3333333432674408, 0.3333333432674408])
        >>> [int(item['obs'][0]) for item in rb.as_dataset(single_deterministic_pass=True)]
        [2, 4, 6, 8]
    """

    _YIELDS_TENSORS = False
    _ITEMS_ALONE = True

    def __init__(self, data_spec: Any, capacity: int, *, seed: int | None = None) -> None:
        self._capacity = check_capacity(type(self).__name__, "capacity", capacity)
        self._flat = FlatSpec.of(data_spec)
        # the limits of the device buffer to_device fills, checked before numpy allocates the ring
        check_column_bytes(type(self).__name__, self._capacity, self._flat.specs, self._flat.descriptions())
        self._data_spec = data_spec
        self._ring = NumpyRing(self._capacity, [spec.shape for spec in self._flat.specs],
                               [numpy_dtype(spec.dtype) for spec in self._flat.specs])
        self._seed = check_seed(type(self).__name__, seed)
        # No seed: mindspore.set_seed's, if one is set (as the device buffers' draws follow it).
        self._rng = np.random.default_rng(self._seed if self._seed is not None else ms.get_seed())
        self._lock = threading.RLock()
        self._added = 0  # items added since construction or the last clear: the next item's id

    @property
    def data_spec(self) -> Any:
        return self._data_spec

    @property
    def capacity(self) -> int:
        """Items the buffer holds."""
        return self._capacity

    @property
    def size(self) -> np.int64:
        """Items stored, as TF-Agents' ``size`` property (a ``numpy.int64``)."""
        return np.int64(self._ring.count)

    def num_frames(self) -> int:
        """Items stored (TF-Agents' numpy buffer raises ``NotImplementedError`` here)."""
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
            self._added += len(leaves[0])

    def get_next(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                 time_stacked: bool = True) -> Any:
        """Sample items uniformly, as TF-Agents' numpy buffer: **the items alone**.

        ``num_steps`` windows are consecutive items that never cross the write position.
        :meth:`get_next_with_info` draws the same way and also returns the ids and the
        probabilities.

        Args:
            sample_batch_size (int): Picks; ``None`` for one pick without a batch dimension.
                Default: ``None``.
            num_steps (int): Consecutive items per pick; ``None`` for one item without a time
                dimension. Default: ``None``.
            time_stacked (bool): Stack the steps into leaves ``[sample_batch_size, num_steps,
                ...]``; otherwise return a tuple of ``num_steps`` items. Default: ``True``.

        Returns:
            A nest like ``data_spec`` of numpy arrays (a tuple of ``num_steps`` of them when
            not ``time_stacked``).

        Raises:
            TypeError: If an argument has the wrong type.
            ValueError: If a size is not positive, the buffer is empty, or ``num_steps``
                exceeds the items stored (TF-Agents returns uninitialised arrays from an
                empty buffer).
        """
        return self._sample("get_next", sample_batch_size, num_steps, time_stacked)[0]

    def get_next_with_info(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                           time_stacked: bool = True) -> tuple[Any, BufferInfo]:
        """:meth:`get_next` with ``BufferInfo(ids, probabilities)``, as the device buffer returns it.

        Returns:
            ``(items, BufferInfo(ids, probabilities))``: ``ids`` (int64) have the leading shape
            of the items, ``probabilities`` (float32) one entry per pick,
            ``1 / (stored - num_steps + 1)``.

        Raises:
            TypeError: If an argument has the wrong type.
            ValueError: As :meth:`get_next`.
        """
        return self._sample("get_next_with_info", sample_batch_size, num_steps, time_stacked)

    def _sample(self, op: str, sample_batch_size: Any, num_steps: Any, time_stacked: Any) -> tuple[Any, BufferInfo]:
        sample_batch_size, num_steps, time_stacked = check_sample_args(op, sample_batch_size, num_steps, time_stacked)
        self._check_request_bytes(op, sample_batch_size, num_steps)
        picks = 1 if sample_batch_size is None else sample_batch_size
        steps = 1 if num_steps is None else num_steps
        with self._lock:
            check_stored(op, num_steps, self._ring.count, self._capacity)
            rows = self._ring.window_rows(self._rng, picks, steps)
            probabilities = np.full(picks, 1.0 / (self._ring.count - steps + 1), np.float32)
            leaves = [column[rows] for column in self._ring.columns]
            logical = (rows - self._ring.head) % self._capacity
            ids = (self._added - self._ring.count + logical).astype(np.int64)
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
        """Every stored item, oldest first, as leaves of shape ``[1, stored, ...]``.

        TF-Agents' numpy buffer returns every slot, ``[1, capacity, ...]`` in physical order,
        slots never written included; this returns what is stored, in the order it came.
        """
        with self._lock:
            return self._flat.unflatten([column[None] for column in self._ring.ordered()])

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        with self._lock:
            rows = self._ring.ordered_rows()
            ids = item_ids(self._added - self._ring.count, self._ring.count, 1)
            return [column[rows][None] for column in self._ring.columns], ids

    def _draw(self, op: str, sample_batch_size: int | None, num_steps: int | None) -> tuple[Any, BufferInfo]:
        return self._sample(op, sample_batch_size, num_steps, True)

    def _pass_limits(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return ("segments", 1), ("capacity", self._capacity)

    def clear(self) -> None:
        """Empty the buffer: cursors and the add counter back to 0, so ids start again from 0."""
        with self._lock:
            self._ring.clear()
            self._added = 0

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
                                  names=self._column_names())
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
    def checkpoint_lock(self) -> contextlib.AbstractContextManager[Any]:
        """The buffer's lock: ``save`` and ``load`` (methods or functions) hold it while they read
        and restore the columns and cursors."""
        return self._lock

    def checkpoint_record(self) -> dict[str, Any]:
        """See ``mindspore_rl_buffer.checkpoint.Checkpointable``."""
        specs = tuple(TensorSpec(spec.shape, spec.dtype, name)
                      for spec, name in zip(self._flat.specs, self._column_names()))
        return {"type": type(self).__name__, "capacity": self._capacity, "specs": spec_record(specs),
                "settings": {"seed": self._seed}, "leaf_paths": self._leaf_paths()}

    def checkpoint_tensors(self) -> dict[str, np.ndarray]:
        """Every column (``columns.<name>``), both cursors, the add counter ``added`` and the
        generator's state ``rng_state``, as numpy arrays."""
        state = {f"columns.{name}": column for name, column in zip(self._column_names(), self._ring.columns)}
        state["head"] = np.array(self._ring.head, np.int32)
        state["count"] = np.array(self._ring.count, np.int32)
        state["added"] = np.array(self._added, np.int64)
        state["rng_state"] = generator_words(self._rng)
        return state

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The ring's cursor contract on the checkpoint's ``head`` and ``count``, and the add counter's."""
        head, count = int(read("head")), int(read("count"))
        problems = [ring_contract(head, count, self._capacity),
                    add_counter_contract(int(read("added")), head, count, self._capacity)]
        return [problem for problem in problems if problem]

    def checkpoint_defaults(self, read: Any) -> dict[Any, np.ndarray]:
        """Files written before the add counter existed: see ``mindspore_rl_buffer.tf_agents.added_default``."""
        added = added_default(read("head"), read("count"))
        defaults = {} if added is None else {"added": added}
        if read("rng_state") is None:  # the generator keeps its state
            defaults["rng_state"] = generator_words(self._rng)
        return defaults

    def checkpoint_random(self, read: Any) -> list[str]:
        """Problems with the saved state of the numpy generator (PCG64)."""
        return generator_problems(read("rng_state"))

    def restore_checkpoint(self, values: Mapping[str, np.ndarray]) -> None:
        """Copy validated checkpoint values into the ring."""
        for name, column in zip(self._column_names(), self._ring.columns):
            column[...] = values[f"columns.{name}"]
        self._ring.head, self._ring.count = int(values["head"]), int(values["count"])
        self._added = int(values["added"])
        self._rng = generator_of(values["rng_state"])

    def __repr__(self) -> str:
        return (f"PyUniformReplayBuffer(capacity={self._capacity}, stored={self._ring.count}, "
                f"data_spec={self._data_spec})")
