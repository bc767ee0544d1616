"""PriorityReplayBuffer and its tree operators against the numpy model, directly and in a Cell."""
from __future__ import annotations

import re

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn
from mindspore.graph import api as ms_api
from mindspore_rl_buffer.ops import PRIORITY_FLOOR, tree_size
from scipy.stats import chisquare

from mindspore_rl_buffer import PriorityReplayBuffer, create_buffer
from tests.helpers import (
    DTYPES,
    MS_DTYPES,
    NAMES,
    SHAPES,
    ConstantBetaSample,
    PriorityModel,
    decode,
    encoded_batch,
)

ALPHA = 0.7


def make(capacity=6, sample_size=5, alpha=ALPHA, **kwargs) -> PriorityReplayBuffer:
    return PriorityReplayBuffer(alpha, capacity, sample_size, SHAPES, MS_DTYPES, names=NAMES, **kwargs)


def state_of(prb: PriorityReplayBuffer):
    arrays = [c.asnumpy().copy() for c in prb.columns]
    arrays += [prb.sum_tree.asnumpy().copy(), prb.min_tree.asnumpy().copy(), prb.max_priority.asnumpy().copy()]
    return arrays, int(prb.head), int(prb.count)


def assert_same_state(before, after) -> None:
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]


def assert_matches(prb: PriorityReplayBuffer, model: PriorityModel) -> None:
    """Ring and cursors equal; leaves as the model says; every inner node made of its children."""
    capacity, size = model.capacity, tree_size(model.capacity)
    assert (int(prb.head), int(prb.count)) == (model.head, model.count)
    for got, want in zip(prb.columns, model.columns):
        np.testing.assert_array_equal(got.asnumpy(), want)
    sums, mins = prb.sum_tree.asnumpy(), prb.min_tree.asnumpy()
    leaves = model.leaves()
    np.testing.assert_allclose(sums[size:size + capacity], leaves, rtol=2e-6)
    assert (sums[size + capacity:] == 0).all() and sums[0] == 0
    np.testing.assert_allclose(mins[size:size + capacity], np.where(leaves > 0, leaves, np.inf), rtol=2e-6)
    assert (mins[size + capacity:] == np.inf).all() and mins[0] == np.inf
    # float32, recomputed from the children: exactly their float32 sum and minimum.
    np.testing.assert_array_equal(sums[1:size], sums[2::2] + sums[3::2])
    np.testing.assert_array_equal(mins[1:size], np.minimum(mins[2::2], mins[3::2]))
    np.testing.assert_allclose(sums[1], leaves.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(prb.max_priority), model.max_priority, rtol=1e-6)
    assert int(prb.size()) == model.count and bool(prb.full()) == (model.count == capacity)


# ---------------------------------------------------------------------- the trees
def test_trees_match_the_model_after_random_inserts_and_updates():
    rng = np.random.default_rng(7)
    prb, model, start = make(), PriorityModel(ALPHA, 6, SHAPES, DTYPES), 0
    assert_matches(prb, model)
    for step in range(15):
        if step % 3 == 0:
            n = [1, 4, 9, 0][(step // 3) % 4]  # from empty, crossing the end, overflowing, nothing
            prb.insert(encoded_batch(start, n))
            model.insert(encoded_batch(start, n))
            start += n
        else:
            # Repeated slots, zeros (clamped to the floor) and values spanning 6 decades.
            n = [3, 8][step % 2]
            slots = rng.integers(0, model.count, n).astype(np.int32)
            priorities = (10.0 ** rng.uniform(-3, 3, n) * (rng.random(n) > 0.2)).astype(np.float32)
            prb.update_priorities(slots, priorities)
            model.update(slots, priorities)
        assert_matches(prb, model)


# ---------------------------------------------------------------------- sampling
def test_sampling_frequencies_follow_priority_to_the_alpha():
    ms.set_seed(21)
    prb = make(capacity=8, sample_size=4096)
    model = PriorityModel(ALPHA, 8, SHAPES, DTYPES)
    prb.insert(encoded_batch(0, 11))  # wrapped: head at 3
    model.insert(encoded_batch(0, 11))
    slots = np.arange(8, dtype=np.int32)
    priorities = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 1e-6, 3.0, 0.25], np.float32)
    prb.update_priorities(slots, priorities)
    model.update(slots, priorities)
    counts = np.zeros(8)
    for beta in (0.0, 0.4, 1.0):
        indices, weights, *transitions = prb.sample(beta)
        indices = indices.asnumpy()
        assert (np.diff(indices) >= 0).all(), "stratified targets increase, so do their slots"
        # Every row intact, from the slot it names.
        np.testing.assert_array_equal(decode(*transitions), model.columns[1][indices])
        np.testing.assert_allclose(weights.asnumpy(), model.weights(indices, beta), rtol=1e-5)
        counts += np.bincount(indices, minlength=8)
    expected = counts.sum() * model.probabilities()
    # Slot 5 has P ~ 1e-5 (expected ~0.1 draws): kept out of the chi-square, which needs
    # expected counts of at least ~5. Stratified draws vary less than independent ones,
    # so the multinomial chi-square bound is conservative; with a fixed seed the test is
    # deterministic, and p < 1e-4 would mean frequencies clearly off p ** alpha (with
    # alpha = 1 instead of 0.7, p is below 1e-100).
    assert counts[5] <= 1
    kept = np.arange(8) != 5
    assert chisquare(counts[kept], expected[kept] * counts[kept].sum() / expected[kept].sum()).pvalue > 1e-4


def test_stratified_sampling_draws_once_per_stratum():
    """Equal priorities and sample_size == size: each stratum holds exactly one item."""
    ms.set_seed(6)
    prb = make(capacity=8, sample_size=8)
    prb.insert(encoded_batch(0, 8))
    for _ in range(3):
        indices, weights, *_ = prb.sample(1.0)
        np.testing.assert_array_equal(indices.asnumpy(), np.arange(8))
        np.testing.assert_array_equal(weights.asnumpy(), np.ones(8, np.float32))


def test_importance_weights_match_the_formula_and_are_at_most_one():
    ms.set_seed(4)
    prb, model = make(capacity=5, sample_size=64), PriorityModel(ALPHA, 5, SHAPES, DTYPES)
    prb.insert(encoded_batch(0, 3))  # not full: N = 3
    model.insert(encoded_batch(0, 3))
    prb.update_priorities(np.array([0, 2], np.int32), np.array([9.0, 0.0], np.float32))
    model.update([0, 2], [9.0, 0.0])
    for beta in (0.0, 0.5, 1.0, Tensor(0.7, ms.float32)):
        indices, weights, *_ = prb.sample(beta)
        indices, weights = indices.asnumpy(), weights.asnumpy()
        assert (indices < 3).all()
        np.testing.assert_allclose(weights, model.weights(indices, float(beta)), rtol=1e-5)
        assert (weights > 0).all() and (weights <= 1).all()
    # The floored slot 2 (priority 1e-8) still gets a finite weight, the largest: 1.
    np.testing.assert_allclose(model.weights(np.array([2]), 1.0), [1.0])
    # Adversarial neighbours: 1e-8 beside 1e8 (alpha 0.7: leaves ~2.5e-6 beside ~4e5).
    prb.update_priorities(np.arange(3, dtype=np.int32), np.array([1e8, 1e-8, 1e8], np.float32))
    indices, weights, *transitions = prb.sample(1.0)
    indices, weights = indices.asnumpy(), weights.asnumpy()
    assert set(indices) == {0, 2}  # the 1e-8 item has P ~ 3e-12
    np.testing.assert_array_equal(decode(*transitions), indices)
    assert np.isfinite(weights).all() and (weights > 0).all()


# ---------------------------------------------------------------------- updates
def test_repeated_indexes_last_wins_and_overwritten_slots_get_the_largest_priority():
    prb, model = make(capacity=4), PriorityModel(ALPHA, 4, SHAPES, DTYPES)
    prb.insert(encoded_batch(0, 4))
    model.insert(encoded_batch(0, 4))
    for slots, priorities in [([1, 3, 1, 1], [5.0, 2.0, 0.5, 7.0]), ([2, 2, 0, 2], [9.0, 1.0, 0.0, 3.0]),
                              ([0, 1, 2, 3], [0.01, 6.0, 0.2, 0.3]), ([0] * 4, [1.0, 2.0, 3.0, 0.5])]:
        prb.update_priorities(np.array(slots, np.int32), np.array(priorities, np.float32))
        model.update(slots, priorities)
        assert_matches(prb, model)
    # The losers' 9.0 never counted; lowering priorities does not lower the maximum.
    assert float(prb.max_priority) == 7.0
    for start, n in [(4, 1), (5, 2), (7, 6)]:  # overwrite the oldest: slot 0, then 1-2, then all (wrapping)
        prb.insert(encoded_batch(start, n))
        model.insert(encoded_batch(start, n))
        assert_matches(prb, model)
    assert model.priorities.tolist() == [7.0] * 4


# ---------------------------------------------------------------------- inside a Cell
class Learner(nn.Cell):
    """A user's step: insert, update the priorities of earlier samples, sample, in one graph."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, reward, indices, priorities, beta):
        _ = self.buffer.insert([state, action, reward])
        self.buffer.update_priorities(indices, priorities)
        indices, weights, *transitions = self.buffer.sample(beta)
        return indices, weights, transitions, self.buffer.size(), self.buffer.full(), self.buffer.get_item(-1)


def test_inside_a_cell_insert_update_and_sample_agree_with_the_model():
    ms.set_seed(2)
    rng = np.random.default_rng(2)
    prb, model, start = make(capacity=6, sample_size=8), PriorityModel(ALPHA, 6, SHAPES, DTYPES), 0
    learner = Learner(prb)
    for step in range(6):
        batch = encoded_batch(start, 2)
        model.insert(batch)
        start += 2
        slots = rng.integers(0, model.count, 3).astype(np.int32)
        priorities = (10.0 ** rng.uniform(-2, 2, 3)).astype(np.float32)
        model.update(slots, priorities)
        beta = 0.2 * step
        indices, weights, transitions, size, full, newest = learner(
            *(Tensor(x) for x in batch), Tensor(slots), Tensor(priorities), Tensor(beta, ms.float32))
        assert_matches(prb, model)
        assert (int(size), bool(full), int(decode(*newest))) == (model.count, model.count == 6, start - 1)
        indices = indices.asnumpy()
        assert ((indices >= 0) & (indices < model.count)).all()
        np.testing.assert_array_equal(decode(*transitions), model.columns[1][indices])
        np.testing.assert_allclose(weights.asnumpy(), model.weights(indices, beta), rtol=1e-5)


def test_sampling_an_empty_buffer_inside_a_cell_fails_loudly():
    class Sampler(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            return self.buffer.sample(0.5)

    prb = make()
    with pytest.raises(RuntimeError, match="assert failed"):  # one Assert kernel: see ops/ring.py
        Sampler(prb)()
    assert int(prb.size()) == 0  # the buffer itself keeps working (as ReplayBuffer's test shows in full)


def test_update_out_of_range_inside_a_cell_fails_loudly():
    class Updater(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, indices, priorities):
            self.buffer.update_priorities(indices, priorities)
            return self.buffer.size()

    prb = make()
    prb.insert(encoded_batch(0, 2))
    before = state_of(prb)
    with pytest.raises(RuntimeError, match="assert failed"):
        Updater(prb)(Tensor(np.array([0, 2], np.int32)), Tensor(np.full(2, 7.0, np.float32)))
    assert_same_state(before, state_of(prb))  # the writes depend on the assertion: none ran


# ---------------------------------------------------------------------- reset, compile, config
def test_reset_returns_to_the_constructed_state():
    fresh = state_of(make())
    prb, model = make(), PriorityModel(ALPHA, 6, SHAPES, DTYPES)
    prb.insert(encoded_batch(0, 9))  # wrapped: head != 0
    model.insert(encoded_batch(0, 9))
    prb.update_priorities(np.array([1, 2], np.int32), np.array([30.0, 0.0], np.float32))
    model.update([1, 2], [30.0, 0.0])
    assert int(prb.head) != 0 and float(prb.max_priority) == 30.0
    prb.reset()
    model.reset()
    after = state_of(prb)
    for got, want in zip(after[0][3:], fresh[0][3:]):  # trees and max priority; columns keep old rows
        np.testing.assert_array_equal(got, want)
    assert after[1:] == (0, 0)
    prb.insert(encoded_batch(50, 4))
    model.insert(encoded_batch(50, 4))
    assert_matches(prb, model)


def test_changing_beta_and_data_does_not_recompile():
    prb = make()
    prb.insert(encoded_batch(0, 3))
    prb.sample(0.4)
    prb.update_priorities(np.array([0, 1, 2, 0, 1], np.int32), np.ones(5, np.float32))
    compiled = len(ms_api.ms_compile_cache)
    for step in range(6):
        prb.insert(encoded_batch(3 + 3 * step, 3))
        indices, _, *_ = prb.sample(0.4 + 0.1 * step)
        prb.update_priorities(indices, np.full(5, step + 1.0, np.float32))
    assert len(ms_api.ms_compile_cache) == compiled


def test_create_buffer_builds_it_from_a_config_entry():
    entry = {"number": 1, "type": PriorityReplayBuffer, "alpha": 0.6, "capacity": 1000,
             "data_shape": [(4,), (1,)], "data_type": [ms.float32, ms.int32], "sample_size": 32, "seed": 3}
    prb = create_buffer(entry)
    assert isinstance(prb, PriorityReplayBuffer)
    assert (prb.alpha, prb.capacity, prb.sample_size) == (0.6, 1000, 32)
    assert prb.sum_tree.shape == (2048,)
    nested = create_buffer({"type": "PriorityReplayBuffer", "params": {**{k: v for k, v in entry.items()
                                                                           if k not in ("number", "type")}}})
    assert nested.alpha == 0.6
    assert PRIORITY_FLOOR == 1e-8


@pytest.mark.parametrize("change, error, message", [
    ({"alpha": None}, ValueError, r"the key 'alpha' is missing"),
    ({"alpha": -0.5}, ValueError, r"'alpha' must be a finite float >= 0, but got -0.5"),
    ({"alpha": "0.6"}, TypeError, r"'alpha' must be a float, but got str"),
    ({"ordered": True}, ValueError, r"the key 'ordered' does not apply to PriorityReplayBuffer"),
    ({"alpah": 0.6}, ValueError, r"unknown key 'alpah'; did you mean alpha\?"),
])
def test_bad_config_entries_name_the_key(change, error, message):
    entry = {"type": "PriorityReplayBuffer", "alpha": 0.6, "capacity": 10, "data_shape": [(1,)],
             "data_type": ["float32"], "sample_size": 4, **change}
    entry = {key: value for key, value in entry.items() if value is not None}
    with pytest.raises(error, match=message):
        create_buffer(entry)


def test_alpha_is_unknown_to_the_uniform_buffer():
    with pytest.raises(ValueError, match=r"the key 'alpha' does not apply to ReplayBuffer"):
        create_buffer({"type": "ReplayBuffer", "alpha": 0.6, "capacity": 10, "data_shape": [(1,)],
                       "data_type": ["float32"], "sample_size": 4})


# ---------------------------------------------------------------------- bad input
GOOD = encoded_batch(0, 2)
I32, F32 = np.int32, np.float32

BAD_CALLS = [
    ("update an index past the stored", lambda b: b.update_priorities(np.array([0, 3], I32), np.ones(2, F32)),
     IndexError, r"in \[0, 3\) .* but got 3"),
    ("update a negative index", lambda b: b.update_priorities(np.array([-1], I32), np.ones(1, F32)),
     IndexError, "but got -1"),
    ("update float indices", lambda b: b.update_priorities(np.array([0.0], F32), np.ones(1, F32)),
     TypeError, "'indices' must be a 1-D int tensor, but got a tensor of dtype float32"),
    ("update int priorities", lambda b: b.update_priorities(np.array([0], I32), np.ones(1, I32)),
     TypeError, "'priorities' must be a 1-D float tensor"),
    ("update with a list", lambda b: b.update_priorities([0, 1], np.ones(2, F32)), TypeError,
     "'indices' must be a 1-D int tensor, but got list"),
    ("update 2-D indices", lambda b: b.update_priorities(np.zeros((1, 2), I32), np.ones((1, 2), F32)),
     ValueError, r"a 1-D int tensor, but got a tensor of shape \(1, 2\)"),
    ("update shapes differ", lambda b: b.update_priorities(np.array([0, 1], I32), np.ones(3, F32)),
     ValueError, r"the shape of 'indices' \(2,\), but got \(3,\)"),
    ("update a negative priority", lambda b: b.update_priorities(np.array([0], I32), np.array([-1.0], F32)),
     ValueError, "'priorities' must be finite and >= 0, but got -1.0"),
    ("update a NaN priority", lambda b: b.update_priorities(Tensor(np.array([0], I32)), Tensor([np.nan])),
     ValueError, "but got nan"),
    ("update an infinite priority", lambda b: b.update_priorities(np.array([1], I32), np.array([np.inf], F32)),
     ValueError, "but got inf"),
    ("sample a negative beta", lambda b: b.sample(-0.1), ValueError, "'beta' must be a finite float >= 0"),
    ("sample a beta float32 takes as infinite", lambda b: b.sample(1e39), ValueError,
     r"'beta' must be a finite float >= 0 of at most 3.4028235e\+38 \(float32's largest\), but got 1e\+39"),
    ("sample a NaN beta", lambda b: b.sample(float("nan")), ValueError, "'beta' must be a finite float"),
    ("sample an int beta past float64", lambda b: b.sample(10**400), ValueError,
     r"'beta' must be a finite float >= 0 of at most 3.4028235e\+38 \(float32's largest\), "
     r"but got 10{17}\.\.\.0{19}\."),
    ("sample a bool beta", lambda b: b.sample(True), TypeError, "'beta' must be a float, but got bool"),
    ("sample a string beta", lambda b: b.sample("1"), TypeError, "'beta' must be a float, but got str"),
    ("sample_with_indices", lambda b: b.sample_with_indices(), TypeError, r"use sample\(beta\)"),
    ("insert a wrong dtype", lambda b: b.insert([GOOD[0].astype(np.float64), GOOD[1], GOOD[2]]), ValueError,
     "dtype of column 'state' must be Float32"),
]


@pytest.fixture(scope="module")
def filled():
    """One buffer for the whole table: compiling a fresh one per case would take ~1.5 s each.
    Sharing cannot hide a change: every case compares the whole state before and after."""
    ms.set_context(mode=ms.GRAPH_MODE)
    prb = make()
    prb.insert(encoded_batch(0, 3))
    prb.update_priorities(np.array([0, 2], I32), np.array([2.0, 0.5], F32))
    return prb


@pytest.mark.parametrize("name, call, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_and_leaves_the_buffer_unchanged(filled, name, call, error, message):
    prb = filled
    before = state_of(prb)
    with pytest.raises(error, match=message):
        call(prb)
    assert_same_state(before, state_of(prb))
    prb.update_priorities(np.array([1], I32), np.array([3.0], F32))  # and it keeps working
    assert set(decode(*prb.sample(0.5)[2:])) <= {0, 1, 2}
    assert float(prb.sum_tree.asnumpy()[tree_size(6) + 1]) == pytest.approx(3.0 ** ALPHA)


def test_sampling_an_empty_buffer_is_refused():
    prb = make()
    with pytest.raises(ValueError, match="the buffer is empty"):
        prb.sample(0.4)
    with pytest.raises(IndexError, match=r"in \[0, 0\)"):
        prb.update_priorities(np.array([0], I32), np.ones(1, F32))
    prb.update_priorities(np.zeros(0, I32), np.zeros(0, F32))  # nothing to do: no error, no change
    assert state_of(prb)[1:] == (0, 0)


@pytest.mark.parametrize("alpha, error, message", [
    (-1.0, ValueError, r"For 'PriorityReplayBuffer', 'alpha' must be a finite float >= 0, but got -1.0"),
    (1e39, ValueError, r"For 'PriorityReplayBuffer', 'alpha' must be a finite float >= 0 of at most 3.4028235e\+38"),
    (float("inf"), ValueError, "but got inf"),
    (True, TypeError, "'alpha' must be a float, but got bool"),
    ("0.6", TypeError, "'alpha' must be a float, but got str"),
    (10**400, ValueError, r"'alpha' must be a finite float >= 0 of at most 3.4028235e\+38 .*"
                          r"but got 10{17}\.\.\.0{19}\.$"),
])
def test_bad_alpha(alpha, error, message):
    with pytest.raises(error, match=message):
        make(alpha=alpha)


# ------------------------------------------------ priorities that would overflow float32
class Updater(nn.Cell):
    """A user's graph that sets priorities: the graph path, where nothing is checked on the host."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, indices, priorities):
        return self.buffer.update_priorities(indices, priorities)


class Sampler(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, beta):
        return self.buffer.sample(beta)


@pytest.mark.parametrize("dtype", [ms.float64, ms.float16, ms.int32])
def test_in_a_graph_a_beta_tensor_of_another_dtype_gives_float32_weights(dtype):
    prb = make()
    prb.insert(encoded_batch(0, 6))
    prb.update_priorities(np.arange(6, dtype=I32), np.arange(1, 7, dtype=F32))
    slots, weights = Sampler(prb)(Tensor(2, dtype))[:2]
    assert weights.dtype == ms.float32
    leaves = prb.sum_tree.asnumpy()[tree_size(6):][slots.asnumpy()]
    np.testing.assert_allclose(weights.asnumpy(), (prb.min_tree.asnumpy()[1] / leaves) ** 2, rtol=1e-5)


@pytest.mark.parametrize("beta", ["0.4", True, None, -1.0, float("inf"), float("nan")])
def test_a_constant_beta_is_checked_when_the_graph_compiles_as_a_direct_call_checks_it(beta):
    # A str beta failed inside MindSpore (Failed calling Pow with "exponent=String"); True and -1.0 were taken.
    prb = make()
    prb.insert(encoded_batch(0, 6))
    with pytest.raises((TypeError, ValueError)) as direct:
        prb.sample(beta)
    with pytest.raises(direct.type) as compiled:
        ConstantBetaSample(prb, beta)()
    assert str(compiled.value).splitlines()[0] == str(direct.value)


def test_in_a_graph_a_beta_in_range_samples_and_a_tensor_or_mutable_beta_is_not_checked():
    prb = make()
    prb.insert(encoded_batch(0, 6))
    prb.update_priorities(np.arange(6, dtype=I32), np.arange(1, 7, dtype=F32))
    for beta in (0.0, 2, 0.5):
        assert ConstantBetaSample(prb, beta)().shape == (5,)
    assert float(Sampler(prb)(ms.mutable(0.0))[1].asnumpy().min()) == 1.0  # known only when the graph runs
    assert Sampler(prb)(Tensor(-1.0, ms.float32))[1].shape == (5,)  # taken as given: pass a beta >= 0
    with pytest.raises(TypeError) as compiled:
        Sampler(prb)(ms.mutable(True))
    assert str(compiled.value).splitlines()[0] == "For 'sample', 'beta' must be a float, but got bool."


def test_a_bfloat16_beta_tensor_is_taken_by_its_value_in_a_direct_call():
    prb = make()
    prb.insert(encoded_batch(0, 6))
    prb.update_priorities(np.arange(6, dtype=I32), np.arange(1, 7, dtype=F32))
    slots, weights = prb.sample(Tensor(0.5, ms.bfloat16))[:2]  # 0.5 is exact in bfloat16
    leaves = prb.sum_tree.asnumpy()[tree_size(6):][slots.asnumpy()]
    np.testing.assert_allclose(weights.asnumpy(), (prb.min_tree.asnumpy()[1] / leaves) ** 0.5, rtol=1e-5)


def test_an_empty_update_is_nothing_to_do_in_a_graph_too():
    prb = make()
    prb.insert(encoded_batch(0, 3))
    prb.update_priorities(np.array([0, 2], I32), np.array([2.0, 0.5], F32))
    before = state_of(prb)
    top = Updater(prb)(Tensor(np.zeros(0, I32)), Tensor(np.zeros(0, F32)))
    assert float(top) == 2.0
    assert_same_state(before, state_of(prb))


@pytest.mark.parametrize("in_graph", [False, True])
def test_priorities_of_shape_n_by_1_are_taken_as_msrl_s_kernel_took_them(in_graph):
    """TD errors of MindSpore Reinforcement's (1,) reward column come as (n, 1)."""
    prbs = [make(), make()]
    for prb in prbs:
        prb.insert(encoded_batch(0, 6))
    slots, values = np.array([4, 1, 3], I32), np.array([0.5, 3.0, 2.0], F32)
    def update(prb, *args):
        return Updater(prb)(*map(Tensor, args)) if in_graph else prb.update_priorities(*args)

    update(prbs[0], slots, values)
    update(prbs[1], slots, values.reshape(3, 1))
    assert_same_state(state_of(prbs[0]), state_of(prbs[1]))
    with pytest.raises(ValueError, match=r"'priorities' must be a 1-D float tensor, but got a tensor of shape "
                                         r"\(3, 2\)"):
        update(prbs[1], slots, np.ones((3, 2), F32))


def draw_counts(prb, draws):
    counts = np.zeros(prb.capacity)
    for _ in range(draws):
        counts += np.bincount(prb.sample(1.0)[0].asnumpy(), minlength=prb.capacity)
    return counts


@pytest.mark.parametrize("alpha, priorities", [
    (1.0, [3e38, 3e38, 1.0, 1.0]),
    (10.0, [1e5, 1.0, 1.0, 1.0]),
    (1.0, [np.inf, 2.0, 1.0, 1.0]),
    (0.5, [np.nan, 4.0, 1.0, 1.0]),
])
def test_priorities_that_overflow_are_clamped_in_a_graph_and_sampling_follows_the_model(alpha, priorities):
    ms.set_seed(31)
    prb, model = make(capacity=4, sample_size=400, alpha=alpha), PriorityModel(alpha, 4, SHAPES, DTYPES)
    prb.insert(encoded_batch(0, 4))
    model.insert(encoded_batch(0, 4))
    slots, values = np.arange(4, dtype=np.int32), np.array(priorities, np.float32)
    Updater(prb)(Tensor(slots), Tensor(values))
    model.update(slots, values)
    sums, mins = prb.sum_tree.asnumpy(), prb.min_tree.asnumpy()
    assert np.isfinite(sums).all() and np.isfinite(float(prb.max_priority)), "no inf or NaN in any node"
    assert np.isfinite(mins[1:8]).all()
    np.testing.assert_allclose(sums[4:8], model.leaves(), rtol=1e-6)
    counts, expected = draw_counts(prb, 10), model.probabilities()
    # Slots whose probability is below 1e-6 must never be drawn; the others follow the model
    # (4,000 stratified draws, fixed seed: p < 1e-4 would mean clearly wrong frequencies).
    rare = expected < 1e-6
    assert counts[rare].sum() == 0
    if (~rare).sum() > 1:
        assert chisquare(counts[~rare], expected[~rare] / expected[~rare].sum() * counts.sum()).pvalue > 1e-4
    # Priorities back to 1, four new items: the trees hold no trace of the overflow.
    Updater(prb)(Tensor(slots), Tensor(np.ones(4, np.float32)))
    model.update(slots, np.ones(4))
    prb.insert(encoded_batch(4, 4))
    model.insert(encoded_batch(4, 4))
    np.testing.assert_allclose(prb.sum_tree.asnumpy()[4:8], model.leaves(), rtol=1e-6)
    counts = draw_counts(prb, 4)
    assert chisquare(counts).pvalue > 1e-4, "uniform again once every priority is equal"


@pytest.mark.parametrize("alpha, priority, dtype", [
    (1.0, 3e38, np.float32), (10.0, 1e5, np.float32), (1.0, 1e39, np.float64), (0.0, 1e39, np.float64),
])
def test_a_direct_update_refuses_a_priority_that_would_overflow_naming_the_largest_accepted(alpha, priority, dtype):
    prb = make(capacity=4, alpha=alpha)
    prb.insert(encoded_batch(0, 4))
    before = state_of(prb)
    largest = min(2.0**126, (2.0**96) ** (1 / alpha) if alpha else np.inf)
    message = f"'priorities' must be at most {re.escape(f'{largest:.6g}')} .* but got {re.escape(f'{priority:.6g}')}"
    with pytest.raises(ValueError, match=message):
        prb.update_priorities(np.arange(2, dtype=np.int32), np.array([1.0, priority], dtype))
    assert_same_state(before, state_of(prb))
    accepted = np.nextafter(np.float32(largest), np.float32(0))
    prb.update_priorities(np.array([0], np.int32), np.array([accepted], np.float32))  # just below: taken
    assert np.isfinite(prb.sum_tree.asnumpy()).all()


def test_an_int64_slot_past_int32_is_refused_in_a_graph_not_cut_to_another_slot():
    prb = make(capacity=8)
    prb.insert(encoded_batch(0, 5))
    before = state_of(prb)
    with pytest.raises(RuntimeError, match="assert failed"):
        Updater(prb)(Tensor(np.array([2**32 + 1], np.int64)), Tensor(np.array([5.0], np.float32)))
    assert_same_state(before, state_of(prb))
    with pytest.raises(IndexError, match=f"but got {2**32 + 1}"):  # and directly, on the host
        prb.update_priorities(np.array([2**32 + 1], np.int64), np.array([5.0], np.float32))
