"""Prioritized starts of a transition buffer: trees whose positive leaves are exactly the valid starts.

The state is that of :mod:`mindspore_rl_buffer.ops.transition` (a ring of ``max_length``
time rows of ``num_envs`` environments, ``head`` and ``count`` in time rows, ``terminated``
and ``truncated`` columns ``(max_length, num_envs)``) with a sum tree and a min tree over its
flat slots ``s = row * num_envs + env`` (``capacity = max_length * num_envs``), and:

* Tree layout: :func:`tree_shape` gives a fan-out ``K <= 128`` and a depth ``D`` with
  ``K ** D >= capacity``. Level ``i`` of a tree is its own float32 Parameter of ``K ** (D - i)``
  nodes: level 0 holds the leaves (slot ``s`` at index ``s``), level ``D`` the root; node ``v``
  of level ``i`` has the children ``v * K .. v * K + K - 1`` of level ``i - 1`` and holds their
  float32 sum (their minimum), recomputed from them on every write. A wide tree keeps a write
  to ``D`` steps of a few kernels each (3 at 1,000,000 slots), where a binary tree takes 20,
  and a draw to a search of level 1 and one step down (:func:`find_leaves`); every level is
  written once per graph, after it is read, then read above.
* ``steps``: int32 scalar, the time rows inserted since the last reset, modulo
  :func:`id_period`; ``(steps - count) % max_length == head`` always.
* The leaf of a slot is its ``priority ** alpha`` while the slot is a valid start (the rule of
  :mod:`~mindspore_rl_buffer.ops.transition`) and exactly 0 otherwise (``+inf`` in the min
  tree). So a draw with probability ``leaf / total`` gives every start that is not valid
  probability 0, with no rejection; :func:`find_leaves` never descends into a node of zero
  mass, so rounding cannot reach one either.
* :func:`insert_leaves` keeps that rule through every insert: the starts that become valid
  (the ``n_step`` newest rows before the insert and the rows written) get the leaf of
  ``max_priority``, those that stop being valid (the rows that fall among the ``stack_size``
  oldest, and the rows overwritten) get 0, and no other leaf changes.
* An id names a start by the absolute index ``T`` of its time row, ``id = (T % period) *
  num_envs + env``: ``id % capacity`` is its slot, and a slot overwritten since its id was
  drawn holds another ``T``, so :func:`update_leaves` can tell a stale id from a fresh one.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, ops
from mindspore_rl_buffer.ops._common import ASSERT, arange, draws, offsets, sort_ints
from mindspore_rl_buffer.ops.dedupe import last_occurrence
from mindspore_rl_buffer.ops.priority import clamp_priorities, leaf_values
from mindspore_rl_buffer.ops.rng import uniform_real

#: ``id_period(max_length, num_envs) * num_envs`` is at most this: every id and every difference of
#: two time indexes stays inside int32.
ID_SPACE = 2**30


#: The widest fan-out of a tree.
MAX_FANOUT = 128
_INF = float("inf")


def tree_shape(capacity):
    """``(fanout, depth)``: the fewest levels with a fan-out of at most ``MAX_FANOUT`` (128), then the
    smallest fan-out ``K >= 2`` with ``K ** depth >= capacity``.

    Examples:
        >>> from mindspore_rl_buffer.ops import tree_shape
        >>> tree_shape(1_000_000), tree_shape(4096), tree_shape(10)
        ((100, 3), (64, 2), (10, 1))
    """
    depth = 1
    while MAX_FANOUT ** depth < capacity:
        depth += 1
    fanout = max(2, round(capacity ** (1.0 / depth)))
    while fanout ** depth < capacity:
        fanout += 1
    while fanout > 2 and (fanout - 1) ** depth >= capacity:
        fanout -= 1
    return fanout, depth


def empty_levels(capacity):
    """The levels of an empty sum tree and min tree (all leaves 0 and ``+inf``), leaves first.

    Returns:
        Tuple of 2 lists of ``depth + 1`` float32 numpy arrays.
    """
    fanout, depth = tree_shape(capacity)
    sizes = [fanout ** (depth - i) for i in range(depth + 1)]
    return [np.zeros(n, np.float32) for n in sizes], [np.full(n, np.inf, np.float32) for n in sizes]


def level_parameters(capacity):
    """The levels of :func:`empty_levels` as two ``mindspore.ParameterTuple`` s, the Parameters named
    ``sum_tree_<i>`` and ``min_tree_<i>`` (``i = 0`` the leaves): the state a buffer keeps.

    Examples:
        >>> from mindspore_rl_buffer.ops import level_parameters
        >>> sums, mins = level_parameters(1000)
        >>> [level.shape for level in sums], mins[0].name
        ([(1024,), (32,), (1,)], 'min_tree_0')
    """
    return tuple(ParameterTuple([Parameter(Tensor(x), name=f"{kind}_tree_{i}", requires_grad=False)
                                 for i, x in enumerate(levels)])
                 for kind, levels in zip(("sum", "min"), empty_levels(capacity)))


@ops.constexpr
def _strata(sample_size):
    """``[0, sample_size)`` as a float32 constant: the strata of a draw."""
    return Tensor(np.arange(sample_size, dtype=np.float32))


@ops.constexpr
def _children(fanout):
    return Tensor(np.arange(fanout, dtype=np.int32).reshape(1, fanout))


def write_leaves(sums, mins, slots, values):
    """In place: set leaves (0 for a slot that may not be drawn) and recompute their ancestors.

    Each level is written with one scatter per tree, then read for the level above (a node is
    the sum, the minimum, of its children as just written). A slot repeated in ``slots`` must
    carry the same value each time; its ancestors then get equal values from every repeat.

    Args:
        sums (mindspore.ParameterTuple): The sum tree's levels, leaves first (see the module docstring).
        mins (mindspore.ParameterTuple): The min tree's levels.
        slots (Tensor): int32, ``(n,)``.
        values (Tensor): float32, ``(n,)``, leaves (``priority ** alpha``) or 0.

    Returns:
        Tensor, float32 ``(1,)``: the root of the sum tree, the total mass.

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import find_leaves, level_parameters, write_leaves
        >>> sums, mins = level_parameters(100)
        >>> total = write_leaves(sums, mins, Tensor(np.array([3, 50, 97], np.int32)), Tensor([1.0, 0.0, 2.0]))
        >>> float(total[0]), float(mins[-1][0]), find_leaves(sums, Tensor([0.5, 1.0, 2.9])).asnumpy().tolist()
        (3.0, 1.0, [3, 97, 97])
    """
    fanout = sums[0].shape[0] // sums[1].shape[0]
    values = values.astype(ms.float32)
    ops.scatter_update(sums[0], slots, values)
    ops.scatter_update(mins[0], slots, ops.where(values > 0, values, _INF))
    nodes = slots
    for level in range(1, len(sums)):
        nodes = nodes // fanout
        children = nodes.reshape((-1, 1)) * fanout + _children(fanout)
        ops.scatter_update(sums[level], nodes, ops.gather(sums[level - 1], children, 0).sum(1))
        ops.scatter_update(mins[level], nodes, ops.amin(ops.gather(mins[level - 1], children, 0), 1))
    return sums[-1]


#: The most nodes a level may have for :func:`find_leaves` to search it whole instead of descending to it.
FLAT_SEARCH_NODES = 2**14


def find_leaves(sums, targets):
    """The leaf whose cumulative-sum interval holds each target, never one of zero mass.

    The first step searches a whole level (level 1, the parents of the leaves, when it has at
    most ``FLAT_SEARCH_NODES`` (16,384) nodes; else the root's children): its running sums, and for
    each target the first node whose running sum exceeds it (a ``searchsorted``), the target
    first held strictly below the level's total. Each step after gathers the ``K`` children of
    the node, takes their running sums, and goes to the first child whose running sum exceeds
    the target, or, when rounding leaves the target at or past them all, to the last child of
    positive mass, subtracting the sums before it. A node or child of zero mass does not raise
    the running sum, so it is never the first to exceed a target, and a node of positive mass
    has a positive child: from a positive root the search ends in a positive leaf, whatever the
    rounding. (A search over a level of ``n`` nodes is a handful of kernels over ``n`` values;
    a step down is about 15 small kernels, which dominate on CPU.)

    Args:
        sums (mindspore.ParameterTuple): The sum tree's levels, leaves first, with a positive root.
        targets (Tensor): float32, ``(B,)``, nominally in ``[0, total)``.

    Returns:
        Tensor, int32, ``(B,)``: slots whose leaves are positive.
    """
    depth = len(sums) - 1
    fanout = sums[0].shape[0] // sums[1].shape[0]
    flat = 1 if sums[1].shape[0] <= FLAT_SEARCH_NODES else depth - 1
    running = ops.cumsum(sums[flat], 0)
    size = running.shape[0]
    total = running[size - 1:]
    # Strictly below the total, so the first running sum above it exists and rises there: a positive node.
    held = ops.minimum(targets, total * (1.0 - 2.0**-23))
    nodes = ops.minimum(ops.searchsorted(running, held, out_int32=True, right=True), size - 1)  # a total of 0
    before = ops.gather(running, nodes, 0) - ops.gather(sums[flat], nodes, 0)
    targets = ops.maximum(held - before, 0.0).reshape((-1, 1))
    for level in range(flat - 1, -1, -1):
        children = ops.gather(sums[level], nodes.reshape((-1, 1)) * fanout + _children(fanout), 0)
        running = ops.cumsum(children, 1)
        # The first child whose running sum passes the target or, for a target at or past them all, the
        # first whose running sum reaches the node's total (its last positive child): one count.
        below = ops.logical_and(running <= targets, running < running[:, fanout - 1:])
        chosen = below.astype(ms.int32).sum(1, keepdims=True).astype(ms.int32)  # the sum is int64
        targets = ops.maximum(targets - ops.gather_elements(running - children, 1, chosen), 0.0)
        nodes = nodes * fanout + chosen.reshape(-1)
    return nodes


def id_period(max_length, num_envs):
    """The period of the time indexes inside ids: the largest multiple of ``max_length`` with
    ``period * num_envs <= 2**30``.

    Examples:
        >>> from mindspore_rl_buffer.ops import id_period
        >>> id_period(1000, 1), id_period(1000, 8) * 8 <= 2**30
        (1073741000, True)
    """
    return max_length * max(1, ID_SPACE // num_envs // max_length)


@ops.constexpr
def _period(max_length, num_envs):
    return Tensor(id_period(max_length, num_envs), ms.int32)


def insert_leaves(sums, mins, head, count, terminated_column, truncated_column, terminated, truncated,
                  max_priority, alpha, stack_size, n_step):
    """In place: the leaves of the starts that an insert of ``k`` time steps makes valid or not valid.

    Call it before the ring's insert moves the cursors or writes the flag columns: it reads
    the columns there and computes the state after the insert. Of ``k > max_length`` steps,
    only the newest ``max_length`` are stored, as ``ring.insert`` keeps them.

    The candidates are the time rows ``head + count - n_step .. head + count + k - 1`` (those
    before the insert were within ``n_step`` of the write position, the others are written)
    and ``head + stack_size .. head + stack_size + k - 1`` (they may fall among the
    ``stack_size`` oldest). Each one's leaf after the insert is a function of its slot alone:
    0 if the start is not valid then, else the leaf of ``max_priority`` for a row of the first
    group (never valid before), else its leaf as it was; a slot in both groups gets one value.

    Args:
        sums (mindspore.ParameterTuple): The sum tree's levels (see the module docstring).
        mins (mindspore.ParameterTuple): The min tree's levels.
        head (Tensor): int32 scalar, before the insert.
        count (Tensor): int32 scalar, time rows stored before the insert.
        terminated_column (Tensor): ``(max_length, num_envs)``, the stored flags.
        truncated_column (Tensor): ``(max_length, num_envs)``, the stored flags.
        terminated (Tensor): ``(k, num_envs)``, the batch's flags.
        truncated (Tensor): ``(k, num_envs)``, the batch's flags.
        max_priority (Tensor): float32 scalar.
        alpha (float): Priority exponent.
        stack_size (int): Frames per observation.
        n_step (int): Steps per return.

    Returns:
        Tensor, float32 ``(1,)``: the total mass after the insert.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import insert_leaves, level_parameters
        >>> sums, mins = level_parameters(8)
        >>> flags, steps = Tensor(np.zeros((8, 1), np.uint8)), Tensor(np.zeros((6, 1), np.uint8))
        >>> total = insert_leaves(sums, mins, Tensor(0, ms.int32), Tensor(0, ms.int32), flags, flags, steps, steps,
        ...                       Tensor(2.0), 1.0, 1, 2)  # 6 steps, stack_size 1, n_step 2: starts 1 to 3
        >>> sums[0].asnumpy().tolist(), float(total[0])
        ([0.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0], 6.0)
    """
    max_length, num_envs = terminated_column.shape
    steps = terminated.shape[0]
    kept = min(steps, max_length)
    first = steps - kept  # the batch's first stored step
    top, bottom = min(steps + n_step, max_length), min(steps, max_length)
    end = head + count  # the write position, unreduced
    new_count = ops.minimum(count + steps, max_length)
    new_head = (head + ops.maximum(count + steps - max_length, 0)) % max_length
    rows = ops.concat(((end + offsets(max_length - n_step, max_length - n_step + top)) % max_length,
                       (head + offsets(stack_size, stack_size + bottom)) % max_length))
    # A row is final when the row before it ended an episode: read from the batch where it is written.
    before = (rows + (max_length - 1)) % max_length
    written = (before - end + (3 * max_length - first % max_length)) % max_length
    batch_ended = ops.logical_or(terminated != 0, truncated != 0).astype(ms.int32)
    from_batch = ops.gather(batch_ended, ops.minimum(written + first, steps - 1), 0)
    stored = ops.logical_or(ops.gather(terminated_column, before, 0) != 0,
                            ops.gather(truncated_column, before, 0) != 0).astype(ms.int32)
    final = ops.where((written < kept).reshape((-1, 1)), from_batch, stored) > 0
    logical = (rows + max_length - new_head) % max_length
    in_range = ops.logical_and(logical >= stack_size, logical <= new_count - (n_step + 1))
    valid = ops.logical_and(in_range.reshape((-1, 1)), ops.logical_not(final)).reshape(-1)
    fresh = ((rows - end + (2 * max_length + n_step)) % max_length < top).reshape((-1, 1))
    slots = (rows.reshape((-1, 1)) * num_envs + arange(num_envs)).reshape(-1)
    fresh = ops.broadcast_to(fresh, (rows.shape[0], num_envs)).reshape(-1)
    current = ops.gather(sums[0], slots, 0)
    kept_leaves = ops.where(fresh, ops.broadcast_to(leaf_values(max_priority, alpha), slots.shape), current)
    values = ops.where(valid, kept_leaves, ops.zeros_like(current))
    return write_leaves(sums, mins, slots, values)


def start_ids(flat, head, count, steps, max_length, num_envs):
    """The ids of starts given as flat slots (int32 ``(B,)``): ``(T % period) * num_envs + env``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import start_ids
        >>> # 10 steps inserted into 4 rows: rows 2, 3, 0, 1 hold steps 6, 7, 8, 9
        >>> start_ids(Tensor(np.array([0, 3], np.int32)), Tensor(2, ms.int32), Tensor(4, ms.int32),
        ...           Tensor(10, ms.int32), 4, 1).asnumpy().tolist()
        [8, 7]
    """
    rows = flat if num_envs == 1 else flat // num_envs
    logical = (rows + max_length - head) % max_length
    times = ops.floor_mod(steps - count + logical, _period(max_length, num_envs))
    return times if num_envs == 1 else times * num_envs + flat % num_envs


@draws
def sample_leaves(sums, mins, sample_size, beta, capacity, rng=None):
    """Draw ``sample_size`` slots with probability ``leaf / total``, stratified, and their weights.

    Target ``j`` is ``(j + u_j) * total / sample_size`` with ``u_j`` uniform in ``[0, 1)``, found
    by :func:`find_leaves`. Weights ``(min_leaf / leaf) ** beta`` are ``(N * P(i)) ** -beta``
    over their largest value among the ``N`` positive leaves. With a total of 0 (no valid
    start) the slots are meaningless (clamped into the ring): the caller guards that case.

    Args:
        sums (mindspore.ParameterTuple): The sum tree's levels.
        mins (mindspore.ParameterTuple): The min tree's levels.
        sample_size (int): Slots to draw.
        beta (Union[float, Tensor]): Importance-sampling exponent, ``>= 0``.
        capacity (int): Slots of the ring.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw.

    Returns:
        Tuple of 2 tensors: slots (int32, ``(sample_size,)``) and weights (float32, ``(sample_size,)``).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import level_parameters, random_state, sample_leaves, write_leaves
        >>> sums, mins = level_parameters(8)
        >>> _ = write_leaves(sums, mins, Tensor(np.array([1, 3, 6], np.int32)), Tensor([1.0, 0.0, 3.0]))
        >>> slots, weights = sample_leaves(sums, mins, 4, 1.0, 8, random_state(0))
        >>> slots.asnumpy().tolist(), [round(float(w), 3) for w in weights.asnumpy()]  # slot 3 has no mass
        ([1, 6, 6, 6], [1.0, 0.333, 0.333, 0.333])
    """
    total = sums[-1]
    uniform = uniform_real((sample_size,), rng)
    targets = (_strata(sample_size) + uniform) * (total / sample_size)
    slots = ops.minimum(find_leaves(sums, targets), capacity - 1)
    leaves = ops.gather(sums[0], slots, 0)
    if isinstance(beta, Tensor) and beta.dtype != ms.float32:  # a float64 beta would make float64 weights
        beta = beta.astype(ms.float32)
    return slots, ops.pow(mins[-1] / leaves, beta)


def update_leaves(sums, mins, max_priority, head, count, steps, ids, priorities, alpha, max_length,
                  num_envs, check=True):
    """In place: set the priorities of the starts ``ids`` name; stale ids change nothing.

    An id is fresh when its slot still holds its time row (the slot's ``T`` equals the id's)
    and that start is still valid (a positive leaf): a start stops being valid only on its way
    out of the ring, so an id is never revived. Of the fresh occurrences of one id, the last
    wins; stale entries are ordered before all fresh ones, so a stale id of a slot never undoes
    a fresh one.

    Args:
        ids (Tensor): Integer (any int dtype), ``(n,)``, in ``[0, id_period * num_envs)``; judged
            in int64 before any narrowing cast.
        priorities (Tensor): float, ``(n,)``; clamped to ``[PRIORITY_FLOOR, PRIORITY_CEILING]``.
        check (bool): Guard the id range inside the graph. Default: ``True``. The others: see
            the module docstring.

    Returns:
        Tensor, float32 scalar: the new largest priority, for the caller to assign.

    Raises:
        RuntimeError: At run time, with ``check=True``, if an id is out of range (``assert
            failed``); nothing is written.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import level_parameters, update_leaves, write_leaves
        >>> sums, mins = level_parameters(8)
        >>> _ = write_leaves(sums, mins, Tensor(np.array([1, 2, 3], np.int32)), Tensor([2.0, 2.0, 2.0]))
        >>> # 6 steps stored from step 0: ids 1 to 3 are fresh; id 9 names step 9, not slot 1's step 1
        >>> top = update_leaves(sums, mins, Tensor(2.0), Tensor(0, ms.int32), Tensor(6, ms.int32),
        ...                     Tensor(6, ms.int32), Tensor(np.array([1, 3, 9], np.int32)),
        ...                     Tensor([4.0, 0.5, 7.0]), 1.0, 8, 1)
        >>> sums[0].asnumpy().tolist(), float(top)
        ([0.0, 4.0, 2.0, 0.5, 0.0, 0.0, 0.0, 0.0], 4.0)
    """
    size = ids.shape[0]
    if size == 0:
        return max_priority
    capacity = max_length * num_envs
    period = id_period(max_length, num_envs)
    wide = ids.astype(ms.int64)
    ids = (wide % (period * num_envs)).astype(ms.int32)
    if check:
        ok = ops.logical_and(wide >= 0, wide < period * num_envs).all()
        ids = ops.depend(ids, ASSERT(ok, [wide]))
    slots = ids % capacity
    rows = slots if num_envs == 1 else slots // num_envs
    logical = (rows + max_length - head) % max_length
    same_row = ops.floor_mod(steps - count + logical - ids // num_envs, _period(max_length, num_envs)) == 0
    current = ops.gather(sums[0], slots, 0)
    fresh = ops.logical_and(same_row, current > 0)
    clamped = clamp_priorities(priorities)
    values = ops.where(fresh, leaf_values(clamped, alpha), current)
    applied = ops.where(fresh, clamped, ops.zeros_like(clamped))
    order = sort_ints(fresh.astype(ms.int32) * size + arange(size), 2 * size)[1]
    slots, values, applied = (ops.gather(x, order, 0) for x in (slots, values, applied))
    winner = last_occurrence(slots, capacity)
    values, applied = ops.gather(values, winner, 0), ops.gather(applied, winner, 0)
    write_leaves(sums, mins, slots, values)
    return ops.maximum(max_priority, applied.max())
