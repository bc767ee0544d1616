"""ops.ring against the cursor contract, item by item (tests.helpers.RingModel), on both paths.

Every column encodes its item number (tests.helpers.encoded_batch), so a torn row, a row of
the wrong item or an unstored row is caught by ``decode``. Each operator is called op by op
("direct") and compiled ("compiled": ``mindspore.jit``, or a user's Cell for ``insert``).
"""
from __future__ import annotations

import itertools
import math

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from mindspore_rl_buffer.ops import (
    gather_ordered,
    get_item,
    insert,
    insert_rows,
    logical_to_physical,
    physical_to_logical,
    random_state,
    sample,
    sample_indices,
    sample_windows,
)
from scipy.stats import chisquare

from tests.helpers import (
    DTYPES,
    PATHS,
    SHAPES,
    RingModel,
    assert_guard_fails,
    decode,
    encoded_batch,
    on_path,
    parameter,
    ring_rows_item_by_item,
)

CAPACITY = 7
I32 = ms.int32


def ring_after(items: int, capacity: int = CAPACITY) -> RingModel:
    """The model after ``items`` encoded items (0, 1, ...) were appended one at a time."""
    model = RingModel(capacity, SHAPES, DTYPES)
    model.insert(encoded_batch(0, items))
    return model


def cursors(model: RingModel):
    return Tensor(model.head, I32), Tensor(model.count, I32)


def stored_ids(model: RingModel) -> np.ndarray:
    """Item numbers in logical order, oldest first (from the model's own row map)."""
    return np.array([model.columns[1][model.row(i)] for i in range(model.count)])


# Rings the read tests run on: unfilled (head 0), full and unwrapped, full and wrapped.
STATES = {"unfilled": 4, "full": 7, "wrapped": 12}


# ------------------------------------------------------------------ insert_rows
# (capacity, batch sizes): directly every size up to twice the capacity and more; compiled,
# where every (batch size, capacity) is a graph of its own, the sizes around one capacity.
INSERT_ROWS_SIZES = {
    "direct": [(capacity, range(1, 2 * capacity + 2)) for capacity in (1, 2, 5)],
    "compiled": [(5, (1, 4, 5, 6, 11))],
}


@pytest.mark.parametrize("path", PATHS)
def test_insert_rows_follows_item_by_item_appends_from_every_state(path):
    run = on_path(path, insert_rows)
    for capacity, batch_sizes in INSERT_ROWS_SIZES[path]:
        # Every state the contract allows: head == 0 until full, any head once full.
        states = [(0, count) for count in range(capacity)] + [(head, capacity) for head in range(capacity)]
        for batch_size in batch_sizes:
            for head, count in states:
                rows, new_head, new_count = run(Tensor(head, I32), Tensor(count, I32), batch_size, capacity)
                want_rows, want_head, want_count = ring_rows_item_by_item(head, count, batch_size, capacity)
                assert rows.dtype == I32 and rows.shape == (min(batch_size, capacity),)
                assert rows.asnumpy().tolist() == want_rows, (head, count, batch_size, capacity)
                assert (int(new_head), int(new_count)) == (want_head, want_count), (head, count, batch_size)


@pytest.mark.parametrize("path", PATHS)
def test_insert_rows_stays_exact_at_the_largest_capacity_and_any_batch_size(path):
    # At capacity 2**30 every int32 intermediate must stay below 2**31: head + count reaches
    # 2**31 - 1 when full, and a naive head + count + j overflows. Batch sizes past 2**31 (a
    # Python int) are reduced before they meet the cursors. Python ints are the model.
    run = on_path(path, insert_rows)
    cases = [(2**30, 2**30 - 1, 2**30, 3), (2**30, 0, 2**30 - 1, 4), (2**30, 5, 2**30, 2**30 - 3),
             (7, 3, 7, 2**31 + 5), (7, 0, 6, 2**40 + 1)]
    for capacity, head, count, batch_size in cases:
        if batch_size > 64 and capacity > 64:
            continue  # the rows of such a batch would be a huge constant; its cursors are checked below
        rows, new_head, new_count = run(Tensor(head, I32), Tensor(count, I32), batch_size, capacity)
        kept = min(batch_size, capacity)
        first = head + count + (batch_size - kept)
        assert rows.asnumpy().tolist() == [(first + j) % capacity for j in range(kept)]
        total = count + batch_size
        want_count = min(total, capacity)
        assert (int(new_head), int(new_count)) == ((head + total - want_count) % capacity, want_count)


# ------------------------------------------------------------------ insert
def _insert(state, action, reward, head, count, new_state, new_action, new_reward):
    return insert([state, action, reward], head, count, [new_state, new_action, new_reward])


# (items already stored, batch size) on a ring of 7, named for the boundary each crosses.
INSERT_CASES = {
    "from_empty": (0, 3),
    "nothing_from_empty": (0, 0),
    "single_item": (4, 1),
    "fills_exactly": (4, 3),
    "crosses_end_before_full": (5, 4),
    "batch_equals_capacity_from_empty": (0, 7),
    "batch_equals_capacity_when_full": (10, 7),
    "larger_than_capacity_from_empty": (0, 9),
    "larger_than_capacity_when_full": (9, 16),
    "when_full": (7, 3),
    "when_full_wraps": (12, 4),
    "nothing_when_full": (10, 0),
}


# Compiled, each case is a graph of its own (new Parameters): the cases of distinct kinds.
COMPILED_INSERT_CASES = ["from_empty", "nothing_when_full", "crosses_end_before_full",
                         "batch_equals_capacity_when_full", "larger_than_capacity_when_full", "when_full_wraps"]


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in INSERT_CASES),
                                            *((case, "compiled") for case in COMPILED_INSERT_CASES)])
def test_insert_writes_like_the_model_and_returns_the_rows_it_wrote(case, path):
    stored, batch_size = INSERT_CASES[case]
    model = ring_after(stored)
    columns = [parameter(column, name) for column, name in zip(model.columns, ("state", "action", "reward"))]
    want_rows, _, _ = ring_rows_item_by_item(model.head, model.count, batch_size, CAPACITY)
    batch = encoded_batch(stored, batch_size)
    rows, head, count = on_path(path, _insert, columns)(*cursors(model), *(Tensor(x) for x in batch))
    model.insert(batch)
    assert (int(head), int(count)) == (model.head, model.count)
    for got, want in zip(columns, model.columns):
        np.testing.assert_array_equal(got.asnumpy(), want)
    # The rows returned are those the newest min(n, capacity) items now occupy, oldest first.
    assert rows.dtype == I32 and rows.asnumpy().tolist() == want_rows
    newest = np.arange(stored + batch_size - len(want_rows), stored + batch_size)
    np.testing.assert_array_equal(decode(*(c.asnumpy()[rows.asnumpy()] for c in columns)), newest)
    # FIFO: oldest first, the stored items are the newest `count` of all offered, intact.
    logical_rows = [model.row(i) for i in range(model.count)]
    np.testing.assert_array_equal(decode(*(c.asnumpy()[logical_rows] for c in columns)),
                                  np.arange(stored + batch_size - model.count, stored + batch_size))


# ------------------------------------------------------------------ index maps
@pytest.mark.parametrize("path", PATHS)
def test_logical_and_physical_indexes_follow_the_contract(path):
    to_physical, to_logical = on_path(path, logical_to_physical), on_path(path, physical_to_logical)
    for capacity in (1, 6):
        for head in range(capacity):
            # Logical order walks the rows from head to the end, then from row 0 up to head.
            walk = list(range(head, capacity)) + list(range(head))
            logical = np.arange(capacity, dtype=np.int32)
            got = to_physical(Tensor(head, I32), Tensor(logical), capacity)
            assert got.dtype == I32 and got.asnumpy().tolist() == walk
            back = to_logical(Tensor(head, I32), Tensor(np.arange(capacity, dtype=np.int32)), capacity)
            assert back.dtype == I32 and back.asnumpy().tolist() == [walk.index(p) for p in range(capacity)]
            # Any shape maps element by element (sample_windows passes a matrix).
            column = to_physical(Tensor(head, I32), Tensor(logical.reshape(-1, 1)), capacity)
            assert column.shape == (capacity, 1) and column.asnumpy()[:, 0].tolist() == walk


# ------------------------------------------------------------------ get_item
def _get_item(state, action, reward, head, count, index):
    return get_item([state, action, reward], head, count, index)


GET_ITEM = {path: on_path(path, _get_item) for path in PATHS}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("state", STATES)
def test_get_item_reads_by_python_index_scalar_or_tensor(state, path):
    model = ring_after(STATES[state])
    columns = [Tensor(column) for column in model.columns]
    count = model.count
    for index in range(-count, count):  # 0 is the oldest, -1 the newest, as in Python
        row = GET_ITEM[path](*columns, *cursors(model), Tensor(index, I32))
        assert [r.shape for r in row] == [(2,), (), (1,)]
        assert decode(*(r.asnumpy() for r in row)) == model.item(index)[1]
    # A tensor of indexes: every index once, negatives included, and repeats.
    index = np.concatenate([np.arange(-count, count), [count - 1, -count, 0, 0]]).astype(np.int32)
    rows = GET_ITEM[path](*columns, *cursors(model), Tensor(index))
    np.testing.assert_array_equal(decode(*rows), [model.item(int(i))[1] for i in index])


# A compiled graph reports a failed assertion about 3 s after the kernel fails (measured on
# this machine: MindSpore's runtime queue logs the failure 3 s later), so every violation
# runs directly and one per operator runs compiled: the guard is the same kernel on both paths.
GET_ITEM_VIOLATIONS = {  # (items stored, index)
    "past_newest": (4, 4),
    "before_oldest": (4, -5),
    "past_newest_when_full": (12, 7),
    "before_oldest_when_full": (12, -8),
    "one_bad_in_a_tensor": (4, [0, -1, 4]),
    "empty": (0, 0),
}


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in GET_ITEM_VIOLATIONS),
                                            ("one_bad_in_a_tensor", "compiled")])
def test_get_item_out_of_range_fails_its_guard(case, path):
    stored, index = GET_ITEM_VIOLATIONS[case]
    model = ring_after(stored)
    assert_guard_fails(on_path(path, _get_item), *(Tensor(c) for c in model.columns), *cursors(model),
                       Tensor(np.asarray(index, np.int32)))


def _get_item_unchecked(state, action, reward, head, count, index):
    return get_item([state, action, reward], head, count, index, check=False)


@pytest.mark.parametrize("path", PATHS)
def test_get_item_without_its_guard_reads_a_stored_row_for_a_stored_index(path):
    """check=False (the direct path checks on the host) drops the guard, not the reading."""
    model = ring_after(STATES["wrapped"])
    index = np.array([-7, -1, 0, 6, 7, -8], np.int32)  # the last two are out of range: no failure
    rows = on_path(path, _get_item_unchecked)(*(Tensor(c) for c in model.columns), *cursors(model), Tensor(index))
    ids = decode(*rows)
    np.testing.assert_array_equal(ids[:4], [model.item(int(i))[1] for i in index[:4]])
    assert set(ids[4:]) <= set(stored_ids(model))


# ------------------------------------------------------------------ sample_indices, sample
def assert_valid_draws(model: RingModel, physical, logical, ordered: bool, replace: bool) -> None:
    physical, logical = physical.asnumpy(), logical.asnumpy()
    assert ((logical >= 0) & (logical < model.count)).all(), logical
    assert physical.tolist() == [model.row(int(i)) for i in logical], "physical row of each logical index"
    if ordered:
        assert (np.diff(logical) >= 0).all(), "ordered: oldest first"
    if not replace:
        assert len(set(logical)) == len(logical), "without replacement: distinct items"


def _sample_indices(key, counter, head, count, sample_size, capacity, ordered, replace):
    return sample_indices(head, count, sample_size, capacity, ordered, replace, (key, counter))


SAMPLE_INDICES = {path: on_path(path, _sample_indices, random_state(3)) for path in PATHS}
ORDER_AND_REPLACE = list(itertools.product((False, True), (True, False)))
ORDER_AND_REPLACE_IDS = [f"{'ordered' if o else 'unordered'}-{'with' if r else 'without'}_replacement"
                         for o, r in ORDER_AND_REPLACE]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("ordered", "replace"), ORDER_AND_REPLACE, ids=ORDER_AND_REPLACE_IDS)
def test_sample_indices_draw_stored_items_at_their_rows(ordered, replace, path):
    for state in STATES:
        model = ring_after(STATES[state])
        for _ in range(10):
            physical, logical = SAMPLE_INDICES[path](*cursors(model), 4, CAPACITY, ordered, replace)
            assert physical.shape == logical.shape == (4,) and physical.dtype == logical.dtype == I32
            assert_valid_draws(model, physical, logical, ordered, replace)
    # Without replacement, as many draws as items: every item once.
    model = ring_after(STATES["wrapped"])
    _, logical = SAMPLE_INDICES[path](*cursors(model), CAPACITY, CAPACITY, ordered, False)
    assert sorted(logical.asnumpy().tolist()) == list(range(CAPACITY))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_sample_indices_with_replacement_are_uniform_over_the_stored_items(ordered, path):
    run = on_path(path, _sample_indices, random_state(11))  # seeded: the draws are fixed
    for state in ("unfilled", "wrapped"):
        model = ring_after(STATES[state])
        physical, logical = run(*cursors(model), 400 * model.count, CAPACITY, ordered, True)
        assert_valid_draws(model, physical, logical, ordered, True)
        # 400 independent draws expected per item: the multinomial chi-square holds exactly.
        # With fixed seeds the test is deterministic; p < 1e-4 would mean a clearly
        # non-uniform draw (drawing over the capacity instead of the count, or only the
        # oldest rows, gives p far below 1e-100).
        counts = np.bincount(logical.asnumpy(), minlength=model.count)
        assert counts.sum() == 400 * model.count
        assert chisquare(counts).pvalue > 1e-4, counts


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.slow
def test_sample_indices_without_replacement_draw_every_subset_alike(ordered, path):
    run = on_path(path, _sample_indices, random_state(12))
    model = ring_after(STATES["wrapped"])
    subsets = {subset: 0 for subset in itertools.combinations(range(CAPACITY), 3)}
    for _ in range(350):
        physical, logical = run(*cursors(model), 3, CAPACITY, ordered, False)
        assert_valid_draws(model, physical, logical, ordered, False)
        subsets[tuple(sorted(logical.asnumpy().tolist()))] += 1
    # 35 subsets of 3 of 7 items, 10 draws expected each (>= 5, so the chi-square
    # approximation holds). Deterministic with fixed seeds; p < 1e-4 would mean some items
    # or pairs are favoured.
    assert len(subsets) == math.comb(CAPACITY, 3)
    assert chisquare(list(subsets.values())).pvalue > 1e-4, subsets


def _sample(key, counter, state, action, reward, head, count, sample_size, ordered, replace):
    return sample([state, action, reward], head, count, sample_size, ordered, replace, (key, counter))


SAMPLE = {path: on_path(path, _sample, random_state(5)) for path in PATHS}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("ordered", "replace"), ORDER_AND_REPLACE, ids=ORDER_AND_REPLACE_IDS)
def test_sample_gathers_the_intact_rows_of_the_items_it_names(ordered, replace, path):
    for state in STATES:
        model = ring_after(STATES[state])
        for _ in range(5):
            logical, rows = SAMPLE[path](*(Tensor(c) for c in model.columns), *cursors(model), 4, ordered, replace)
            assert [r.shape for r in rows] == [(4, 2), (4,), (4, 1)]
            logical = logical.asnumpy()
            np.testing.assert_array_equal(decode(*rows), [model.item(int(i))[1] for i in logical])
            if ordered:
                assert (np.diff(logical) >= 0).all()
            if not replace:
                assert len(set(logical)) == 4


SAMPLE_VIOLATIONS = {  # (items stored, sample size, with replacement)
    "empty": (0, 1, True),
    "empty_without_replacement": (0, 3, False),
    "too_few_without_replacement": (2, 3, False),
}


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in SAMPLE_VIOLATIONS),
                                            ("too_few_without_replacement", "compiled")])
def test_sample_indices_fail_their_guard_without_enough_items(case, path):
    stored, sample_size, replace = SAMPLE_VIOLATIONS[case]
    model = ring_after(stored)
    run = on_path(path, _sample_indices, random_state(0))
    assert_guard_fails(run, *cursors(model), sample_size, CAPACITY, False, replace)


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in SAMPLE_VIOLATIONS), ("empty", "compiled")])
def test_sample_fails_its_guard_without_enough_items(case, path):
    stored, sample_size, replace = SAMPLE_VIOLATIONS[case]
    model = ring_after(stored)
    run = on_path(path, _sample, random_state(0))
    assert_guard_fails(run, *(Tensor(c) for c in model.columns), *cursors(model), sample_size, False, replace)


# ------------------------------------------------------------------ sample_windows
def _sample_windows(key, counter, head, count, sample_size, num_steps, capacity):
    return sample_windows(head, count, sample_size, num_steps, capacity, (key, counter))


@pytest.mark.parametrize("path", PATHS)
def test_sample_windows_are_consecutive_uniform_and_never_cross_the_write_position(path):
    run = on_path(path, _sample_windows, random_state(9))
    sample_size = 1500  # one graph per window length
    for state, num_steps in [("wrapped", 3), ("unfilled", 2), ("wrapped", 7)]:  # 5, 3 and 1 start(s)
        model = ring_after(STATES[state])
        starts_allowed = model.count - num_steps + 1  # a window ends at the newest item at the latest
        rows, logical = run(*cursors(model), sample_size, num_steps, CAPACITY)
        assert rows.shape == logical.shape == (sample_size, num_steps) and rows.dtype == logical.dtype == I32
        logical, rows = logical.asnumpy(), rows.asnumpy()
        np.testing.assert_array_equal(logical, logical[:, :1] + np.arange(num_steps))
        assert ((logical[:, 0] >= 0) & (logical[:, -1] < model.count)).all()
        np.testing.assert_array_equal(rows, np.vectorize(model.row)(logical))
        if starts_allowed > 1:
            # 300 or 500 independent starts expected per allowed start: the multinomial
            # chi-square holds. Deterministic with fixed seeds; p < 1e-4 would mean favoured starts.
            counts = np.bincount(logical[:, 0], minlength=starts_allowed)
            assert chisquare(counts).pvalue > 1e-4, counts


WINDOW_VIOLATIONS = {  # (items stored, steps per window)
    "fewer_rows_than_steps": (2, 3),
    "empty": (0, 1),
    "more_steps_than_capacity": (12, 8),
}


@pytest.mark.parametrize(("case", "path"), [*((case, "direct") for case in WINDOW_VIOLATIONS),
                                            ("fewer_rows_than_steps", "compiled")])
def test_sample_windows_fail_their_guard_without_enough_rows(case, path):
    stored, num_steps = WINDOW_VIOLATIONS[case]
    model = ring_after(stored)
    assert_guard_fails(on_path(path, _sample_windows, random_state(0)), *cursors(model), 4, num_steps, CAPACITY)


# ------------------------------------------------------------------ gather_ordered
def _gather_ordered(state, action, reward, head):
    return gather_ordered([state, action, reward], head)


@pytest.mark.parametrize("path", PATHS)
def test_gather_ordered_returns_every_row_oldest_first(path):
    run = on_path(path, _gather_ordered)
    for state in ("empty", *STATES):
        model = ring_after(STATES.get(state, 0))
        columns = run(*(Tensor(c) for c in model.columns), Tensor(model.head, I32))
        assert [c.shape for c in columns] == [(CAPACITY, 2), (CAPACITY,), (CAPACITY, 1)]
        ids = decode(*columns)
        np.testing.assert_array_equal(ids[: model.count], stored_ids(model))
        # Unfilled: the rest are the rows past the stored ones, in physical order.
        np.testing.assert_array_equal(ids[model.count:], model.columns[1][model.count:])
