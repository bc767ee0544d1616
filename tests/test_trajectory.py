"""The TF-Agents face on the device: TrajectoryReplayBuffer (and the dataset methods of tf_agents.py)
against numpy models, beside PyUniformReplayBuffer where both must agree."""
from __future__ import annotations

import collections
from pathlib import Path

import mindspore as ms
import numpy as np
import optree
import pytest
from mindspore import Tensor, nn
from scipy.stats import chisquare

from mindspore_rl_buffer import PyUniformReplayBuffer, TensorSpec, TrajectoryReplayBuffer
from mindspore_rl_buffer.specs import numpy_dtype
from tests.helpers import SPEC1, TUTORIAL_SPEC, SegmentModel, fill, step_values, to_np, tutorial_items

DATA = Path(__file__).resolve().parent / "data"


def test_the_tf_agents_tutorial_shapes_and_values():
    rb = TrajectoryReplayBuffer(TUTORIAL_SPEC, batch_size=32, max_length=1000)
    assert rb.capacity == 32000 and rb.data_spec is TUTORIAL_SPEC
    for t in range(6):
        rb.add_batch(tutorial_items(t))
    (action, (lidar, camera)), info = next(iter(rb.as_dataset(sample_batch_size=4, num_steps=2)))
    assert (action.shape, lidar.shape, camera.shape) == ((4, 2, 3), (4, 2, 5), (4, 2, 3, 2))
    action = action.asnumpy()
    assert (np.diff(action[:, :, 0], axis=1) == 1000).all(), "two consecutive steps of one segment"
    np.testing.assert_allclose(info.probabilities.asnumpy(), 1 / (32 * 5))
    action, (lidar, camera) = to_np(rb.gather_all())
    assert (action.shape, lidar.shape, camera.shape) == ((32, 6, 3), (32, 6, 5), (32, 6, 3, 2))
    expected = np.stack([step_values(t, 32) for t in range(6)], 1).astype(np.float32)  # [32, 6]
    np.testing.assert_array_equal(action, np.repeat(expected[..., None], 3, -1))
    np.testing.assert_array_equal(lidar, np.repeat(expected[..., None], 5, -1))
    np.testing.assert_array_equal(camera, np.broadcast_to(expected[..., None, None], (32, 6, 3, 2)))


def test_add_batch_wraps_like_the_model_and_windows_never_cross_the_write_position():
    ms.set_seed(2)
    rb, model = TrajectoryReplayBuffer(SPEC1, batch_size=3, max_length=5), SegmentModel(3, 5)
    fill(rb, model, 13, 3)  # wrapped: holds steps 8..12
    np.testing.assert_array_equal(rb.gather_all()["value"].asnumpy(), model.stored())
    items, info = rb.get_next(sample_batch_size=3000, num_steps=3)
    values = items["value"].asnumpy().astype(np.int64)
    t, segment = values // 1000, values % 1000
    assert (np.diff(t, axis=1) == 1).all(), "consecutive steps, never newest-then-oldest"
    assert (segment == segment[:, :1]).all() and t.min() >= 8 and t.max() <= 12
    ids = info.ids.asnumpy()
    assert ids.dtype == np.int64
    np.testing.assert_array_equal(ids % 3, segment)
    np.testing.assert_array_equal(ids // 3, t)  # ids count the adds: add * batch_size + segment; step t was add t
    np.testing.assert_allclose(info.probabilities.asnumpy(), 1 / (3 * 3))
    # 3 segments x 3 valid starts (8, 9, 10), equally likely; seeded, so deterministic.
    picks = np.bincount(segment[:, 0] * 3 + (t[:, 0] - 8), minlength=9)
    assert chisquare(picks).pvalue > 1e-4


def test_num_steps_equal_to_the_stored_steps_takes_the_whole_segment():
    rb, model = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4), SegmentModel(2, 4)
    fill(rb, model, 6, 2)  # holds 2..5, head mid-ring
    items, _ = rb.get_next(sample_batch_size=20, num_steps=4)
    t = items["value"].asnumpy().astype(np.int64) // 1000
    assert (t == np.arange(2, 6)).all()


def test_numpy_int_sizes_are_taken_as_ints_and_leave_plain_int_calls_working():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4, seed=0)
    fill(rb, SegmentModel(2, 4), 3, 2)
    for sizes in ({"num_steps": np.int32(2)}, {"sample_batch_size": np.int32(3)},
                  {"sample_batch_size": np.uint8(3), "num_steps": np.int16(2)}):
        plain = {name: int(value) for name, value in sizes.items()}
        for given in (sizes, plain):  # the numpy call first: its graph is the plain call's too
            items, info = rb.get_next(**given)
            expected = tuple(plain[name] for name in ("sample_batch_size", "num_steps") if name in plain)
            assert items["value"].shape == info.ids.shape == expected, (given, items["value"].shape)
    items, info = next(iter(rb.as_dataset(sample_batch_size=np.int32(3), num_steps=np.int32(2))))
    assert items["value"].shape == info.ids.shape == (3, 2)


def test_num_steps_longer_than_stored_and_empty_buffers_are_refused():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    with pytest.raises(ValueError, match="For 'get_next', the buffer is empty"):
        rb.get_next()
    with pytest.raises(ValueError, match="For 'as_dataset', the buffer is empty"):  # the method called, named
        next(iter(rb.as_dataset(sample_batch_size=2)))
    fill(rb, SegmentModel(2, 4), 2, 2)
    with pytest.raises(ValueError, match=r"'num_steps' \(3\) must not exceed the 2 time steps stored"):
        rb.get_next(num_steps=3)
    with pytest.raises(ValueError, match=r"'num_steps' \(5\) must not exceed the 4 time steps the buffer can hold"):
        rb.get_next(num_steps=5)
    with pytest.raises(TypeError, match="'time_stacked' must be a bool"):
        rb.get_next(2, 2, time_stacked=None)
    with pytest.raises(ValueError, match="'sample_batch_size' must be an int >= 1"):
        rb.get_next(0)


def test_single_items_and_unstacked_time():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=6)
    fill(rb, SegmentModel(2, 6), 4, 2)
    item, info = rb.get_next()
    assert item["value"].shape == () and info.ids.shape == () and info.probabilities.shape == ()
    steps, info = rb.get_next(sample_batch_size=5, num_steps=3, time_stacked=False)
    assert len(steps) == 3 and steps[0]["value"].shape == (5,) and len(info.ids) == 3
    t = np.stack([s["value"].asnumpy() for s in steps], 1).astype(np.int64) // 1000
    assert (np.diff(t, axis=1) == 1).all()
    one, _ = rb.get_next(num_steps=2, time_stacked=False)
    assert len(one) == 2 and one[0]["value"].shape == ()


Point = collections.namedtuple("Point", ["x", "y"])
NESTS = {
    "single spec": TensorSpec([2], ms.float32, "obs"),
    "list": [TensorSpec([2], ms.float32), TensorSpec([], ms.int32)],
    "dict": {"obs": TensorSpec([2], ms.float32), "step": TensorSpec([], ms.int32)},
    "namedtuple": Point(TensorSpec([2], ms.float32), TensorSpec([1], ms.int32)),
    "nested": {"a": (TensorSpec([2], ms.float32), [Point(TensorSpec([], ms.int32), TensorSpec([3], ms.float32))])},
}


@pytest.mark.parametrize("kind", list(NESTS))
def test_nests_of_every_kind_round_trip(kind):
    spec = NESTS[kind]
    specs, treespec = optree.tree_flatten(spec)

    def items(t, outer):
        return optree.tree_unflatten(treespec, [
            np.full((*outer, *s.shape), t * 10 + i, numpy_dtype(s.dtype)) for i, s in enumerate(specs)])

    rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=3)
    py = PyUniformReplayBuffer(spec, capacity=3)
    for t in range(4):
        rb.add_batch(items(t, (2,)))
        py.add_batch(items(t, (1,)))
    for gathered, outer in ((rb.gather_all(), 2), (py.gather_all(), 1)):
        assert optree.tree_structure(gathered) == treespec
        for i, leaf in enumerate(optree.tree_leaves(to_np(gathered))):
            assert leaf.shape == (outer, 3, *specs[i].shape)
            np.testing.assert_array_equal(leaf[:, :, ...].reshape(outer, 3, -1)[..., 0],
                                          np.broadcast_to([10 + i, 20 + i, 30 + i], (outer, 3)))
    for sampled in (rb.get_next(4, 2)[0], py.get_next(4, 2)):  # the numpy buffer returns the items alone
        assert optree.tree_structure(sampled) == treespec


class _PointsInGraph(nn.Cell):
    """Adds a ``Point`` built inside the graph (``build=True``) or the one passed in, then samples."""

    def __init__(self, buffer, build):
        super().__init__()
        self.buffer = buffer
        self.build = build

    def construct(self, x, y):
        items = Point(x, y) if self.build else (x, y)
        _ = self.buffer.add_batch(items)
        sampled, (ids, _) = self.buffer.get_next(4)
        return sampled[0] * 1.0, sampled[1] + 0, ids  # a namedtuple comes back a plain tuple in a graph


def test_a_namedtuple_spec_inside_a_graph_reads_by_position_and_one_built_there_is_refused():
    rb = TrajectoryReplayBuffer(NESTS["namedtuple"], batch_size=2, max_length=3)
    x, y = Tensor(np.ones((2, 2), np.float32)), Tensor(np.full((2, 1), 7, np.int32))
    sampled_x, sampled_y, ids = _PointsInGraph(rb, build=False)(x, y)
    assert sampled_x.shape == (4, 2) and (sampled_y.asnumpy() == 7).all() and set(ids.asnumpy()) <= {0, 1}
    assert type(rb.get_next(2)[0]) is Point  # called directly, the spec's own type
    before, added = to_np(rb.gather_all()), int(rb.added)
    with pytest.raises(TypeError, match=r"For 'add_batch', items must be tensors of known shape and dtype "
                                        r"when the graph compiles.*a namedtuple made inside the graph is one"):
        _PointsInGraph(rb, build=True)(x, y)
    after = to_np(rb.gather_all())
    assert int(rb.added) == added and all(np.array_equal(a, b) for a, b in zip(before, after))


def test_bad_items_name_the_leaf_and_write_nothing():
    rb = TrajectoryReplayBuffer(TUTORIAL_SPEC, batch_size=32, max_length=10)
    rb.add_batch(tutorial_items(0))
    before = rb.gather_all()
    good = tutorial_items(1)
    bad_calls = [
        ((good[0], (good[1][0][:, :4], good[1][1])), ValueError,
         r"For 'add_batch', the shape of items\[1\]\[0\] 'lidar' must be \(32, 5\), but got \(32, 4\)\."),
        ((good[0], (good[1][0].astype(np.float64), good[1][1])), ValueError,
         r"the dtype of items\[1\]\[0\] 'lidar' must be Float32, but got Float64"),
        ((good[0][:31], good[1]), ValueError, r"the shape of items\[0\] 'action' must be \(32, 3\), but got \(31, 3\)"),
        ((good[0], good[1][0]), ValueError, "must have the structure of the data spec"),
        ([good[0], good[1]], ValueError, "must have the structure of the data spec"),
        ((good[0].tolist(), good[1]), TypeError, r"items\[0\] 'action' must be a mindspore.Tensor or a numpy array"),
    ]
    for items, error, message in bad_calls:
        with pytest.raises(error, match=message):
            rb.add_batch(items)
    after = rb.gather_all()
    for x, y in zip(optree.tree_leaves(to_np(before)), optree.tree_leaves(to_np(after))):
        np.testing.assert_array_equal(x, y)


def test_single_deterministic_pass_walks_every_item_once_in_order():
    rb, model = TrajectoryReplayBuffer(SPEC1, batch_size=5, max_length=4), SegmentModel(5, 4)
    fill(rb, model, 7, 5)  # holds 3..6 of 5 segments
    stored = model.stored()
    singles = [to_np(item)["value"] for item, _ in rb.as_dataset(single_deterministic_pass=True)]
    np.testing.assert_array_equal(np.array(singles), stored.reshape(-1))  # segment by segment, oldest first
    windows = [to_np(item)["value"] for item, _ in rb.as_dataset(num_steps=2, single_deterministic_pass=True)]
    np.testing.assert_array_equal(np.array(windows), stored.reshape(5, 2, 2).reshape(10, 2))
    groups = [to_np(item)["value"] for item, _ in rb.as_dataset(sample_batch_size=2, single_deterministic_pass=True)]
    assert [g.shape for g in groups] == [(2,)] * 8 + [(1,)] * 4
    np.testing.assert_array_equal(np.concatenate(groups[:4]), stored[:2].T.reshape(-1))
    py = PyUniformReplayBuffer(SPEC1, capacity=4)
    for t in range(7):
        py.add_batch({"value": np.array([t], np.float32)})
    assert [float(item["value"]) for item in py.as_dataset(single_deterministic_pass=True)] == [3, 4, 5, 6]


def test_as_mindspore_dataset_columns():
    rb = TrajectoryReplayBuffer(TUTORIAL_SPEC, batch_size=32, max_length=10)
    for t in range(3):
        rb.add_batch(tutorial_items(t))
    dataset = rb.as_mindspore_dataset(sample_batch_size=4, num_steps=2, num_samples=2)
    assert dataset.get_col_names() == ["action", "lidar", "camera", "ids", "probabilities"]
    rows = list(dataset.create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert len(rows) == 2 and [x.shape for x in rows[0]] == [(4, 2, 3), (4, 2, 5), (4, 2, 3, 2), (4, 2), (4,)]
    passes = list(rb.as_mindspore_dataset(single_deterministic_pass=True).create_tuple_iterator(
        num_epochs=1, output_numpy=True))
    assert len(passes) == 32 * 3


def test_add_batch_is_an_observer_for_a_driver():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=8)
    observers = [rb.add_batch]
    for t in range(3):  # a minimal driver: step the environments, hand each step to the observers
        for observer in observers:
            observer({"value": step_values(t, 2).astype(np.float32)})
    assert int(rb.num_frames()) == 6


class InGraph(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, action, lidar, camera):
        _ = self.buffer.add_batch((action, (lidar, camera)))
        # Inside a graph the info is the plain pair (ids, probabilities): it unpacks like BufferInfo.
        (action, (_, camera)), (ids, probabilities) = self.buffer.get_next(4, 2)
        return action, camera, ids, probabilities


def _picks(buffer, value):
    return buffer.get_next(value, 2)[0]


def _steps(buffer, value):
    return buffer.get_next(3, value)[0]


def _stacked(buffer, value):
    return buffer.get_next(3, 2, value)[0]


class _Windows(nn.Cell):
    def __init__(self, buffer, call):
        super().__init__()
        self.buffer = buffer
        self.call = call

    def construct(self, given):
        return self.call(self.buffer, given)


@pytest.mark.parametrize("call, arg, value, expected, fixes", [
    (_picks, "sample_batch_size", 3, "an int or None", "the shape of the sample"),
    (_steps, "num_steps", 2, "an int or None", "the shape of the sample"),
    (_stacked, "time_stacked", False, "a bool", "the structure of the sample"),
])
def test_a_mutable_get_next_argument_is_refused_when_the_graph_compiles(call, arg, value, expected, fixes):
    # A mutable size reached the compile-time check as None and crashed the compile further on
    # (unsupported operand type(s) for *: 'NoneType' and 'int'): it fixes a shape, so it must be a constant.
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    for t in range(3):
        rb.add_batch({"value": step_values(t, 2).astype(np.float32)})
    call(rb, ms.mutable(value))  # a direct call takes it as the constant it holds
    with pytest.raises(TypeError) as compiled:
        _Windows(rb, call)(ms.mutable(value))
    assert str(compiled.value).splitlines()[0] == (
        f"For 'get_next', '{arg}' must be a Python constant ({expected}) inside a graph, since it fixes {fixes}, "
        f"but got a graph variable of type {type(value).__name__} (a mindspore.mutable, say), whose value is known "
        f"only when the graph runs.")


def test_inside_a_cell_add_then_sample_in_one_graph():
    rb = TrajectoryReplayBuffer(TUTORIAL_SPEC, batch_size=32, max_length=10)
    rb.add_batch(tutorial_items(0))  # windows of 2 need 2 stored steps: the graph adds the second
    graph = InGraph(rb)
    for t in range(1, 4):
        action_t, (lidar_t, camera_t) = tutorial_items(t)
        action, camera, ids, probabilities = graph(Tensor(action_t), Tensor(lidar_t), Tensor(camera_t))
        assert action.shape == (4, 2, 3) and camera.shape == (4, 2, 3, 2) and ids.shape == (4, 2)
        values = action.asnumpy()[:, :, 0].astype(np.int64)
        steps = values // 1000
        assert (np.diff(steps, axis=1) == 1).all() and steps.max() <= t
        np.testing.assert_array_equal(ids.asnumpy(), steps * 32 + values % 1000)  # add * batch_size + segment
        np.testing.assert_allclose(probabilities.asnumpy(), np.full(4, 1 / (32 * t), np.float32))
    assert int(rb.added) == 4
    expected = np.stack([step_values(t, 32) for t in range(4)], 1)
    np.testing.assert_array_equal(rb.gather_all()[0].asnumpy()[:, :, 0], expected)


def test_clear_inside_a_cell_including_the_bare_statement():
    # `clear` is on MindSpore's list of list-method names, yet MindSpore 2.10 leaves a bare
    # `self.buffer.clear()` alone (unlike `insert(...)`): it must just work.
    class BareClear(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, value):
            self.buffer.clear()
            _ = self.buffer.add_batch({"value": value})
            items, (ids, _) = self.buffer.get_next(8)
            return self.buffer.num_frames(), items["value"] * 1.0, ids  # the items' dict is read in the graph

    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    fill(rb, SegmentModel(2, 4), 3, 2)
    graph = BareClear(rb)
    for t in range(3):
        frames, values, ids = graph(Tensor(step_values(10 + t, 2).astype(np.float32)))
        assert int(frames) == 2 and int(rb.added) == 1, "the clear restarted the add counter"
        assert set(values.asnumpy().astype(int)) <= set(step_values(10 + t, 2))
        np.testing.assert_array_equal(ids.asnumpy(), values.asnumpy().astype(np.int64) % 1000)


def test_windows_longer_than_stored_inside_a_cell_fail_loudly():
    rb = TrajectoryReplayBuffer(TUTORIAL_SPEC, batch_size=32, max_length=10)
    graph = InGraph(rb)  # adds one step, then asks for windows of 2: only 1 is stored
    action_t, (lidar_t, camera_t) = tutorial_items(0)
    with pytest.raises(RuntimeError, match="assert failed"):
        graph(Tensor(action_t), Tensor(lidar_t), Tensor(camera_t))


def test_constructor_defaults_and_dataset_settings():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2)
    assert rb.max_length == 1000 and rb.capacity == 2000
    settings = TrajectoryReplayBuffer(SPEC1, 2, 3, dataset_drop_remainder=True,
                                      dataset_window_shift=1).checkpoint_record()["settings"]
    assert settings["dataset_drop_remainder"] is True and settings["dataset_window_shift"] == 1
    with pytest.raises(TypeError, match="'dataset_drop_remainder' must be a bool, but got int"):
        TrajectoryReplayBuffer(SPEC1, 2, 3, dataset_drop_remainder=1)
    with pytest.raises(ValueError, match="'dataset_window_shift' must be an int >= 1, but got 0"):
        TrajectoryReplayBuffer(SPEC1, 2, 3, dataset_window_shift=0)
    with pytest.raises(TypeError, match="'dataset_window_shift' must be an int, but got float"):
        TrajectoryReplayBuffer(SPEC1, 2, 3, dataset_window_shift=1.0)


def test_ids_count_the_adds_and_stay_unique_across_overwrites():
    ms.set_seed(5)
    rb, model = TrajectoryReplayBuffer(SPEC1, batch_size=3, max_length=4), SegmentModel(3, 4)
    seen = {}  # id -> value, over the whole run: an id must never name two items
    for round_ in range(4):
        fill(rb, model, 3, 3, start=3 * round_)  # wraps from the second round on
        items, info = rb.get_next(sample_batch_size=200, num_steps=2)
        values, ids = items["value"].asnumpy().astype(np.int64), info.ids.asnumpy()
        np.testing.assert_array_equal(ids, (values // 1000) * 3 + values % 1000)  # add t wrote step t
        for value, i in zip(values.reshape(-1), ids.reshape(-1)):
            assert seen.setdefault(int(i), int(value)) == value
        assert int(rb.added) == 3 * round_ + 3
    assert len(seen) > 12, "ids of overwritten items were not reused"
    passed = {int(i): int(v) for item, info in rb.as_dataset(single_deterministic_pass=True)
              for v, i in [(to_np(item)["value"], info.ids.asnumpy())]}
    assert passed == {t * 3 + b: 1000 * t + b for t in range(8, 12) for b in range(3)}
    rb.clear()
    fill(rb, SegmentModel(3, 4), 1, 3, start=50)
    _, info = rb.get_next(sample_batch_size=20)
    assert set(info.ids.asnumpy().tolist()) <= {0, 1, 2}, "ids start again from 0 after clear, as TF-Agents'"


def test_the_add_counter_is_checkpointed_and_checked(tmp_path):
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    fill(rb, SegmentModel(2, 4), 6, 2)
    rb.save(tmp_path / "rb.safetensors")
    restored = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    restored.load(tmp_path / "rb.safetensors")
    assert int(restored.added) == 6
    restored.add_batch({"value": step_values(6, 2).astype(np.float32)})
    ids = [int(info.ids) for _, info in restored.as_dataset(single_deterministic_pass=True)]
    assert ids == [6, 8, 10, 12, 7, 9, 11, 13]  # adds 3..6, segment by segment: the count went on from 6
    broken = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    fill(broken, SegmentModel(2, 4), 2, 2)
    broken.added.set_data(Tensor(9, ms.int64))  # 2 stored from head 0: 9 adds cannot leave them there
    broken.save(tmp_path / "broken.safetensors")
    with pytest.raises(ValueError, match=r"break the contract: added=9 must be >= count=2 with \(added - count\) % 4"):
        restored.load(tmp_path / "broken.safetensors")
    assert int(restored.added) == 7 and int(restored.num_frames()) == 8  # the refused load changed nothing
    # A counter that keeps the cursors' congruence but whose ids (add * 2 + segment) would pass int64's end.
    huge = 2**63 - 2  # (huge - 2) % 4 == 0 == head
    broken.added.set_data(Tensor(huge, ms.int64))
    broken.save(tmp_path / "huge.safetensors")
    with pytest.raises(ValueError, match=rf"added={huge} must be .* and added \* 2 <= 2\*\*62"):
        restored.load(tmp_path / "huge.safetensors")
    assert int(restored.added) == 7 and int(restored.num_frames()) == 8


def test_a_file_from_before_the_add_counter_loads_with_a_consistent_one():
    spec = {"value": TensorSpec([], ms.int32, "value"), "obs": TensorSpec([2], ms.float32, "obs")}
    rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=3)
    rb.load(DATA / "v1_trajectory_replay_buffer.safetensors")  # holds adds 2, 3, 4: head 2, count 3
    assert int(rb.added) == 5
    ids = [info.ids.asnumpy().tolist() for _, info in rb.as_dataset(num_steps=3, single_deterministic_pass=True)]
    assert ids == [[4, 6, 8], [5, 7, 9]]


def test_as_mindspore_dataset_deterministic_pass_keeps_short_windows_and_ids():
    rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=8)
    fill(rb, SegmentModel(2, 8), 3, 2)
    dataset = rb.as_mindspore_dataset(num_steps=2, single_deterministic_pass=True)
    assert dataset.get_col_names() == ["value", "ids"]
    rows = [[x.tolist() for x in row] for row in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert rows == [[[0, 1000], [0, 2]], [[2000], [4]], [[1, 1001], [1, 3]], [[2001], [5]]]


def test_a_trajectory_buffer_past_two_to_the_30_items_is_refused():
    with pytest.raises(ValueError, match=r"'batch_size \* max_length' must be an int <= 1073741824"):
        TrajectoryReplayBuffer(SPEC1, batch_size=2**16, max_length=2**15)


@pytest.mark.parametrize("spec, names", [
    # Leaf paths that join alike ('a_b', then 'a' / 'b'): named by their positions.
    ({"a_b": TensorSpec([2], ms.float32), "a": {"b": TensorSpec([], ms.int32)}}, ["items_0", "items_1"]),
    # Spec names a column cannot take (empty, an attribute of the storage, surrounding spaces): the paths.
    ((TensorSpec([2], ms.float32, ""), TensorSpec([], ms.int32, "x")), ["items_0", "items_1"]),
    ({"obs": TensorSpec([2], ms.float32, "phase"), "act": TensorSpec([], ms.int32, "act")}, ["items_act", "items_obs"]),
    ((TensorSpec([2], ms.float32, " obs"), TensorSpec([], ms.int32, "act")), ["items_0", "items_1"]),
    ((TensorSpec([2], ms.float32, "obs"), TensorSpec([], ms.int32, "act")), ["obs", "act"]),
])
@pytest.mark.slow
def test_any_data_spec_gets_column_names_and_round_trips(spec, names, tmp_path):
    for buffer in (TrajectoryReplayBuffer(spec, batch_size=2, max_length=4), PyUniformReplayBuffer(spec, 8)):
        leaves = optree.tree_leaves(spec, none_is_leaf=True)
        first = optree.tree_unflatten(optree.tree_structure(spec), [
            np.arange(2 * int(np.prod(leaf.shape)), dtype=numpy_dtype(leaf.dtype)).reshape((2, *leaf.shape))
            for leaf in leaves])
        buffer.add_batch(first)
        device = buffer.storage if isinstance(buffer, TrajectoryReplayBuffer) else buffer.to_device()
        assert list(device.names) == names
        buffer.save(tmp_path / "b.ckpt")
        buffer.clear()
        buffer.load(tmp_path / "b.ckpt")
        stored = optree.tree_leaves(to_np(buffer.gather_all()))
        for got, want in zip(stored, optree.tree_leaves(first)):
            np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_names_too_long_for_the_storage_fall_back_to_paths_or_positions():
    # Its ring 'storage' registers a column as 'storage.<name>': a spec name (or a leaf path) past 1016
    # characters cannot name one, and falls back as any other unusable name does.
    act = TensorSpec([], ms.int32, "act")
    for spec, names in [
            ((TensorSpec([2], ms.float32, "o" * 1016), act), ["o" * 1016, "act"]),
            ((TensorSpec([2], ms.float32, "o" * 1017), act), ["items_0", "items_1"]),
            ({"obs": TensorSpec([2], ms.float32, "o" * 1020), "act": act}, ["items_act", "items_obs"]),
            ({"k" * 1010: TensorSpec([2], ms.float32), "act": TensorSpec([], ms.int32)},
             ["items_act", "items_" + "k" * 1010]),
            ({"k" * 1011: TensorSpec([2], ms.float32), "act": TensorSpec([], ms.int32)}, ["items_0", "items_1"])]:
        assert list(TrajectoryReplayBuffer(spec, batch_size=2, max_length=4).storage.names) == names
        assert PyUniformReplayBuffer(spec, 8)._column_names() == names  # the same columns on both buffers


def _nested(depth):
    spec, item = TensorSpec([2], ms.float32, "x"), np.arange(6, dtype=np.float32).reshape(3, 2)
    for level in range(depth):
        spec, item = ({"k": spec}, {"k": item}) if level % 2 else ((spec,), (item,))
    return spec, item


def test_a_data_spec_nested_four_levels_deep_works_and_a_deeper_one_is_refused_when_built():
    # A 5-level spec was taken, then every add_batch failed inside MindSpore ("nesting is not
    # allowed more than 6 levels"); the numpy buffer takes any depth.
    spec, item = _nested(4)
    rb = TrajectoryReplayBuffer(spec, batch_size=3, max_length=4)
    rb.add_batch(item)
    rb.add_batch(optree.tree_map(lambda x: x + 10, item))
    leaf = item["k"][0]["k"][0]
    np.testing.assert_array_equal(rb.gather_all()["k"][0]["k"][0].asnumpy(), np.stack([leaf, leaf + 10], 1))
    items, _ = rb.get_next(sample_batch_size=5, num_steps=2)
    assert items["k"][0]["k"][0].shape == (5, 2, 2)
    deep_spec, deep_item = _nested(5)
    with pytest.raises(ValueError, match=r"'data_spec' must nest at most 4 levels deep .* but "
                                         r"items\[0\]\['k'\]\[0\]\['k'\]\[0\] 'x' is 5 levels deep"):
        TrajectoryReplayBuffer(deep_spec, batch_size=3, max_length=4)
    py = PyUniformReplayBuffer(deep_spec, capacity=4)
    py.add_batch(optree.tree_map(lambda x: x[:1], deep_item))
    assert py.num_frames() == 1 and py.gather_all()[0]["k"][0]["k"][0].shape == (1, 1, 2)


@pytest.mark.parametrize("name", ["head", "count", "ids", "probabilities"])
@pytest.mark.parametrize("kind", [TrajectoryReplayBuffer, PyUniformReplayBuffer])
def test_a_leaf_named_like_the_buffers_state_or_the_datasets_info_columns_is_taken(kind, name):
    # head and count are the storage's cursors (refused naming 'ReplayBuffer'; to_device failed),
    # ids and probabilities the dataset's info columns (as_mindspore_dataset failed in MindSpore).
    spec = {"obs": TensorSpec([2], ms.float32, "obs"), "other": TensorSpec([], ms.int32, name)}
    rb = kind(spec, batch_size=2, max_length=4) if kind is TrajectoryReplayBuffer else kind(spec, capacity=8)
    for t in range(3):
        rb.add_batch({"obs": np.full((2, 2), t, np.float32), "other": np.full(2, t, np.int32)})
    items = rb.get_next(sample_batch_size=4)
    items = items[0] if kind is TrajectoryReplayBuffer else items
    np.testing.assert_array_equal(to_np(items["obs"])[:, 0], to_np(items["other"]))
    dataset = rb.as_mindspore_dataset(sample_batch_size=4, num_samples=2)
    assert dataset.get_col_names() == ["items_obs", "items_other", "ids", "probabilities"]
    for obs, other, _, _ in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
        np.testing.assert_array_equal(obs[:, 0], other)
    if kind is PyUniformReplayBuffer:
        device = rb.to_device()
        assert int(device.size()) == 6


@pytest.mark.parametrize("kind", [TrajectoryReplayBuffer, PyUniformReplayBuffer])
def test_load_refuses_a_file_whose_nest_holds_the_same_leaves_in_other_places(kind, tmp_path):
    # The record held only the flat leaves, so a dict with its keys renamed loaded, and
    # gather_all gave the reward under 'return' and the cost under 'penalty' swapped.
    def build(spec):
        return kind(spec, batch_size=2, max_length=4) if kind is TrajectoryReplayBuffer else kind(spec, capacity=8)

    r, c = TensorSpec([], ms.float32, "r"), TensorSpec([], ms.float32, "c")
    source = build({"reward": r, "cost": c})
    source.add_batch({"reward": np.ones(2, np.float32), "cost": np.zeros(2, np.float32)})
    path = source.save(tmp_path / "nest.safetensors")
    for other in ({"return": r, "penalty": c}, (c, r)):
        target = build(other)
        before = {n: to_np(v).copy() for n, v in target.checkpoint_tensors().items()}
        with pytest.raises(ValueError, match=r"the leaf_paths in '.*nest.safetensors' must be .* to match this "
                                             r"buffer, but got \[\['cost'\], \['reward'\]\]"):
            target.load(path)
        after = {n: to_np(v) for n, v in target.checkpoint_tensors().items()}
        assert all(np.array_equal(before[n], after[n]) for n in before)
    same = build({"reward": r, "cost": c})
    same.load(path)
    np.testing.assert_array_equal(to_np(same.gather_all()["reward"]).ravel(), [1.0, 1.0])
    np.testing.assert_array_equal(to_np(same.gather_all()["cost"]).ravel(), [0.0, 0.0])


def test_a_spec_with_dict_keys_graphs_cannot_take_is_refused_and_odd_keys_bind_the_checkpoint(tmp_path):
    # An enum key was accepted, then every add_batch failed inside MindSpore; a float key and its
    # text ('1.5') were recorded alike, so a file of one loaded into the other.
    import enum

    class Color(enum.Enum):
        RED = 1

    with pytest.raises(TypeError, match=r"the dict keys of 'data_spec' must be str, int, float or tuple, .* has "
                                        r"the key <Color.RED: 1>"):
        TrajectoryReplayBuffer({Color.RED: TensorSpec([], ms.float32, "r")}, batch_size=2, max_length=4)
    spec = TensorSpec([], ms.float32, "v")
    source = TrajectoryReplayBuffer({1.5: spec, "z": TensorSpec([], ms.float32, "w")}, batch_size=2, max_length=4)
    source.add_batch({1.5: np.ones(2, np.float32), "z": np.zeros(2, np.float32)})
    path = source.save(tmp_path / "odd.safetensors")
    text_keys = TrajectoryReplayBuffer({"1.5": spec, "z": TensorSpec([], ms.float32, "w")}, batch_size=2, max_length=4)
    with pytest.raises(ValueError, match="the leaf_paths in"):
        text_keys.load(path)
    same = TrajectoryReplayBuffer({1.5: spec, "z": TensorSpec([], ms.float32, "w")}, batch_size=2, max_length=4)
    same.load(path)
    np.testing.assert_array_equal(same.gather_all()[1.5].asnumpy().ravel(), [1.0, 1.0])
