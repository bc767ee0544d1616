"""save/load: exact restores for every buffer type, refusals that change nothing, atomic writes."""
from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from mindspore_rl_buffer import (
    PriorityReplayBuffer,
    PyUniformReplayBuffer,
    ReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TrajectoryReplayBuffer,
    load_checkpoint,
    save_checkpoint,
)
from mindspore_rl_buffer.checkpoint_files import FORMAT_1, RECORD
from tests.helpers import (
    DTYPES,
    MS_DTYPES,
    NAMES,
    SHAPES,
    Learner,
    RingModel,
    assert_state_unchanged,
    decode,
    encoded_batch,
    make,
    refuse_to_open,
    state_of,
)

ROOT_DIR = Path(__file__).resolve().parents[1]


def assert_same_state(a, b):
    for x, y in zip(a[0], b[0]):
        np.testing.assert_array_equal(x, y)
    assert a[1:] == b[1:]


def test_a_wrapped_buffer_is_restored_exactly(tmp_path):
    rb, model = make(), RingModel(7, SHAPES, DTYPES)
    rb.insert(encoded_batch(0, 11))
    model.insert(encoded_batch(0, 11))
    saved = state_of(rb)
    assert saved[1] != 0, "the checkpoint must hold a wrapped buffer"
    rb.save(tmp_path / "rb.safetensors")
    restored = make()
    restored.load(tmp_path / "rb.safetensors")
    assert_same_state(state_of(restored), saved)
    assert decode(*restored.get_item(0)) == 4 and decode(*restored.get_item(-1)) == 10


def test_restore_into_a_buffer_whose_graphs_already_ran(tmp_path):
    source = make()
    source.insert(encoded_batch(100, 9))
    source.save(tmp_path / "source.safetensors")
    rb = make()
    learner = Learner(rb)  # compile and run both the direct graphs and a user's graph first
    rb.insert(encoded_batch(0, 3))
    rb.sample(), rb.get_item(0), rb.size()
    learner(*(Tensor(x) for x in encoded_batch(3, 1)))
    rb.load(tmp_path / "source.safetensors")
    assert_same_state(state_of(rb), state_of(source))
    assert decode(*rb.get_item(0)) == 102 and int(rb.size()) == 7  # direct graphs see the restore
    assert set(decode(*rb.sample())) <= set(range(102, 109))
    size, _, newest, _, sampled, _ = learner(*(Tensor(x) for x in encoded_batch(500, 1)))  # so does the user's
    assert int(size) == 7 and decode(*newest) == 500
    assert set(decode(*sampled)) <= set(range(103, 109)) | {500}


def test_trajectory_and_py_uniform_buffers_round_trip(tmp_path):
    spec = {"obs": TensorSpec([2], ms.float32), "step": TensorSpec([], ms.int32)}
    rb = TrajectoryReplayBuffer(spec, batch_size=3, max_length=4)
    py = PyUniformReplayBuffer(spec, capacity=5)
    for t in range(6):
        rb.add_batch({"obs": np.full((3, 2), t, np.float32), "step": np.full(3, t, np.int32)})
        py.add_batch({"obs": np.full((1, 2), t, np.float32), "step": np.full(1, t, np.int32)})
    rb.save(tmp_path / "traj.safetensors")
    save_checkpoint(py, tmp_path / "py.safetensors")
    rb2, py2 = TrajectoryReplayBuffer(spec, batch_size=3, max_length=4), PyUniformReplayBuffer(spec, capacity=5)
    rb2.load(tmp_path / "traj.safetensors")
    load_checkpoint(tmp_path / "py.safetensors", py2)
    np.testing.assert_array_equal(rb2.gather_all()["step"].asnumpy(), rb.gather_all()["step"].asnumpy())
    np.testing.assert_array_equal(py2.gather_all()["step"], [[1, 2, 3, 4, 5]])
    with pytest.raises(ValueError, match="records no PyUniformReplayBuffer"):
        py2.load(tmp_path / "traj.safetensors")


@pytest.mark.parametrize("other, message", [
    (lambda: make(capacity=8), r"Parameter 'state' has shape \(7, 2\) .* but shape \(8, 2\)"),
    (lambda: ReplayBuffer(5, 7, [(3,), (), (1,)], [ms.float32, ms.int32, ms.float32], names=NAMES),
     r"Parameter 'state' has shape \(7, 2\)"),
    (lambda: ReplayBuffer(5, 7, SHAPES, [ms.float32, ms.int64, ms.float32], names=NAMES),
     r"Parameter 'action' has shape \(7,\) and dtype Int32 .* dtype Int64"),
    (lambda: make().__class__(5, 7, SHAPES, [ms.float32, ms.int32, ms.float32]), r"no value for Parameter 'column_0'"),
    (lambda: TrajectoryReplayBuffer({"x": TensorSpec([], ms.float32)}, 2, 3), "records no TrajectoryReplayBuffer"),
])
def test_loading_into_another_kind_of_buffer_is_refused_and_changes_nothing(tmp_path, other, message):
    rb = make()
    rb.insert(encoded_batch(0, 9))
    rb.save(tmp_path / "rb.safetensors")
    target = other()
    before = [p.asnumpy().copy() for p in target.get_parameters()]
    with pytest.raises(ValueError, match=message):
        target.load(tmp_path / "rb.safetensors")
    for x, p in zip(before, target.get_parameters()):
        np.testing.assert_array_equal(x, p.asnumpy())


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
def test_both_formats_round_trip_and_refuse_corrupt_truncated_and_missing_files(tmp_path, suffix):
    rb = make()
    rb.insert(encoded_batch(0, 10))
    path = rb.save(tmp_path / f"rb{suffix}")
    restored = make()
    restored.load(path)
    assert_same_state(state_of(restored), state_of(rb))
    data = path.read_bytes()
    (tmp_path / f"truncated{suffix}").write_bytes(data[: len(data) - 16])
    (tmp_path / f"garbage{suffix}").write_bytes(b"\x00garbage" * 100)
    target = make()
    target.insert(encoded_batch(50, 2))
    before = state_of(target)
    for name in (f"truncated{suffix}", f"garbage{suffix}"):
        with pytest.raises(ValueError, match="is not a readable checkpoint"):
            target.load(tmp_path / name)
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        target.load(tmp_path / f"missing{suffix}")
    with pytest.raises(ValueError, match=r"must end in \.safetensors or \.ckpt"):
        target.save(tmp_path / "rb.bin")
    assert_same_state(state_of(target), before)
    assert decode(*target.sample()).max() <= 51


def _edited_ckpt(path, tmp_path, edit):
    """``path`` (a ``.ckpt``) with its protobuf message changed by ``edit``."""
    from mindspore.train.checkpoint_pb2 import Checkpoint

    message = Checkpoint()
    message.ParseFromString(path.read_bytes())
    edit(message)
    edited = tmp_path / f"edited_{len(list(tmp_path.iterdir()))}.ckpt"
    edited.write_bytes(message.SerializeToString())
    return edited


def _index(message, tag, after=0):
    """The position of the tensor ``after`` places past the one named ``tag`` (the record comes first)."""
    return [value.tag for value in message.value].index(tag) + after


def _set_dims(tag, dims):
    def edit(message):
        index = _index(message, tag)
        del message.value[index].tensor.dims[:]
        message.value[index].tensor.dims.extend(dims)
    return edit


def _rename(tag, after, name):
    def edit(message):
        message.value[_index(message, tag, after)].tag = name
    return edit


def _split_first(message):
    """The first column's tensor written as two slices of one name, as MindSpore writes tensors past 512 MiB."""
    index = _index(message, "state")
    first = message.value[index]
    content = first.tensor.tensor_content
    second = type(message)().value.add()
    second.CopyFrom(first)
    first.tensor.tensor_content, second.tensor.tensor_content = content[:40], content[40:]
    message.value.insert(index + 1, second)


@pytest.mark.parametrize("edit, message", [
    (_set_dims("state", [16, 2]), r"the tensor 'state' declares shape \(16, 2\) of Float32 \(128 bytes\), but "
                                  r"holds \d+ bytes"),
    (_set_dims("state", [-1, 3]), r"the tensor 'state' declares negative dims \[-1, 3\]"),
    (_set_dims("state", [2**28, 3]), r"declares shape \(268435456, 3\) of Float32 \(3221225472 bytes\)"),
    (_rename("state", 1, "state"), r"the slices of the tensor 'state' disagree on its dims or type"),
    (_rename("state", 2, "state"), r"the tensor 'state' is stored in two places"),
])
@pytest.mark.slow
def test_a_ckpt_whose_dims_or_names_disagree_with_its_bytes_is_refused_before_a_tensor_is_built(tmp_path, edit,
                                                                                                 message):
    # MindSpore's reader trusts the dims: such files corrupted the heap (the process died inside
    # the load or at a later call), and 800 bytes declaring [2**28, 3] allocated 3.4 GiB.
    rb = make()
    rb.insert(encoded_batch(0, 4))
    good = rb.save(tmp_path / "rb.ckpt")
    target = make()
    target.insert(encoded_batch(50, 2))
    before = state_of(target)
    with pytest.raises(ValueError, match="is not a readable checkpoint .*" + message):
        target.load(_edited_ckpt(good, tmp_path, edit))
    assert_same_state(state_of(target), before)
    target.insert(encoded_batch(60, 1))
    target.load(good)
    assert_same_state(state_of(target), state_of(rb))



def test_a_ckpt_cut_short_at_any_tensor_s_end_is_refused_as_truncated(tmp_path):
    # A .ckpt is a sequence of tensors: cut at a tensor's end it still parses. The record goes first and
    # lists every tensor, so a cut file cannot pass for one without a record (whose random state a load
    # would take from the buffer instead of the file).
    from mindspore.train.checkpoint_pb2 import Checkpoint

    rb = make()
    rb.insert(encoded_batch(0, 10))
    good = rb.save(tmp_path / "rb.ckpt")
    whole = Checkpoint()
    whole.ParseFromString(good.read_bytes())
    assert whole.value[0].tag == RECORD
    target = make()
    target.insert(encoded_batch(50, 2))
    before = state_of(target)
    for kept in range(1, len(whole.value)):
        def cut(message, kept=kept):
            del message.value[kept:]
        path = _edited_ckpt(good, tmp_path, cut)
        assert good.read_bytes().startswith(path.read_bytes())
        with pytest.raises(ValueError, match=rf"the checkpoint '.*' is truncated or corrupt: its record lists "
                                             rf"{len(whole.value) - kept} tensors it does not hold"):
            target.load(path)
        assert_same_state(state_of(target), before)


def test_a_ckpt_holding_text_under_a_tensor_s_name_is_refused_naming_it(tmp_path):
    source = make()
    source.insert(encoded_batch(0, 3))
    tensors = {name: value for name, value in ms.load_checkpoint(str(source.save(tmp_path / "rb.ckpt"))).items()
               if name not in ("count", RECORD)}
    path = tmp_path / "text.ckpt"  # MindSpore's writer takes text beside tensors (append_dict)
    ms.save_checkpoint([{"name": name, "data": value} for name, value in tensors.items()], str(path),
                       append_dict={"count": "three"})
    target = make()
    before = state_of(target)
    with pytest.raises(ValueError, match=r"must hold a tensor under every name the buffer reads, but it holds a str "
                                         r"under 'count'"):
        target.load(path)
    assert_same_state(state_of(target), before)


def test_a_network_of_every_dtype_saved_by_mindspore_loads_as_mindspore_reads_it(tmp_path):
    # The .ckpt reader builds tensors itself: a 0-d bfloat16 failed in it, and a file holding none
    # of the network's tensors read as corrupt in the safetensors reader.
    values = {"f16": np.array([1.5, -0.0, np.inf], np.float16), "u64": np.array([2**64 - 1], np.uint64),
              "flag": np.array(True), "i8": np.array([[-3, 4]], np.int8), "f64": np.array(2.5)}

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = make()
            for name, value in values.items():
                setattr(self, name, ms.Parameter(Tensor(value), name=name))
            self.bf16 = ms.Parameter(Tensor(np.array(-1.5, np.float32), ms.bfloat16), name="bf16")
            self.bf16_row = ms.Parameter(Tensor(np.array([1e-40, 3e38], np.float32), ms.bfloat16), name="bf16_row")

    source = Net()
    source.buffer.insert(encoded_batch(0, 4))
    path = tmp_path / "net.ckpt"
    ms.save_checkpoint(source, str(path), append_dict={"note": "text", "epoch": 7})
    theirs = ms.load_checkpoint(str(path))
    target = Net()
    ours = load_checkpoint(path, target)
    for name, param in target.parameters_and_names():
        np.testing.assert_array_equal(param.asnumpy(), theirs[name].asnumpy(), err_msg=name)
        assert param.dtype == theirs[name].dtype and tuple(param.shape) == tuple(theirs[name].shape)
    assert set(ours) == {name for name, _ in target.parameters_and_names()}
    assert_same_state(state_of(target.buffer), state_of(source.buffer))
    other = tmp_path / "other.safetensors"
    ms.save_checkpoint(nn.Dense(2, 2), str(other), format="safetensors")
    with pytest.raises(ValueError, match=r"'.*other.safetensors' has no value for Parameter 'buffer.state'"):
        load_checkpoint(other, target)


def test_a_ckpt_tensor_in_slices_loads_joined(tmp_path):
    rb = make()
    rb.insert(encoded_batch(0, 6))
    restored = make()
    restored.load(_edited_ckpt(rb.save(tmp_path / "rb.ckpt"), tmp_path, _split_first))
    assert_same_state(state_of(restored), state_of(rb))


@pytest.mark.slow
def test_a_tensor_the_buffer_does_not_hold_is_never_read(tmp_path):
    # A safetensors file with an extra 2 GiB tensor (a sparse file: nothing on disk) loads with the
    # process's peak memory growing less than 512 MiB: only the buffer's tensors are read (the
    # whole file had been: the peak grew by 2 GiB for an extra 1 GiB).
    rb = make()
    rb.insert(encoded_batch(0, 5))
    path = rb.save(tmp_path / "rb.safetensors")
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8:8 + length]), raw[8 + length:]
    header["zz_extra"] = {"dtype": "F32", "shape": [2**29], "data_offsets": [len(data), len(data) + 2**31]}
    encoded = json.dumps(header).encode()
    extra = tmp_path / "extra.safetensors"
    with open(extra, "wb") as file:
        file.write(len(encoded).to_bytes(8, "little") + encoded + data)
        file.truncate(8 + len(encoded) + len(data) + 2**31)
    script = tmp_path / "load_extra.py"
    script.write_text(textwrap.dedent(f"""
        import resource
        from tests.helpers import encoded_batch, make, state_of
        target = make()
        target.insert(encoded_batch(0, 1))  # MindSpore's runtime started before the baseline
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        target.load({str(extra)!r})
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, state_of(target)[1:])
        """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT_DIR, env={**os.environ, "PYTHONPATH": str(ROOT_DIR)})
    assert done.returncode == 0, done.stderr[-2000:]
    peak_growth_mib, cursors = done.stdout.split(maxsplit=1)
    assert int(peak_growth_mib) < 512 and cursors.strip() == str(state_of(rb)[1:])


def test_a_record_nested_past_python_s_recursion_limit_is_refused_naming_the_file(tmp_path):
    rb = make()
    rb.insert(encoded_batch(0, 3))
    deep = b'{"format": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    params = [{"name": name, "data": p} for name, p in rb.parameters_and_names()]
    params.append({"name": RECORD, "data": Tensor(np.frombuffer(deep, np.uint8).copy())})
    path = tmp_path / "deep.ckpt"
    ms.save_checkpoint(params, str(path))
    with pytest.raises(ValueError, match=r"'.*deep.ckpt' has an unreadable buffer record: it nests too deep to parse"):
        make().load(path)


def test_a_checkpoint_path_that_is_not_a_regular_file_is_refused_saying_what_it_is(tmp_path):
    (tmp_path / "folder.ckpt").mkdir()
    (tmp_path / "loop.ckpt").symlink_to(tmp_path / "loop.ckpt")
    os.mkfifo(tmp_path / "fifo.ckpt")
    cases = {"folder.ckpt": "is a folder, not a file", "loop.ckpt": "cannot be examined: Too many levels of symbolic",
             "fifo.ckpt": "must be a regular file, but it is a device, a FIFO or a socket",
             "x" * 300 + ".ckpt": "cannot be examined: File name too long"}
    for name, message in cases.items():
        with pytest.raises(ValueError, match=f"For 'load', the checkpoint file '.*' {message}"):
            make().load(tmp_path / name)


@pytest.mark.slow
def test_a_training_network_saved_by_mindspore_or_by_us_restores_in_place(tmp_path):
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = make()
            self.dense = nn.Dense(2, 1)

        def construct(self, state, action, reward):
            _ = self.buffer.insert([state, action, reward])
            s, _, _ = self.buffer.sample()
            return self.dense(s).sum()

    net = Net()
    for start in range(0, 12, 3):
        net(*(Tensor(x) for x in encoded_batch(start, 3)))
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.ckpt"
    save_checkpoint(net, ours)
    ms.save_checkpoint(net, str(theirs))
    expected = state_of(net.buffer)
    for path in (ours, theirs):
        fresh = Net()
        fresh(*(Tensor(x) for x in encoded_batch(900, 3)))  # compiled and run before the restore
        load_checkpoint(path, fresh)
        assert_same_state(state_of(fresh.buffer), expected)
        np.testing.assert_array_equal(fresh.dense.weight.asnumpy(), net.dense.weight.asnumpy())
        fresh(*(Tensor(x) for x in encoded_batch(12, 1)))  # the compiled graph writes after the restore
        assert decode(*fresh.buffer.get_item(-1)) == 12 and int(fresh.buffer.size()) == 7


SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    import mindspore as ms
    from mindspore_rl_buffer import ReplayBuffer
    ms.set_context(mode=ms.GRAPH_MODE)
    rb = ReplayBuffer(1, 64, [(256, 1024)], [ms.float32])  # 64 MiB: a save takes a while
    for version in range(1, 1000):
        rb.insert([np.full((64, 256, 1024), version, np.float32)])
        print("begin", version, flush=True)
        rb.save(sys.argv[1])
        print("end", version, flush=True)
""")


def test_a_crash_in_the_middle_of_a_save_leaves_the_previous_checkpoint_intact(tmp_path):
    script, path = tmp_path / "saver.py", tmp_path / "buffer.safetensors"
    script.write_text(SAVER)
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=tmp_path)
    try:
        lines = []
        while "end 1" not in lines:
            lines.append(child.stdout.readline().strip())
        assert child.stdout.readline().strip() == "begin 2"
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".buffer.*.tmp*")):  # kill while the second save is being written
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.0005)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    leftovers = list(tmp_path.glob(".buffer.*.tmp*"))
    assert leftovers, "the kill must interrupt a save in progress (its temporary file is left behind)"
    rb = ReplayBuffer(1, 64, [(256, 1024)], [ms.float32])
    rb.load(path)
    versions = np.unique(rb.columns[0].asnumpy())
    assert len(versions) == 1 and versions[0] in (1.0, 2.0), "a complete checkpoint, never a torn one"


def test_priority_and_reservoir_buffers_round_trip_with_their_trees_and_counters(tmp_path):
    from mindspore_rl_buffer import PriorityReplayBuffer, ReservoirReplayBuffer

    ms.set_seed(4)
    prb = PriorityReplayBuffer(0.6, 8, 4, SHAPES, [ms.float32, ms.int32, ms.float32])
    prb.insert(encoded_batch(0, 11))
    indices, _, *_ = prb.sample(0.4)
    prb.update_priorities(indices, Tensor(np.linspace(0.5, 3.0, 4).astype(np.float32)))
    rrb = ReservoirReplayBuffer(5, 2, SHAPES, [ms.float32, ms.int32, ms.float32])
    rrb.insert(encoded_batch(0, 40))
    for buffer, name in ((prb, "prb"), (rrb, "rrb")):
        path = buffer.save(tmp_path / f"{name}.safetensors")
        before = [p.asnumpy().copy() for p in buffer.get_parameters()]
        buffer.reset()
        buffer.load(path)
        for saved, restored in zip(before, buffer.get_parameters()):
            np.testing.assert_array_equal(saved, restored.asnumpy())
    assert decode(*rrb.get_item(0)) >= 0 and int(rrb.size()) == 5


def _filled_buffers():
    """One small filled buffer of every device kind, built the same way at each call."""
    from mindspore_rl_buffer import ReservoirReplayBuffer, TransitionReplayBuffer

    ms.set_seed(3)
    ring, prb = make(), PriorityReplayBuffer(0.6, 8, 4, SHAPES, [ms.float32, ms.int32, ms.float32])
    rrb = ReservoirReplayBuffer(5, 2, SHAPES, [ms.float32, ms.int32, ms.float32])
    for buffer in (ring, prb, rrb):
        buffer.insert(encoded_batch(0, 11))
    trb = TransitionReplayBuffer(2, 12, [(2,), (), (), (), ()], [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8],
                                 num_envs=2, stack_size=2, n_step=2)
    for t in range(6):
        trb.insert([np.full((2, 2), t, np.float32), np.full(2, t, np.int32), np.ones(2, np.float32),
                    np.array([t == 3, 0], np.uint8), np.zeros(2, np.uint8)])
    trajectory = TrajectoryReplayBuffer(TensorSpec([3], ms.float32, "x"), batch_size=2, max_length=4)
    trajectory.add_batch(Tensor(np.ones((2, 3), np.float32)))
    sharded = ShardedReplayBuffer(2, 6, SHAPES, [ms.float32, ms.int32, ms.float32], names=NAMES)  # one rank
    sharded.insert(encoded_batch(0, 8))
    return ring, prb, rrb, trb, trajectory, sharded


def test_every_buffer_loads_a_file_plain_mindspore_save_checkpoint_wrote(tmp_path):
    # mindspore.save_checkpoint(buffer) names tensors by their Parameter names, ours by attribute
    # paths: a TransitionReplayBuffer's frames, named after the observation column, did not load.
    for i, (source, fresh) in enumerate(zip(_filled_buffers(), _filled_buffers())):
        path = str(tmp_path / f"plain_{i}.ckpt")
        ms.save_checkpoint(source, path)
        fresh.reset() if hasattr(fresh, "reset") else fresh.clear()
        fresh.load(path)
        for saved, restored in zip(source.get_parameters(), fresh.get_parameters()):
            np.testing.assert_array_equal(saved.asnumpy(), restored.asnumpy(), err_msg=type(source).__name__)


class _Holder(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer


def test_every_buffer_loads_a_plain_file_of_itself_held_by_a_network(tmp_path):
    # Held by a network as `buffer`, a buffer's Parameters are named `buffer.column_0`, ...:
    # mindspore.save_checkpoint(buffer) writes those names, and a fresh buffer's are unprefixed.
    for i, (source, fresh) in enumerate(zip(_filled_buffers(), _filled_buffers())):
        _Holder(source)
        assert all(p.name.startswith("buffer.") for p in source.get_parameters()), type(source).__name__
        path = str(tmp_path / f"held_{i}.ckpt")
        ms.save_checkpoint(source, path)
        for restore in (fresh.load, lambda file, fresh=fresh: load_checkpoint(file, fresh)):
            fresh.reset() if hasattr(fresh, "reset") else fresh.clear()
            restore(path)
            for saved, restored in zip(source.get_parameters(), fresh.get_parameters()):
                np.testing.assert_array_equal(saved.asnumpy(), restored.asnumpy(), err_msg=type(source).__name__)


# ------------------------------------------------------------- format 1, written by db13ac2
DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
def test_a_replay_buffer_saved_by_the_first_format_still_loads(suffix):
    model = RingModel(7, SHAPES, DTYPES)
    model.insert(encoded_batch(0, 10))  # what the file's writer inserted: wrapped, head 3
    rb = make(capacity=7, sample_size=4)
    rb.load(DATA / f"v1_replay_buffer{suffix}")
    columns, head, count = state_of(rb)
    assert (head, count) == (model.head, model.count) == (3, 7)
    for got, want in zip(columns, model.columns):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="records no PriorityReplayBuffer"):
        PriorityReplayBuffer(0.6, 7, 4, SHAPES, [ms.float32, ms.int32, ms.float32], names=NAMES).load(
            DATA / f"v1_replay_buffer{suffix}")


def test_priority_reservoir_trajectory_numpy_and_sharded_files_of_the_first_format_still_load():
    from mindspore_rl_buffer import ReservoirReplayBuffer, ShardedReplayBuffer
    from tests.helpers import MS_DTYPES, PriorityModel

    model = PriorityModel(0.6, 7, SHAPES, DTYPES)
    model.insert(encoded_batch(0, 10))
    model.update([0, 2, 5], [2.0, 0.5, 3.0])
    prb = PriorityReplayBuffer(0.6, 7, 4, SHAPES, MS_DTYPES, names=NAMES)
    prb.load(DATA / "v1_priority_replay_buffer.safetensors")
    leaves = prb.sum_tree.asnumpy()[8:15]
    np.testing.assert_allclose(leaves, model.leaves(), rtol=1e-6)
    assert float(prb.max_priority) == 3.0 and int(prb.head) == 3

    rrb = ReservoirReplayBuffer(5, 2, SHAPES, MS_DTYPES, names=NAMES)
    rrb.load(DATA / "v1_reservoir_replay_buffer.safetensors")
    assert (int(rrb.seen), int(rrb.count)) == (10, 5)
    ids = decode(*rrb.get_item(Tensor(np.arange(5, dtype=np.int32))))
    assert len(set(ids)) == 5 and set(ids) <= set(range(10))

    spec = {"value": TensorSpec([], ms.int32, "value"), "obs": TensorSpec([2], ms.float32, "obs")}
    traj = TrajectoryReplayBuffer(spec, batch_size=2, max_length=3)
    traj.load(DATA / "v1_trajectory_replay_buffer.safetensors")
    np.testing.assert_array_equal(traj.gather_all()["value"].asnumpy(), [[2, 3, 4], [12, 13, 14]])
    py = PyUniformReplayBuffer(spec, capacity=4)
    py.load(DATA / "v1_py_uniform_replay_buffer.safetensors")
    np.testing.assert_array_equal(py.gather_all()["value"], [[2, 3, 4, 5]])

    ring = RingModel(7, SHAPES, DTYPES)
    ring.insert(encoded_batch(0, 10))
    sharded = ShardedReplayBuffer(4, 7, SHAPES, MS_DTYPES, names=NAMES)
    sharded.load(DATA / "v1_sharded_replay_buffer.ckpt")
    columns, head, count = state_of(sharded.storage)
    assert (head, count) == (ring.head, ring.count)
    for got, want in zip(columns, ring.columns):
        np.testing.assert_array_equal(got, want)
    other = ShardedReplayBuffer(4, 8, SHAPES, MS_DTYPES, names=NAMES)
    with pytest.raises(ValueError, match=r"the capacity in .* must be 8 to match this buffer, but got 7"):
        other.load(DATA / "v1_sharded_replay_buffer.ckpt")


@pytest.mark.parametrize("buffer, file, head", [
    ("trajectory", "v1_trajectory_replay_buffer.safetensors", "storage.head"),
    ("py_uniform", "v1_py_uniform_replay_buffer.safetensors", "head"),
    ("transition", None, "storage.head"),
])
def test_a_file_of_an_earlier_format_with_a_corrupt_cursor_is_refused_naming_it(tmp_path, buffer, file, head):
    """The values derived for tensors an earlier format lacks (``added``, the start table) are
    not derived from a cursor of the wrong shape: the load names its shape (was a TypeError)."""
    from mindspore_rl_buffer import TransitionReplayBuffer

    spec = {"value": TensorSpec([], ms.int32, "value"), "obs": TensorSpec([2], ms.float32, "obs")}
    build = {"trajectory": lambda: TrajectoryReplayBuffer(spec, batch_size=2, max_length=3),
             "py_uniform": lambda: PyUniformReplayBuffer(spec, capacity=4),
             "transition": lambda: TransitionReplayBuffer(4, 16, [(2,), (), (), (), ()],
                                                          ["float32", "int32", "float32", "uint8", "uint8"])}[buffer]
    if file is None:  # a file written before the start table existed
        source = build()
        source.insert([np.ones((5, 1, 2), np.float32), np.zeros((5, 1), np.int32), np.ones((5, 1), np.float32),
                       np.zeros((5, 1), np.uint8), np.zeros((5, 1), np.uint8)])
        file = source.save(tmp_path / "source.safetensors")
        tensors = ms.load_checkpoint(str(file), format="safetensors")
        tensors.pop("start_table")
        record = json.loads(tensors[RECORD].asnumpy().tobytes())
        del record["checksums"]["start_table"]  # as that file's record: no checksum of a tensor it lacks
        tensors[RECORD] = Tensor(np.frombuffer(json.dumps(record).encode(), np.uint8).copy())
    else:
        tensors = ms.load_checkpoint(str(DATA / file), format="safetensors")
    tensors[head] = Tensor(np.zeros(2, np.int32))
    corrupt = tmp_path / "corrupt.safetensors"
    ms.save_checkpoint([{"name": name, "data": value} for name, value in tensors.items()], str(corrupt),
                       format="safetensors")
    with pytest.raises(ValueError, match=rf"Parameter '{head}' has shape \(2,\)|'{head}' .*shape \(2,\)"):
        load_checkpoint(corrupt, build())


# ------------------------------------------------------ contracts, checksums, settings
@pytest.mark.parametrize("head, count", [(0, 8), (7, 7), (2, 5), (-1, 3), (0, -1)])
def test_a_checkpoint_whose_cursors_break_the_contract_is_refused_and_changes_nothing(tmp_path, head, count):
    source = make()
    source.insert(encoded_batch(0, 5))
    source.head.set_data(Tensor(head, ms.int32))  # what a corrupt or hand-made file could hold
    source.count.set_data(Tensor(count, ms.int32))
    path = source.save(tmp_path / "bad.safetensors")
    target = make()
    target.insert(encoded_batch(50, 3))
    before = state_of(target)
    with pytest.raises(ValueError, match=r"the cursors of '\.' in .* break the contract"):
        target.load(path)
    assert_same_state(state_of(target), before)
    assert set(decode(*target.sample())) <= {50, 51, 52}


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
@pytest.mark.slow
def test_any_flipped_byte_is_refused_or_changes_nothing(tmp_path, suffix):
    rb = make()
    rb.insert(encoded_batch(0, 10))
    path = rb.save(tmp_path / f"rb{suffix}")
    expected, data = state_of(rb), bytearray(path.read_bytes())
    loaded_unchanged = refused = 0
    for position in range(0, len(data), 3):
        corrupt = bytearray(data)
        corrupt[position] ^= 0x5A
        (tmp_path / f"corrupt{suffix}").write_bytes(bytes(corrupt))
        target = make()
        try:
            target.load(tmp_path / f"corrupt{suffix}")
        except ValueError:
            refused += 1
            assert state_of(target)[1:] == (0, 0), "a refused load changes nothing"
            continue
        assert_same_state(state_of(target), expected)  # never different data, silently
        loaded_unchanged += 1
    assert refused > 4 * loaded_unchanged, "flips land mostly in data, header or record, all of which are checked"


def test_a_refused_safetensors_file_is_closed_without_a_resource_warning(tmp_path, monkeypatch):
    # MindSpore's reader leaves the file open when the header does not parse; the load's refusal lets it go
    # at once, where the warning it raises on closing is silenced. A collection afterwards finds nothing open.
    rb = make()
    rb.insert(encoded_batch(0, 10))
    data = rb.save(tmp_path / "rb.safetensors").read_bytes()
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: unraisable.append(report.exc_value))
    for number, blob in enumerate([data[:4], data[:20], bytes([data[0] ^ 0x5A]) + data[1:], data[:8] + b"{" * 40]):
        corrupt = tmp_path / f"corrupt{number}.safetensors"
        corrupt.write_bytes(blob)
        target = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            with pytest.raises(ValueError, match="is not a readable checkpoint"):
                target.load(corrupt)
            gc.collect()
        assert state_of(target)[1:] == (0, 0)
    assert unraisable == []


def test_a_flipped_data_byte_is_named_by_its_parameter(tmp_path):
    rb = make()
    rb.insert(encoded_batch(0, 10))
    path = rb.save(tmp_path / "rb.safetensors")
    data = bytearray(path.read_bytes())
    state = rb.columns[0].asnumpy().tobytes()
    offset = bytes(data).find(state)
    assert offset > 0
    data[offset + len(state) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"the data of Parameter 'state' in .* is corrupt"):
        make().load(path)


def test_a_priority_checkpoint_of_another_alpha_is_refused(tmp_path):
    prb = PriorityReplayBuffer(0.6, 7, 4, SHAPES, [ms.float32, ms.int32, ms.float32], names=NAMES)
    prb.insert(encoded_batch(0, 3))
    path = prb.save(tmp_path / "prb.safetensors")
    other = PriorityReplayBuffer(1.0, 7, 4, SHAPES, [ms.float32, ms.int32, ms.float32], names=NAMES)
    with pytest.raises(ValueError, match=r"the alpha in .* must be 1\.0 to match this buffer, but got 0\.6"):
        other.load(path)
    with pytest.raises(ValueError, match=r"the alpha in .* must be 1\.0 to match this buffer, but got 0\.6"):
        other.load(DATA / "v1_priority_replay_buffer.safetensors")  # format 1 recorded alpha in its text
    assert int(other.count) == 0


# ------------------------------------------------------------- a priority buffer's trees
def priority_buffer(alpha=0.6, capacity=6):
    return PriorityReplayBuffer(alpha, capacity, 4, SHAPES, [ms.float32, ms.int32, ms.float32], names=NAMES)


def trees_of(leaves, count):
    """The sum and min trees the operators build over float32 ``leaves`` (one per leaf node)
    with slots ``[0, count)`` stored."""
    size = leaves.size
    sums, mins = np.zeros(2 * size, np.float32), np.full(2 * size, np.inf, np.float32)
    sums[size:] = leaves
    mins[size:] = np.where(np.arange(size) < count, leaves, np.inf)
    for node in range(size - 1, 0, -1):
        sums[node] = sums[2 * node] + sums[2 * node + 1]
        mins[node] = min(mins[2 * node], mins[2 * node + 1])
    return sums, mins


def set_leaf(sums, mins, slot, value=None, min_value=None):
    """Leaf ``slot`` of either tree set, and every inner node rebuilt from the leaves, so only
    the leaves break the contract."""
    size, sums, mins = sums.size // 2, sums.copy(), mins.copy()
    if value is not None:
        sums[size + slot] = value
    if min_value is not None:
        mins[size + slot] = min_value
    rebuilt_sums, _ = trees_of(sums[size:], size)
    sums[1:size] = rebuilt_sums[1:size]
    for node in range(size - 1, 0, -1):
        mins[node] = min(mins[2 * node], mins[2 * node + 1])
    return sums, mins


def scaled(tree, node, factor):
    tree = tree.copy()
    tree[node] *= factor
    return tree


# Each corrupts a valid state (4 of 6 slots stored, tree of 8 leaves: slot s is node 8 + s) so
# that exactly one invariant breaks.
CORRUPT_TREES = {
    "max_priority_nan": (lambda s, m, t: (s, m, np.float32(np.nan)),
                         r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got nan"),
    "max_priority_zero": (lambda s, m, t: (s, m, np.float32(0)),
                          r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got 0\.0"),
    "max_priority_inf": (lambda s, m, t: (s, m, np.float32(np.inf)),
                         r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got inf"),
    "max_priority_past_the_ceiling": (lambda s, m, t: (s, m, np.float32(3e38)),
                                      r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got 3"),
    "max_priority_below_the_floor": (lambda s, m, t: (s, m, np.float32(1e-9)),
                                     r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got 9\.99"),
    "max_priority_below_one": (lambda s, m, t: (s, m, np.float32(0.5)),  # it starts at 1 and never decreases
                               r"Parameter 'max_priority' must be in \[1, 2\*\*126\] .*, but got 0\.5"),
    "stored_leaf_above_max_priority": (lambda s, m, t: (*set_leaf(s, m, 1, 100.0, 100.0), t),
                                       r"Parameter 'sum_tree' must hold no leaf above 2\.29\d*, the leaf of "
                                       r"'max_priority' \(4 \*\* alpha 0\.6\), the largest priority stored so far, "
                                       r"but got 100\.0 for slot 1"),
    "stored_leaf_past_the_ceiling": (lambda s, m, t: (*set_leaf(s, m, 1, 3e38, 3e38), t),
                                     r"Parameter 'sum_tree' must hold a leaf in \[1\.175e-38, 2\*\*96\] .* for each "
                                     r"of the 4 stored slots, but got 3"),
    "stored_leaf_subnormal": (lambda s, m, t: (*set_leaf(s, m, 0, 1e-45, 1e-45), t),
                              r"Parameter 'sum_tree' must hold a leaf in \[1\.175e-38, 2\*\*96\] .*, but got 1"),
    "negative_sum_node": (lambda s, m, t: (np.where(np.arange(16) == 9, -5, s).astype(np.float32), m, t),
                          r"Parameter 'sum_tree' must be finite and >= 0 in every node, but got -5\.0 at node 9"),
    "infinite_sum_root": (lambda s, m, t: (np.where(np.arange(16) == 1, np.inf, s).astype(np.float32), m, t),
                          r"Parameter 'sum_tree' must be finite and >= 0 in every node, but got inf at node 1"),
    "nan_min_node": (lambda s, m, t: (s, np.where(np.arange(16) == 3, np.nan, m).astype(np.float32), t),
                     r"Parameter 'min_tree' must be >= 0 \(or \+inf\) in every node, but got nan at node 3"),
    "stored_slot_of_priority_0": (lambda s, m, t: (*set_leaf(s, m, 2, 0.0, 0.0), t),
                                  r"Parameter 'sum_tree' must hold a leaf in \[1\.175e-38, 2\*\*96\] .* for each "
                                  r"of the 4 stored slots, but got 0\.0 for slot 2"),
    "slot_not_stored_with_mass": (lambda s, m, t: (*set_leaf(s, m, 5, 1.0), t),
                                  r"Parameter 'sum_tree' must hold 0 for the slots not stored \(from slot 4 on\), "
                                  r"but got 1\.0 for slot 5"),
    "min_leaf_apart_from_sum_leaf": (lambda s, m, t: (*set_leaf(s, m, 1, None, 0.25), t),
                                     r"Parameter 'min_tree' must hold the leaves of 'sum_tree' for the stored "
                                     r"slots, but got 0\.25 for slot 1"),
    "finite_min_leaf_not_stored": (lambda s, m, t: (*set_leaf(s, m, 6, None, 2.0), t),
                                   r"Parameter 'min_tree' must hold \+inf for the slots not stored \(from slot 4 "
                                   r"on\), but got 2\.0 for slot 6"),
    "root_not_the_sum": (lambda s, m, t: (scaled(s, 1, 1.01), m, t),
                         r"Parameter 'sum_tree' must hold in every inner node the sum of its two children, but "
                         r"node 1 holds"),
    "root_not_the_minimum": (lambda s, m, t: (s, scaled(m, 1, 0.5), t),
                             r"Parameter 'min_tree' must hold in every inner node the minimum of its two children, "
                             r"but node 1 holds"),
}


@pytest.mark.parametrize("case", list(CORRUPT_TREES))
@pytest.mark.slow
def test_a_priority_checkpoint_whose_trees_break_their_invariants_is_refused_and_changes_nothing(tmp_path, case):
    corrupt, message = CORRUPT_TREES[case]
    source = priority_buffer()
    source.insert(encoded_batch(0, 4))
    source.update_priorities(np.array([0, 3, 1], np.int32), np.array([2.0, 0.5, 4.0], np.float32))
    sums, mins, top = source.sum_tree.asnumpy(), source.min_tree.asnumpy(), source.max_priority.asnumpy()
    expected_sums, expected_mins = trees_of(sums[8:], 4)
    np.testing.assert_array_equal(sums, expected_sums)  # the corruptions start from a state the buffer reached
    np.testing.assert_array_equal(mins, expected_mins)
    sums, mins, top = corrupt(sums, mins, top)
    # As plain mindspore.save_checkpoint writes it: no record, no checksums; only the contract can tell.
    values = {param.name: param.asnumpy() for param in source.get_parameters()}
    values.update(sum_tree=sums, min_tree=mins, max_priority=np.asarray(top, np.float32))
    path = str(tmp_path / "corrupt.ckpt")
    ms.save_checkpoint([{"name": name, "data": Tensor(value)} for name, value in values.items()], path)

    target = priority_buffer()
    target.insert(encoded_batch(50, 7))  # wrapped: 51..56
    target.update_priorities(np.array([2, 4], np.int32), np.array([3.0, 0.1], np.float32))
    target.sample(0.4)
    before = [param.asnumpy().copy() for param in target.get_parameters()]
    with pytest.raises(ValueError, match=r"the state of '\.' in .* is not one the buffer can reach: " + message):
        target.load(path)
    for saved, param in zip(before, target.get_parameters()):
        np.testing.assert_array_equal(saved, param.asnumpy())
    slots, weights, *columns = target.sample(0.4)
    assert set(decode(*columns)) <= set(range(51, 57))
    np.testing.assert_array_equal(decode(*columns), target.columns[1].asnumpy()[slots.asnumpy()])
    assert np.isfinite(weights.asnumpy()).all() and (weights.asnumpy() > 0).all()
    assert (weights.asnumpy() <= 1).all()
    good = source.save(tmp_path / "good.safetensors")
    target.load(good)  # nothing was left half-written: a valid checkpoint still restores
    assert set(decode(*target.sample(0.4)[2:])) <= {0, 1, 2, 3}


@pytest.mark.slow
def test_the_tree_check_accepts_every_state_the_buffer_reaches(tmp_path):
    rng = np.random.default_rng(11)
    for alpha, capacity in ((0.0, 5), (0.6, 1), (0.6, 6), (3.0, 8)):
        prb, start = priority_buffer(alpha, capacity), 0
        for step in range(8):
            size = int(rng.choice([1, 3, capacity + 2]))
            prb.insert(encoded_batch(start, size))
            start += size
            slots = rng.integers(0, int(prb.count), 9).astype(np.int32)  # repeats: the leaves may differ in rounding
            priorities = rng.choice([0.0, 1e-9, 0.3, 2.0, 1e5], 9).astype(np.float32)
            prb.update_priorities(slots, priorities)
            if step == 5:
                prb.reset()
            path = prb.save(tmp_path / f"prb_{alpha}_{capacity}_{step}.safetensors")
            restored = priority_buffer(alpha, capacity)
            restored.load(path)
            for saved, param in zip(prb.get_parameters(), restored.get_parameters()):
                np.testing.assert_array_equal(saved.asnumpy(), param.asnumpy())



# ------------------------------------------------------------- records that lack a key
def with_record(path, tmp_path, edit):
    """``path`` rewritten by ``mindspore.save_checkpoint`` with its record (JSON) changed by ``edit``."""
    loaded = ms.load_checkpoint(str(path))
    meta = json.loads(loaded.pop(RECORD).asnumpy().tobytes())
    edit(meta)
    params = [{"name": name, "data": value} for name, value in loaded.items()]
    params.append({"name": RECORD, "data": Tensor(np.frombuffer(json.dumps(meta).encode(), np.uint8).copy())})
    edited = str(tmp_path / "edited.ckpt")
    ms.save_checkpoint(params, edited)
    return edited


def without(key):
    def edit(meta):
        meta["buffers"]["."].pop(key)
        meta.pop("checksums")
    return edit


def setting(key, value):
    def edit(meta):
        meta["buffers"]["."][key] = value
    return edit


def without_alpha(meta):
    meta["buffers"]["."]["settings"].pop("alpha")


def format_1_without_alpha(meta):
    meta.update(format=FORMAT_1, buffers={".": "PriorityReplayBuffer(sample_size=4, capacity=6, columns=[])"})
    meta.pop("checksums")


# (edit of a record written with alpha 0.9, alpha of the buffer loading it, the refusal). The
# alpha matches where the case is not about it, so the missing key alone must refuse.
RECORDS_LACKING = {
    "no_settings": (without("settings"), 0.1, r"unreadable buffer record: the record of '\.' must hold 'type', "
                                                r"'capacity', 'specs' and 'settings', .* but it has no 'settings'"),
    "no_alpha": (without_alpha, 0.1, r"the alpha in .* must be 0\.1 to match this buffer, but the record of '\.' "
                                     r"has no alpha"),
    "no_capacity": (without("capacity"), 0.9, r"unreadable buffer record: .* but it has no 'capacity'"),
    "no_specs": (without("specs"), 0.9, r"unreadable buffer record: .* but it has no 'specs'"),
    "settings_not_a_dict": (setting("settings", []), 0.9, r"the settings in the record of '\.' must be a dict, "
                                                           r"but got list"),
    "capacity_a_string": (setting("capacity", "6"), 0.9, r"the capacity in .* must be 6 to match this buffer, "
                                                          r"but got '6'"),
    "format_1_without_alpha": (format_1_without_alpha, 0.1, r"unreadable buffer record: the record of a "
                                                            r"PriorityReplayBuffer must hold its alpha"),
}


@pytest.mark.parametrize("case", list(RECORDS_LACKING))
@pytest.mark.slow
def test_a_record_lacking_a_binding_setting_or_a_key_is_refused_and_changes_nothing(tmp_path, case):
    edit, alpha, message = RECORDS_LACKING[case]
    source = priority_buffer(alpha=0.9)
    source.insert(encoded_batch(0, 4))
    source.update_priorities(np.array([0], np.int32), np.array([5.0], np.float32))
    path = with_record(source.save(tmp_path / "prb.ckpt"), tmp_path, edit)
    target = priority_buffer(alpha=alpha)
    target.insert(encoded_batch(50, 3))
    target.sample(0.4)
    before = [param.asnumpy().copy() for param in target.get_parameters()]
    with pytest.raises(ValueError, match=message):
        target.load(path)
    for saved, param in zip(before, target.get_parameters()):
        np.testing.assert_array_equal(saved, param.asnumpy())
    assert set(decode(*target.sample(0.4)[2:])) <= {50, 51, 52}
    target.insert(encoded_batch(60, 1))
    assert int(target.size()) == 4


def test_a_complete_record_and_a_file_without_records_still_load(tmp_path):
    source = priority_buffer(alpha=0.9)
    source.insert(encoded_batch(0, 4))
    path = with_record(source.save(tmp_path / "prb.ckpt"), tmp_path, lambda meta: None)
    priority_buffer(alpha=0.9).load(path)
    plain = str(tmp_path / "plain.ckpt")  # mindspore.save_checkpoint(buffer): no record, so no settings to check
    ms.save_checkpoint(source, plain)
    restored = priority_buffer(alpha=0.9)
    restored.load(plain)
    assert set(decode(*restored.sample(0.4)[2:])) <= {0, 1, 2, 3}


def test_a_path_under_a_file_or_onto_a_folder_is_refused_naming_it(tmp_path):
    rb = make()
    rb.insert(encoded_batch(0, 3))
    (tmp_path / "notes.txt").write_text("a file")
    (tmp_path / "run.ckpt").mkdir()
    with pytest.raises(ValueError, match=r"For 'save', the checkpoint path '.*notes.txt/deeper/b.safetensors' cannot "
                                         r"be written: '.*notes.txt' is a file, not a folder\.$"):
        rb.save(tmp_path / "notes.txt" / "deeper" / "b.safetensors")  # was a bare FileExistsError
    with pytest.raises(ValueError, match=r"'.*run.ckpt' cannot be written: it is a folder, not a file\.$"):
        rb.save(tmp_path / "run.ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "run.ckpt"]
    assert rb.save(tmp_path / "new" / "b.ckpt").exists()  # a missing folder is made


def test_a_mismatch_error_gives_a_buffer_s_own_record_without_a_stray_name(tmp_path):
    make().save(tmp_path / "rb.ckpt")
    with pytest.raises(ValueError, match=r"The checkpoint holds \{'type': 'ReplayBuffer', .*; the network holds "
                                         r"\{'type': 'ReplayBuffer', 'capacity': 8"):
        make(capacity=8).load(tmp_path / "rb.ckpt")


@pytest.mark.parametrize("seen", [2**63 - 2, 2**62 + 1, -1])
@pytest.mark.slow
def test_a_reservoir_checkpoint_whose_counter_could_not_take_another_insert_is_refused(tmp_path, seen):
    from mindspore_rl_buffer import ReservoirReplayBuffer

    source = ReservoirReplayBuffer(4, 2, SHAPES, [ms.float32, ms.int32, ms.float32])
    source.insert(encoded_batch(0, 6))
    values = {param.name: param.asnumpy() for param in source.get_parameters()}
    values["seen"] = np.asarray(seen, np.int64)  # as plain mindspore.save_checkpoint writes it
    path = str(tmp_path / "seen.ckpt")
    ms.save_checkpoint([{"name": name, "data": Tensor(value)} for name, value in values.items()], path)
    target = ReservoirReplayBuffer(4, 2, SHAPES, [ms.float32, ms.int32, ms.float32])
    target.insert(encoded_batch(10, 3))
    before = [param.asnumpy().copy() for param in target.get_parameters()]
    with pytest.raises(ValueError, match=rf"head=0, count=4, seen={seen}: a reservoir keeps head=0, "
                                         rf"count=min\(seen, 4\) and 0 <= seen <= 2\*\*62"):
        target.load(path)
    for saved, param in zip(before, target.get_parameters()):
        np.testing.assert_array_equal(saved, param.asnumpy())
    values["seen"] = np.asarray(2**62, np.int64)  # the largest accepted takes further inserts
    ms.save_checkpoint([{"name": name, "data": Tensor(value)} for name, value in values.items()], path)
    target.load(path)
    target.insert(encoded_batch(20, 3))
    assert (int(target.seen), int(target.count)) == (2**62 + 3, 4)


def test_a_save_that_fails_leaves_no_temporary_file_behind(tmp_path, monkeypatch):
    # On a full disk MindSpore's .ckpt writer failed after writing its own '<temporary>.tmp', which stayed.
    rb = make()
    rb.insert(encoded_batch(0, 3))
    previous = rb.save(tmp_path / "rb.ckpt")

    def full_disk(params, name, **kwargs):
        Path(name).with_suffix(".tmp").write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ms, "save_checkpoint", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        rb.save(tmp_path / "rb.ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rb.ckpt"]
    monkeypatch.undo()
    make().load(previous)


class SafetensorError(Exception):
    """Stands in for the safetensors writer's own error, which is no OSError."""


@pytest.mark.parametrize("failure, kind, reason", [
    (lambda name: PermissionError(13, "Permission denied", name), PermissionError,
     r"PermissionError: Permission denied"),
    (lambda name: SafetensorError(f"Error while serializing: I/O error: Permission denied at path {name!r}"), OSError,
     r"SafetensorError: Error while serializing"),
])
def test_a_save_that_fails_names_the_checkpoint_not_its_temporary_file(tmp_path, monkeypatch, failure, kind, reason):
    # A read-only folder: the writers' errors named the temporary file beside the checkpoint.
    rb = make()

    def refused(params, name, **kwargs):
        raise failure(name)

    monkeypatch.setattr(ms, "save_checkpoint", refused)
    with pytest.raises(kind, match=rf"the checkpoint could not be written \({reason}.*\): '{tmp_path / 'rb.ckpt'}'$"):
        rb.save(tmp_path / "rb.ckpt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("leads_to", ["nothing", "itself"])
def test_a_save_under_a_symbolic_link_that_leads_nowhere_is_refused_naming_the_link(tmp_path, leads_to):
    # The folder was made with mkdir outside the save's checks: a bare FileExistsError naming the link.
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nothing" if leads_to == "nothing" else link)
    with pytest.raises(ValueError, match=rf"^For 'save', the checkpoint path '{re.escape(str(link))}/sub/rb\.ckpt' "
                                         rf"cannot be written: '{re.escape(str(link))}' is a symbolic link that leads "
                                         rf"nowhere \(to nothing, or in a loop\)\.$"):
        make().save(link / "sub" / "rb.ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["link"]


def test_a_folder_a_save_cannot_make_is_an_os_error_naming_the_checkpoint(tmp_path, monkeypatch):
    # A missing folder under a read-only one: mkdir's bare PermissionError named the folder, not the checkpoint.
    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    target = tmp_path / "sub" / "rb.ckpt"
    with pytest.raises(PermissionError, match=rf"the checkpoint could not be written \(PermissionError: Permission "
                                              rf"denied\): '{re.escape(str(target))}'$"):
        make().save(target)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_that_cannot_be_opened_is_an_os_error_not_a_corrupt_file(tmp_path, monkeypatch):
    # A file without read permission was refused as "not a readable checkpoint (corrupt or truncated?)".
    rb = make()
    rb.insert(encoded_batch(0, 3))
    path = rb.save(tmp_path / "rb.ckpt")
    refuse_to_open(monkeypatch, path)
    target = make()
    before = state_of(target)
    with pytest.raises(PermissionError, match=rf"^\[Errno 13\] For 'load', the checkpoint could not be read "
                                              rf"\(PermissionError: Permission denied\): '{re.escape(str(path))}'$"):
        target.load(path)
    assert_state_unchanged(before, state_of(target))
    monkeypatch.undo()
    target.load(path)
    np.testing.assert_array_equal(decode(*target.get_item(np.arange(3))), [0, 1, 2])


@pytest.mark.parametrize("path, got", [(b"rb.ckpt", "bytes"), (None, "NoneType"), (123, "int")])
def test_a_checkpoint_path_of_another_type_is_a_type_error_naming_the_call(path, got):
    rb, sharded = make(), ShardedReplayBuffer(4, 7, SHAPES, MS_DTYPES, names=NAMES)
    calls = [("save", rb.save), ("load", rb.load), ("save", lambda p: save_checkpoint(rb, p)),
             ("load", lambda p: load_checkpoint(p, rb)), ("save", sharded.save), ("load", sharded.load)]
    for op, call in calls:
        with pytest.raises(TypeError, match=rf"^For '{op}', the checkpoint path must be a str or a pathlib\.Path, "
                                            rf"but got {got}\.$"):
            call(path)
