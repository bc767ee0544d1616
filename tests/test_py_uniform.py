"""PyUniformReplayBuffer, TF-Agents' numpy buffer, against the numpy segment model."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from mindspore_rl_buffer import PyUniformReplayBuffer, ReplayBuffer
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
    items, info = py.get_next(sample_batch_size=500, num_steps=3)
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
