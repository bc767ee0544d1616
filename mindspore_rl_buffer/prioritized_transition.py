"""PrioritizedTransitionReplayBuffer: prioritized replay of stacked, n-step transitions, in the graph.

A :class:`~mindspore_rl_buffer.TransitionReplayBuffer` (frames stored once, stacks and n-step
returns assembled by the sample) whose starts are drawn in proportion to ``priority ** alpha``
over a sum tree and a min tree of its flat slots. A leaf is positive exactly while its start is
valid: each insert sets the leaves of the starts it makes valid or not valid
(:mod:`mindspore_rl_buffer.ops.prioritized` has the rule), so a start that is not valid is never
drawn, whatever priority it was given, and no draw is ever rejected.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops

from mindspore_rl_buffer import _errors, contracts
from mindspore_rl_buffer._graph import DIRECT_CALLS, Launch, buffer_method, discard
from mindspore_rl_buffer._graph_checks import check_optional_size_graph, checked_beta
from mindspore_rl_buffer._validation import (
    check_array_type,
    check_capacity,
    check_exponent,
    check_priorities,
    check_same_shape,
    check_same_shape_graph,
    check_tensor_arg_graph,
    host_array,
)
from mindspore_rl_buffer.ops import prioritized
from mindspore_rl_buffer.ops._common import guarded
from mindspore_rl_buffer.priority_replay_buffer import _one_column
from mindspore_rl_buffer.transition import TransitionReplayBuffer
from mindspore_rl_buffer.transition import _host_sample as _host_uniform_sample


def _host_sample(self: PrioritizedTransitionReplayBuffer, beta: Any, batch_size: Any = None) -> Launch:
    beta = check_exponent("sample", "beta", beta)
    launch = _host_uniform_sample(self, batch_size)
    return Launch(Tensor(beta, ms.float32), launch.args[0], finish=launch.finish)


def _host_update(self: PrioritizedTransitionReplayBuffer, ids: Any, priorities: Any) -> Launch | None:
    op = "update_priorities"
    priorities = _one_column(priorities)
    given = host_array(op, "ids", ids, "int")
    check_array_type(op, "priorities", priorities, "float")  # its type before its shape, as PriorityReplayBuffer
    check_same_shape(op, given.shape, np.shape(priorities), "ids")
    out = given >= self.id_bound if given.dtype.kind == "u" else (given < 0) | (given >= self.id_bound)
    if out.any():
        raise IndexError(f"For '{op}', 'ids' must be ids that 'sample' returned, in [0, {self.id_bound}), but got "
                         f"{given[out][0].item()}.")
    _, values = check_priorities(op, np.zeros(given.shape, np.int32), priorities, 1, self._alpha)
    if not given.size:
        return None
    return Launch(Tensor(given.astype(np.int32)), Tensor(values.astype(np.float32)), finish=discard)


#: The largest capacity: ``2 * capacity <= prioritized.ID_SPACE``, so ids repeat no sooner than every second
#: time a slot is written (:func:`~mindspore_rl_buffer.ops.prioritized.id_period`), and a stale id never
#: names the start written over it.
MAX_CAPACITY = prioritized.ID_SPACE // 2


class PrioritizedTransitionReplayBuffer(TransitionReplayBuffer):
    """Prioritized replay (Schaul et al., 2016) of stacked, n-step transitions, on a sum tree and a min tree.

    Stores time steps as :class:`~mindspore_rl_buffer.TransitionReplayBuffer` does, and samples
    the same transitions, but draws start ``i`` with probability ``P(i) = p_i ** alpha / sum_k
    p_k ** alpha`` over the **valid** starts only (stratified over the total mass). A start that
    is not valid (a final row, within ``n_step`` of the write position, a stack reaching into
    overwritten frames) has probability exactly 0 whatever priority it was given. A start
    becomes valid with the largest priority recorded so far (1 at first; ``alpha`` applied once).
    Importance weights are ``(N * P(i)) ** -beta`` divided by their largest value over the ``N``
    valid starts. Priorities are clamped to ``[ops.PRIORITY_FLOOR, ops.PRIORITY_CEILING]``.

    :meth:`sample` returns ids that :meth:`update_priorities` takes: an id names one start of one
    time step, so an id whose start was overwritten, or stopped being valid, since it was drawn
    is ignored. ``id % capacity`` is the start's flat slot ``row * num_envs + env``.

    Args:
        sample_size (int): Transitions per :meth:`sample`.
        capacity (int): Rows the buffer holds, ``max_length * num_envs``.
        shapes (list[tuple[int]]): As :class:`~mindspore_rl_buffer.TransitionReplayBuffer`.
        types (list[mindspore.dtype]): As :class:`~mindspore_rl_buffer.TransitionReplayBuffer`.
        alpha (float): Priority exponent, ``>= 0``; 0 draws the valid starts uniformly. Default: ``0.6``.
        num_envs (int): Environments stepped together. Default: ``1``.
        stack_size (int): Frames per sampled observation. Default: ``1``.
        n_step (int): Steps per return. Default: ``1``.
        gamma (float): Discount per step, in ``[0, 1]``. Default: ``0.99``.
        names (list[str]): Column names. Default: ``None`` (``observation, action, reward, ...``).
        seed (int): Seed of the draws; ``None`` follows ``mindspore.set_seed``. Default: ``None``.

    Raises:
        TypeError: If ``alpha`` is not a number, or an argument of
            :class:`~mindspore_rl_buffer.TransitionReplayBuffer` has the wrong type.
        ValueError: If ``alpha`` is negative or not finite, or as
            :class:`~mindspore_rl_buffer.TransitionReplayBuffer` raises.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import PrioritizedTransitionReplayBuffer
        >>> rb = PrioritizedTransitionReplayBuffer(4, 16, [(2,), (), (), (), ()],
        ...                                        [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8],
        ...                                        alpha=1.0, n_step=2, seed=0)
        >>> for t in range(6):  # one episode of 6 steps: starts 1, 2 and 3 are valid
        ...     rb.insert([np.full((1, 2), t, np.float32), np.array([t], np.int32), np.ones(1, np.float32),
        ...                np.zeros(1, np.uint8), np.zeros(1, np.uint8)])
        >>> rb.update_priorities(np.array([1, 3], np.int32), np.array([0.0, 3.0], np.float32))
        >>> ids, weights, observation, action, reward, next_observation, discount = rb.sample(1.0)
        >>> set(ids.asnumpy().tolist()) <= {1, 2, 3}, float(rb.max_priority.asnumpy())
        (True, 3.0)
    """

    BINDING_SETTINGS = (*TransitionReplayBuffer.BINDING_SETTINGS, "alpha")
    RESERVED_NAMES = ("sum_tree", "min_tree", "max_priority", "steps", *(f"{kind}_tree_{i}" for kind in ("sum", "min")
                                                                        for i in range(8)))

    def __init__(self, sample_size: int, capacity: int, shapes: Sequence[Any], types: Sequence[Any], *,
                 alpha: float = 0.6, num_envs: int = 1, stack_size: int = 1, n_step: int = 1, gamma: float = 0.99,
                 names: Sequence[str] | None = None, seed: int | None = None) -> None:
        op = type(self).__name__
        alpha = check_exponent(op, "alpha", alpha)
        if check_capacity(op, "capacity", capacity) > MAX_CAPACITY:
            raise ValueError(f"For '{op}', 'capacity' must be an int <= {MAX_CAPACITY} (2**29: above it, the id of a "
                             f"start could equal the id of the start written over it in the same slot, and a stale "
                             f"id would update the newer start), but got {capacity}.")
        super().__init__(sample_size, capacity, shapes, types, num_envs=num_envs, stack_size=stack_size,
                         n_step=n_step, gamma=gamma, names=names, seed=seed)
        self._alpha = alpha
        self.sum_tree, self.min_tree = prioritized.level_parameters(self.capacity)
        self.max_priority = Parameter(Tensor(1.0, ms.float32), name="max_priority", requires_grad=False)
        self.steps = Parameter(Tensor(0, ms.int32), name="steps", requires_grad=False)

    @property
    def alpha(self) -> float:
        """The priority exponent."""
        return self._alpha

    @property
    def id_bound(self) -> int:
        """Every id is in ``[0, id_bound)``."""
        return prioritized.id_period(self.max_length, self.num_envs) * self.num_envs

    def tree_leaves(self) -> tuple[np.ndarray, np.ndarray]:
        """Host copies of the leaves of the sum tree and the min tree, one per flat slot ``row * num_envs + env``:
        ``priority ** alpha`` at a valid start, 0 (``+inf`` in the min tree) at every other slot."""
        with DIRECT_CALLS:
            return tuple(tree[0].asnumpy()[:self.capacity].copy() for tree in (self.sum_tree, self.min_tree))

    # ------------------------------------------------------------------------- insert
    def _before_insert(self, batch):
        storage = self.storage
        prioritized.insert_leaves(self.sum_tree, self.min_tree, storage.head, storage.count, *storage.columns[2:4],
                                  batch[3], batch[4], self.max_priority, self._alpha, self._stack_size, self._n_step)
        period = prioritized.id_period(self._max_length, self._num_envs)
        ops.assign(self.steps, (self.steps + batch[3].shape[0] % period) % period)

    # ------------------------------------------------------------------------- sample
    def sample(self, beta, batch_size=None):
        """Draw transitions with probability proportional to ``priority ** alpha`` over the valid starts.

        Args:
            beta (Union[float, Tensor]): Importance-sampling exponent, ``>= 0`` (0 gives weights
                of 1). Called directly, a float does not recompile the graph when it changes.
            batch_size (int): Transitions to draw; ``None`` for ``sample_size``. Default: ``None``.

        Returns:
            Flat tuple ``(ids, weights, observation, action, reward, next_observation, discount,
            *extras)``: the ids (int32, ``(B,)``) for :meth:`update_priorities`, the importance
            weights (float32, ``(B,)``, in ``(0, 1]``), then the items
            :meth:`TransitionReplayBuffer.sample <mindspore_rl_buffer.TransitionReplayBuffer.sample>` returns.

        Raises:
            TypeError: If ``beta`` is not a number or ``batch_size`` not an int or None.
            ValueError: If ``beta`` is negative or not finite, ``batch_size`` is not positive,
                or no start is valid yet (direct calls). Inside a graph the run fails with
                ``RuntimeError: assert failed`` instead, and that compiled graph cannot run again.
        """
        return self._sample_prioritized(beta, batch_size)[1]

    def sample_with_info(self, beta=None, batch_size=None):
        """Not offered: :meth:`sample` returns the ids and the importance weights.

        Raises:
            TypeError: Always.
        """
        raise _errors.not_offered_error("sample_with_info", type(self).__name__,
                                        "sample(beta), which returns (ids, weights, *items)")

    @buffer_method(_host_sample)
    def _sample_prioritized(self, beta, batch_size, *, check=True):
        batch_size = check_optional_size_graph("sample", "batch_size", batch_size)
        if batch_size is None:
            batch_size = self._sample_size
        storage = self.storage
        # Whether a start is valid (1) or none is (0): the total mass is positive exactly then.
        total = (self.sum_tree[-1] > 0).astype(ms.int32).reshape(())
        beta = checked_beta("sample", beta)  # a Python constant: checked when the graph compiles
        slots, weights = prioritized.sample_leaves(self.sum_tree, self.min_tree, batch_size, beta, self.capacity,
                                                   storage.rng())
        if check:
            slots, weights, total = guarded((slots, weights, total), total >= 1, [storage.count])
        ids = prioritized.start_ids(slots, storage.head, storage.count, self.steps, self._max_length, self._num_envs)
        return total, (ids, weights, *self._read(slots))

    # ------------------------------------------------------------- update_priorities
    @buffer_method(_host_update)
    def update_priorities(self, ids, priorities, *, check=True):
        """Set the priorities of the starts that ``ids`` name; ids gone stale are ignored.

        An id whose start was overwritten, or stopped being valid, since :meth:`sample` returned
        it changes nothing (a start is never revived). Of several occurrences of one id, the last
        wins. The largest priority recorded, which new starts get, grows with the priorities set.

        Args:
            ids (Tensor): int, 1-D, as :meth:`sample` returned them, in ``[0, id_bound)``.
                A numpy array is accepted for direct calls.
            priorities (Tensor): float, the shape of ``ids``, finite and ``>= 0``; ``(n, 1)``
                for ``n`` ids is read as ``(n,)`` (TD errors of a ``(1,)`` column).

        Returns:
            None when called directly; inside a graph, the new largest priority.

        Raises:
            TypeError: If ``ids`` is not an int tensor or ``priorities`` not a float one.
            ValueError: If either is not 1-D, their shapes differ, or a priority is negative, not
                finite, or above the largest whose ``priority ** alpha`` stays within
                ``ops.LEAF_CEILING`` (direct calls; inside a graph they are clamped).
            IndexError: If an id is outside ``[0, id_bound)`` (direct calls). Inside a graph the
                run fails with ``RuntimeError: assert failed`` instead, writes nothing, and that
                compiled graph cannot run again.
        """
        priorities = _one_column(priorities)
        check_tensor_arg_graph("update_priorities", "ids", ids.dtype, ids.shape, "int", "a 1-D int tensor")
        check_tensor_arg_graph("update_priorities", "priorities", priorities.dtype, priorities.shape, "float",
                               "a 1-D float tensor")
        check_same_shape_graph("update_priorities", ids.shape, priorities.shape, "ids")
        storage = self.storage
        top = prioritized.update_leaves(self.sum_tree, self.min_tree, self.max_priority, storage.head, storage.count,
                                        self.steps, ids, priorities, self._alpha, self._max_length, self._num_envs,
                                        check)
        ops.assign(self.max_priority, top)
        return top

    # ------------------------------------------------------------------------- reset
    def _clear(self):
        for level in self.sum_tree:
            ops.assign(level, ops.zeros_like(level))
        for level in self.min_tree:
            ops.assign(level, ops.fill(ms.float32, level.shape, float("inf")))
        ops.assign(self.max_priority, ops.ones_like(self.max_priority))
        ops.assign(self.steps, ops.zeros_like(self.steps))
        return TransitionReplayBuffer._clear(self)

    # ----------------------------------------------------------------------- records
    def _settings(self) -> dict[str, Any]:
        return {**TransitionReplayBuffer._settings(self), "alpha": self._alpha}

    def checkpoint_state(self, read: Any) -> list[str]:
        """The trees hold a positive leaf exactly at each valid start, every node the sum (the
        minimum) of its children (see :func:`~mindspore_rl_buffer.contracts.level_tree_contract`), and
        ``steps`` agrees with the ring's cursors: a corrupt file would otherwise draw starts that are not valid."""
        storage = self.storage
        head, count = int(read(storage.head)), int(read(storage.count))
        ended = (np.asarray(read(storage.columns[2])) != 0) | (np.asarray(read(storage.columns[3])) != 0)
        valid = contracts.valid_starts(head, count, ended, self._stack_size, self._n_step)
        problems = contracts.level_tree_contract([read(x) for x in self.sum_tree], [read(x) for x in self.min_tree],
                                                 read(self.max_priority), valid, self._alpha)
        steps, period = int(np.asarray(read(self.steps))), prioritized.id_period(self._max_length, self._num_envs)
        if not 0 <= steps < period or (steps - count - head) % self._max_length:
            problems.append(f"Parameter '{self.steps.name}' must be in [0, {period}) and agree with the cursors "
                            f"((steps - count) % {self._max_length} == head {head}), but got {steps}")
        return problems

    def extend_repr(self) -> str:
        return f"alpha={self._alpha}, " + super().extend_repr()
