"""ops.priority: the sum and min trees, their descent, prioritized sampling and updates."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor
from mindspore_rl_buffer.ops import (
    empty_trees,
    find_slots,
    leaf_values,
    set_leaves,
    tree_size,
    tree_writes,
    winning_values,
)

from tests.helpers import apply_in_order


def test_tree_writes_give_numpys_assignment_in_any_scatter_order():
    """On CPU the scatter applies repeats in order; the plan must not depend on that."""
    rng = np.random.default_rng(1)
    capacity, size = 6, tree_size(6)
    for n in (1, 5, 12, 12, 40):
        old = np.zeros(capacity)
        old[:4] = rng.random(4)
        sum_tree, min_tree = (Parameter(t, requires_grad=False) for t in empty_trees(capacity))
        set_leaves(sum_tree, min_tree, Tensor(np.arange(4, dtype=np.int32)), Tensor(old[:4].astype(np.float32)),
                   capacity)
        slots = rng.integers(0, capacity, n).astype(np.int32)
        values = rng.random(n).astype(np.float32)
        leaves = old.copy()
        leaves[slots] = values  # numpy: the last of repeated indexes wins
        np.testing.assert_array_equal(winning_values(Tensor(slots), Tensor(values)).asnumpy(), leaves[slots])
        nodes, sums, mins = (x.asnumpy() for x in tree_writes(
            sum_tree, min_tree, Tensor(slots), winning_values(Tensor(slots), Tensor(values)), capacity))
        stored = np.arange(capacity) < 4
        stored[slots] = True
        want_sums = np.zeros(2 * size, np.float32)
        want_sums[size:size + capacity] = leaves
        want_mins = np.full(2 * size, np.inf, np.float32)
        want_mins[size:size + capacity] = np.where(stored, leaves, np.inf)
        for node in range(size - 1, 0, -1):
            want_sums[node] = want_sums[2 * node] + want_sums[2 * node + 1]
            want_mins[node] = min(want_mins[2 * node], want_mins[2 * node + 1])
        for order in (range(len(nodes)), range(len(nodes) - 1, -1, -1), rng.permutation(len(nodes))):
            got_sums = apply_in_order(sum_tree.asnumpy(), nodes, sums, order)
            got_mins = apply_in_order(min_tree.asnumpy(), nodes, mins, order)
            np.testing.assert_allclose(got_sums, want_sums, rtol=1e-6)
            np.testing.assert_array_equal(got_mins, want_mins)


def test_drift_guard_never_returns_an_unstored_or_zero_leaf():
    """Targets at and past the total (what float32 rounding can produce) end in a stored slot."""
    for capacity, count in [(6, 6), (8, 5), (1, 1)]:
        sum_tree, min_tree = (Parameter(t, requires_grad=False) for t in empty_trees(capacity))
        stored = np.tile([1e8, 1e-8], capacity)[:count].astype(np.float32)  # adversarial neighbours
        set_leaves(sum_tree, min_tree, Tensor(np.arange(count, dtype=np.int32)), leaf_values(Tensor(stored), 1.0),
                   capacity)
        total = sum_tree.asnumpy()[1]
        targets = np.concatenate([np.linspace(0, total, 101, dtype=np.float32),
                                  [np.nextafter(total, np.float32(np.inf)), total * 2, np.float32(np.inf)],
                                  np.cumsum(stored)]).astype(np.float32)
        slots = find_slots(sum_tree, Tensor(targets), Tensor(count, ms.int32), capacity).asnumpy()
        assert ((slots >= 0) & (slots < count)).all(), slots
        assert (sum_tree.asnumpy()[tree_size(capacity) + slots] > 0).all()
        assert slots[targets >= total].tolist() == [count - 1] * int((targets >= total).sum())
