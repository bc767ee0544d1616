"""Graph operators of the replay buffers, as pure functions of the buffer state.

Installed as ``mindspore_rl_buffer.ops``. Every operator is built from MindSpore graph ops
whose documentation lists GPU among the supported platforms, does no host round-trip, and
can be called from a user's own ``nn.Cell.construct`` or ``@jit`` function.

The cursor contract
-------------------
A ring buffer's state is a sequence of ``columns`` (column ``c`` has shape
``(capacity, *shape_c)``; all share the leading ``capacity``) and two int32 scalars:

* ``head``: the physical row of the oldest item; ``0 <= head < capacity``.
* ``count``: how many items are stored; ``0 <= count <= capacity``.
* ``head`` moves only once the buffer is full, so ``count < capacity`` implies ``head == 0``
  and the stored items are exactly the physical rows ``[0, count)`` or, when full, all rows.
* Logical index ``i`` (0 = oldest, ``count - 1`` = newest) lives at physical row
  ``(head + i) % capacity``.
* The next item is written at ``(head + count) % capacity``; once full, that is ``head``,
  the oldest row, which is overwritten (FIFO) and ``head`` moves forward.
* ``full == (count == capacity)``; the empty state is ``head == count == 0``.
* ``capacity <= MAX_CAPACITY`` (2**30): then every int32 intermediate of the cursor
  arithmetic stays below 2**31, so it is exact (the buffers refuse larger capacities).

Operators that write (``insert``) scatter into the column ``Parameter`` objects in place,
because a functional scatter would copy every column on every call; they return the new
cursors for the caller to assign. All other operators only read.

The operators of a buffer sharded over the ranks of a distributed job (``locate``,
``draw_global``, ``sample_global``, ...) live in :mod:`mindspore_rl_buffer.ops.sharded`,
whose docstring extends this contract to the union of the shards.
Prioritized replay (``ops.priority``) keeps a sum tree and a min tree over the slots of a
ring; reservoir sampling (``ops.reservoir``) fills the slots ``[0, count)`` with ``head``
fixed at 0. Both cite this contract; their ``sample`` and ``insert`` are exported here as
``priority_sample`` and ``reservoir_insert``. Repeated indexes in one write are resolved by
``ops.dedupe`` (the last occurrence wins), never left to the scatter's order. The operators
that draw take ``rng``, the state of a counter-based generator held in two Parameters
(``ops.rng``: ``random_state``, ``uniform_int``, ``uniform_real``, ``random_bits``); every
draw advances its counter, so a saved state resumes the stream exactly.
A transition buffer (``ops.transition``) keeps a ring of time rows for several
environments at once, and reads episodes out of it: its module docstring extends the
contract with the episode structure, the validity rule of a start, frame stacks and n-step
returns; ``ops.stacks`` reads those stacks and returns for the starts it draws.
``ops.prioritized`` keeps a transition buffer's valid starts in the trees of ``ops.priority``:
a leaf is positive exactly while its start is valid.
"""
from mindspore_rl_buffer.ops import dedupe, prioritized, priority, reservoir, rng, stacks, transition
from mindspore_rl_buffer.ops._common import MAX_CAPACITY, draws
from mindspore_rl_buffer.ops.dedupe import last_occurrence
from mindspore_rl_buffer.ops.prioritized import (
    empty_levels,
    find_leaves,
    id_period,
    insert_leaves,
    level_parameters,
    sample_leaves,
    start_ids,
    tree_shape,
    update_leaves,
    write_leaves,
)
from mindspore_rl_buffer.ops.priority import (
    LEAF_CEILING,
    LEAF_FLOOR,
    PRIORITY_CEILING,
    PRIORITY_FLOOR,
    clamp_priorities,
    empty_trees,
    find_prefix,
    find_slots,
    insert_priorities,
    leaf_values,
    set_leaves,
    tree_size,
    tree_writes,
    update_priorities,
    winning_values,
)
from mindspore_rl_buffer.ops.priority import sample as priority_sample
from mindspore_rl_buffer.ops.reservoir import draw_slots, plan_writes
from mindspore_rl_buffer.ops.reservoir import insert as reservoir_insert
from mindspore_rl_buffer.ops.ring import (
    gather_ordered,
    get_item,
    insert,
    insert_rows,
    logical_to_physical,
    physical_to_logical,
    sample,
    sample_indices,
    sample_windows,
)
from mindspore_rl_buffer.ops.rng import random_bits, random_state, uniform_int, uniform_real
from mindspore_rl_buffer.ops.sharded import (
    combine_rows,
    draw_global,
    gather_counts,
    gather_owned,
    locate,
    sample_global,
    share_from_root,
)
from mindspore_rl_buffer.ops.stacks import gather_frames, stacked_windows, transition_windows
from mindspore_rl_buffer.ops.transition import (
    count_starts,
    draw_starts,
    final_rows,
    insert_steps,
    rank_period,
    sample_starts,
    select_starts,
)

__all__ = [
    "LEAF_CEILING",
    "LEAF_FLOOR",
    "MAX_CAPACITY",
    "PRIORITY_CEILING",
    "PRIORITY_FLOOR",
    "clamp_priorities",
    "combine_rows",
    "count_starts",
    "dedupe",
    "draw_global",
    "draw_slots",
    "draw_starts",
    "draws",
    "empty_levels",
    "empty_trees",
    "final_rows",
    "find_leaves",
    "find_prefix",
    "find_slots",
    "gather_counts",
    "gather_frames",
    "gather_ordered",
    "gather_owned",
    "get_item",
    "id_period",
    "insert",
    "insert_leaves",
    "insert_priorities",
    "insert_rows",
    "insert_steps",
    "last_occurrence",
    "leaf_values",
    "level_parameters",
    "locate",
    "logical_to_physical",
    "physical_to_logical",
    "plan_writes",
    "prioritized",
    "priority",
    "priority_sample",
    "random_bits",
    "random_state",
    "rank_period",
    "reservoir",
    "reservoir_insert",
    "rng",
    "sample",
    "sample_global",
    "sample_indices",
    "sample_leaves",
    "sample_starts",
    "sample_windows",
    "select_starts",
    "set_leaves",
    "share_from_root",
    "stacked_windows",
    "stacks",
    "start_ids",
    "transition",
    "transition_windows",
    "tree_shape",
    "tree_size",
    "tree_writes",
    "uniform_int",
    "uniform_real",
    "update_leaves",
    "update_priorities",
    "winning_values",
    "write_leaves",
]
