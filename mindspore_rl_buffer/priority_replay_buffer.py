"""PriorityReplayBuffer: prioritized experience replay whose ring and trees live on the device."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, jit, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import in_graph
from mindspore_rl_buffer.ops import priority, ring
from mindspore_rl_buffer.replay_buffer import _INT_DTYPES, ReplayBuffer

_FLOAT_DTYPES = (ms.float16, ms.bfloat16, ms.float32, ms.float64)


def check_exponent(op: str, arg: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real number ``>= 0`` (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _errors.type_error(op, arg, "a float", value)
    if not math.isfinite(value) or value < 0:
        raise _errors.value_error(op, arg, "a finite float >= 0", value)
    return float(value)


@ops.constexpr
def _refuse(op, cls, instead):
    raise _errors.not_offered_error(op, cls, instead)


def _host_array(op: str, arg: str, value: Any, kinds: str, what: str) -> np.ndarray:
    """A 1-D numpy copy of a Tensor or array whose dtype kind is one of ``kinds``."""
    if isinstance(value, Tensor):
        ok = value.dtype in (_INT_DTYPES if kinds == "iu" else _FLOAT_DTYPES)
        array = value.asnumpy() if ok else None
    elif isinstance(value, np.ndarray):
        ok = value.dtype.kind in kinds
        array = value
    else:
        raise _errors.type_error(op, arg, f"a 1-D {what} tensor", value)
    if not ok:
        raise TypeError(f"For '{op}', '{arg}' must be a 1-D {what} tensor, but got a tensor of dtype "
                        f"{value.dtype}.")
    if array.ndim != 1:
        raise _errors.value_error(op, arg, f"a 1-D {what} tensor", f"shape {array.shape}")
    return array


class PriorityReplayBuffer(ReplayBuffer):
    """Prioritized experience replay (Schaul et al., 2016), on a sum tree and a min tree.

    Items are stored in the same FIFO ring as :class:`ReplayBuffer`. Each stored item has a
    priority ``p``; :meth:`sample` draws item ``i`` with probability
    ``P(i) = p_i ** alpha / sum_j p_j ** alpha`` (stratified over the total mass) and
    returns importance weights ``(N * P(i)) ** -beta`` divided by their largest value over
    all ``N`` stored items. New items get the largest priority set so far (1 at first);
    an overwritten slot loses its old priority; :meth:`reset` forgets every priority and
    sets the largest back to 1. Priorities are clamped below at
    ``ops.PRIORITY_FLOOR`` (1e-8) so every weight is finite.

    The trees are two float32 Parameters of ``2 * P`` nodes (``P`` the smallest power of
    two ``>= capacity``, see :mod:`mindspore_rl_buffer.ops.priority`), so inserting,
    sampling and updating priorities cost O(batch * log capacity).

    ``indices`` returned by :meth:`sample` and taken by :meth:`update_priorities` are
    *physical slots* in ``[0, size())``, as in MindSpore RL and TorchRL, not the logical
    indexes (0 = oldest) that :meth:`get_item` takes. A slot keeps its index until it is
    overwritten; priorities set for a slot after it was overwritten apply to the new item.

    Called directly, every method checks its input on the host and runs a compiled graph;
    inside a user's ``construct`` it becomes part of the user's graph (write
    ``_ = self.buffer.insert(...)``, see :meth:`ReplayBuffer.insert`).

    Args:
        alpha (float): Priority exponent, ``>= 0``; 0 samples uniformly.
        capacity (int): Items the buffer holds; the oldest are overwritten beyond it.
        sample_size (int): Items per :meth:`sample`.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column.
        seed (int): Seed of the sampling operator; ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.
        names (list[str]): Column names. Default: ``None`` (``column_0``, ...).

    Raises:
        TypeError: If ``alpha`` is not a number, a size is not an int, or
            ``shapes``/``types`` is not a list.
        ValueError: If ``alpha`` is negative or not finite, a size is not positive,
            ``shapes`` and ``types`` differ in length, or a dtype is unknown.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import PriorityReplayBuffer
        >>> prb = PriorityReplayBuffer(0.6, 4, 3, [(2,), ()], [ms.float32, ms.int32])
        >>> prb.insert([np.zeros((4, 2), np.float32), np.arange(4, dtype=np.int32)])
        >>> indices, weights, (state, action) = prb.sample(0.4)
        >>> indices.shape, weights.shape, state.shape
        ((3,), (3,), (3, 2))
        >>> prb.update_priorities(np.array([0, 1, 2, 3], np.int32), np.array([0.0, 0.0, 0.0, 5.0], np.float32))
        >>> prb.sample(1.0)[2][1].asnumpy().tolist()
        [3, 3, 3]
    """

    def __init__(
        self,
        alpha: float,
        capacity: int,
        sample_size: int,
        shapes: Sequence[Any],
        types: Sequence[Any],
        *,
        seed: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        alpha = check_exponent(type(self).__name__, "alpha", alpha)
        super().__init__(sample_size, capacity, shapes, types, seed=seed, names=names)
        self._alpha = alpha
        sum_tree, min_tree = priority.empty_trees(self._capacity)
        self.sum_tree = Parameter(sum_tree, name="sum_tree", requires_grad=False)
        self.min_tree = Parameter(min_tree, name="min_tree", requires_grad=False)
        self.max_priority = Parameter(Tensor(1.0, ms.float32), name="max_priority", requires_grad=False)

    @property
    def alpha(self) -> float:
        """The priority exponent."""
        return self._alpha

    # ------------------------------------------------------------------------- insert
    def _write(self, transition):
        batch_size, batch = self._batch(transition)
        if batch_size > 0:
            rows, head, count = ring.insert(self.columns, self.head, self.count, batch)
            priority.insert_priorities(self.sum_tree, self.min_tree, rows, self.max_priority, self._alpha,
                                       self._capacity)
            ops.assign(self.head, head)
            ops.assign(self.count, count)
        return batch_size

    # ------------------------------------------------------------------------- sample
    def sample(self, beta):
        """Draw ``sample_size`` items with probability proportional to ``priority ** alpha``.

        Args:
            beta (Union[float, Tensor]): Importance-sampling exponent, ``>= 0`` (0 gives
                weights of 1). Called directly, a float does not recompile the graph when it
                changes.

        Returns:
            Tuple of 3: the physical slots drawn (int32, ``(sample_size,)``), their
            importance weights (float32, ``(sample_size,)``, in ``(0, 1]``), and the tuple
            of column tensors, each with leading dimension ``sample_size``.

        Raises:
            TypeError: If ``beta`` is not a number.
            ValueError: If ``beta`` is negative or not finite, or the buffer is empty.
                Inside a graph an empty buffer is reported when the graph runs, and that
                compiled graph cannot run again; ``beta`` is not checked there.
        """
        if in_graph():
            return self._sample_graph(beta, True)
        op = "sample"
        if isinstance(beta, Tensor) and beta.shape == () and beta.dtype in _FLOAT_DTYPES:
            beta = beta.asnumpy().item()
        beta = check_exponent(op, "beta", beta)
        if int(self.count) == 0:
            raise _errors.empty_error(op)
        return self._sample_compiled(Tensor(beta, ms.float32))

    def _sample_graph(self, beta, check):
        slots, weights = priority.sample(self.sum_tree, self.min_tree, self.count, self._sample_size, beta,
                                         self._capacity, self._seed, check)
        return slots, weights, tuple(ops.gather(column, slots, 0) for column in self.columns)

    @jit
    def _sample_compiled(self, beta):
        return self._sample_graph(beta, False)

    def sample_with_indices(self, ordered=None):
        """Not offered: :meth:`sample` already returns the slots drawn.

        Raises:
            TypeError: Always.
        """
        return _refuse("sample_with_indices", "PriorityReplayBuffer",
                       "sample(beta), which returns (indices, weights, transitions)")

    # ------------------------------------------------------------- update_priorities
    def update_priorities(self, indices, priorities):
        """Set the priorities of stored items, by physical slot.

        Of a slot repeated in ``indices``, the last priority given wins, as in numpy's
        ``p[indices] = priorities``. Priorities below ``ops.PRIORITY_FLOOR`` are clamped
        to it. The largest priority stored so far, which new items get, grows with them.

        Args:
            indices (Tensor): int, 1-D: physical slots in ``[0, size())``, as returned by
                :meth:`sample`. A numpy array is accepted for direct calls.
            priorities (Tensor): float, the shape of ``indices``, finite and ``>= 0``.

        Returns:
            None.

        Raises:
            TypeError: If ``indices`` is not an int tensor or ``priorities`` not a float one.
            ValueError: If either is not 1-D, their shapes differ, or a priority is
                negative or not finite.
            IndexError: If an index is outside ``[0, size())``. Inside a graph this is
                raised when the graph runs, and that compiled graph cannot run again;
                there, negative and NaN priorities are clamped to the floor and ``+inf``
                is not checked.
        """
        if in_graph():
            self._update_graph(indices.astype(ms.int32), priorities, True)
            return None
        op = "update_priorities"
        slots = _host_array(op, "indices", indices, "iu", "int")
        values = _host_array(op, "priorities", priorities, "f", "float")
        if slots.shape != values.shape:
            raise ValueError(f"For '{op}', 'priorities' must have the shape of 'indices' {slots.shape}, "
                             f"but got {values.shape}.")
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            raise _errors.value_error(op, "priorities", "finite and >= 0", values[bad][0].item())
        size = int(self.count)
        out = (slots < 0) | (slots >= size)
        if out.any():
            raise _errors.slot_error(op, slots[out][0].item(), size)
        if slots.size:
            self._update_compiled(Tensor(slots.astype(np.int32)), Tensor(values.astype(np.float32)))
        return None

    def _update_graph(self, slots, priorities, check):
        top = priority.update_priorities(self.sum_tree, self.min_tree, self.max_priority, self.count, slots,
                                         priorities, self._alpha, self._capacity, check)
        ops.assign(self.max_priority, top)
        return top

    @jit
    def _update_compiled(self, slots, priorities):
        return self._update_graph(slots, priorities, False)

    # ------------------------------------------------------------------------- reset
    def _reset_graph(self):
        ops.assign(self.sum_tree, ops.zeros_like(self.sum_tree))
        ops.assign(self.min_tree, ops.fill(ms.float32, self.min_tree.shape, float("inf")))
        ops.assign(self.max_priority, ops.ones_like(self.max_priority))
        ops.assign(self.head, ops.zeros_like(self.head))
        ops.assign(self.count, ops.zeros_like(self.count))
        return self.count

    def extend_repr(self) -> str:
        columns = ", ".join(f"{s.name}: {s.shape} {s.dtype}" for s in self._specs)
        return (f"alpha={self._alpha}, sample_size={self._sample_size}, capacity={self._capacity}, "
                f"columns=[{columns}]")
