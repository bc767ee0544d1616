"""destroy() refuses save and load, also calls that waited on it; save and load hold a host
buffer's lock; the TransitionReplayBuffer's MindSpore Reinforcement call forms; checkpoint
messages that name what lies beside a missing file; binding floats compared as float32; long
file names."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from mindspore_rl_buffer import (
    PyUniformReplayBuffer,
    ReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TransitionReplayBuffer,
    load_checkpoint,
    lock,
    save_checkpoint,
)

STEP_SHAPES = [(2,), (), (), (), ()]
STEP_TYPES = [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8]


def _step(t: int, num_envs: int = 1) -> list[np.ndarray]:
    return [np.full((num_envs, 2), t, np.float32), np.full(num_envs, t, np.int32), np.ones(num_envs, np.float32),
            np.zeros(num_envs, np.uint8), np.zeros(num_envs, np.uint8)]


def _buffers():
    ring = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    ring.insert([np.ones((3, 2), np.float32)])
    transition = TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES)
    transition.insert(_step(1))
    sharded = ShardedReplayBuffer(2, 8, [(2,)], [ms.float32])
    sharded.insert([np.ones((3, 2), np.float32)])
    return ring, transition, sharded


@pytest.mark.parametrize("kind", [0, 1, 2])
def test_save_and_load_after_destroy_raise_and_leave_the_good_checkpoint(tmp_path, kind):
    buffer = _buffers()[kind]
    written = buffer.save(tmp_path / "good.safetensors")
    before = Path(written).read_bytes()
    buffer.destroy()
    for call in (lambda: buffer.save(tmp_path / "good.safetensors"), lambda: buffer.load(tmp_path / "good.safetensors"),
                 lambda: save_checkpoint(buffer, tmp_path / "good.safetensors"),
                 lambda: load_checkpoint(tmp_path / "good.safetensors", buffer)):
        with pytest.raises(RuntimeError, match="the buffer was destroyed"):
            call()
    assert Path(written).read_bytes() == before


def _waiting(call):
    """``call`` started in a thread that then waits on a lock the test holds; its outcome after ``join``."""
    outcome = {}

    def run():
        try:
            outcome["result"] = call()
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)  # time to reach the lock: a thread not there yet only makes the test pass more easily
    return thread, outcome


@pytest.mark.parametrize("call", ["insert", "save", "load"])
def test_a_call_that_waited_on_destroy_is_refused_and_leaves_the_good_checkpoint(tmp_path, call):
    buffer = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    buffer.insert([np.ones((3, 2), np.float32)])
    path = Path(buffer.save(tmp_path / "good.safetensors"))
    good = path.read_bytes()
    calls = {"insert": lambda: buffer.insert([np.ones((2, 2), np.float32)]),
             "save": lambda: buffer.save(path), "load": lambda: buffer.load(path)}
    with lock:  # the direct calls' lock, as a direct call in another thread holds it
        thread, outcome = _waiting(calls[call])
        buffer.destroy()
    thread.join()
    assert isinstance(outcome.get("error"), RuntimeError) and "destroyed" in str(outcome["error"]), outcome
    assert int(buffer.count) == 0 and "_direct_twins" not in buffer.__dict__
    assert path.read_bytes() == good


def test_a_second_destroy_is_refused_naming_destroy():
    buffer = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    buffer.destroy()
    with pytest.raises(RuntimeError, match=r"^For 'destroy', the buffer was destroyed"):
        buffer.destroy()


def _py(values):
    py = PyUniformReplayBuffer({"x": TensorSpec([2], "float32")}, capacity=8)
    py.add_batch({"x": np.asarray(values, np.float32).reshape(-1, 2)})
    return py


def test_save_checkpoint_of_a_host_buffer_holds_its_lock(tmp_path):
    py = _py(np.arange(6))
    with py.checkpoint_lock():  # an add_batch in progress
        thread, outcome = _waiting(lambda: save_checkpoint(py, tmp_path / "py.safetensors"))
        py.add_batch({"x": np.full((1, 2), 9, np.float32)})
    thread.join()
    assert "error" not in outcome, outcome
    restored = _py([])
    load_checkpoint(tmp_path / "py.safetensors", restored)
    assert int(restored.num_frames()) == 4  # written after the add, not before or in the middle of it


def test_load_checkpoint_into_a_host_buffer_holds_its_lock(tmp_path):
    save_checkpoint(_py(np.arange(6)), tmp_path / "py.safetensors")
    py = _py([])
    with py.checkpoint_lock():
        thread, outcome = _waiting(lambda: load_checkpoint(tmp_path / "py.safetensors", py))
        py.add_batch({"x": np.full((1, 2), 9, np.float32)})
    thread.join()
    assert "error" not in outcome, outcome
    assert int(py.num_frames()) == 3  # restored after the add, so the add is gone: a serial order


def test_a_file_name_as_long_as_the_file_system_takes_is_saved_and_no_temporary_is_left(tmp_path):
    path = tmp_path / ("s" * 240 + ".safetensors")  # 252 characters; the limit is 255
    buffer = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    buffer.insert([np.ones((3, 2), np.float32)])
    buffer.save(path)
    assert os.listdir(tmp_path) == [path.name]
    restored = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    restored.load(path)
    assert int(restored.size()) == 3


def test_a_transition_buffer_takes_the_mindspore_reinforcement_call_forms():
    rb = TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES)
    rb.insert(_step(0))                # one list
    rb.insert(*_step(1))               # one tensor per column
    rb.insert(exp=_step(2))            # MindSpore Reinforcement's name
    rb.push(*_step(3))                 # its 0.6 name
    rb.push(exp=_step(4))
    assert int(rb.size()) == 5
    assert [int(rb.storage.get_item(i)[0][0]) for i in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="give the transition once"):
        rb.insert(*_step(5), exp=_step(5))
    rb.destroy()
    assert int(rb.storage.count) == 0
    with pytest.raises(RuntimeError, match="the buffer was destroyed"):
        rb.insert(_step(6))
    with pytest.raises(RuntimeError, match="the buffer was destroyed"):
        rb.sample()


def test_a_transition_buffer_s_call_forms_work_inside_a_graph():
    class Collect(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, observation, action, reward, terminated, truncated):
            _ = self.buffer.insert(observation, action, reward, terminated, truncated)
            _ = self.buffer.push(exp=[observation, action, reward, terminated, truncated])
            return self.buffer.size()

    ms.set_context(mode=ms.GRAPH_MODE)
    rb = TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES)
    assert int(Collect(rb)(*(Tensor(x) for x in _step(7)))) == 2


def test_a_missing_file_beside_a_sharded_buffer_s_rank_file_names_it(tmp_path):
    ShardedReplayBuffer(2, 8, [(2,)], [ms.float32]).save(tmp_path / "buf.safetensors")
    with pytest.raises(FileNotFoundError) as error:
        ReplayBuffer(2, 8, [(2,)], [ms.float32]).load(tmp_path / "buf.safetensors")
    assert f"'{tmp_path / 'buf.rank0-of-1.safetensors'}' lies beside it" in str(error.value)


def test_a_sharded_buffer_loads_a_file_plain_mindspore_save_checkpoint_wrote(tmp_path):
    source, fresh = ShardedReplayBuffer(2, 8, [(2,)], [ms.float32]), ShardedReplayBuffer(2, 8, [(2,)], [ms.float32])
    source.insert([np.arange(6, dtype=np.float32).reshape(3, 2)])
    ms.save_checkpoint(source, str(tmp_path / "plain.ckpt"))
    fresh.load(tmp_path / "plain.ckpt")
    assert int(fresh.size()) == 3
    np.testing.assert_array_equal(fresh.get_item(-1)[0].asnumpy(), [4, 5])


def test_a_0_d_leaf_names_the_batch_dimension_in_words():
    rb = PyUniformReplayBuffer(TensorSpec((), ms.float32, "x"), 4)
    with pytest.raises(ValueError, match=r"must be \(n,\), with a leading batch dimension n, but got \(\)"):
        rb.add_batch(np.float32(1.0))


def test_a_gamma_given_as_float32_loads_into_a_buffer_of_the_same_float32_discount(tmp_path):
    source = TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES, gamma=np.float32(0.99))
    source.insert(_step(1))
    path = source.save(tmp_path / "gamma.safetensors")
    restored = TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES, gamma=0.99)
    restored.load(path)
    assert int(restored.size()) == 1
    with pytest.raises(ValueError, match="the gamma in"):
        TransitionReplayBuffer(2, 8, STEP_SHAPES, STEP_TYPES, gamma=0.98).load(path)
