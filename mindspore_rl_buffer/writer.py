"""BufferWriter: stage transitions on the host, insert them into a buffer in batches.

A direct ``insert`` launches one compiled graph, and on MindSpore 2.10's CPU runtime a
launch costs ~100-250 µs whatever the graph does (``python -m benchmarks.launch_cost``),
while 32 rows cost no more than one. A loop that collects on the host (a numpy or
gymnasium environment) therefore inserts far faster through a writer: each ``insert``
copies the transition into a preallocated numpy staging area, and every ``batch_size``
transitions go to the buffer in one batched insert.

Staged transitions are not in the buffer yet, as with a buffered file: the buffer's
``sample``, ``size``, ``save`` and any graph reading it see them after :meth:`flush`, which
a ``with`` block calls on exit.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import DIRECT_CALLS
from mindspore_rl_buffer._validation import (
    check_batch,
    check_final_rows,
    check_size,
    given_columns,
    native,
    refuse_masked,
    transition_of,
)
from mindspore_rl_buffer.specs import DTYPES, check_batch_bytes, numpy_dtype, spec_fields


class DroppedTransitionsWarning(UserWarning):
    """A :class:`BufferWriter` was dropped with transitions staged and never flushed: they are lost.

    A ``UserWarning``, so Python shows it by default (a ``ResourceWarning`` is hidden).
    """


class BufferWriter:
    """Stages transitions on the host and inserts them into ``buffer`` in batches.

    Make one with ``buffer.writer(batch_size)``. Not thread-safe: one writer per thread.

    Args:
        buffer: A buffer with ``specs`` and ``insert`` (:class:`ReplayBuffer` and the
            buffers built on it, :class:`ShardedReplayBuffer`).
        batch_size (int): Transitions staged before they are inserted, ``>= 1``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import ReplayBuffer
        >>> rb = ReplayBuffer(2, 100, [(2,), ()], [ms.float32, ms.int32])
        >>> with rb.writer(4) as writer:
        ...     for step in range(6):
        ...         writer.insert([np.full(2, step, np.float32), np.int32(step)])
        ...     int(rb.size()), writer.pending  # 4 inserted, 2 still staged
        (4, 2)
        >>> int(rb.size()), int(rb.get_item(-1)[1])  # the with block flushed them
        (6, 5)
    """

    def __init__(self, buffer: Any, batch_size: int) -> None:
        self._batch_size = check_size("writer", "batch_size", batch_size)
        self._buffer = buffer
        specs = tuple(buffer.specs)
        self._names, self._shapes, self._dtypes = spec_fields(specs)
        self._np_dtypes = tuple(numpy_dtype(spec.dtype) for spec in specs)
        check_batch_bytes("writer", "batch_size", self._batch_size, specs)
        self._staging = [np.empty((self._batch_size, *shape), dtype)
                         for shape, dtype in zip(self._shapes, self._np_dtypes)]
        self._pending = 0

    @property
    def batch_size(self) -> int:
        """Transitions staged before they are inserted."""
        return self._batch_size

    @property
    def pending(self) -> int:
        """Transitions staged and not yet in the buffer."""
        return self._pending

    def insert(self, *columns: Any, exp: Any = None) -> None:
        """Stage one transition, or a batch of them (a leading dimension ``n`` on every column).

        Takes what :meth:`ReplayBuffer.insert` takes (a list or tuple with one array per column,
        one array per column as separate arguments, or MindSpore Reinforcement's ``exp=``), as
        numpy arrays (tensors are copied to the host); checks it the same way, and refuses bad
        input before anything is staged. Inserts into the buffer each time ``batch_size`` are
        staged.
        """
        op = "insert"
        if self._pending == self._batch_size:  # the flush of a full stage failed: try it again first
            self.flush()
        transition = transition_of(op, self._names, given_columns(columns, exp))
        if not isinstance(transition, (list, tuple)):
            raise _errors.type_error(op, "transition", "a list or tuple of arrays, one per column", transition)
        arrays = [self._host_array(i, value) for i, value in enumerate(transition)]
        n, single = self._check(arrays)
        if n:
            self._check_order(arrays, single)
        if single:
            arrays = [array[None] for array in arrays]
        # `before`: rows staged that are not this call's; `inserted`: this call's rows in the buffer.
        before, inserted, done = self._pending, 0, 0
        try:
            while done < n:
                take = min(n - done, self._batch_size - self._pending)
                for stage, array in zip(self._staging, arrays):
                    stage[self._pending:self._pending + take] = array[done:done + take]
                self._pending += take
                done += take
                if self._pending == self._batch_size:
                    self.flush()  # a full stage: one insert, all or nothing
                    before, inserted = 0, done
        except BaseException as error:
            # This call's rows leave the stage, so it stands for what went in: nothing when it
            # raises from its first insert, and retrying it inserts nothing twice.
            self._pending = before
            if inserted and hasattr(error, "add_note"):
                error.add_note(f"BufferWriter.insert: {inserted} of its {n} transitions went into the buffer "
                               f"before it failed; the other {n - inserted} are not staged.")
            raise

    def flush(self) -> None:
        """Insert every staged transition into the buffer, oldest first.

        A full stage goes in one batched insert; a partial one in at most
        ``log2(batch_size) + 1`` inserts of power-of-two sizes, so that flushing at any fill
        level compiles a bounded number of graphs. Each piece leaves the stage as it goes in:
        if an insert fails (or is interrupted), the transitions not yet inserted stay staged,
        and the next flush or insert tries them again, never one twice.
        """
        while self._pending:
            left = self._pending
            size = left if left == self._batch_size else 1 << (left.bit_length() - 1)
            self._buffer.insert([stage[:size] for stage in self._staging])  # copied before it returns
            for stage in self._staging:
                stage[:left - size] = stage[size:left]
            self._pending = left - size

    def discard(self) -> int:
        """Drop the staged transitions without inserting them (after a flush the buffer refuses,
        say); return how many were dropped."""
        dropped, self._pending = self._pending, 0
        return dropped

    def close(self) -> None:
        """Flush; the writer can be used again afterwards."""
        self.flush()

    def __enter__(self) -> BufferWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.flush()

    def __del__(self) -> None:
        # Flushing here is not safe (the interpreter may be shutting down, another thread may
        # hold the buffer): say loudly what is lost instead.
        if getattr(self, "_pending", 0):
            warnings.warn(f"BufferWriter dropped {self._pending} staged transitions that were never flushed: "
                          "they are not in the buffer. Call flush() or use the writer in a with block.",
                          DroppedTransitionsWarning, stacklevel=2)

    def __repr__(self) -> str:
        return f"BufferWriter(batch_size={self._batch_size}, pending={self._pending})"

    # ------------------------------------------------------------------------- checks
    def _check_order(self, arrays: list[np.ndarray], single: bool) -> None:
        """Hook: refuse valid transitions that may not follow what is staged (nothing is staged
        yet when it raises). The base writer accepts any order."""

    def _host_array(self, i: int, value: Any) -> np.ndarray:
        refuse_masked("insert", self._names, i, value)
        if isinstance(value, (np.ndarray, np.generic)):
            return native(np.asarray(value))
        if isinstance(value, Tensor):
            return value.asnumpy()
        raise _errors.not_an_array_error("insert", self._names, i, value)

    def _check(self, arrays: list[np.ndarray]) -> tuple[int, bool]:
        """``(n, single)`` of a valid transition; the errors of ``ReplayBuffer.insert`` otherwise."""
        if len(arrays) == len(self._names) and all(
                a.dtype == d and a.shape == s for a, d, s in zip(arrays, self._np_dtypes, self._shapes)):
            return 1, True  # the common case, one transition, checked without building messages
        # A numpy dtype with no column counterpart (bool, object) fails the dtype check by name.
        dtypes = [DTYPES.get(a.dtype.name, f"numpy {a.dtype}") for a in arrays]
        return check_batch("insert", self._names, self._shapes, self._dtypes, len(arrays),
                           [a.shape for a in arrays], dtypes)


class TransitionWriter(BufferWriter):
    """A :class:`BufferWriter` for a :class:`~mindspore_rl_buffer.TransitionReplayBuffer`.

    One staged item is one time step of every environment. Besides the writer's checks, it
    refuses a final row that carries a flag before staging it, as the buffer's ``insert`` does.

    Args:
        buffer (TransitionReplayBuffer): The buffer.
        batch_size (int): Time steps staged before they are inserted, ``>= 1``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import TransitionReplayBuffer
        >>> rb = TransitionReplayBuffer(2, 32, [(3,), (), (), (), ()],
        ...                             ['float32', 'int32', 'float32', 'uint8', 'uint8'], num_envs=2)
        >>> flags = np.zeros(2, np.uint8)
        >>> with rb.writer(8) as writer:
        ...     for t in range(10):
        ...         writer.insert([np.full((2, 3), t, np.float32), np.zeros(2, np.int32), np.ones(2, np.float32),
        ...                        flags, flags])
        >>> int(rb.size()), int(rb.valid_starts())  # 10 steps of 2 environments; starts 1..8 of each
        (20, 16)
    """

    def __init__(self, buffer: Any, batch_size: int) -> None:
        super().__init__(buffer, batch_size)
        self._transitions = buffer

    def _check_order(self, arrays: list[np.ndarray], single: bool) -> None:
        terminated, truncated = (a[None] if single else a for a in arrays[3:5])
        if self.pending:  # whether the newest staged row ended an episode, read from the stage
            newest = self.pending - 1
            previous = (self._staging[3][newest] != 0) | (self._staging[4][newest] != 0)
        else:
            with DIRECT_CALLS:
                previous = self._transitions.last_ended.asnumpy()
        check_final_rows("insert", previous, terminated, truncated)
