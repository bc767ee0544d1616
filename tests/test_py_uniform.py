"""PyUniformReplayBuffer, TF-Agents' numpy buffer, against the numpy segment model."""
from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from mindspore_rl_buffer import PyUniformReplayBuffer, ReplayBuffer, TensorSpec
from tests.helpers import SPEC1, SegmentModel


def test_py_uniform_buffer_against_the_model_and_to_device():
    ms.set_seed(0)
    py = PyUniformReplayBuffer(SPEC1, capacity=5, seed=1)
    model = SegmentModel(1, 5)
    for start, n in [(0, 1), (1, 3), (4, 4), (8, 1), (9, 7)]:
        py.add_batch({"value": np.arange(start, start + n, dtype=np.float32)})
        for v in range(start, start + n):
            model.add([v])
        np.testing.assert_array_equal(py.gather_all()["value"], model.stored())
    assert py.num_frames() == 5  # holds 11..15
    items, info = py.get_next_with_info(sample_batch_size=500, num_steps=3)
    v = items["value"].astype(np.int64)
    assert (np.diff(v, axis=1) == 1).all() and v.min() >= 11 and v.max() <= 15
    np.testing.assert_allclose(info.probabilities, 1 / 3)
    device = py.to_device(sample_size=4)
    assert isinstance(device, ReplayBuffer) and int(device.size()) == 5
    np.testing.assert_array_equal(device.get_item(Tensor(np.arange(5, dtype=np.int32)))[0].asnumpy(),
                                  np.arange(11, 16))
    with pytest.raises(ValueError, match="the buffer's columns must be"):
        py.to_device(ReplayBuffer(1, 5, [(2,)], [ms.float32]))
    with pytest.raises(ValueError, match=r"the shape of items\['value'\] 'value' must be \(2,\), but got \(2, 2\)"):
        py.add_batch({"value": np.zeros((2, 2), np.float32)})
    py.clear()
    assert py.num_frames() == 0
    with pytest.raises(ValueError, match="the buffer is empty"):
        py.get_next()


def test_get_next_returns_the_items_alone_and_get_next_with_info_the_same_draws_with_info():
    a, b = PyUniformReplayBuffer(SPEC1, capacity=6, seed=4), PyUniformReplayBuffer(SPEC1, capacity=6, seed=4)
    for rb in (a, b):
        rb.add_batch({"value": np.arange(9, dtype=np.float32)})  # holds 3..8, from slot 3
    for args, shape in [((), ()), ((5,), (5,)), ((None, 3), (3,)), ((5, 3), (5, 3))]:
        items = a.get_next(*args)
        with_info, info = b.get_next_with_info(*args)
        assert isinstance(items, dict) and items["value"].shape == shape
        np.testing.assert_array_equal(items["value"], with_info["value"])  # same seed, same draws
        assert info.ids.dtype == np.int64 and info.ids.shape == shape
        np.testing.assert_array_equal(info.ids, with_info["value"].astype(np.int64))  # item k was the k-th added
        steps = 1 if len(args) < 2 else args[1]
        np.testing.assert_allclose(info.probabilities, 1 / (6 - steps + 1))
    first, second = a.get_next(num_steps=2, time_stacked=False)
    assert float(second["value"]) == float(first["value"]) + 1
    pairs, info = b.get_next_with_info(4, 2, time_stacked=False)
    assert len(pairs) == 2 and pairs[0]["value"].shape == (4,) and len(info.ids) == 2
    with pytest.raises(ValueError, match="For 'get_next_with_info', the buffer is empty"):
        PyUniformReplayBuffer(SPEC1, capacity=2).get_next_with_info()


def test_size_is_a_property_and_ids_count_the_items_added():
    py = PyUniformReplayBuffer(SPEC1, capacity=4, seed=2)
    assert py.size == 0 and isinstance(py.size, np.int64)
    py.add_batch({"value": np.arange(3, dtype=np.float32)})
    py.add_batch({"value": np.arange(3, 10, dtype=np.float32)})  # wraps: holds 6..9
    assert py.size == 4 and py.num_frames() == 4
    items, info = py.get_next_with_info(sample_batch_size=100)
    np.testing.assert_array_equal(info.ids, items["value"].astype(np.int64))  # unique across overwrites
    assert set(info.ids.tolist()) <= {6, 7, 8, 9}
    passed = [float(item["value"]) for item in py.as_dataset(single_deterministic_pass=True)]
    assert passed == [6, 7, 8, 9]
    py.clear()
    assert py.size == 0
    py.add_batch({"value": np.array([42], np.float32)})
    assert py.get_next_with_info()[1].ids == 0, "ids start again from 0 after clear"


def test_the_add_counter_is_checkpointed_and_old_files_derive_it(tmp_path):
    py = PyUniformReplayBuffer(SPEC1, capacity=4, seed=1)
    py.add_batch({"value": np.arange(7, dtype=np.float32)})
    py.save(tmp_path / "py.safetensors")
    restored = PyUniformReplayBuffer(SPEC1, capacity=4)
    restored.load(tmp_path / "py.safetensors")
    restored.add_batch({"value": np.array([7], np.float32)})
    items, info = restored.get_next_with_info(sample_batch_size=50)
    np.testing.assert_array_equal(info.ids, items["value"].astype(np.int64))
    spec = {"value": TensorSpec([], ms.int32, "value"), "obs": TensorSpec([2], ms.float32, "obs")}
    old = PyUniformReplayBuffer(spec, capacity=4)
    old.load(Path(__file__).resolve().parent / "data" / "v1_py_uniform_replay_buffer.safetensors")  # 2..5: 6 adds
    items, info = old.get_next_with_info(sample_batch_size=50)
    np.testing.assert_array_equal(info.ids, items["value"])


def test_without_a_seed_it_follows_mindspore_set_seed_like_the_device_buffers():
    def draws():
        buffer = PyUniformReplayBuffer(SPEC1, 64)
        buffer.add_batch({"value": np.arange(64, dtype=np.float32)})
        return [item["value"].tolist() for item in (buffer.get_next(sample_batch_size=16) for _ in range(3))]

    ms.set_seed(11)
    first = draws()
    ms.set_seed(11)
    assert draws() == first  # numpy's fresh entropy drew apart


@pytest.mark.parametrize("shape, capacity, message", [
    ((0,), 4, r"the shape of items\['obs'\] must be a tuple of ints >= 1 \(an empty item stores nothing\), "
              r"but got \(0,\)"),
    ((1,) * 8, 4, r"the shape of items\['obs'\] must be at most 7 dims"),
    ((1024,), 2**30, r"the size of items\['obs'\] must be at most 1099511627776 bytes \(1 TiB\), but got 1073741824 "
                     r"rows of shape \(1024,\) and dtype Float32: 4398046511104 bytes"),
])
def test_a_spec_the_device_buffers_refuse_is_refused_before_numpy_allocates(shape, capacity, message):
    # Such specs were taken, and failed later in to_device (naming ReplayBuffer) or in numpy (MemoryError).
    with pytest.raises(ValueError, match=rf"^For 'PyUniformReplayBuffer', {message}"):
        PyUniformReplayBuffer({"obs": TensorSpec(shape, "float32")}, capacity)
    device = PyUniformReplayBuffer({"obs": TensorSpec((1,) * 7, "float32")}, 2).to_device()  # the limit itself
    assert device.specs[0].shape == (1,) * 7
