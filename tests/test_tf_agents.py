"""TF-Agents' own test scenarios, written afresh against the TF-Agents face.

Each test names the case of TF-Agents' ``tf_uniform_replay_buffer_test.py`` (against
``TrajectoryReplayBuffer``) or ``py_replay_buffers_test.py`` (against
``PyUniformReplayBuffer``) it mirrors, and expects the values that case expects. Where the
face differs on purpose ("Differences" in docs/migrating/tf-agents.md), the test holds our
behaviour and says why. Then the deterministic pass's rules beyond TF-Agents' tests (short
windows, ``dataset_drop_remainder``, ``dataset_window_shift``, wraparound) and the item ids.
"""
from __future__ import annotations

import collections

import mindspore as ms
import numpy as np
import optree
import pytest

from mindspore_rl_buffer import PyUniformReplayBuffer, TensorSpec, TrajectoryReplayBuffer
from mindspore_rl_buffer.specs import numpy_dtype
from mindspore_rl_buffer.tf_agents import deterministic_pass
from tests.helpers import to_np

BATCH_SIZES = pytest.mark.parametrize("batch_size", [1, 5])

# TF-Agents' `_data_spec()`: python lists, which the face takes as a nest like any other.
LIST_SPEC = [TensorSpec([3], ms.float32, "action"),
             [TensorSpec([5], ms.float32, "lidar"), TensorSpec([3, 2], ms.float32, "camera")]]
LIST_VALUES = [np.full(3, 1, np.float32), [np.full(5, 2, np.float32), np.full((3, 2), 3, np.float32)]]


def stacked(values, n):
    """``values`` repeated along a new leading axis of ``n``."""
    return optree.tree_map(lambda x: np.stack([x] * n), values)


def assert_nests_equal(got, want):
    got, want = optree.tree_leaves(to_np(got)), optree.tree_leaves(want)
    assert len(got) == len(want)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == np.asarray(y).dtype


# ------------------------------------------------------------- tf_uniform_replay_buffer_test.py
@BATCH_SIZES
def test_add(batch_size):  # testAdd
    rb = TrajectoryReplayBuffer(LIST_SPEC, batch_size=batch_size, max_length=10)
    rb.add_batch(stacked(LIST_VALUES, batch_size))
    sample, _ = rb.get_next()
    assert isinstance(sample, list) and isinstance(sample[1], list)
    assert_nests_equal(sample, LIST_VALUES)


def test_get_next_empty():  # testGetNextEmpty: a ValueError here, where TensorFlow raises InvalidArgumentError
    rb = TrajectoryReplayBuffer(LIST_SPEC, batch_size=1, max_length=10)
    with pytest.raises(ValueError, match="For 'get_next', the buffer is empty"):
        rb.get_next()


def test_add_single_sample_batch():  # testAddSingleSampleBatch
    rb = TrajectoryReplayBuffer(LIST_SPEC, batch_size=1, max_length=10)
    rb.add_batch(stacked(LIST_VALUES, 1))
    sample, _ = rb.get_next(sample_batch_size=3)
    assert_nests_equal(sample, stacked(LIST_VALUES, 3))


def test_clear():  # testClear; the add counter `added` is TF-Agents' `last_id + 1`
    rb = TrajectoryReplayBuffer(LIST_SPEC, batch_size=1, max_length=10)
    initial = int(rb.added)
    empty = to_np(rb.gather_all())
    assert initial == 0
    assert [x.shape for x in optree.tree_leaves(empty)] == [(1, 0, 3), (1, 0, 5), (1, 0, 3, 2)]
    rb.add_batch(stacked(LIST_VALUES, 1))
    sample, _ = rb.get_next(sample_batch_size=3)
    assert_nests_equal(sample, stacked(LIST_VALUES, 3))
    assert int(rb.added) != initial
    rb.clear()
    assert int(rb.added) == initial
    assert_nests_equal(rb.gather_all(), empty)
    with pytest.raises(ValueError, match="the buffer is empty"):
        rb.get_next()


def test_clear_leaves_nothing_stale_to_read():
    # testClearAllVariables zero-fills the tables through the private `_clear(clear_all_variables=True)`,
    # which is not offered: `clear()` leaves old rows in memory, as TF-Agents' `clear()` does. What must
    # hold is that none of them can be read again.
    rb = TrajectoryReplayBuffer(LIST_SPEC, batch_size=1, max_length=10)
    for _ in range(4):
        rb.add_batch(stacked(LIST_VALUES, 1))
    rb.clear()
    fresh = optree.tree_map(lambda x: x * 10, LIST_VALUES)
    rb.add_batch(stacked(fresh, 1))
    sample, _ = rb.get_next(sample_batch_size=8)
    assert_nests_equal(sample, stacked(fresh, 8))
    assert_nests_equal(rb.gather_all(), stacked(stacked(fresh, 1), 1))


def int64_steps(batch_size, adds=10):
    """TF-Agents' multi-step data: int64 scalars, add ``i`` is ``i`` in every segment; default max_length."""
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int64), batch_size=batch_size)
    assert rb.max_length == 1000 and rb.capacity == 1000 * batch_size
    for i in range(adds):
        rb.add_batch(np.full(batch_size, i, np.int64))
    return rb


@BATCH_SIZES
def test_multi_step_sampling(batch_size):  # testMultiStepSampling
    rb = int64_steps(batch_size)
    for _ in range(100):
        (step, next_step), _ = rb.get_next(num_steps=2, time_stacked=False)
        assert step.shape == next_step.shape == () and (int(step) + 1) % 10 == int(next_step)


@BATCH_SIZES
def test_multi_step_stacked_sampling(batch_size):  # testMultiStepStackedSampling
    rb = int64_steps(batch_size)
    for _ in range(100):
        steps = rb.get_next(num_steps=2)[0].asnumpy()
        assert steps.shape == (2,) and (steps[0] + 1) % 10 == steps[1]


@BATCH_SIZES
def test_multi_step_stacked_batched_sampling(batch_size):  # testMultiStepStackedBatchedSampling
    rb = int64_steps(batch_size)
    for _ in range(100):
        steps = rb.get_next(3, num_steps=2, time_stacked=True)[0].asnumpy()
        assert steps.shape == (3, 2) and ((steps[:, 0] + 1) % 10 == steps[:, 1]).all()


@BATCH_SIZES
def test_gather_all(batch_size):  # testGatherAll
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int64), batch_size=batch_size)
    for i in range(10):
        rb.add_batch(np.arange(i, i + batch_size, dtype=np.int64))
    assert rb.gather_all().asnumpy().tolist() == [list(range(b, b + 10)) for b in range(batch_size)]


@BATCH_SIZES
def test_gather_all_over_capacity(batch_size):  # testGatherAllOverCapacity
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int64), batch_size=batch_size, max_length=10)
    for i in range(15):
        rb.add_batch(100 * np.arange(batch_size, dtype=np.int64) + i)
    assert rb.gather_all().asnumpy().tolist() == [list(range(5 + 100 * b, 15 + 100 * b)) for b in range(batch_size)]


@BATCH_SIZES
def test_gather_all_empty(batch_size):  # testGatherAllEmpty
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=batch_size)
    items = rb.gather_all().asnumpy()
    assert items.shape == (batch_size, 0) and items.tolist() == [[]] * batch_size


@BATCH_SIZES
def test_sample_batch_correct_probabilities(batch_size):  # testSampleBatchCorrectProbabilities
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=batch_size, max_length=4)
    for i in (1, 2):
        rb.add_batch(np.full(batch_size, i, np.int32))
        probabilities = rb.get_next(sample_batch_size=2)[1].probabilities.asnumpy()
        np.testing.assert_allclose(probabilities, [1 / (i * batch_size)] * 2, rtol=1e-6)


@BATCH_SIZES
def test_sample_single_correct_probability(batch_size):  # testSampleSingleCorrectProbability
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=batch_size, max_length=3)
    for i in range(1, 5):
        rb.add_batch(np.full(batch_size, i, np.int32))
        probability = rb.get_next()[1].probabilities.asnumpy()
        assert probability.shape == ()
        np.testing.assert_allclose(probability, 1 / min(i * batch_size, 3 * batch_size), rtol=1e-6)


@BATCH_SIZES
def test_sample_single_correct_probability_as_dataset(batch_size):  # testSampleSingleCorrectProbabilityAsDataset
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=batch_size, max_length=3)
    stream = iter(rb.as_dataset())  # made before anything is added, as there
    for i in range(1, 5):
        rb.add_batch(np.full(batch_size, i, np.int32))
        np.testing.assert_allclose(next(stream)[1].probabilities.asnumpy(), 1 / min(i * batch_size, 3 * batch_size),
                                   rtol=1e-6)


def collect_pass(max_length, batch_size, adds, sample_batch_size=None, num_steps=None, **settings):
    """TF-Agents' `_create_collect_rb_dataset`: the pass is made first, then segment ``b`` gets
    ``10 * b + j`` at add ``j``, then the pass is read to its end."""
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=batch_size, max_length=max_length,
                                **settings)
    dataset = rb.as_dataset(sample_batch_size=sample_batch_size, num_steps=num_steps, single_deterministic_pass=True)
    for j in range(adds):
        rb.add_batch((10 * np.arange(batch_size) + j).astype(np.int32))
    return [items.asnumpy().tolist() for items, _ in dataset]


@BATCH_SIZES
def test_deterministic_as_dataset(batch_size):  # testDeterministicAsDataset
    assert collect_pass(3, batch_size, 3) == [10 * b + f for b in range(batch_size) for f in range(3)]


def test_deterministic_as_dataset_with_num_steps():  # testDeterministicAsDatasetWithNumSteps
    assert collect_pass(4, 5, 4, num_steps=2) == [[0, 1], [2, 3], [10, 11], [12, 13], [20, 21], [22, 23],
                                                 [30, 31], [32, 33], [40, 41], [42, 43]]


@BATCH_SIZES
def test_deterministic_as_dataset_with_sample_batch(batch_size):  # testDeterministicAsDatasetWithSampleBatch
    assert collect_pass(3, batch_size, 3, sample_batch_size=batch_size) == [
        [10 * b + f for b in range(batch_size)] for f in range(3)]


def test_deterministic_as_dataset_with_num_steps_and_sample_batch():
    # testDeterministicAsDatasetWithNumStepsAndSampleBatch
    assert collect_pass(4, 6, 4, sample_batch_size=3, num_steps=2) == [
        [[0, 1], [10, 11], [20, 21]], [[2, 3], [12, 13], [22, 23]],
        [[30, 31], [40, 41], [50, 51]], [[32, 33], [42, 43], [52, 53]]]


@pytest.mark.parametrize("arguments", [{"sample_batch_size": 3}, {"num_steps": 4}])
def test_deterministic_as_dataset_that_would_drop_all_data_fails(arguments):
    # testDeterministicAsDatasetSampleBatchGreaterThanBufferBatchFails, ...NumStepsGreaterThanMaxLengthFails:
    # refused when as_dataset is called, before anything is stored.
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=2, max_length=3, dataset_drop_remainder=True)
    with pytest.raises(ValueError, match="ALL data would be dropped"):
        rb.as_dataset(single_deterministic_pass=True, **arguments)


@BATCH_SIZES
def test_num_frames(batch_size):  # testNumFrames
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int64), batch_size=batch_size, max_length=12)
    for i in range(10):
        rb.add_batch(np.arange(i, i + batch_size, dtype=np.int64))
    assert int(rb.num_frames()) == 10 * batch_size
    for i in range(10, 20):
        rb.add_batch(np.arange(i, i + batch_size, dtype=np.int64))
    assert int(rb.num_frames()) == rb.capacity == 12 * batch_size


def test_get_next_windows_never_cross_the_write_position():  # testGetNext
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int64, "observation"), batch_size=2, max_length=3)
    for t in range(4):  # wrapped: the oldest step was overwritten
        rb.add_batch(np.array([t, t + 3], np.int64))
    steps = rb.get_next(sample_batch_size=256, num_steps=2, time_stacked=True)[0].asnumpy()
    assert ((steps[:, 0] + 1) == steps[:, 1]).all()


# ------------------------------------------- the deterministic pass beyond TF-Agents' own tests
@pytest.mark.parametrize("max_length, num_steps, settings, windows", [
    (5, 2, {}, [[0, 1], [2, 3], [4]]),                          # a short last window is kept ...
    (3, 4, {}, [[0, 1, 2]]),                                    # ... also when num_steps > max_length
    (5, 2, {"dataset_drop_remainder": True}, [[0, 1], [2, 3]]),  # ... unless dataset_drop_remainder
    (5, 2, {"dataset_window_shift": 1}, [[0, 1], [1, 2], [2, 3], [3, 4], [4]]),
    (5, 2, {"dataset_window_shift": 1, "dataset_drop_remainder": True}, [[0, 1], [1, 2], [2, 3], [3, 4]]),
    (5, 3, {"dataset_window_shift": 1}, [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4], [4]]),
    (5, 2, {"dataset_window_shift": 3}, [[0, 1], [3, 4]]),
])
def test_windows_of_one_segment(max_length, num_steps, settings, windows):
    assert collect_pass(max_length, 1, max_length, num_steps=num_steps, **settings) == windows
    py = PyUniformReplayBuffer(TensorSpec([], ms.int32), capacity=max_length)
    py.add_batch(np.arange(max_length, dtype=np.int32))
    if not settings:  # the numpy buffer's pass: one segment, TF-Agents' default dataset settings
        assert [x.tolist() for x in py.as_dataset(num_steps=num_steps, single_deterministic_pass=True)] == windows


def test_groups_of_segments_with_and_without_drop_remainder():
    kept = collect_pass(2, 5, 2, sample_batch_size=2)
    assert kept == [[0, 10], [1, 11], [20, 30], [21, 31], [40], [41]]  # the last group is smaller
    assert collect_pass(2, 5, 2, sample_batch_size=2, dataset_drop_remainder=True) == kept[:4]
    # A group larger than the buffer's batch is one group of every segment, unless it would be dropped.
    assert collect_pass(2, 2, 2, sample_batch_size=3) == [[0, 10], [1, 11]]


def test_batched_windows_are_whole_and_cut_per_group():
    # Short windows are always dropped with a sample_batch_size (as TF-Agents). Windows are cut per
    # group of segments, so none spans two groups (TF-Agents windows all groups as one stream).
    assert collect_pass(3, 3, 3, sample_batch_size=2, num_steps=2) == [[[0, 1], [10, 11]], [[20, 21]]]
    assert collect_pass(3, 3, 3, sample_batch_size=2, num_steps=2, dataset_window_shift=1) == [
        [[0, 1], [10, 11]], [[1, 2], [11, 12]], [[20, 21]], [[21, 22]]]


def test_a_batched_pass_of_windows_longer_than_max_length_is_refused():
    # TF-Agents yields nothing here without dataset_drop_remainder: a pass that can never yield is an error.
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=2, max_length=3)
    with pytest.raises(ValueError, match=r"'num_steps' \(4\) must not exceed 'max_length' \(3\) with a sample_batch"):
        rb.as_dataset(sample_batch_size=2, num_steps=4, single_deterministic_pass=True)
    py = PyUniformReplayBuffer(TensorSpec([], ms.int32), capacity=3)
    with pytest.raises(ValueError, match=r"'num_steps' \(4\) must not exceed 'capacity' \(3\)"):
        py.as_dataset(sample_batch_size=2, num_steps=4, single_deterministic_pass=True)


def test_the_pass_after_wraparound_reads_each_segment_and_the_ids_of_get_next():
    # TF-Agents reads row (b * L + f) % (B * L) after a wrap, which lands in the next segment; each
    # segment's own steps are read here.
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=2, max_length=3)
    for j in range(5):
        rb.add_batch(np.array([j, 10 + j], np.int32))
    elements = [(items.asnumpy().tolist(), info) for items, info in
                rb.as_dataset(num_steps=3, single_deterministic_pass=True)]
    assert [items for items, _ in elements] == [[2, 3, 4], [12, 13, 14]]
    assert all(info.probabilities == () for _, info in elements)
    ids = {item: int(i) for items, info in elements for item, i in zip(items, info.ids.asnumpy())}
    assert ids == {2: 4, 3: 6, 4: 8, 12: 5, 13: 7, 14: 9}  # add * batch_size + segment
    items, info = rb.get_next(sample_batch_size=64)
    assert {int(v): int(i) for v, i in zip(items.asnumpy(), info.ids.asnumpy())}.items() <= ids.items()


def test_deterministic_pass_function_on_unequal_lengths():
    leaves, ids = [np.arange(7)[None]], np.arange(7, dtype=np.int64)[None]
    chunks = list(deterministic_pass(leaves, ids, None, 3, window_shift=2))
    assert [c[0].tolist() for c, _ in chunks] == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]


def test_an_empty_pass_fails_when_read():
    rb = TrajectoryReplayBuffer(TensorSpec([], ms.int32), batch_size=2, max_length=3)
    dataset = rb.as_dataset(single_deterministic_pass=True)
    with pytest.raises(ValueError, match="For 'as_dataset', the buffer is empty"):
        next(iter(dataset))


# ------------------------------------------------------------------- py_replay_buffers_test.py
Trajectory = collections.namedtuple(
    "Trajectory", ["step_type", "observation", "action", "policy_info", "next_step_type", "reward", "discount"])
TRAJECTORY_SPEC = Trajectory(TensorSpec([], ms.int32, "step_type"), TensorSpec([15, 15, 4], ms.int32, "obs"),
                             TensorSpec([], ms.int32, "action"), (), TensorSpec([], ms.int32, "next_step_type"),
                             TensorSpec([], ms.float32, "reward"), TensorSpec([], ms.float32, "discount"))


def filled_buffer():
    """TF-Agents' `_fill_replay_buffer`: 96 transitions into capacity 32; observation ``k`` stacks
    frames ``k .. k+3`` (``obs[..., j] == k + j``), so the oldest stored observation starts at 64."""
    rb = PyUniformReplayBuffer(TRAJECTORY_SPEC, capacity=32, seed=0)
    for k in range(96):
        observation = np.broadcast_to(np.arange(k, k + 4, dtype=np.int32), (1, 15, 15, 4)).copy()
        rb.add_batch(Trajectory(np.ones(1, np.int32), observation, np.zeros(1, np.int32), (),
                                np.ones(1, np.int32), np.zeros(1, np.float32), np.ones(1, np.float32)))
    return rb


@pytest.mark.parametrize("arguments", [{}, {"sample_batch_size": 2}, {"num_steps": 2}])
def test_empty_numpy_buffer(arguments):
    # testEmptyBuffer, testEmptyBufferBatchSize, testEmptyBufferNumSteps: TF-Agents yields uninitialised
    # arrays from an empty buffer; here reading it is a clear error, and the buffer works afterwards.
    rb = PyUniformReplayBuffer(TRAJECTORY_SPEC, capacity=32)
    dataset = rb.as_dataset(**arguments)
    with pytest.raises(ValueError, match="the buffer is empty"):
        next(iter(dataset))
    zeros = optree.tree_map(lambda s: np.zeros((1, *s.shape), numpy_dtype(s.dtype)), TRAJECTORY_SPEC)
    rb.add_batch(zeros)
    rb.add_batch(zeros)
    assert next(iter(dataset)).observation.shape[-3:] == (15, 15, 4)


def assert_circular(dataset):
    """testReplayBufferCircular's checks on 200 elements: only the newest 32 are stored, every
    observation intact."""
    stream = iter(dataset)
    for _ in range(200):
        observation = next(stream).observation
        assert observation[0, 0, 0] >= 64
        for j in (1, 2, 3):
            np.testing.assert_array_equal(observation[:, :, 0] + j, observation[:, :, j])


def test_replay_buffer_circular():  # testReplayBufferCircular
    assert_circular(filled_buffer().as_dataset())


def test_sample_does_not_cross_head():  # testSampleDoesNotCrossHead
    rb = PyUniformReplayBuffer(TensorSpec([], ms.int32), capacity=10, seed=12345)
    for _ in range(5):
        rb.add_batch(np.array([0], np.int32))  # the write position moves to 5
    for i in range(10):
        rb.add_batch(np.array([i], np.int32))  # full: 0..9 oldest first, stored from slot 5
    firsts = []
    for _ in range(10000):
        first, second = rb.get_next(num_steps=2, time_stacked=False)  # the items alone, as there
        assert first != 9 and second != 0 and second == first + 1
        firsts.append(int(first))
    counts = np.bincount(firsts, minlength=9)
    # 9 valid starts, each Binomial(10000, 1/9): mean 1111, sd 31.4; 150 is 4.8 sd (seeded, so fixed).
    assert len(counts) == 9 and (abs(counts - 10000 / 9) < 150).all()


@pytest.mark.parametrize("arguments, observation, action", [
    ({"sample_batch_size": 5}, (5, 15, 15, 4), (5,)),                  # testSampleBatches
    ({"sample_batch_size": 5, "num_steps": 3}, (5, 3, 15, 15, 4), (5, 3)),  # testSampleBatchesWithNumSteps
    ({"num_steps": 3}, (3, 15, 15, 4), (3,)),                          # testNumStepsNoBatching
])
def test_dataset_element_shapes(arguments, observation, action):
    element = next(iter(filled_buffer().as_dataset(**arguments)))
    assert isinstance(element, Trajectory) and element.policy_info == ()
    assert element.observation.shape == observation and element.action.shape == action
    assert element.step_type.shape == action and element.reward.dtype == np.float32


def test_checkpointable(tmp_path):  # testCheckpointable, through save/load instead of tf.train.Checkpoint
    rb = filled_buffer()
    assert rb.size == 32 and isinstance(rb.size, np.int64)
    rb.save(tmp_path / "py.safetensors")
    restored = PyUniformReplayBuffer(TRAJECTORY_SPEC, capacity=32)
    restored.load(tmp_path / "py.safetensors")
    assert restored.size == 32
    assert_circular(restored.as_dataset())
