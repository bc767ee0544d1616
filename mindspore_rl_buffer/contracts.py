"""The invariants a buffer's state keeps, checked on the host before a checkpoint is restored.

Each function takes the values a checkpoint holds and returns what breaks the contract
(``None`` or ``[]`` when nothing does). The buffers' ``checkpoint_cursors`` and
``checkpoint_state`` (see ``mindspore_rl_buffer.checkpoint.Checkpointable``) call
them, and a restore refuses a file whose state breaks one.
"""
from __future__ import annotations

import numpy as np

from mindspore_rl_buffer.ops.priority import LEAF_CEILING, LEAF_FLOOR, PRIORITY_CEILING
from mindspore_rl_buffer.ops.transition import rank_period

# The ranges a priority buffer's graphs clamp to, as float32 holds their ends (1e-8 rounds below 1e-8).
# max_priority starts at 1, never decreases, and is clamped like every priority.
_TOP_RANGE = (1.0, float(np.float32(PRIORITY_CEILING)))
_LEAF_RANGE = (float(np.float32(LEAF_FLOOR)), float(np.float32(LEAF_CEILING)))


def held_int(value: object) -> int | None:
    """A checkpoint's scalar integer as an int, or ``None`` if it is missing or is no 0-d
    integer array (a corrupt file: the shape and dtype checks name it)."""
    array = None if value is None else np.asarray(value)
    if array is None or array.shape != () or array.dtype.kind not in "iu":
        return None
    return int(array)


def ring_contract(head: int, count: int, capacity: int) -> str | None:
    """What breaks the cursor contract of :mod:`mindspore_rl_buffer.ops`, or ``None``."""
    if not 0 <= count <= capacity:
        return f"count={count} must be in [0, {capacity}]"
    if not 0 <= head < capacity:
        return f"head={head} must be in [0, {capacity})"
    if head != 0 and count != capacity:
        return f"head={head} must be 0 while the buffer is not full (count={count} < {capacity})"
    return None


def _stored_rows(head: int, count: int, max_length: int, num_envs: int) -> np.ndarray:
    """The flat physical rows of the ``count`` stored time steps, oldest first, time-major."""
    return (((head + np.arange(count)) % max_length)[:, None] * num_envs + np.arange(num_envs)).reshape(-1)


def episode_contract(head: int, count: int, last_ended: np.ndarray, finals: int, ranks: np.ndarray,
                     ended: np.ndarray) -> list[str]:
    """What breaks the episode bookkeeping of a transition buffer (``mindspore_rl_buffer.ops.transition``).

    ``ended`` holds the physical rows' episode ends, ``(max_length, num_envs)``; ``head`` and
    ``count`` keep the ring contract (checked apart).
    """
    max_length, num_envs = ended.shape
    size = max_length * num_envs
    problems = []
    stored = ended[(head + np.arange(count)) % max_length]
    expected_last = stored[-1] if count else np.zeros(num_envs, bool)
    if not np.isin(last_ended, (0, 1)).all() or not np.array_equal(last_ended.astype(bool), expected_last):
        problems.append(f"last_ended={last_ended.tolist()} must be the newest row's episode ends "
                        f"{expected_last.astype(int).tolist()}")
    if (stored[1:] & stored[:-1]).any():
        problems.append("a final row (the one after an episode's end) carries a flag")
    if not 0 <= finals < rank_period(size) or (count == 0 and finals):
        problems.append(f"finals={finals} must count the final rows since the last reset, modulo {rank_period(size)} "
                        f"(0 in an empty buffer)")
    q = _stored_rows(head, count, max_length, num_envs)
    adjusted = ranks[q].astype(np.int64) + size * (q < head * num_envs)
    steps = np.mod(np.diff(adjusted), rank_period(size))  # the final rows are counted modulo the period
    if count and (not np.isin(steps[:num_envs - 1], (0, 1)).all()
                  or not np.array_equal(steps[num_envs - 1:], 1 - stored[:-1].reshape(-1))
                  or ranks[q[-1]] != q[-1] - size - finals):
        problems.append("the start ranks disagree with the stored flags and final_rows")
    if count < max_length and ranks[count * num_envs:].any():
        problems.append("rows not written yet must rank 0")
    return problems


def start_slots(head: int, count: int, ranks: np.ndarray, ended: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The start table's slots that a transition buffer's sample may read, and the flat rows
    they must hold (:func:`~mindspore_rl_buffer.ops.select_starts`): every stored row after
    the oldest that is not a final row, at its rank modulo the ring's rows. (The oldest row's
    own finality is unknown once the row before it is overwritten, and it is never a start.)

    ``ranks`` must keep :func:`episode_contract`; ``ended`` as there.
    """
    max_length, num_envs = ended.shape
    after_end = ended[(head + np.arange(count - 1)) % max_length].reshape(-1)
    q = _stored_rows(head, count, max_length, num_envs)[num_envs:][~after_end]
    return np.mod(ranks[q].astype(np.int64), max_length * num_envs), q


def valid_starts(head: int, count: int, ended: np.ndarray, stack_size: int, n_step: int) -> np.ndarray:
    """The valid starts of a transition buffer as a bool mask over its flat slots ``row * num_envs + env``
    (the rule of :mod:`mindspore_rl_buffer.ops.transition`); ``ended`` is ``(max_length, num_envs)``."""
    max_length, num_envs = ended.shape
    mask = np.zeros((max_length, num_envs), bool)
    logical = np.arange(stack_size, count - n_step)
    rows = (head + logical) % max_length
    mask[rows] = ~ended[(rows - 1) % max_length]
    return mask.reshape(-1)


def start_table_default(head: int | None, count: int | None, ranks: np.ndarray | None, terminated: np.ndarray | None,
                        truncated: np.ndarray | None, max_length: int, num_envs: int) -> np.ndarray:
    """The start table of a file written before it existed, built from its ranks (zeros where the
    file breaks more: it is refused for that)."""
    table = np.zeros(max_length * num_envs + 1, np.int32)
    if (head is not None and count is not None and not ring_contract(head, count, max_length)
            and ranks is not None and np.shape(ranks) == (max_length * num_envs,)
            and np.shape(terminated) == np.shape(truncated) == (max_length, num_envs)):
        slots, rows = start_slots(head, count, np.asarray(ranks), (np.asarray(terminated) != 0)
                                  | (np.asarray(truncated) != 0))
        table[slots] = rows
    return table


def start_table_contract(head: int, count: int, ranks: np.ndarray, ended: np.ndarray,
                         table: np.ndarray) -> list[str]:
    """What breaks a transition buffer's start table: a slot a sample may read that does not
    hold its row (see :func:`start_slots`)."""
    slots, rows = start_slots(head, count, ranks, ended)
    wrong = np.flatnonzero(table[slots] != rows)
    if wrong.size:
        return [f"the start table disagrees with the ranks at {wrong.size} slot(s), the first "
                f"slot {int(slots[wrong[0]])} holding {int(table[slots[wrong[0]]])} for row {int(rows[wrong[0]])}"]
    return []


#: How far a tree node may be from what its children give. Each is one float32 operation on
#: them (``ops.priority.tree_writes``), but a slot repeated in one update may be written from leaf
#: values one unit of rounding apart (MindSpore 2.10's CPU pow, measured on the 9th of 9 equal
#: values), a node and its child from different repeats: allow some units of float32
#: rounding, far below a corruption that changes what is sampled.
TREE_RTOL = 1e-5


def priority_contract(sum_tree: np.ndarray, min_tree: np.ndarray, max_priority: np.ndarray, count: int,
                      names: tuple[str, str, str], alpha: float) -> list[str]:
    """What breaks the trees of a priority buffer (``mindspore_rl_buffer.ops.priority``), or ``[]``.

    The invariants its operators keep: ``max_priority`` is in ``[1, PRIORITY_CEILING]`` (it
    starts at 1 and never decreases); the stored slots ``[0, count)`` (the ring holds ``count``
    items; ``count`` keeps the ring contract, checked apart) have leaves in ``[LEAF_FLOOR,
    LEAF_CEILING]``, none above the leaf of ``max_priority`` (``max_priority ** alpha``, the
    largest priority stored so far, clamped alike), equal in both trees; every other leaf is 0 in
    the sum tree and ``+inf`` in the min tree; every inner node is the sum (the minimum) of its
    two children. Values computed apart are compared within :data:`TREE_RTOL`; each problem
    names its Parameter (``names``: the sum tree's, the min tree's, ``max_priority``'s).
    """
    sum_name, min_name, max_name = names
    top = float(np.asarray(max_priority, np.float64).reshape(-1)[0])
    problems = []
    if not _TOP_RANGE[0] <= top <= _TOP_RANGE[1]:  # NaN is in no range
        problems.append(f"Parameter '{max_name}' must be in [1, 2**126] (it starts at 1 and never decreases; the "
                        f"buffer clamps every priority to 2**126), but got {top}")
    sums, mins = np.asarray(sum_tree, np.float64), np.asarray(min_tree, np.float64)
    bad = np.flatnonzero(~(np.isfinite(sums) & (sums >= 0)))
    if bad.size:
        problems.append(f"Parameter '{sum_name}' must be finite and >= 0 in every node, but got {sums[bad[0]]} "
                        f"at node {bad[0]} ({bad.size} such nodes)")
    bad = np.flatnonzero(~(mins >= 0))  # +inf marks slots not stored
    if bad.size:
        problems.append(f"Parameter '{min_name}' must be >= 0 (or +inf) in every node, but got {mins[bad[0]]} "
                        f"at node {bad[0]} ({bad.size} such nodes)")
    if problems:
        return problems
    size = sums.size // 2  # slot s is the leaf node size + s; node 0 is unused
    stored = np.arange(size) < count
    sum_leaves, min_leaves = sums[size:], mins[size:]
    after = f"the slots not stored (from slot {count} on)"
    with np.errstate(over="ignore"):
        top_leaf = min(max(float(np.power(top, np.float64(alpha))), _LEAF_RANGE[0]), _LEAF_RANGE[1])
    for name, wrong, what, values in (
            (sum_name, stored & ~((_LEAF_RANGE[0] <= sum_leaves) & (sum_leaves <= _LEAF_RANGE[1])),
             f"a leaf in [{LEAF_FLOOR:.4g}, 2**96] (where the buffer clamps priority ** alpha) for each of the "
             f"{count} stored slots", sum_leaves),
            (sum_name, stored & (sum_leaves > top_leaf * (1 + TREE_RTOL)),
             f"no leaf above {top_leaf:.7g}, the leaf of '{max_name}' ({top:.7g} ** alpha {alpha:g}), the largest "
             f"priority stored so far", sum_leaves),
            (sum_name, ~stored & (sum_leaves != 0), f"0 for {after}", sum_leaves),
            (min_name, stored & ~np.isclose(min_leaves, sum_leaves, rtol=TREE_RTOL, atol=0),
             f"the leaves of '{sum_name}' for the stored slots",
             min_leaves),
            (min_name, ~stored & (min_leaves != np.inf), f"+inf for {after}", min_leaves)):
        slots = np.flatnonzero(wrong)
        if slots.size:
            problems.append(f"Parameter '{name}' must hold {what}, but got {values[slots[0]]} for slot {slots[0]} "
                            f"({slots.size} such slots)")
    inner = np.arange(1, size)
    children = sums[2 * inner] + sums[2 * inner + 1]
    bad = inner[~np.isclose(sums[inner], children, rtol=TREE_RTOL, atol=0)]
    if bad.size:
        problems.append(f"Parameter '{sum_name}' must hold in every inner node the sum of its two children, but "
                        f"node {bad[0]} holds {sums[bad[0]]} where its children sum to {children[bad[0] - 1]} "
                        f"({bad.size} such nodes)")
    children = np.minimum(mins[2 * inner], mins[2 * inner + 1])
    bad = inner[~np.isclose(mins[inner], children, rtol=TREE_RTOL, atol=0)]
    if bad.size:
        problems.append(f"Parameter '{min_name}' must hold in every inner node the minimum of its two children, "
                        f"but node {bad[0]} holds {mins[bad[0]]} where their minimum is {children[bad[0] - 1]} "
                        f"({bad.size} such nodes)")
    return problems


def level_tree_contract(sums: list[np.ndarray], mins: list[np.ndarray], max_priority: np.ndarray,
                        valid: np.ndarray, alpha: float) -> list[str]:
    """What breaks the trees of a prioritized transition buffer (``mindspore_rl_buffer.ops.prioritized``).

    ``sums``/``mins``: the levels, leaves first, as the Parameters ``sum_tree_<i>``/``min_tree_<i>``;
    ``valid``: the valid starts (:func:`valid_starts`). The invariants: ``max_priority`` in ``[1,
    PRIORITY_CEILING]``; a leaf in ``[LEAF_FLOOR, LEAF_CEILING]``, at most the leaf of
    ``max_priority``, at each valid start and the same in both trees; 0 and ``+inf`` at every
    other slot; every node of a level above the sum (the minimum) of its children, within
    :data:`TREE_RTOL`.
    """
    top = float(np.asarray(max_priority, np.float64).reshape(-1)[0])
    problems = []
    if not _TOP_RANGE[0] <= top <= _TOP_RANGE[1]:  # NaN is in no range
        problems.append(f"Parameter 'max_priority' must be in [1, 2**126] (it starts at 1 and never decreases), "
                        f"but got {top}")
    sums, mins = [np.asarray(x, np.float64).reshape(-1) for x in sums], [np.asarray(x, np.float64).reshape(-1)
                                                                            for x in mins]
    shapes = [x.size for x in sums]
    if [x.size for x in mins] != shapes or any(a != b * (shapes[0] // shapes[1]) for a, b in zip(shapes, shapes[1:])):
        return [*problems, f"the tree levels must have the sizes the buffer builds, {shapes}, but got "
                           f"{[x.size for x in mins]} in the min tree"]
    valid = np.concatenate([valid, np.zeros(shapes[0] - valid.size, bool)])
    leaves, floors = sums[0], mins[0]
    with np.errstate(over="ignore"):
        top_leaf = min(max(float(np.power(top, np.float64(alpha))), _LEAF_RANGE[0]), _LEAF_RANGE[1])
    checks = (("sum_tree_0", valid & ~((_LEAF_RANGE[0] <= leaves) & (leaves <= top_leaf * (1 + TREE_RTOL))),
               f"a leaf in [{LEAF_FLOOR:.4g}, {top_leaf:.7g}] (the leaf of 'max_priority') at every valid start"),
              ("sum_tree_0", ~valid & (leaves != 0), "0 at every slot that is not a valid start"),
              ("min_tree_0", valid & ~np.isclose(floors, leaves, rtol=TREE_RTOL, atol=0),
               "the leaves of 'sum_tree_0' at every valid start"),
              ("min_tree_0", ~valid & (floors != np.inf), "+inf at every slot that is not a valid start"))
    for name, wrong, what in checks:
        slots = np.flatnonzero(wrong)
        if slots.size:
            values = leaves if name.startswith("sum") else floors
            problems.append(f"Parameter '{name}' must hold {what}, but got {values[slots[0]]} for slot {slots[0]} "
                            f"({slots.size} such slots)")
    fanout = shapes[0] // shapes[1] if len(shapes) > 1 else 1
    for level in range(1, len(sums)):
        for kind, nodes, below, combine in (("sum", sums[level], sums[level - 1], np.sum),
                                            ("min", mins[level], mins[level - 1], np.min)):
            expected = combine(below.reshape(-1, fanout), axis=1)
            bad = np.flatnonzero(~np.isclose(nodes, expected, rtol=TREE_RTOL, atol=0) & (nodes != expected))
            if bad.size:
                problems.append(f"Parameter '{kind}_tree_{level}' must hold in every node the {kind} of its "
                                f"{fanout} children, but node {bad[0]} holds {nodes[bad[0]]} where they give "
                                f"{expected[bad[0]]} ({bad.size} such nodes)")
    return problems
