"""Operators of a buffer sharded over the ranks of a distributed job.

Every rank holds one ring buffer, its *shard*, with its own ``head`` and ``count`` under the
cursor contract of :mod:`mindspore_rl_buffer.ops`. The union of the shards has a logical
order of its own: shard 0's items oldest first, then shard 1's, and so on. With
``counts[r]`` the items of shard ``r`` and ``starts[r] = counts[0] + ... + counts[r - 1]``,
global index ``g`` in ``[0, sum(counts))`` is item ``g - starts[r]`` of the shard ``r`` with
``starts[r] <= g < starts[r] + counts[r]``.

A global sample draws ``sample_size`` global indexes uniformly: each draw lands in shard
``r`` with probability ``counts[r] / sum(counts)``, so the draws are allocated across the
shards in proportion to their counts (a multinomial allocation). Collectives used, in this
order, all on the communication group ``group``:

1. ``AllGather`` of every shard's ``count``: ``world_size`` int32.
2. ``AllGather`` of every rank's draws, of which all ranks keep rank 0's: the same indexes
   on every rank even if the ranks were seeded differently (``sample_size`` int32 each).
3. ``AllGather`` of every rank's gathered rows, encoded in 32-bit words: one for the float
   columns, one for the integer columns (see :func:`combine_rows`); each rank then keeps,
   for draw ``j``, the row its owner gathered.

Every rank must run these operators, in the same order, for the collectives to complete:
they are collective calls. The collectives are MindSpore's ``AllGather``, documented for
Ascend and GPU (HCCL, NCCL) and run by mccl on CPU; ``AllReduce`` is avoided because its CPU
kernel takes only float16/float32. float64 and uint64 columns cannot be sampled globally
(see ``encode_words``).
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import arange, capacity_of, draws, each, guarded, sort_ints, take_rows
from mindspore_rl_buffer.ops.ring import logical_to_physical
from mindspore_rl_buffer.ops.rng import uniform_int

# How each column dtype travels, in 32-bit words, exactly. MindSpore 2.10's CPU AllGather
# (mccl) rounds int64 and float64 to 32 bits and refuses int8/uint8 (measured), so every
# column travels as float32 or int32 words: floats of 32 bits or fewer as one float32 word,
# integers of 32 bits or fewer as one int32 word, int64 and uint32 as two int32 words (high
# and low halves). float64 and uint64 have no exact 32-bit form without a bitcast operator,
# which MindSpore 2.10 lacks: they are refused.
_FLOAT_WORD = (ms.float16, ms.bfloat16, ms.float32)
_INT_WORD = (ms.bool_, ms.int8, ms.uint8, ms.int16, ms.uint16, ms.int32)
_TWO_INT_WORDS = (ms.int64, ms.uint32)
UNMOVABLE = (ms.float64, ms.uint64)
_HALF = Tensor(2**32, ms.int64)
_LOW_BITS = Tensor(2**32 - 1, ms.int64)
_OFFSET = Tensor(2**31, ms.int64)


@ops.constexpr
def _transport_plan(dtypes):
    """How each column travels: ``(block, words per value)`` per column (block 0 is float32,
    1 is int32), and the column numbers of each block."""
    plan = []
    for dtype in dtypes:
        if dtype in _FLOAT_WORD:
            plan.append((0, 1))
        elif dtype in _INT_WORD:
            plan.append((1, 1))
        elif dtype in _TWO_INT_WORDS:
            plan.append((1, 2))
        else:
            raise TypeError(f"For 'sample_global', a column of dtype {dtype} cannot travel exactly: "
                            f"MindSpore's CPU AllGather rounds 64-bit values to 32 bits, and float64 or "
                            f"uint64 has no exact 32-bit form without a bitcast.")
    blocks = tuple(tuple(n for n, (block, _) in enumerate(plan) if block == b) for b in (0, 1))
    return tuple(plan), blocks


@ops.constexpr
def _widths(shapes):
    """Values per row of each column: the product of its item shape (at least 1 for ``()``)."""
    widths = []
    for shape in shapes:
        width = 1
        for dim in shape[1:]:
            width *= dim
        widths.append(width)
    return tuple(widths)


def encode_words(value, block, words):
    """``value`` of shape ``(k, width)`` as 32-bit words: float32 ``(k, width)`` (block 0) or
    int32 ``(k, words * width)`` (block 1).

    Two words (int64, uint32) are the high half ``value // 2**32`` and the low half
    ``value % 2**32 - 2**31``, both within int32: ``decode_words`` inverts it exactly. The
    low half comes from a bitwise and, and the division is of a multiple of ``2**32``, which
    is exact even where the kernel divides in float64 (the CPU kernel does: a direct
    ``(2**63 - 1) // 2**32`` came out as ``2**31``).
    """
    if words == 2:
        wide = value.astype(ms.int64)
        low = ops.bitwise_and(wide, _LOW_BITS)
        high = ops.floor_divide(wide - low, _HALF)
        low = low - _OFFSET
        return ops.cat((high.astype(ms.int32), low.astype(ms.int32)), 1)
    if block == 0:
        return value.astype(ms.float32)
    return value.astype(ms.int32)


def decode_words(encoded, words, dtype):
    """The inverse of :func:`encode_words`, back to ``dtype``; shape ``(k, width)``."""
    if words == 2:
        width = encoded.shape[1] // 2
        high = encoded[:, :width].astype(ms.int64)
        low = encoded[:, width:].astype(ms.int64)
        return (high * _HALF + low + _OFFSET).astype(dtype)
    return encoded.astype(dtype)


def all_gather(x, group):
    """``x`` of every rank stacked along axis 0, rank 0 first (MindSpore ``AllGather``)."""
    return ops.AllGather(group)(x)


def gather_counts(count, group):
    """Every shard's ``count``, as an int32 tensor of shape ``(world_size,)``.

    Args:
        count (Tensor): int32 scalar, this rank's count.
        group (str): The communication group.

    Returns:
        Tensor, int32, ``(world_size,)``: the same on every rank.
    """
    return all_gather(count.reshape(1), group)


def locate(counts, index):
    """The shard and the shard's logical index of global indexes (see the module docstring).

    Args:
        counts (Tensor): int32 ``(world_size,)``, every shard's count.
        index (Tensor): int32 ``(k,)`` global indexes in ``[0, sum(counts))``.

    Returns:
        Tuple of 2 int32 tensors of shape ``(k,)``: the owning rank and the logical index
        in its shard. An index outside ``[0, sum(counts))`` gets an owner in
        ``[0, world_size)`` all the same (the last shard), so callers can gather safely.

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import locate
        >>> owner, local = locate(Tensor(np.array([3, 0, 2], np.int32)),
        ...                       Tensor(np.array([0, 2, 3, 4], np.int32)))
        >>> owner.asnumpy().tolist(), local.asnumpy().tolist()
        ([0, 0, 2, 2], [0, 2, 0, 1])
    """
    world_size = counts.shape[0]
    ends = ops.cumsum(counts, 0)
    owner = (index.reshape(-1, 1) >= ends.reshape(1, -1)).astype(ms.int32).sum(1).astype(ms.int32)
    owner = ops.minimum(owner, world_size - 1)
    starts = ends - counts
    return owner, index - ops.gather(starts, owner, 0)


@draws
def draw_global(counts, sample_size, ordered=False, rng=None, bound=None):
    """Draw ``sample_size`` global indexes uniformly over the union of the shards.

    Args:
        counts (Tensor): int32 ``(world_size,)``.
        sample_size (int): Draws.
        ordered (bool): Sort the draws ascending (oldest first within a shard, shards in
            rank order). Default: ``False``.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw
            (see :func:`~mindspore_rl_buffer.ops.random_state`).
            Default: ``None``.
        bound (int): An upper bound of the total (the union's capacity), which lets an
            ordered draw of more than 4,096 sort as float32 keys on GPU (see
            ``sort_ints``). Default: ``None``, no bound known.

    Returns:
        Tuple of 2: the draws (int32, ``(sample_size,)``) and the total count (int32
        scalar). When the total is 0 the draws are all 0, meaningless: check the total.
    """
    total = counts.sum().astype(ms.int32)
    drawn = uniform_int((sample_size,), ops.maximum(total, 1), rng)
    if ordered:
        drawn = sort_ints(drawn, bound)[0]
    return drawn, total


def share_from_root(x, group):
    """Rank 0's ``x`` on every rank: an ``AllGather`` that keeps the first block."""
    return all_gather(x, group)[:x.shape[0]]


def gather_owned(columns, head, owner, local, rank):
    """This shard's rows for the draws it owns; row 0 (any valid row) for the others.

    Args:
        columns (Union[tuple[Tensor], list[Tensor]]): This shard's columns.
        head (Tensor): int32 scalar, this shard's head.
        owner (Tensor): int32 ``(k,)``, the owning rank of each draw.
        local (Tensor): int32 ``(k,)``, the logical index of each draw in its owner's shard.
        rank (int): This rank.

    Returns:
        Tuple of tensors, one per column, each of leading dimension ``k``.
    """
    capacity = capacity_of(columns)
    rows = ops.where(owner == rank, logical_to_physical(head, local, capacity), 0)
    return each(take_rows, columns, rows)


def combine_rows(values, owner, group):
    """For every draw ``j``, row ``j`` as gathered by the draw's owner, on every rank.

    Every column is flattened to ``(k, width)`` and encoded in 32-bit words (see
    ``encode_words``): the float columns are concatenated into one float32 block and
    the integer columns into one int32 block, one ``AllGather`` per block (so at most two,
    whatever the columns). The result ``(world_size * k, words)`` holds every rank's block,
    and row ``owner[j] * k + j`` is selected. Selection copies bits, so every value (NaN,
    -0.0, any integer) arrives exactly as stored.

    Args:
        values (tuple[Tensor]): This rank's rows, one tensor per column, leading dimension ``k``.
        owner (Tensor): int32 ``(k,)``, the owning rank of each draw.
        group (str): The communication group.

    Returns:
        Tuple of tensors shaped and typed as ``values``: the same on every rank.

    Raises:
        TypeError: When compiled, if a column is float64 or uint64 (no exact 32-bit form).
    """
    k = values[0].shape[0]
    pick = owner * k + arange(k)
    widths = _widths(tuple(v.shape for v in values))
    plan, blocks = _transport_plan(tuple(v.dtype for v in values))
    encoded = [encode_words(v.reshape(k, widths[n]), plan[n][0], plan[n][1]) for n, v in enumerate(values)]
    combined = [None] * len(values)
    for numbers in blocks:
        if numbers:
            parts = [encoded[n] for n in numbers]
            chosen = ops.gather(all_gather(parts[0] if len(parts) == 1 else ops.cat(parts, 1), group), pick, 0)
            offset = 0
            for n in numbers:
                size = widths[n] * plan[n][1]
                piece = decode_words(chosen[:, offset:offset + size], plan[n][1], values[n].dtype)
                combined[n] = piece.reshape(values[n].shape)
                offset += size
    return tuple(combined)


@draws
def sample_global(columns, head, count, sample_size, rank, group, ordered=False, rng=None, check=True):
    """Draw ``sample_size`` items uniformly over the union of all shards; the same on every rank.

    A collective call: every rank of ``group`` must call it, in the same order relative to
    the other collectives, including ranks whose shard is empty.

    Args:
        columns (Union[tuple[Tensor], list[Tensor]]): This rank's shard.
        head (Tensor): int32 scalar, this shard's head.
        count (Tensor): int32 scalar, this shard's count.
        sample_size (int): Items to draw.
        rank (int): This rank in ``group``.
        group (str): The communication group.
        ordered (bool): Oldest first within a shard, shards in rank order. Default: ``False``.
        rng (tuple[Parameter, Parameter]): The generator's state (only rank 0's draws are used;
            every rank's counter advances alike).
        check (bool): Guard against an empty union inside the graph (one Assert kernel); every
            rank sees the same total, so every rank fails alike. Default: ``True``.

    Returns:
        Tuple of 3: the total count (int32 scalar), the global indexes drawn (int32,
        ``(sample_size,)``) and a tuple of tensors, one per column, each with leading
        dimension ``sample_size``. With ``check=False`` and an empty union the rows are
        meaningless: check the total.

    Raises:
        RuntimeError: At run time, with ``check=True``, if every shard is empty
            (``assert failed``, on every rank); the compiled graph cannot run again afterwards.

    Supported Platforms:
        ``GPU`` ``CPU``
    """
    counts = gather_counts(count, group)
    drawn, total = draw_global(counts, sample_size, ordered, rng, capacity_of(columns) * counts.shape[0])
    drawn = share_from_root(drawn, group)
    owner, local = locate(counts, drawn)
    values = gather_owned(columns, head, owner, local, rank)
    rows = combine_rows(values, owner, group)
    if check:
        # Every rank sees the same total, so every rank's run fails alike: no rank is left
        # waiting in a collective.
        checked = guarded((drawn, *rows), total >= 1, [total])
        return total, checked[0], tuple(checked[1:])
    return total, drawn, rows
