"""ops.priority against numpy trees laid out as its docstring says, on both paths.

The reference trees are rebuilt from their leaves bottom up (never updated along paths as
the operators do); leaves follow the docstring's clamping; sampling is checked against
numpy's cumsum and searchsorted, the strata and the paper's importance weights. Each
operator runs op by op ("direct") and compiled ("compiled": ``mindspore.jit``, or a user's
Cell that owns the trees for the operators that write them).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor
from mindspore_rl_buffer.ops import (
    empty_trees,
    find_prefix,
    find_slots,
    insert_priorities,
    leaf_values,
    priority_sample,
    random_state,
    set_leaves,
    tree_size,
    tree_writes,
    update_priorities,
    winning_values,
)
from scipy.stats import chisquare

from tests.helpers import (
    PATHS,
    apply_in_order,
    assert_guard_fails,
    on_path,
    parameter,
    ring_rows_item_by_item,
)

ALPHA = 0.7
CAPACITY = 7  # 8 leaves: one unused leaf past the ring
FLOOR32 = np.float32(1e-8)
TINY = np.finfo(np.float32).tiny
I32 = ms.int32


def leaves_count(capacity: int) -> int:
    """The smallest power of two >= capacity, by doubling (the docstring's definition of P)."""
    size = 1
    while size < capacity:
        size *= 2
    return size


class TreeModel:
    """The two trees as ``ops.priority`` lays them out: node 1 the root, children 2v and 2v + 1,
    slot s at node P + s; sums of children (float32) and minimums, 0 / +inf where unstored."""

    def __init__(self, capacity: int) -> None:
        self.size = leaves_count(capacity)
        self.sums = np.zeros(2 * self.size, np.float32)
        self.mins = np.full(2 * self.size, np.inf, np.float32)

    def set(self, slots, values) -> None:
        """numpy's ``leaf[slots] = values`` (the last of repeated slots wins) in both trees."""
        self.sums[self.size + np.asarray(slots)] = values
        self.mins[self.size + np.asarray(slots)] = values
        self.sums[:self.size], self.mins[:self.size] = rebuilt(self.sums, self.mins, self.size)

    def leaves(self) -> np.ndarray:
        return self.sums[self.size:]


def rebuilt(sums, mins, size):
    """Every inner node recomputed from its children, bottom up, in float32 (node 0 unused)."""
    sums, mins = sums.copy(), mins.copy()
    for node in range(size - 1, 0, -1):
        sums[node] = sums[2 * node] + sums[2 * node + 1]
        mins[node] = min(mins[2 * node], mins[2 * node + 1])
    sums[0], mins[0] = 0, np.inf
    return sums[:size], mins[:size]


def leaf_of(priority, alpha: float = ALPHA) -> np.ndarray:
    """The docstring's leaf: NaN and anything below the floor count as the floor, then
    ``** alpha``, then at least the smallest normal float32; float64 arithmetic."""
    priority = np.asarray(priority, np.float32).astype(np.float64)
    clamped = np.where(np.isnan(priority) | (priority < FLOOR32), FLOOR32, priority)
    return np.maximum(clamped ** alpha, TINY)


def assert_trees(sum_tree, min_tree, model: TreeModel) -> None:
    """Leaves as the model's (float32 pow against float64: 1e-6), zero / +inf exactly where
    unstored, and every inner node exactly the float32 sum / minimum of its children."""
    sums, mins = sum_tree.asnumpy(), min_tree.asnumpy()
    size = model.size
    np.testing.assert_allclose(sums[size:], model.sums[size:], rtol=1e-6)
    np.testing.assert_allclose(mins[size:], model.mins[size:], rtol=1e-6)
    assert ((sums[size:] == 0) == (model.sums[size:] == 0)).all()
    assert (np.isinf(mins[size:]) == np.isinf(model.mins[size:])).all()
    inner_sums, inner_mins = rebuilt(sums, mins, size)
    np.testing.assert_array_equal(sums[:size], inner_sums)
    np.testing.assert_array_equal(mins[:size], inner_mins)


def trees_of(model: TreeModel):
    return parameter(model.sums, "sum_tree"), parameter(model.mins, "min_tree")


# ------------------------------------------------------------------ layout
def test_tree_size_is_the_smallest_power_of_two_holding_the_capacity():
    for capacity in [*range(1, 70), 2**20 - 1, 2**20, 2**20 + 1]:
        assert tree_size(capacity) == leaves_count(capacity), capacity


def test_empty_trees_hold_no_mass_and_no_minimum():
    for capacity in (1, 5, 8):
        sum_tree, min_tree = empty_trees(capacity)
        size = 2 * leaves_count(capacity)
        assert sum_tree.shape == min_tree.shape == (size,)
        assert sum_tree.dtype == min_tree.dtype == ms.float32
        np.testing.assert_array_equal(sum_tree.asnumpy(), np.zeros(size))
        np.testing.assert_array_equal(min_tree.asnumpy(), np.full(size, np.inf))


# ------------------------------------------------------------------ leaf_values
PRIORITIES = [np.nan, -np.inf, -1.0, 0.0, 1e-12, 1e-8, 2e-8, 0.5, 1.0, 3.0, 6e4]  # 6e4 fits float16, 6e4 ** 5 float32


def leaf_values_of(alpha):
    def run(priorities):
        return leaf_values(priorities, alpha)
    return run


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("dtype", "alpha"), [(np.float32, 0.7), (np.float64, 0.7), (np.float16, 0.7),
                                              (np.float32, 0.0), (np.float32, 1.0), (np.float32, 5.0)])
def test_leaf_values_floor_nan_and_negatives_then_raise_to_alpha(dtype, alpha, path):
    priorities = np.array(PRIORITIES, dtype)
    got = on_path(path, leaf_values_of(alpha))(Tensor(priorities))
    assert got.dtype == ms.float32 and got.shape == priorities.shape
    want = leaf_of(priorities.astype(np.float32), alpha)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    assert (got.asnumpy() >= TINY).all(), "every leaf positive and normal"
    if alpha == 5.0:  # 1e-8 ** 5 = 1e-40 is subnormal: the leaf floor applies
        assert got.asnumpy()[3] == TINY


# ------------------------------------------------------------------ set_leaves, winning_values
def set_leaves_of(capacity):
    def run(sum_tree, min_tree, slots, values):
        return set_leaves(sum_tree, min_tree, slots, values, capacity)
    return run


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("capacity", [1, 5, 8, 13])
def test_set_leaves_gives_the_trees_of_numpys_assignment(capacity, path):
    rng = np.random.default_rng(capacity)
    model = TreeModel(capacity)
    sum_tree, min_tree = trees_of(model)
    run = on_path(path, set_leaves_of(capacity), (sum_tree, min_tree))
    batch_size = 6  # one graph per capacity: every round writes 6 leaves
    for _ in range(5):
        # Repeated slots carry one value (the contract of set_leaves; winning_values makes it so).
        slots = rng.integers(0, capacity, batch_size).astype(np.int32)
        per_slot = (10.0 ** rng.uniform(-3, 3, capacity)).astype(np.float32)
        total = run(Tensor(slots), Tensor(per_slot[slots]))
        model.set(slots, per_slot[slots])
        np.testing.assert_array_equal(sum_tree.asnumpy(), model.sums)
        np.testing.assert_array_equal(min_tree.asnumpy(), model.mins)
        assert total.shape == () and float(total) == model.sums[1]


@pytest.mark.parametrize("path", PATHS)
def test_winning_values_give_every_repeat_the_last_value(path):
    rng = np.random.default_rng(2)
    run = on_path(path, winning_values)
    for batch_size, high in [(1, 1), (9, 3), (64, 5), (64, 1000)]:
        slots = rng.integers(0, high, batch_size).astype(np.int32)
        values = rng.random(batch_size).astype(np.float32)
        leaves = np.zeros(high, np.float32)
        leaves[slots] = values  # numpy: the last of repeated indexes wins
        got = run(Tensor(slots), Tensor(values))
        np.testing.assert_array_equal(got.asnumpy(), leaves[slots])


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


# ------------------------------------------------------------------ find_prefix, find_slots
def find_prefix_of(capacity):
    def run(sum_tree, targets):
        return find_prefix(sum_tree, targets, capacity)
    return run


def find_slots_of(capacity):
    def run(sum_tree, targets, count):
        return find_slots(sum_tree, targets, count, capacity)
    return run


def searchsorted_slots(leaves, targets) -> np.ndarray:
    """The slot whose interval [sum(leaves[:s]), sum(leaves[:s + 1])) holds each target."""
    return np.searchsorted(np.cumsum(leaves, dtype=np.float64), targets, side="right")


@pytest.mark.parametrize("path", PATHS)
def test_find_prefix_matches_cumsum_and_searchsorted(path):
    rng = np.random.default_rng(4)
    capacity = 13  # 16 leaves, 3 of them past the ring
    run = on_path(path, find_prefix_of(capacity))
    # Integer leaves, zeros among them: every prefix sum is exact in float32, so targets
    # on the boundaries test the half-open intervals, and zero leaves are never found.
    model = TreeModel(capacity)
    model.set(np.arange(capacity), rng.integers(0, 4, capacity).astype(np.float32))
    total = int(model.sums[1])
    targets = np.concatenate([np.arange(total), np.arange(total) + 0.5, np.arange(1, total) - 2.0**-10])
    got = run(Tensor(model.sums), Tensor(targets.astype(np.float32)))
    assert got.dtype == I32
    np.testing.assert_array_equal(got.asnumpy(), searchsorted_slots(model.leaves(), targets))
    # Leaves over three decades: the midpoint of every interval is found (each midpoint is
    # at least 0.05 from a boundary, far beyond float32 rounding of sums below 2000).
    model = TreeModel(capacity)
    model.set(np.arange(capacity), (10.0 ** rng.uniform(-1, 2, capacity)).astype(np.float32))
    leaves = model.leaves().astype(np.float64)
    midpoints = np.cumsum(leaves)[:capacity] - leaves[:capacity] / 2
    got = run(Tensor(model.sums), Tensor(midpoints.astype(np.float32)))
    np.testing.assert_array_equal(got.asnumpy(), np.arange(capacity))
    # Past the total: still a leaf of the tree, which callers clamp.
    got = run(Tensor(model.sums), Tensor(np.array([1, 2, np.inf] * 13, np.float32) * model.sums[1]))
    assert ((got.asnumpy() >= 0) & (got.asnumpy() < 16)).all()


@pytest.mark.parametrize("path", PATHS)
def test_find_slots_matches_searchsorted_and_ends_in_a_stored_slot(path):
    rng = np.random.default_rng(5)
    capacity, count = 13, 9  # 9 stored slots, 7 zero leaves after them
    run = on_path(path, find_slots_of(capacity))
    model = TreeModel(capacity)
    model.set(np.arange(count), rng.integers(1, 4, count).astype(np.float32))
    total = int(model.sums[1])
    targets = np.concatenate([np.arange(total), np.arange(total) + 0.5, [total, total + 0.5, 2 * total, np.inf]])
    got = run(Tensor(model.sums), Tensor(targets.astype(np.float32)), Tensor(count, I32)).asnumpy()
    within = targets < total
    np.testing.assert_array_equal(got[within], searchsorted_slots(model.leaves(), targets[within]))
    assert (got[~within] == count - 1).all(), "at or past the total: the last stored slot"


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


# ------------------------------------------------------------------ sample
def sample_of(path, capacity, sample_size, seed=0):
    def run(key, counter, sum_tree, min_tree, count, beta):
        return priority_sample(sum_tree, min_tree, count, sample_size, beta, capacity, (key, counter))
    return on_path(path, run, random_state(seed))


def importance_weights(leaves, count, slots, beta) -> np.ndarray:
    """The paper's weights: (N * P(i)) ** -beta over their maximum across the stored items."""
    probabilities = leaves[:count].astype(np.float64) / leaves[:count].astype(np.float64).sum()
    weights = (count * probabilities) ** -beta
    return weights[slots] / weights.max()


@pytest.mark.parametrize("path", PATHS)
def test_sample_draws_one_slot_per_stratum_in_proportion_to_its_leaf(path):
    # Leaves 1, 3, 1, 3, ...: with 8 draws stratum j is exactly the mass of slots 2j and
    # 2j + 1, so draw j must be one of them, slot 2j a quarter of the time.
    capacity, sample_size = 16, 8
    model = TreeModel(capacity)
    model.set(np.arange(capacity), np.tile([1.0, 3.0], 8).astype(np.float32))
    run = sample_of(path, capacity, sample_size, seed=7)
    evens, calls = 0, 40
    for _ in range(calls):
        slots, _ = run(*(Tensor(t) for t in (model.sums, model.mins)), Tensor(capacity, I32), Tensor(1.0))
        slots = slots.asnumpy()
        np.testing.assert_array_equal(slots // 2, np.arange(sample_size))
        evens += int((slots % 2 == 0).sum())
    # 320 draws, independent across calls and strata: a binomial with p = 1/4 (expected
    # 80 / 240), so the chi-square of two cells holds. Deterministic with fixed seeds;
    # p < 1e-4 would mean the draw inside a stratum ignores the leaves (even = 1/2 gives p ~ 1e-24).
    draws = calls * sample_size
    assert chisquare([evens, draws - evens], [draws / 4, 3 * draws / 4]).pvalue > 1e-4, evens


@pytest.mark.parametrize("path", PATHS)
def test_sample_finds_stored_slots_within_their_strata_with_the_weights_formula(path):
    rng = np.random.default_rng(8)
    capacity, count, sample_size = CAPACITY, 5, 16  # unfilled: slots 5, 6 (and leaf 7) unstored
    model = TreeModel(capacity)
    model.set(np.arange(count), leaf_of(10.0 ** rng.uniform(-1, 1, count)).astype(np.float32))
    run = sample_of(path, capacity, sample_size, seed=8)
    leaves = model.leaves().astype(np.float64)
    ends = np.cumsum(leaves)
    starts, total = ends - leaves, ends[-1]
    for beta in (0.0, 0.4, 1.0, 0.4):
        slots, weights = run(*(Tensor(t) for t in (model.sums, model.mins)), Tensor(count, I32),
                             Tensor(beta, ms.float32))
        slots, weights = slots.asnumpy(), weights.asnumpy()
        assert slots.dtype == np.int32 and weights.dtype == np.float32
        assert ((slots >= 0) & (slots < count)).all() and (np.diff(slots) >= 0).all()
        # Draw j comes from stratum [j, j + 1) * total / sample_size (float32 slack: 1e-5).
        j = np.arange(sample_size)
        slack = 1e-5 * total
        assert (starts[slots] <= (j + 1) * total / sample_size + slack).all()
        assert (ends[slots] >= j * total / sample_size - slack).all()
        np.testing.assert_allclose(weights, importance_weights(leaves, count, slots, beta), rtol=1e-5)
        assert ((weights > 0) & (weights <= 1)).all()
    # beta as a Python float: a constant of the graph, the same formula.
    slots, weights = run(*(Tensor(t) for t in (model.sums, model.mins)), Tensor(count, I32), 1.0)
    np.testing.assert_allclose(weights.asnumpy(), importance_weights(leaves, count, slots.asnumpy(), 1.0), rtol=1e-5)


@pytest.mark.parametrize("path", PATHS)
def test_sample_from_empty_trees_fails_its_guard(path):
    sum_tree, min_tree = empty_trees(CAPACITY)
    assert_guard_fails(sample_of(path, CAPACITY, 4), sum_tree, min_tree, Tensor(0, I32), Tensor(0.5))


# ------------------------------------------------------------------ insert_priorities
def _insert_priorities(sum_tree, min_tree, rows, max_priority):
    return insert_priorities(sum_tree, min_tree, rows, max_priority, ALPHA, CAPACITY)


@pytest.mark.parametrize("path", PATHS)
def test_insert_priorities_give_the_written_rows_the_largest_priority(path):
    model = TreeModel(CAPACITY)
    sum_tree, min_tree = trees_of(model)
    run = on_path(path, _insert_priorities, (sum_tree, min_tree))
    head, count = 0, 0
    # From empty, up to full and over the end, the whole ring, over the end again; the
    # largest priority grows, or stays below the floor (a leaf of the floor).
    for batch_size, max_priority in [(3, 1.0), (3, 2.5), (3, 0.0), (7, 7.0), (3, 1e-12), (3, 4.0)]:
        rows, head, count = ring_rows_item_by_item(head, count, batch_size, CAPACITY)
        total = run(Tensor(np.array(rows, np.int32)), Tensor(max_priority, ms.float32))
        model.set(rows, leaf_of(np.full(len(rows), max_priority)).astype(np.float32))
        assert_trees(sum_tree, min_tree, model)
        np.testing.assert_allclose(float(total), model.sums[1], rtol=1e-6)


# ------------------------------------------------------------------ update_priorities
def _update_priorities(sum_tree, min_tree, max_priority, count, slots, priorities):
    return update_priorities(sum_tree, min_tree, max_priority, count, slots, priorities, ALPHA, CAPACITY)


def updated(model: TreeModel, max_priority: float, slots, priorities) -> float:
    """The docstring's update: clamp (NaN too), the last of repeated slots wins, the largest
    stored priority grows; the new largest priority is returned."""
    clamped = np.asarray(priorities, np.float32).astype(np.float64)
    clamped = np.where(np.isnan(clamped) | (clamped < FLOOR32), FLOOR32, clamped)
    winners = {}
    for slot, priority in zip(slots, clamped):
        winners[int(slot)] = priority
    model.set(list(winners), leaf_of(list(winners.values())).astype(np.float32))
    return max(max_priority, *winners.values())


@pytest.mark.parametrize("path", PATHS)
def test_update_priorities_write_the_last_of_repeated_slots_and_return_the_largest(path):
    rng = np.random.default_rng(9)
    for count, dtype in [(4, np.float64), (CAPACITY, np.float32)]:  # unfilled, full; priorities of any float
        model = TreeModel(CAPACITY)
        model.set(np.arange(count), np.ones(count, np.float32))
        sum_tree, min_tree = trees_of(model)
        run = on_path(path, _update_priorities, (sum_tree, min_tree))
        max_priority = 1.0
        cases = [([1, 3, 1, 1], [5.0, 2.0, 0.5, 7.0]),  # repeats: 7.0 wins slot 1, 5.0 never counts
                 ([2, 2, 0, 2], [9.0, np.nan, -3.0, 0.0]),  # NaN, negative and 0 count as the floor
                 ([1, 3, 1], [5.0, 2.0, np.nan]),  # a NaN that wins: the floor, never the largest
                 ([0, 1, 2, 3], [1e-12, 6.0, 0.2, 1e6])]
        cases += [(rng.integers(0, count, 4), 10.0 ** rng.uniform(-4, 4, 4)) for _ in range(3)]
        for slots, priorities in cases:
            got = run(Tensor(max_priority, ms.float32), Tensor(count, I32), Tensor(np.asarray(slots, np.int32)),
                      Tensor(np.asarray(priorities, dtype)))
            max_priority = updated(model, max_priority, slots, priorities)
            assert got.dtype == ms.float32
            np.testing.assert_allclose(float(got), max_priority, rtol=1e-6)
            assert_trees(sum_tree, min_tree, model)


UPDATE_VIOLATIONS = {"slot_at_count": [0, 4], "negative_slot": [-1], "slot_past_capacity": [7, 0]}


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in UPDATE_VIOLATIONS),
                                            ("slot_at_count", "compiled")])
def test_update_priorities_out_of_range_fails_its_guard_and_writes_nothing(case, path):
    model = TreeModel(CAPACITY)
    model.set(np.arange(4), np.arange(1, 5, dtype=np.float32))
    sum_tree, min_tree = trees_of(model)
    slots = np.array(UPDATE_VIOLATIONS[case], np.int32)
    assert_guard_fails(on_path(path, _update_priorities, (sum_tree, min_tree)), Tensor(4.0), Tensor(4, I32),
                       Tensor(slots), Tensor(np.full(len(slots), 9.0, np.float32)))
    np.testing.assert_array_equal(sum_tree.asnumpy(), model.sums)
    np.testing.assert_array_equal(min_tree.asnumpy(), model.mins)
