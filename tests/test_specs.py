"""Column specs, and bool columns: stored as uint8, bool at every boundary, on every path."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from mindspore_rl_buffer import (
    PriorityReplayBuffer,
    PyUniformReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TrajectoryReplayBuffer,
    create_buffer,
)
from mindspore_rl_buffer.specs import storage_dtype

FLAGS = np.array([True, False, False, True, True, False, True])


def items(n, start=0):
    """Item ``i`` has value ``i`` and flag ``FLAGS[i % 7]``: a flag can be checked against its row."""
    ids = np.arange(start, start + n)
    return [ids.astype(np.int32), FLAGS[ids % 7].reshape(n, 1)]


def assert_flags_match(values, flags):
    values, flags = np.asarray(values), np.asarray(flags)
    assert flags.dtype == np.bool_
    np.testing.assert_array_equal(flags.reshape(len(values)), FLAGS[values % 7])


def test_a_bool_column_is_stored_as_uint8_and_read_back_as_bool():
    assert storage_dtype(ms.bool_) == ms.uint8 and storage_dtype(ms.float32) == ms.float32
    rb = ReplayBuffer(16, 5, [(), (1,)], [ms.int32, ms.bool_], names=["value", "done"])
    assert rb.columns[1].dtype == ms.uint8 and rb.specs[1].dtype == ms.bool_
    rb.insert(items(8))  # wrapped
    value, done = rb.get_item(Tensor(np.arange(5, dtype=np.int32)))
    assert done.dtype == ms.bool_
    assert_flags_match(value.asnumpy(), done.asnumpy())
    value, done = rb.sample()
    assert_flags_match(value.asnumpy(), done.asnumpy())
    with pytest.raises(ValueError, match="dtype of column 'done' must be Bool, but got UInt8"):
        rb.insert([np.int32(1), np.ones(1, np.uint8)])  # the stored dtype is not the column's


class UserStep(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, value, done):
        _ = self.buffer.insert([value, done])
        return self.buffer.sample(), self.buffer.get_item(-1)


def test_bool_columns_inside_a_users_graph_through_a_writer_and_a_checkpoint(tmp_path):
    rb = ReplayBuffer(8, 6, [(), (1,)], [ms.int32, ms.bool_], names=["value", "done"])
    step = UserStep(rb)
    for start in range(0, 9, 3):
        (value, done), (newest, newest_done) = step(*(Tensor(x) for x in items(3, start)))
        assert done.dtype == ms.bool_ and newest_done.dtype == ms.bool_
        assert_flags_match(value.asnumpy(), done.asnumpy())
        assert_flags_match(newest.asnumpy().reshape(1), newest_done.asnumpy())
    with rb.writer(4) as writer:
        for i in range(9, 14):
            writer.insert([np.int32(i), FLAGS[[i % 7]]])
    assert_flags_match(*(x.asnumpy() for x in rb.get_item(Tensor(np.arange(6, dtype=np.int32)))))
    path = rb.save(tmp_path / "bool.safetensors")
    restored = ReplayBuffer(8, 6, [(), (1,)], ["int32", "bool"], names=["value", "done"])
    restored.load(path)
    np.testing.assert_array_equal(restored.columns[1].asnumpy(), rb.columns[1].asnumpy())
    assert_flags_match(*(x.asnumpy() for x in restored.sample()))


@pytest.mark.parametrize("build", [
    lambda: PriorityReplayBuffer(0.6, 6, 8, [(), (1,)], [ms.int32, ms.bool_]),
    lambda: ReservoirReplayBuffer(6, 8, [(), (1,)], [ms.int32, ms.bool_], seed=3),
    lambda: ShardedReplayBuffer(8, 6, [(), (1,)], [ms.int32, ms.bool_], sampling="global"),
    lambda: create_buffer({"type": "ReplayBuffer", "capacity": 6, "sample_size": 8, "data_shape": [[], [1]],
                           "data_type": ["int32", ms.bool_]}),
], ids=["priority", "reservoir", "sharded", "config"])
def test_every_buffer_type_takes_and_gives_bool_columns(build):
    buffer = build()
    buffer.insert(items(9))
    sampled = buffer.sample(0.5)[2:] if isinstance(buffer, PriorityReplayBuffer) else buffer.sample()
    assert_flags_match(*(x.asnumpy() for x in sampled))


def test_the_tf_agents_face_takes_and_gives_bool_leaves():
    spec = {"value": TensorSpec([], ms.int32, "value"), "done": TensorSpec([], ms.bool_, "done")}
    rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=4)
    py = PyUniformReplayBuffer(spec, capacity=4)
    for t in range(6):
        values = np.array([t, 10 + t], np.int32)
        rb.add_batch({"value": values, "done": FLAGS[values % 7]})
        py.add_batch({"value": values[:1], "done": FLAGS[values[:1] % 7]})
    items_, _ = rb.get_next(sample_batch_size=5, num_steps=2)
    assert items_["done"].dtype == ms.bool_
    assert_flags_match(items_["value"].asnumpy().reshape(-1), items_["done"].asnumpy().reshape(-1))
    gathered = rb.gather_all()
    assert_flags_match(gathered["value"].asnumpy().reshape(-1), gathered["done"].asnumpy().reshape(-1))
    sampled = py.get_next(sample_batch_size=5)
    assert_flags_match(sampled["value"], sampled["done"])
