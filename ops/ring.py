"""Ring-buffer operators: insert, get_item, sample (see the cursor contract in ``ops``).

Each operator takes the column tensors, the int32 ``head`` and ``count`` and Python-int
static sizes. Shapes and dtypes are checked when the graph is compiled; what only the run
knows (``count``, the values of an index tensor) is checked by the runtime guards below
when ``check=True``: one ``Assert`` kernel whose failure ends the graph's run with
``RuntimeError: assert failed`` (MindSpore prints the offending values). The outputs depend
on the assertion and the random bounds are clamped, so no value leaves a failed run and no
other kernel fails first. A Python ``raise`` under a tensor condition would give a nicer
message but costs control flow, about 0.3 ms a call on CPU, where the assertion is free.
MindSpore refuses to run a graph again after it failed, so a caller that can check on the
host first (the direct-call path) passes ``check=False``. See ``ops._common`` for the guard.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import ops
from mindspore_rl_buffer.ops._common import (
    CAST,
    MAP,
    arange,
    capacity_of,
    draws,
    each,
    guarded,
    sort_ints,
    take_rows,
    write_rows,
)
from mindspore_rl_buffer.ops.rng import uniform_int, uniform_real


def logical_to_physical(head, logical, capacity):
    """Physical rows of logical indexes: ``(head + logical) % capacity``.

    Args:
        head (Tensor): int32 scalar, the physical row of the oldest item.
        logical (Tensor): int32 logical indexes, ``0 <= logical < count``.
        capacity (int): Rows per column.

    Returns:
        Tensor, int32, the shape of ``logical``.
    """
    return (head + logical) % capacity


def physical_to_logical(head, physical, capacity):
    """Logical indexes of physical rows: ``(physical - head) % capacity``."""
    return (physical - head + capacity) % capacity


def insert_rows(head, count, batch_size, capacity):
    """Where a batch of ``batch_size`` new items goes, and the cursors after it.

    Items are appended in order at ``(head + count + j) % capacity``; of a batch larger than
    ``capacity`` only the newest ``capacity`` items survive, so only their rows are returned.
    Exact for every ``capacity <= MAX_CAPACITY`` (2**30) and any batch size: every int32
    intermediate stays below 2**31 (the batch size, a Python int, is reduced first).

    Args:
        head (Tensor): int32 scalar.
        count (Tensor): int32 scalar.
        batch_size (int): Items in the batch, ``n >= 1``.
        capacity (int): Rows per column.

    Returns:
        Tuple of 3 tensors: the physical rows of the ``m = min(n, capacity)`` newest items
        (int32, shape ``(m,)``, all distinct), the new ``head`` and the new ``count``.

    Examples:
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import insert_rows
        >>> rows, head, count = insert_rows(Tensor(0, ms.int32), Tensor(4, ms.int32), 3, 5)
        >>> rows.asnumpy().tolist(), int(head), int(count)
        ([4, 0, 1], 2, 5)
    """
    kept = batch_size if batch_size < capacity else capacity  # Python's min() compiles a graph of its own
    end = (head + count) % capacity  # the write position; head + count <= 2 * capacity - 1
    # No kernel for what is known when the graph is built: a batch that fits starts at the
    # write position, and one item's row is the write position itself.
    first = end if kept == batch_size else (end + (batch_size - kept) % capacity) % capacity
    rows = first.reshape((1,)) if kept == 1 else (first + arange(kept)) % capacity
    if batch_size >= capacity:  # full afterwards; the newest item ends just before the new head
        return rows, (end + batch_size % capacity) % capacity, ops.zeros_like(count) + capacity
    total = count + batch_size  # < 2 * capacity
    new_count = ops.minimum(total, capacity)
    new_head = (head + (total - new_count)) % capacity
    return rows, new_head, new_count


def insert(columns, head, count, batch):
    """In place: append a batch of items to ``columns``, overwriting the oldest once full (FIFO).

    The only ring operator that writes: it scatters into ``columns`` in place, so they must
    be ``Parameter`` objects; the caller assigns the returned cursors.

    Args:
        columns (Union[tuple[Parameter], list[Parameter]]): Column ``c`` of shape
            ``(capacity, *shape_c)``.
        head (Tensor): int32 scalar.
        count (Tensor): int32 scalar.
        batch (Union[tuple[Tensor], list[Tensor]]): One tensor per column, of shape
            ``(n, *shape_c)`` and the column's dtype; ``n`` may be 0 or exceed ``capacity``.

    Returns:
        Tuple of 3 tensors: the physical rows written (int32, ``(min(n, capacity),)``, all
        distinct; see :func:`insert_rows`), the new ``head`` and the new ``count``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.ops import insert
        >>> column = Parameter(Tensor(np.zeros(3, np.int32)), requires_grad=False)
        >>> rows, head, count = insert([column], Tensor(0, ms.int32), Tensor(2, ms.int32),
        ...                            [Tensor(np.array([7, 8], np.int32))])
        >>> rows.asnumpy().tolist(), int(head), int(count), column.asnumpy().tolist()
        ([2, 0], 1, 3, [8, 0, 7])
    """
    capacity = capacity_of(columns)
    batch_size = batch[0].shape[0]
    rows, new_head, new_count = insert_rows(head, count, batch_size, capacity)
    if batch_size == 0:
        return rows, head, count
    kept = batch_size if batch_size < capacity else capacity  # Python's min() compiles a graph of its own
    if kept == batch_size and isinstance(batch, list) == isinstance(columns, list):  # sequences of one kind: Map's rule
        # One Map over the columns: a loop over them compiles a function graph per column and per index.
        # The rows returned depend on the writes, so that no caller's graph drops them.
        written = MAP(ops.partial(_write_at, rows), columns, batch)
        return ops.depend(rows, written), new_head, new_count
    for i in range(len(columns)):
        values = batch[i]
        if kept < batch_size:
            values = values[batch_size - kept:]
        write_rows(columns[i], rows, values)
    return rows, new_head, new_count


def _write_at(rows, column, values):
    """:func:`write_rows` with the rows first, for ``ops.partial``."""
    return write_rows(column, rows, values)


def get_item(columns, head, count, index, check=True):
    """Read items by logical index: 0 is the oldest, -1 the newest (as in Python).

    Args:
        columns (Union[tuple[Tensor], list[Tensor]]): The columns.
        head (Tensor): int32 scalar.
        count (Tensor): int32 scalar.
        index (Tensor): Integer scalar or 1-D tensor (any int dtype) of logical indexes in
            ``[-count, count)``; the guard judges the values as given, in int64, before any
            narrowing cast (an int64 ``2**32 + 1`` is out of range, not index 1).
        check (bool): Guard the range inside the graph. Default: ``True``.

    Returns:
        Tuple of tensors, one per column: the row (scalar ``index``) or the stacked rows.

    Raises:
        RuntimeError: At run time, with ``check=True``, if an index is out of range
            (``assert failed``; MindSpore prints the index and the count); the compiled graph
            cannot run again afterwards.
    """
    capacity = capacity_of(columns)
    # int64 holds every int dtype's values exactly, but uint64's above 2**63, which become
    # negative: never an index from the end, they become ``count``, which fails the guard.
    wide = CAST(index, ms.int64)
    total = CAST(count, ms.int64)
    logical = ops.where(wide < 0, total if index.dtype == ms.uint64 else wide + total, wide)
    rows = logical_to_physical(head, CAST(logical % capacity, ms.int32), capacity)  # a valid row always
    items = each(take_rows, columns, rows)
    if check:
        ok = ops.logical_and(logical >= 0, logical < total).all()
        items = guarded(items, ok, [index, count])
    return items


@draws
def sample_indices(head, count, sample_size, capacity, ordered=False, replace=True, rng=None,
                   check=True):
    """Draw ``sample_size`` items uniformly from the stored ones.

    Unordered draws physical rows directly (every stored row is equally likely, see the
    contract). Ordered draws logical indexes, sorts them ascending and maps them through
    ``head``, so the batch comes out oldest first. Without replacement the draw is the top
    ``sample_size`` of random keys over the stored rows: distinct items, O(capacity) work.

    Args:
        head (Tensor): int32 scalar.
        count (Tensor): int32 scalar.
        sample_size (int): Items to draw.
        capacity (int): Rows per column.
        ordered (bool): Oldest first. Default: ``False``.
        replace (bool): With replacement. Default: ``True``.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw
            (see :func:`~mindspore_rl_buffer.ops.random_state`).
            Default: ``None``.
        check (bool): Guard against an empty buffer (and, without replacement, too few
            items) inside the graph. Default: ``True``.

    Returns:
        Tuple of 2 int32 tensors of shape ``(sample_size,)``: the physical rows and the
        logical indexes of the draws.

    Raises:
        RuntimeError: At run time, with ``check=True``, if the buffer is empty or holds fewer
            than ``sample_size`` items without replacement (``assert failed``; MindSpore
            prints the count).
    """
    bound = ops.maximum(count, 1) if check else count  # a valid bound even when the guard fails
    if replace:
        drawn = uniform_int((sample_size,), bound, rng)
    else:
        keys = uniform_real((capacity,), rng)
        keys = ops.where(arange(capacity) < count, keys, -1.0)
        drawn = CAST(ops.topk(keys, sample_size, sorted=False)[1], ms.int32)
    if ordered:
        # Draws are physical rows when unordered; ordered re-reads them as logical indexes,
        # which is a uniform draw over [0, count) all the same.
        logical = sort_ints(drawn, capacity)[0]
        physical = logical_to_physical(head, logical, capacity)
    else:
        physical, logical = drawn, physical_to_logical(head, drawn, capacity)
    if check:
        return guarded((physical, logical), count >= (1 if replace else sample_size), [count])
    return physical, logical


@draws
def sample(columns, head, count, sample_size, ordered=False, replace=True, rng=None, check=True):
    """Draw ``sample_size`` items; see :func:`sample_indices` for the arguments.

    Returns:
        Tuple of 2: the logical indexes (int32, ``(sample_size,)``) and a tuple of tensors,
        one per column, each with leading dimension ``sample_size``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import random_state, sample
        >>> column = Tensor(np.arange(5, dtype=np.float32).reshape(5, 1))
        >>> logical, (rows,) = sample([column], Tensor(0, ms.int32), Tensor(3, ms.int32), 8, rng=random_state(0))
        >>> bool((rows.asnumpy() < 3).all()), rows.shape
        (True, (8, 1))
    """
    capacity = capacity_of(columns)
    physical, logical = sample_indices(head, count, sample_size, capacity, ordered, replace, rng, check)
    return logical, each(take_rows, columns, physical)


@draws
def sample_windows(head, count, sample_size, num_steps, capacity, rng=None, check=True):
    """Draw ``sample_size`` windows of ``num_steps`` consecutive logical rows.

    A window starts at a logical index drawn uniformly from ``[0, count - num_steps]``, so
    it never crosses the write position: it holds no mix of the newest and the oldest rows.

    Args:
        head (Tensor): int32 scalar.
        count (Tensor): int32 scalar.
        sample_size (int): Windows to draw.
        num_steps (int): Rows per window.
        capacity (int): Rows per column.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw
            (see :func:`~mindspore_rl_buffer.ops.random_state`).
            Default: ``None``.
        check (bool): Guard ``count >= num_steps`` inside the graph. Default: ``True``.

    Returns:
        Tuple of 2 int32 tensors of shape ``(sample_size, num_steps)``: the physical rows and
        the logical indexes of every step of every window.

    Raises:
        RuntimeError: At run time, with ``check=True``, if fewer than ``num_steps`` rows are
            stored (``assert failed``; MindSpore prints the count).

    Examples:
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import random_state, sample_windows
        >>> rows, logical = sample_windows(Tensor(2, ms.int32), Tensor(5, ms.int32), 3, 5, 5, random_state(0))
        >>> rows.asnumpy().tolist()  # the only window of 5 steps: oldest (row 2) to newest
        [[2, 3, 4, 0, 1], [2, 3, 4, 0, 1], [2, 3, 4, 0, 1]]
    """
    valid = count - num_steps + 1
    bound = ops.maximum(valid, 1) if check else valid
    starts = uniform_int((sample_size, 1), bound, rng)
    logical = starts + arange(num_steps)
    rows = logical_to_physical(head, logical, capacity)
    if check:
        return guarded((rows, logical), valid >= 1, [count])
    return rows, logical


def gather_ordered(columns, head):
    """Every row of every column in logical order, oldest first.

    Rows ``[0, count)`` of the result are the stored items; the rest are stale rows of an
    unfilled buffer (the shape stays static so the operator compiles once).

    Returns:
        Tuple of tensors, one per column, each of the column's shape.
    """
    capacity = capacity_of(columns)
    rows = logical_to_physical(head, arange(capacity), capacity)
    return each(take_rows, columns, rows)
