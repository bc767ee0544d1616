"""Deterministic writes with repeated indexes: the last occurrence wins.

``ops.scatter_update`` with a repeated index keeps one of the values, but which one is not
specified (on GPU it varies from run to run). The operators that may receive repeated
indexes (``update_priorities``, a reservoir batch whose draws collide) first find, for
every position, the *last* position holding the same index, and then write that winner's
value from every duplicate, so the result is the same whatever order the scatter takes,
and equals numpy's ``array[index] = values``.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import ops
from mindspore_rl_buffer.ops._common import GPU_SORT_ANY_DTYPE, arange


def last_occurrence(index, bound=None):
    """For every position ``j``, the last position ``j'`` with ``index[j'] == index[j]``.

    Sorts the distinct keys ``index * n + position`` (int64, so ``n * max(index)`` may exceed
    int32) and finds the end of each index's run with a binary search: O(n log n) for ``n``
    indexes, independent of the size of the array they point into.

    Past 4,096 indexes, when ``bound`` is given, it scatters each position into its index's
    cell of a ``(bound,)`` scratch array keeping the largest, with no sort (MindSpore 2.10's
    GPU Sort sorts rows that long only as float16/float32): O(n + bound).

    Args:
        index (Tensor): int32, shape ``(n,)``, values ``>= 0``.
        bound (int): Every index is below it. Default: ``None``, not known (then the sort
            path, whose int64 keys a GPU refuses past 4,096 indexes).

    Returns:
        Tensor, int32, shape ``(n,)``; ``result[j] == j`` exactly where ``j`` wins.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import last_occurrence
        >>> last_occurrence(Tensor(np.array([4, 1, 4, 4, 1, 0], np.int32))).asnumpy().tolist()
        [3, 4, 3, 3, 4, 5]
    """
    n = index.shape[0]
    if n > GPU_SORT_ANY_DTYPE and bound is not None:
        latest = ops.tensor_scatter_max(ops.full((bound,), -1, dtype=ms.int32), index.reshape((-1, 1)), arange(n))
        return ops.gather(latest, index, 0)
    key = index.astype(ms.int64) * n
    ordered = ops.sort(key + arange(n).astype(ms.int64))[0]
    # The run of `index[j]` ends just before the first key of the next index value.
    end = ops.searchsorted(ordered, key + n) - 1
    return (ops.gather(ordered, end, 0) - key).astype(ms.int32)
