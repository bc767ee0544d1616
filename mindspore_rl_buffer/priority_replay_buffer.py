"""PriorityReplayBuffer: prioritized experience replay whose ring and trees live on the device."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph import Launch, buffer_method, discard
from mindspore_rl_buffer._graph_checks import checked_beta
from mindspore_rl_buffer._validation import (
    check_exponent,
    check_not_empty,
    check_priorities,
    check_same_shape_graph,
    check_seeds,
    check_size,
    check_tensor_arg_graph,
    check_types,
)
from mindspore_rl_buffer.contracts import priority_contract
from mindspore_rl_buffer.core import RingBuffer
from mindspore_rl_buffer.ops import priority
from mindspore_rl_buffer.specs import check_batch_bytes


@ops.constexpr
def _refuse(op, cls, instead):
    raise _errors.not_offered_error(op, cls, instead)


def _host_sample(self: PriorityReplayBuffer, beta: Any) -> Launch:
    beta = check_exponent("sample", "beta", beta)
    check_not_empty("sample", int(self.count))
    return Launch(Tensor(beta, ms.float32))


def _one_column(priorities: Any) -> Any:
    """Priorities of shape ``(n, 1)`` as ``(n,)``: TD errors of MindSpore Reinforcement's ``(1,)`` reward
    column come so, and its kernel read them as ``n`` values. Runs on the host and in graphs."""
    shape = priorities.shape if isinstance(priorities, (Tensor, np.ndarray)) else ()
    return priorities.reshape((shape[0],)) if len(shape) == 2 and shape[1] == 1 else priorities


def _host_update(self: PriorityReplayBuffer, indices: Any, priorities: Any) -> Launch | None:
    priorities = _one_column(priorities)
    slots, values = check_priorities("update_priorities", indices, priorities, int(self.count), self._alpha)
    if not slots.size:
        return None
    return Launch(Tensor(slots.astype(np.int32)), Tensor(values.astype(np.float32)), finish=discard)


def tree_parameters(capacity: int) -> tuple[Parameter, Parameter, Parameter]:
    """The sum tree, the min tree and ``max_priority`` (1) of an empty buffer of ``capacity`` slots."""
    sum_tree, min_tree = priority.empty_trees(capacity)
    return (Parameter(sum_tree, name="sum_tree", requires_grad=False),
            Parameter(min_tree, name="min_tree", requires_grad=False),
            Parameter(Tensor(1.0, ms.float32), name="max_priority", requires_grad=False))


def clear_trees(sum_tree, min_tree, max_priority):
    """In place, inside a graph: the state of :func:`tree_parameters`."""
    ops.assign(sum_tree, ops.zeros_like(sum_tree))
    ops.assign(min_tree, ops.fill(ms.float32, min_tree.shape, float("inf")))
    ops.assign(max_priority, ops.ones_like(max_priority))


class PriorityReplayBuffer(RingBuffer):
    """Prioritized experience replay (Schaul et al., 2016), on a sum tree and a min tree.

    Items are stored in the same FIFO ring as :class:`ReplayBuffer`. Each stored item has a
    priority ``p``; :meth:`sample` draws item ``i`` with probability
    ``P(i) = p_i ** alpha / sum_j p_j ** alpha`` (stratified over the total mass) and
    returns importance weights ``(N * P(i)) ** -beta`` divided by their largest value over
    all ``N`` stored items. New items get the largest priority set so far (1 at first);
    an overwritten slot loses its old priority; :meth:`reset` forgets every priority and
    sets the largest back to 1. Priorities are clamped below at ``ops.PRIORITY_FLOOR``
    (1e-8) so every weight is finite. A direct :meth:`update_priorities` refuses a priority
    whose ``p ** alpha`` would exceed ``ops.LEAF_CEILING`` (2**96), so that the sum tree can
    never overflow float32; inside a graph such leaves (and ``+inf``) are clamped to it.

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
        types (list[mindspore.dtype]): The dtype per column (``dtypes=`` is accepted too, as
            MindSpore Reinforcement 0.6 named it).
        seed0 (int): MindSpore Reinforcement's first seed: used when ``seed1`` is 0. Default: ``0``.
        seed1 (int): MindSpore Reinforcement's second seed: the buffer's seed when not 0.
            Default: ``0``. With both 0 (and no ``seed``) the draws follow ``mindspore.set_seed``.
        seed (int): This library's spelling of the seed, in ``[0, 2**31)``; give it or
            ``seed0``/``seed1``, not both. Default: ``None``.
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
        >>> indices, weights, state, action = prb.sample(0.4)
        >>> indices.shape, weights.shape, state.shape
        ((3,), (3,), (3, 2))
        >>> prb.update_priorities(np.array([0, 1, 2, 3], np.int32), np.array([0.0, 0.0, 0.0, 5.0], np.float32))
        >>> prb.sample(1.0)[3].asnumpy().tolist()
        [3, 3, 3]
    """

    BINDING_SETTINGS = ("alpha",)
    RESERVED_NAMES = ("sum_tree", "min_tree", "max_priority")

    def __init__(
        self,
        alpha: float,
        capacity: int,
        sample_size: int,
        shapes: Sequence[Any],
        types: Sequence[Any] | None = None,
        seed0: int = 0,
        seed1: int = 0,
        *,
        seed: int | None = None,
        names: Sequence[str] | None = None,
        dtypes: Sequence[Any] | None = None,
    ) -> None:
        op = type(self).__name__
        alpha = check_exponent(op, "alpha", alpha)
        sample_size = check_size(op, "sample_size", sample_size)
        seed = check_seeds(op, seed, seed0, seed1)
        super().__init__(capacity, shapes, check_types(op, types, dtypes), names=names, seed=seed)
        check_batch_bytes(op, "sample_size", sample_size, self.specs)
        self._alpha = alpha
        self._sample_size = sample_size
        self._seed = seed
        self.sum_tree, self.min_tree, self.max_priority = tree_parameters(self.capacity)

    @property
    def alpha(self) -> float:
        """The priority exponent."""
        return self._alpha

    @property
    def sample_size(self) -> int:
        """Items per :meth:`sample`."""
        return self._sample_size

    # ------------------------------------------------------------------------- insert
    def _write(self, batch):
        rows = RingBuffer._write(self, batch)
        priority.insert_priorities(self.sum_tree, self.min_tree, rows, self.max_priority, self._alpha, self.capacity)
        return rows

    # ------------------------------------------------------------------------- sample
    @buffer_method(_host_sample)
    def sample(self, beta, *, check=True):
        """Draw ``sample_size`` items with probability proportional to ``priority ** alpha``.

        Args:
            beta (Union[float, Tensor]): Importance-sampling exponent, ``>= 0`` (0 gives
                weights of 1). Called directly, a float does not recompile the graph when it
                changes.

        Returns:
            Flat tuple ``(indices, weights, *columns)``, as MindSpore Reinforcement's
            ``PriorityReplayBuffer.sample``: the physical slots drawn (int32,
            ``(sample_size,)``), their importance weights (float32, ``(sample_size,)``, in
            ``(0, 1]``; 0 only where ``(min priority / its priority) ** beta`` is below float32's
            smallest, for extreme ``beta`` or priority ratios), then one tensor per column, each
            with leading dimension ``sample_size``.

        Raises:
            TypeError: If ``beta`` is not a number.
            ValueError: If ``beta`` is negative or not finite, or the buffer is empty.
                Inside a graph a Python constant ``beta`` is checked when the graph compiles;
                a ``beta`` tensor is not checked there; an empty buffer is reported when the
                graph runs, and that compiled graph cannot run again.
        """
        beta = checked_beta("sample", beta)  # a Python constant: checked when the graph compiles
        slots, weights = priority.sample(self.sum_tree, self.min_tree, self.count, self._sample_size, beta,
                                         self.capacity, self.rng(), check)
        return (slots, weights, *self.decode(tuple(ops.gather(column, slots, 0) for column in self.columns)))

    def sample_with_indices(self, ordered=None):
        """Not offered: :meth:`sample` already returns the slots drawn.

        Raises:
            TypeError: Always.
        """
        return _refuse("sample_with_indices", "PriorityReplayBuffer",
                       "sample(beta), which returns (indices, weights, *columns)")

    # ------------------------------------------------------------- update_priorities
    @buffer_method(_host_update)
    def update_priorities(self, indices, priorities, *, check=True):
        """Set the priorities of stored items, by physical slot.

        Of a slot repeated in ``indices``, the last priority given wins, as in numpy's
        ``p[indices] = priorities``. Priorities below ``ops.PRIORITY_FLOOR`` are clamped
        to it. The largest priority stored so far, which new items get, grows with them.

        Args:
            indices (Tensor): int, 1-D: physical slots in ``[0, size())``, as returned by
                :meth:`sample`. A numpy array is accepted for direct calls.
            priorities (Tensor): float, the shape of ``indices``, finite and ``>= 0``; ``(n, 1)``
                for ``n`` indices is read as ``(n,)``, as MindSpore Reinforcement's kernel read
                TD errors of a ``(1,)`` reward column.

        Returns:
            None when called directly; inside a graph, the new largest priority.

        Raises:
            TypeError: If ``indices`` is not an int tensor or ``priorities`` not a float one.
            ValueError: If either is not 1-D, their shapes differ, or a priority is
                negative or not finite.
            IndexError: If an index is outside ``[0, size())``. Inside a graph this is
                raised when the graph runs, and that compiled graph cannot run again;
                there, negative and NaN priorities are clamped to the floor and ``+inf``
                is not checked.
        """
        priorities = _one_column(priorities)
        check_tensor_arg_graph("update_priorities", "indices", indices.dtype, indices.shape, "int", "a 1-D int tensor")
        check_tensor_arg_graph("update_priorities", "priorities", priorities.dtype, priorities.shape, "float",
                               "a 1-D float tensor")
        check_same_shape_graph("update_priorities", indices.shape, priorities.shape)
        top = priority.update_priorities(self.sum_tree, self.min_tree, self.max_priority, self.count,
                                         indices, priorities, self._alpha, self.capacity, check)
        ops.assign(self.max_priority, top)
        return top

    # ------------------------------------------------------------------------- reset
    def _clear(self):
        clear_trees(self.sum_tree, self.min_tree, self.max_priority)
        return RingBuffer._clear(self)

    def _settings(self) -> dict[str, Any]:
        return {"alpha": self._alpha, "sample_size": self._sample_size, "seed": self._seed}

    def checkpoint_state(self, read: Any) -> list[str]:
        """The trees and ``max_priority`` as the operators keep them (see
        :func:`~mindspore_rl_buffer.contracts.priority_contract`): a corrupt or hand-made file
        would otherwise sample NaN weights or slots that hold no item."""
        return priority_contract(read(self.sum_tree), read(self.min_tree), read(self.max_priority),
                                 int(read(self.count)), (self.sum_tree.name, self.min_tree.name,
                                                         self.max_priority.name), self._alpha)
