"""Reservoir sampling (Vitter's algorithm R) into the columns of a buffer.

State: the columns, and ``seen``, an int64 scalar counting every item ever offered. The
stored items are the slots ``[0, count)`` with ``count == min(seen, capacity)``, and ``head``
stays 0, so the cursor contract of ``ops`` holds and ``ring.get_item`` / ``ring.sample`` read
a reservoir as they read a ring (logical index == slot).

Algorithm R, item by item: item ``k`` (1-based over the whole stream) goes to slot
``k - 1`` while ``k <= capacity``; after that it is kept with probability ``capacity / k``,
in a slot drawn uniformly from ``[0, capacity)``, replacing what was there. Every item seen
is then in the buffer with probability ``capacity / seen``.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import (
    arange,
    capacity_of,
    draws,
    write_rows,
)
from mindspore_rl_buffer.ops.dedupe import last_occurrence
from mindspore_rl_buffer.ops.rng import uniform_int, uniform_real


@draws
def draw_slots(seen, batch_size, capacity, rng=None):
    """Where each item of a batch goes under algorithm R, drawn for the whole batch at once.

    Item ``j`` of the batch is item ``k = seen + j + 1`` of the stream. It is accepted if
    ``k <= capacity`` (slot ``k - 1``) or if ``u_j * k < capacity`` with ``u_j`` uniform in
    ``[0, 1)`` (into a slot drawn uniformly from ``[0, capacity)``, independently of
    ``u_j``). That is algorithm R's law, decided for all items independently; which of
    several accepted items landing on one slot survives is settled by :func:`insert`.

    Args:
        seen (Tensor): int64 scalar, items offered before this batch.
        batch_size (int): Items in the batch, ``n >= 1``.
        capacity (int): Rows per column.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draws
            (see :func:`~mindspore_rl_buffer.ops.random_state`).
            Default: ``None``.

    Returns:
        Tuple of 2 tensors of shape ``(n,)``: the slots (int32, in ``[0, capacity)``) and
        whether each item is accepted (bool).

    Examples:
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import draw_slots, random_state
        >>> slots, accepted = draw_slots(Tensor(1, ms.int64), 3, 3, random_state(0))
        >>> slots.asnumpy().tolist()[:2], accepted.asnumpy().tolist()[:2]
        ([1, 2], [True, True])
    """
    stream = seen + 1 + arange(batch_size).astype(ms.int64)  # k, 1-based
    filling = stream <= capacity
    uniform = uniform_real((batch_size,), rng)
    # float32 holds k to 1 part in 2**24; the acceptance probability is that accurate.
    accepted = ops.logical_or(filling, uniform * stream.astype(ms.float32) < capacity)
    drawn = uniform_int((batch_size,), Tensor(capacity, ms.int32), rng)
    slots = ops.where(filling, (stream - 1).astype(ms.int32), drawn)
    return slots, accepted


def plan_writes(slots, accepted, capacity=None):
    """Resolve a batch's draws into one write per item, with equal values on equal rows.

    Item ``j`` writes row ``rows[j]`` with item ``source[j]`` of the batch, or, where
    ``keep_old[j]``, with that row's current value. An accepted item that no later accepted
    item of the batch overtakes on its slot is its own source; every other item copies such
    a winner (the last accepted item of the batch), or, when no item is accepted, rewrites
    the slot of item 0 with its current value. Applying the writes in any order then gives
    what algorithm R gives item by item.

    Args:
        slots (Tensor): int32, ``(n,)``, in ``[0, capacity)``.
        accepted (Tensor): bool, ``(n,)``.
        capacity (int): Slots of the reservoir, if known: it lets batches over 4,096 items
            resolve without a sort (see :func:`last_occurrence`). Default: ``None``.

    Returns:
        Tuple of 3 tensors of shape ``(n,)``: ``rows`` (int32), ``source`` (int32) and
        ``keep_old`` (bool).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import plan_writes
        >>> rows, source, keep_old = plan_writes(Tensor(np.array([2, 0, 2, 1], np.int32)),
        ...                                      Tensor(np.array([True, True, True, False])))
        >>> rows.asnumpy().tolist(), source.asnumpy().tolist(), keep_old.asnumpy().tolist()
        ([2, 0, 2, 2], [2, 1, 2, 2], [False, False, False, False])
    """
    batch_size = slots.shape[0]
    capacity_sink = slots.max() + 1
    # Rejected items get a slot of their own beyond all real ones, so they never win one.
    winners = last_occurrence(ops.where(accepted, slots, capacity_sink), None if capacity is None else capacity + 1)
    last_accepted = ops.where(accepted, arange(batch_size), 0).max()
    source = ops.where(accepted, winners, last_accepted)
    rows = ops.gather(slots, source, 0)
    keep_old = ops.logical_not(ops.gather(accepted, source, 0))  # only when none is accepted
    return rows, source, keep_old


@draws
def insert(columns, seen, batch, rng=None):
    """In place: offer a batch of items to the reservoir ``columns``, item by item under algorithm R.

    Writes in place into ``columns`` (``Parameter`` objects). Every item writes one row,
    so the write has the static shape of the batch: an accepted item writes its own row to
    its slot unless a later accepted item takes the same slot (the later one wins, as item
    by item); a rejected or overtaken item writes the winner's row to the winner's slot, or,
    when no item of the batch is accepted, row 0 writes its current value back. All writes
    to a row then carry the same value, so the outcome does not depend on the scatter's
    order (on GPU it is not specified for repeated indexes); see :func:`plan_writes`.

    Args:
        columns (Union[tuple[Parameter], list[Parameter]]): Column ``c`` of shape
            ``(capacity, *shape_c)``.
        seen (Tensor): int64 scalar, items offered so far.
        batch (Union[tuple[Tensor], list[Tensor]]): One tensor per column, of shape
            ``(n, *shape_c)``; ``n`` may be 0 or exceed ``capacity``.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draws
            (see :func:`~mindspore_rl_buffer.ops.random_state`).

    Returns:
        Tuple of 2 tensors: the new ``seen`` (int64) and ``count`` (int32,
        ``min(seen, capacity)``), for the caller to assign.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.ops import random_state, reservoir_insert
        >>> column = Parameter(Tensor(np.zeros(3, np.int32)), requires_grad=False)
        >>> seen, count = reservoir_insert([column], Tensor(0, ms.int64), [Tensor(np.arange(1, 3, dtype=np.int32))],
        ...                                random_state(0))
        >>> column.asnumpy().tolist(), int(seen), int(count)
        ([1, 2, 0], 2, 2)
    """
    capacity = capacity_of(columns)
    batch_size = batch[0].shape[0]
    if batch_size == 0:
        return seen, ops.minimum(seen, capacity).astype(ms.int32)
    slots, accepted = draw_slots(seen, batch_size, capacity, rng)
    rows, source, keep_old = plan_writes(slots, accepted, capacity)
    for column, values in zip(columns, batch):
        new = ops.gather(values, source, 0)
        old = ops.gather(column, rows, 0)
        mask = keep_old.reshape((batch_size,) + (1,) * (len(values.shape) - 1))
        write_rows(column, rows, ops.where(mask, old, new))
    new_seen = seen + batch_size
    return new_seen, ops.minimum(new_seen, capacity).astype(ms.int32)
