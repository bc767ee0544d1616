"""Prioritized replay: a sum tree and a min tree over the slots of a ring buffer.

The items live in a ring (see the cursor contract in ``ops``); beside it, two trees index
the physical slots.

Tree layout
-----------
``P = tree_size(capacity)`` is the smallest power of two ``>= capacity``. A tree is a 1-D
float32 tensor of ``2 * P`` nodes: node 1 is the root, node ``v`` has children ``2v`` and
``2v + 1``, and slot ``s`` is the leaf node ``P + s``; a tree has ``log2(P)`` levels above
its leaves. Node 0 is unused.

* Sum tree: leaf ``s`` holds ``priority[s] ** alpha`` for a stored slot and 0 otherwise;
  an inner node holds the sum of its children (recomputed from them, never incremented, so
  float32 rounding does not accumulate over updates).
* Min tree: the same leaves, ``+inf`` for slots not stored; an inner node holds the
  minimum of its children.

Priorities are clamped to ``[PRIORITY_FLOOR, PRIORITY_CEILING]`` (1e-8 and 2**126; NaN to the
floor, +inf to the ceiling) and leaves to ``[LEAF_FLOOR, LEAF_CEILING]`` (the smallest normal float32 and
2**96), so every stored leaf is positive and finite, no node of the sum tree can overflow,
and ``max_priority`` stays finite; every importance weight is finite.

Updating ``n`` leaves computes their new values and their ancestors' level by level (a
static loop of ``log2(P)`` steps of gathers and a binary search over the batch), then
writes all of them with one scatter per tree: O(n log n + n log P).
Sampling descends from the root, also one level per step and vectorised over the batch.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import ASSERT, arange, draws, guarded, sort_ints
from mindspore_rl_buffer.ops.dedupe import last_occurrence
from mindspore_rl_buffer.ops.rng import uniform_real

#: Priorities below this (and NaN, inside a graph) count as this.
PRIORITY_FLOOR = 1e-8
#: Priorities above this (+inf, inside a graph) count as this: ``2**126``, a quarter of float32's
#: range (a graph constant of ``2**127`` or more was measured to become inf in MindSpore 2.10).
PRIORITY_CEILING = float(2.0**126)
#: Leaves (``priority ** alpha``) are clamped to ``[LEAF_FLOOR, LEAF_CEILING]``. With at most
#: ``2**30`` leaves (``MAX_CAPACITY``), the root stays below ``2**126``: no sum overflows float32.
LEAF_FLOOR = float(np.finfo(np.float32).tiny)
#: The largest leaf (``priority ** alpha``); see ``LEAF_FLOOR``.
LEAF_CEILING = float(2.0**96)
_INF = float("inf")


def tree_size(capacity: int) -> int:
    """``P``: the number of leaves, the smallest power of two ``>= capacity``.

    Examples:
        >>> from mindspore_rl_buffer.ops import tree_size
        >>> tree_size(1), tree_size(5), tree_size(8)
        (1, 8, 8)
    """
    return 1 << max(int(capacity) - 1, 0).bit_length()


def empty_trees(capacity: int) -> tuple[Tensor, Tensor]:
    """The sum tree and min tree of an empty buffer (all leaves unstored).

    Returns:
        Tuple of 2 float32 tensors of shape ``(2 * tree_size(capacity),)``.
    """
    size = 2 * tree_size(capacity)
    return Tensor(np.zeros(size, np.float32)), Tensor(np.full(size, np.inf, np.float32))


def clamp_priorities(priorities):
    """Priorities as float32 in ``[PRIORITY_FLOOR, PRIORITY_CEILING]``: NaN and negatives count
    as the floor, ``+inf`` (and what overflows float32) as the ceiling."""
    priorities = priorities.astype(ms.float32)
    priorities = ops.where(priorities >= PRIORITY_FLOOR, priorities, PRIORITY_FLOOR)
    return ops.minimum(priorities, PRIORITY_CEILING)


def leaf_values(priorities, alpha):
    """``clamp_priorities(priority) ** alpha``, clamped to ``[LEAF_FLOOR, LEAF_CEILING]``.

    NaN and negative priorities count as ``PRIORITY_FLOOR``; a power that overflows float32
    counts as ``LEAF_CEILING``.
    """
    values = ops.pow(clamp_priorities(priorities), alpha)
    values = ops.where(values >= LEAF_FLOOR, values, LEAF_FLOOR)
    return ops.minimum(values, LEAF_CEILING)


def tree_writes(sum_tree, min_tree, slots, values, capacity):
    """Every node that changes when leaves are set, with its new value: reads only.

    The leaves are sorted once; level by level, each node's new value is combined with its
    sibling's, taken from the batch when the sibling changes too (found by a binary search
    in the sorted nodes of that level, which stay sorted as they are halved) and read from
    the tree otherwise. Nothing is written, so the caller writes every level with one
    scatter per tree: on MindSpore 2.10 CPU, a graph that reads a Parameter between two of
    its writes copies the whole Parameter (measured: 80 ms for 20 levels at capacity 1e6,
    against 4 ms for reads first, one write last).

    Args:
        sum_tree (Tensor): float32, ``(2P,)``.
        min_tree (Tensor): float32, ``(2P,)``.
        slots (Tensor): int32, ``(n,)``, slots in ``[0, capacity)``. A repeated slot must
            carry the same value each time (see :func:`winning_values`); the repeats then
            write equal values to every node, so the scatter's order does not matter.
        values (Tensor): float32, ``(n,)``, leaf values (see :func:`leaf_values`).
        capacity (int): Slots of the ring.

    Returns:
        Tuple of 3 tensors of shape ``(n * (log2(P) + 1),)``: the nodes (int32), their new
        sums and their new minimums (float32); the last ``n`` entries are the root.
    """
    size = tree_size(capacity)
    batch_size = slots.shape[0]
    order = sort_ints(slots, capacity)[1]
    nodes = ops.gather(slots, order, 0) + size
    sums = ops.gather(values.astype(ms.float32), order, 0)
    mins = sums
    all_nodes, all_sums, all_mins = [nodes], [sums], [mins]
    for _ in range(size.bit_length() - 1):
        sibling = ops.bitwise_xor(nodes, 1)
        where = ops.minimum(ops.searchsorted(nodes, sibling, out_int32=True), batch_size - 1)
        changed = ops.gather(nodes, where, 0) == sibling
        sums = sums + ops.where(changed, ops.gather(sums, where, 0), ops.gather(sum_tree, sibling, 0))
        mins = ops.minimum(mins, ops.where(changed, ops.gather(mins, where, 0), ops.gather(min_tree, sibling, 0)))
        nodes = nodes // 2
        all_nodes.append(nodes)
        all_sums.append(sums)
        all_mins.append(mins)
    return ops.concat(all_nodes), ops.concat(all_sums), ops.concat(all_mins)


def set_leaves(sum_tree, min_tree, slots, values, capacity):
    """In place: set leaves of both trees, with their ancestors; one scatter per tree.

    Args:
        sum_tree (Parameter): float32, ``(2P,)``.
        min_tree (Parameter): float32, ``(2P,)``.
        slots (Tensor): int32, ``(n,)``; a repeated slot must carry the same value.
        values (Tensor): float32, ``(n,)``, the leaf values (see :func:`leaf_values`).
        capacity (int): Slots of the ring.

    Returns:
        Tensor, the root of the sum tree after the update (the total mass).
    """
    nodes, sums, mins = tree_writes(sum_tree, min_tree, slots, values, capacity)
    ops.scatter_update(sum_tree, nodes, sums)
    ops.scatter_update(min_tree, nodes, mins)
    return sums[-1]


def find_prefix(sum_tree, targets, capacity):
    """The slot whose cumulative sum interval holds each target (a prefix-sum descent).

    Slot ``s`` is found for ``target`` in ``[sum(leaf[:s]), sum(leaf[:s+1]))``: at each
    level the descent goes right, subtracting the left child's sum, when the target is not
    below it. Static loop over ``log2(P)`` levels, vectorised over the targets.

    Args:
        sum_tree (Tensor): float32, ``(2P,)``.
        targets (Tensor): float32, ``(n,)``, in ``[0, total)``.
        capacity (int): Slots of the ring.

    Returns:
        Tensor, int32, ``(n,)``, slots in ``[0, P)``: callers clamp them (see ``sample``).
    """
    size = tree_size(capacity)
    nodes = ops.ones(targets.shape, ms.int32)
    for _ in range(size.bit_length() - 1):
        left = ops.gather(sum_tree, 2 * nodes, 0)
        go_right = targets >= left
        targets = ops.where(go_right, targets - left, targets)
        nodes = 2 * nodes + go_right.astype(ms.int32)
    return nodes - size


def find_slots(sum_tree, targets, count, capacity):
    """:func:`find_prefix`, with the float32 drift guard: only stored slots come out.

    The stored slots are exactly ``[0, count)`` (cursor contract), all
    with positive leaves, so every zero leaf lies at or beyond ``count``. Rounding in the
    descent (or a target that rounds up to ``total``) can only end in such a zero leaf by
    crossing, at some node, into a right subtree of zero mass; the slot it should have
    stayed in is then the last positive leaf left of it, which is ``count - 1``. Clamping
    the slot to ``count - 1`` therefore never returns an unstored or zero-priority slot.

    Args:
        sum_tree (Tensor): float32, ``(2P,)``.
        targets (Tensor): float32, ``(n,)``, nominally in ``[0, total)``.
        count (Tensor): int32 scalar, items stored, ``>= 1``.
        capacity (int): Slots of the ring.

    Returns:
        Tensor, int32, ``(n,)``, slots in ``[0, count)``.
    """
    return ops.minimum(find_prefix(sum_tree, targets, capacity), count - 1)


@draws
def sample(sum_tree, min_tree, count, sample_size, beta, capacity, rng=None, check=True):
    """Draw ``sample_size`` slots with probability ``leaf / total``, stratified.

    Target ``j`` is ``(j + u_j) * total / sample_size`` with ``u_j`` uniform in ``[0, 1)``:
    one draw from each of ``sample_size`` equal strata of the total mass, and the slots are
    found by :func:`find_slots` (a descent guarded against float32 drift).

    Importance weights: ``(N * P(i)) ** -beta / max_j (N * P(j)) ** -beta``, the maximum
    over all stored items, is ``(min_leaf / leaf_i) ** beta`` with ``min_leaf`` the root
    of the min tree: in ``(0, 1]``, computed without overflow.

    Args:
        sum_tree (Tensor): float32, ``(2P,)``.
        min_tree (Tensor): float32, ``(2P,)``.
        count (Tensor): int32 scalar, items stored.
        sample_size (int): Slots to draw.
        beta (Union[float, Tensor]): Importance-sampling exponent, ``>= 0``.
        capacity (int): Slots of the ring.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw
            (see :func:`~mindspore_rl_buffer.ops.random_state`).
            Default: ``None``.
        check (bool): Guard against an empty buffer inside the graph. Default: ``True``.

    Returns:
        Tuple of 2 tensors: the physical slots (int32, ``(sample_size,)``) and their
        importance weights (float32, ``(sample_size,)``).

    Raises:
        RuntimeError: At run time, with ``check=True``, if the buffer is empty (``assert
            failed``; MindSpore prints the count); the compiled graph cannot run again afterwards.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.ops import empty_trees, leaf_values, priority_sample, random_state, set_leaves
        >>> sum_tree, min_tree = (Parameter(t, requires_grad=False) for t in empty_trees(3))
        >>> slots = Tensor(np.arange(3, dtype=np.int32))
        >>> total = set_leaves(sum_tree, min_tree, slots, leaf_values(Tensor([1.0, 0.0, 3.0]), 1.0), 3)
        >>> slots, weights = priority_sample(sum_tree, min_tree, Tensor(3, ms.int32), 4, 1.0, 3,
        ...                                  rng=random_state(0))
        >>> sorted(slots.asnumpy().tolist())
        [0, 2, 2, 2]
    """
    total = sum_tree[1]
    uniform = uniform_real((sample_size,), rng)
    targets = (arange(sample_size).astype(ms.float32) + uniform) * (total / sample_size)
    slots = find_slots(sum_tree, targets, count, capacity)
    leaves = ops.gather(sum_tree, slots + tree_size(capacity), 0)
    if isinstance(beta, Tensor) and beta.dtype != ms.float32:  # a float64 beta would make float64 weights
        beta = beta.astype(ms.float32)
    weights = ops.pow(min_tree[1] / leaves, beta)
    if check:
        return guarded((slots, weights), count >= 1, [count])
    return slots, weights


def insert_priorities(sum_tree, min_tree, rows, max_priority, alpha, capacity):
    """In place: give the slots just written by ``ring.insert`` the largest priority seen so far.

    The old priority of an overwritten slot is replaced with it.

    Args:
        sum_tree (Parameter): float32, ``(2P,)``.
        min_tree (Parameter): float32, ``(2P,)``.
        rows (Tensor): int32, ``(m,)``, distinct slots (from ``ring.insert_rows``).
        max_priority (Tensor): float32 scalar.
        alpha (float): Priority exponent.
        capacity (int): Slots of the ring.

    Returns:
        Tensor, the new total mass.
    """
    values = ops.broadcast_to(leaf_values(max_priority, alpha), rows.shape)
    return set_leaves(sum_tree, min_tree, rows, values, capacity)


def winning_values(slots, values, bound=None):
    """Give every occurrence of a slot the value of its last occurrence.

    Writing ``values`` then leaves every leaf as numpy's ``leaf[slots] = values`` would,
    in whatever order the scatter applies the writes (on GPU it is not specified for
    repeated indexes): every write to a slot carries the same value. ``bound`` (every slot is
    below it) lets batches over 4,096 slots resolve without a sort (see :func:`last_occurrence`).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import winning_values
        >>> winning_values(Tensor(np.array([1, 3, 1], np.int32)), Tensor([5.0, 2.0, 0.5])).asnumpy().tolist()
        [0.5, 2.0, 0.5]
    """
    return ops.gather(values, last_occurrence(slots, bound), 0)


def update_priorities(sum_tree, min_tree, max_priority, count, slots, priorities, alpha, capacity,
                      check=True):
    """In place: set the priorities of stored slots in both trees; of repeated slots, the last wins.

    Every occurrence of a slot is given the last occurrence's priority
    (:func:`winning_values`), so the trees equal numpy's ``leaf[slots] = values`` whatever
    order the scatter takes.

    Args:
        sum_tree (Parameter): float32, ``(2P,)``.
        min_tree (Parameter): float32, ``(2P,)``.
        max_priority (Tensor): float32 scalar, the largest priority stored so far.
        count (Tensor): int32 scalar, items stored.
        slots (Tensor): Integer (any int dtype), ``(n,)``, physical slots in ``[0, count)``;
            the guard judges them as given, in int64, before any narrowing cast.
        priorities (Tensor): float, ``(n,)``; clamped to ``[PRIORITY_FLOOR, PRIORITY_CEILING]``
            (NaN to the floor, +inf to the ceiling).
        alpha (float): Priority exponent.
        capacity (int): Slots of the ring.
        check (bool): Guard the slot range inside the graph. Default: ``True``.

    Returns:
        Tensor, float32 scalar: the new largest priority, for the caller to assign.

    Raises:
        RuntimeError: At run time, with ``check=True``, if a slot is outside ``[0, count)``
            (``assert failed``; MindSpore prints the slots and the count); nothing is written,
            and the compiled graph cannot run again afterwards.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.ops import empty_trees, tree_size, update_priorities
        >>> sum_tree, min_tree = (Parameter(t, requires_grad=False) for t in empty_trees(4))
        >>> slots = Tensor(np.array([1, 3, 1], np.int32))
        >>> top = update_priorities(sum_tree, min_tree, Tensor(1.0), Tensor(4, ms.int32), slots,
        ...                         Tensor([5.0, 2.0, 0.5]), 1.0, 4)
        >>> sum_tree.asnumpy()[tree_size(4):].tolist(), float(top)
        ([0.0, 0.5, 0.0, 2.0], 2.0)
    """
    if slots.shape[0] == 0:  # nothing to set (the shape is known when the graph compiles)
        return max_priority
    wide = slots.astype(ms.int64)  # judged as given: a uint64 above 2**63 turns negative and fails
    slots = (wide % capacity).astype(ms.int32)  # a valid slot always; the guard refuses the others
    if check:
        # Every write below depends on the assertion, so a failed check writes nothing.
        ok = ops.logical_and(wide >= 0, wide < count.astype(ms.int64)).all()
        slots = ops.depend(slots, ASSERT(ok, [wide, count]))
    clamped = winning_values(slots, clamp_priorities(priorities), capacity)
    set_leaves(sum_tree, min_tree, slots, leaf_values(clamped, alpha), capacity)
    return ops.maximum(max_priority, clamped.max())
