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

Operators that write (``insert``) scatter into the column ``Parameter`` objects in place,
because a functional scatter would copy every column on every call; they return the new
cursors for the caller to assign. All other operators only read.

The operators of a buffer sharded over the ranks of a distributed job (``locate``,
``draw_global``, ``sample_global``, ...) live in :mod:`mindspore_rl_buffer.ops.sharded`,
whose docstring extends this contract to the union of the shards.
"""
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
from mindspore_rl_buffer.ops.sharded import (
    combine_rows,
    draw_global,
    gather_counts,
    gather_owned,
    locate,
    sample_global,
    share_from_root,
)

__all__ = [
    "combine_rows",
    "draw_global",
    "gather_counts",
    "gather_ordered",
    "gather_owned",
    "get_item",
    "insert",
    "insert_rows",
    "locate",
    "logical_to_physical",
    "physical_to_logical",
    "sample",
    "sample_global",
    "sample_indices",
    "sample_windows",
    "share_from_root",
]
