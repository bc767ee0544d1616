"""The seam between direct calls and graphs: one mechanism, one lock, two threads at once.

Each thread test runs two (or three) threads for a few seconds against a fresh buffer, so
that the first calls compile concurrently too: a writer inserting encoded items in order,
and a reader mixing samples, reads and resets. Every call must either succeed or refuse
with the documented error of the state it met (an empty buffer), every row read must be
intact, and the final state must be one a numpy model reaches from the writer's items
after some reset point (the only thing the interleaving decides).
"""
from __future__ import annotations

import os
import pathlib
import random
import re
import subprocess
import sys
import time

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from mindspore_rl_buffer.ops import draws, tree_size

from mindspore_rl_buffer import (
    BufferInfo,
    PriorityReplayBuffer,
    PyUniformReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TrajectoryReplayBuffer,
    TransitionReplayBuffer,
)
from tests.helpers import (
    DTYPES,
    MS_DTYPES,
    NAMES,
    SHAPES,
    SPEC1,
    RingModel,
    decode,
    encoded_batch,
    make,
    run_threads,
    state_of,
)

SECONDS = 3.0
MIN_BATCHES = 40
ROOT = pathlib.Path(__file__).resolve().parents[1]


def writer_of(buffer, batches, boundaries, reset=None):
    """Insert encoded items in order, in the batch sizes given, for SECONDS; record batch boundaries.

    Every 20th batch or so it also empties the buffer (``reset``), so that a reset can fall
    between another thread's host check and its launch.
    """
    rng = random.Random(7)

    def write(stop):
        start, deadline = 0, time.monotonic() + SECONDS
        for done, n in enumerate(batches):
            # At least MIN_BATCHES batches, and SECONDS of them: the checks below must not
            # depend on how fast a loaded machine runs.
            if stop.is_set() or (done >= MIN_BATCHES and time.monotonic() > deadline):
                break
            buffer.insert(encoded_batch(start, n, single=n == 1) if n == 1 else encoded_batch(start, n))
            start += n
            boundaries.append(start)
            if rng.random() < 0.05:
                (reset or buffer.reset)()
        stop.set()

    return write


def refuses_only_when_empty(call, *also):
    """``call()``; a ValueError or IndexError is accepted only when it says the buffer is empty
    (or, for windows, holds fewer steps than asked: pass that message's words as ``also``)."""
    try:
        return call()
    except ValueError as error:
        assert any(words in str(error) for words in ("empty", *also)), error
    except IndexError as error:
        assert "the buffer is empty (holding 0 items)" in str(error), error
    return None


def assert_some_reset_point_explains(buffer, boundaries, capacity):
    """The final state equals the model's after inserting the items from some reset point on."""
    columns, head, count = state_of(buffer)
    for reset_point in [0, *boundaries]:
        model = RingModel(capacity, SHAPES, DTYPES)
        start = reset_point
        for end in [b for b in boundaries if b > reset_point]:
            model.insert(encoded_batch(start, end - start))
            start = end
        if (model.head, model.count) != (head, count):
            continue
        rows = [model.row(i) for i in range(count)]
        if all(np.array_equal(c[rows], m[rows]) for c, m in zip(columns, model.columns)):
            return reset_point
    raise AssertionError(f"no reset point explains head={head}, count={count}")


BATCHES = [random.Random(0).choice([1, 1, 2, 3, 5]) for _ in range(100000)]


@pytest.mark.parametrize("kind", ["replay", "sharded"])
@pytest.mark.slow
def test_two_threads_insert_sample_read_and_reset_a_ring_buffer(kind):
    buffer = make(capacity=16, sample_size=8) if kind == "replay" else \
        ShardedReplayBuffer(8, 16, SHAPES, MS_DTYPES, names=NAMES)
    boundaries: list[int] = []
    rng = random.Random(1)

    def read(stop):
        while not stop.is_set():
            choice = rng.random()
            if choice < 0.35:
                ids = refuses_only_when_empty(lambda: decode(*buffer.sample()))
                assert ids is None or (ids >= 0).all()
            elif choice < 0.6:
                ids = refuses_only_when_empty(lambda: decode(*buffer.sample(ordered=True)))
                assert ids is None or (np.diff(ids) >= 0).all()
            elif choice < 0.8 and kind == "replay":
                newest = refuses_only_when_empty(lambda: decode(*buffer.get_item(-1)))
                assert newest is None or 0 <= newest < 10**6
            elif choice < 0.8:
                assert 0 <= int(buffer.local_size()) <= 16
            elif choice < 0.88:
                assert 0 <= int(buffer.size()) <= 16
            else:
                buffer.reset()

    errors = run_threads(writer_of(buffer, BATCHES, boundaries), read)
    assert not errors, errors
    assert len(boundaries) >= MIN_BATCHES
    assert_some_reset_point_explains(buffer.storage if kind == "sharded" else buffer, boundaries, 16)
    buffer.reset()  # and the buffer keeps working, direct path included
    buffer.insert(encoded_batch(0, 3))
    assert set(decode(*buffer.sample())) <= {0, 1, 2}


@pytest.mark.slow
def test_two_threads_insert_sample_update_and_reset_a_priority_buffer():
    buffer = PriorityReplayBuffer(0.6, 16, 8, SHAPES, MS_DTYPES, names=NAMES)
    boundaries: list[int] = []
    rng = np.random.default_rng(2)

    def read(stop):
        while not stop.is_set():
            choice = rng.random()
            if choice < 0.4:
                drawn = refuses_only_when_empty(lambda: buffer.sample(0.4))
                if drawn is not None:
                    slots, weights, *columns = drawn
                    decode(*columns)
                    assert (weights.asnumpy() > 0).all() and (weights.asnumpy() <= 1.0 + 1e-6).all()
                    try:
                        buffer.update_priorities(slots, Tensor(rng.uniform(0.1, 5.0, 8).astype(np.float32)))
                    except IndexError as error:  # a reset between the sample and the update
                        assert "in [0, 0)" in str(error) or "holding" in str(error), error
            elif choice < 0.7:
                refuses_only_when_empty(lambda: decode(*buffer.get_item(0)))
            elif choice < 0.97:
                assert 0 <= int(buffer.size()) <= 16
            else:
                buffer.reset()

    errors = run_threads(writer_of(buffer, BATCHES, boundaries), read)
    assert not errors, errors
    assert_some_reset_point_explains(buffer, boundaries, 16)
    size, leaves_at = int(buffer.count), tree_size(16)
    sums, mins = buffer.sum_tree.asnumpy(), buffer.min_tree.asnumpy()
    leaves = sums[leaves_at:]
    assert (leaves[:size] > 0).all() and (leaves[size:] == 0).all()
    for node in range(1, leaves_at):  # every inner node combines its children
        assert sums[node] == pytest.approx(sums[2 * node] + sums[2 * node + 1], rel=1e-5)
        assert mins[node] == min(mins[2 * node], mins[2 * node + 1])


@pytest.mark.slow
def test_two_threads_offer_sample_and_reset_a_reservoir():
    buffer = ReservoirReplayBuffer(16, 8, SHAPES, MS_DTYPES, names=NAMES)
    boundaries: list[int] = []
    resets: list[int] = []

    def read(stop):
        rng = random.Random(3)
        while not stop.is_set():
            choice = rng.random()
            if choice < 0.5:
                refuses_only_when_empty(lambda: decode(*buffer.sample()))
            elif choice < 0.88:
                refuses_only_when_empty(lambda: decode(*buffer.get_item(0)))
            else:
                buffer.reset()
                resets.append(1)

    errors = run_threads(writer_of(buffer, BATCHES, boundaries), read)
    assert not errors, errors
    seen, count = int(buffer.seen), int(buffer.count)
    assert seen in [boundaries[-1] - b for b in [0, *boundaries]], "seen counts the items since some reset"
    assert count == min(seen, 16) and int(buffer.head) == 0
    if count:
        ids = decode(*buffer.get_item(Tensor(np.arange(count, dtype=np.int32))))
        assert len(set(ids)) == count and ids.min() >= boundaries[-1] - seen


@pytest.mark.slow
def test_three_threads_and_a_dataset_pipeline_on_a_trajectory_buffer():
    # In a process of its own: MindSpore 2.10's dataset iterator was seen to crash the process
    # (a segmentation fault) when another GeneratorDataset had run in it before.
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "dataset_threads_worker.py")], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "threads ok" in result.stdout


@pytest.mark.slow
def test_two_threads_on_the_numpy_buffer():
    buffer = PyUniformReplayBuffer(SPEC1, capacity=16, seed=5)
    added: list[int] = []

    def add(stop):
        deadline, n = time.monotonic() + 1.0, 0
        while time.monotonic() < deadline:
            buffer.add_batch({"value": np.arange(n, n + 3, dtype=np.float32)})
            n += 3
            added.append(n)
        stop.set()

    def read(stop):
        while not stop.is_set():
            drawn = refuses_only_when_empty(lambda: buffer.get_next(4, 2), "must not exceed")
            assert drawn is None or (np.diff(drawn["value"], axis=1) == 1).all()  # the items alone
            if random.random() < 0.1:
                buffer.clear()

    errors = run_threads(add, read)
    assert not errors, errors
    stored = buffer.gather_all()["value"][0]
    assert len(stored) <= 16 and (np.diff(stored) == 1).all() and (len(stored) == 0 or stored[-1] == added[-1] - 1)


@pytest.mark.slow
def test_a_save_while_another_thread_runs_a_training_graph_under_the_lock_holds_one_state(tmp_path):
    # Compiled graphs do not take the library's lock: without it a save caught a graph between
    # two columns' writes (different inserts in one row). Holding mindspore_rl_buffer.lock around
    # each call of the graph, as docs/guides/in-your-graph.md says, every file holds one state.
    import mindspore_rl_buffer

    rb = ReplayBuffer(4, 4096, [(64,), ()], [ms.float32, ms.int32])

    class Step(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = rb

        def construct(self, x, y):
            _ = self.buffer.insert([x, y])
            return self.buffer.size()

    step, rows = Step(), np.arange(256, dtype=np.int32)

    def train(stop):
        n = 0
        while not stop.is_set():
            ids = n * 256 + rows
            with mindspore_rl_buffer.lock:
                step(Tensor(np.repeat(ids[:, None], 64, 1).astype(np.float32)), Tensor(ids))
            n += 1

    def save(stop):
        for i in range(25):
            rb.save(tmp_path / f"s{i}.safetensors")
        stop.set()

    errors = run_threads(train, save)
    assert not errors, errors
    for i in range(25):
        restored = ReplayBuffer(4, 4096, [(64,), ()], [ms.float32, ms.int32])
        restored.load(tmp_path / f"s{i}.safetensors")
        count = int(restored.size())
        if count:
            first, second = (column.asnumpy() for column in restored.get_item(np.arange(count)))
            np.testing.assert_array_equal(first, np.repeat(second[:, None], 64, 1))  # one insert per row
            assert (np.diff(second) == 1).all()  # oldest to newest, consecutive


# ------------------------------------------------------------------------------ the seam
def test_in_graph_is_tested_only_inside_the_seam():
    users = [path.relative_to(ROOT).as_posix() for path in (ROOT / "mindspore_rl_buffer").rglob("*.py")
             if "in_graph()" in path.read_text()]
    assert users == ["mindspore_rl_buffer/_graph.py"]


def test_a_direct_call_compiles_one_twin_per_static_signature():
    buffer = make()
    buffer.insert(encoded_batch(0, 3))
    for _ in range(3):
        buffer.sample()
        buffer.sample(ordered=True)
        buffer.sample_with_indices()
        buffer.insert(encoded_batch(0, 2))
    keys = sorted(name for name, _ in buffer.__dict__["_direct_twins"])
    # One twin for every insert (batch sizes are shapes, not constants), one per (ordered, with_indices).
    assert keys == ["ReplayBuffer._sample", "ReplayBuffer._sample", "ReplayBuffer._sample", "RingBuffer.insert"]


def test_direct_calls_of_two_buffers_and_their_variants_log_no_recompile_warning():
    # MindSpore warned "has been compiled again" for every twin after the first of a name
    # (three times for a first example of direct calls). Its log goes to the stderr of a fresh process.
    script = """
import mindspore as ms, numpy as np
from mindspore_rl_buffer import ReplayBuffer
ms.set_context(mode=ms.GRAPH_MODE)
for _ in range(2):
    rb = ReplayBuffer(4, 8, [(2,)], [ms.float32])
    rb.insert([np.zeros((3, 2), np.float32)])
    rb.insert([np.zeros(2, np.float32)])
    rb.sample(), rb.sample(ordered=True), rb.sample_with_indices()
print("done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "done", done.stderr
    assert "compiled again" not in done.stderr


def test_a_direct_call_in_pynative_mode_and_a_jit_function_use_the_same_methods():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    buffer = make()
    buffer.insert(encoded_batch(0, 4))
    assert set(decode(*buffer.sample())) <= {0, 1, 2, 3}

    @ms.jit
    def insert_and_read(state, action, reward):
        _ = buffer.insert([state, action, reward])
        return buffer.get_item(-1), buffer.size()

    newest, size = insert_and_read(*(Tensor(x) for x in encoded_batch(4, 2)))
    assert decode(*newest) == 5 and int(size) == 6
    ms.set_context(mode=ms.GRAPH_MODE)
    assert decode(*buffer.get_item(0)) == 0



def _filled(kind):
    """A small buffer of ``kind`` holding a few items."""
    if kind == "ReplayBuffer":
        buffer = make()
    elif kind == "ShardedReplayBuffer":
        buffer = ShardedReplayBuffer(4, 7, SHAPES, MS_DTYPES)
    elif kind == "TrajectoryReplayBuffer":
        buffer = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
        buffer.add_batch({"value": Tensor(np.ones((2,), np.float32))})
        return buffer
    else:
        buffer = TransitionReplayBuffer(4, 16, [(2,), (), (), (), ()],
                                        [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8])
        buffer.insert([Tensor(np.ones((6, 1, 2), np.float32)), Tensor(np.zeros((6, 1), np.int32)),
                       Tensor(np.zeros((6, 1), np.float32)), Tensor(np.zeros((6, 1), np.uint8)),
                       Tensor(np.zeros((6, 1), np.uint8))])
        return buffer
    buffer.insert(encoded_batch(0, 3))
    return buffer


def _sample(buffer, value):
    return buffer.sample(value)


def _sample_with_indices(buffer, value):
    return buffer.sample_with_indices(value)[1]


def _get_next_batch(buffer, value):
    return buffer.get_next(sample_batch_size=value)[0]


def _get_next_steps(buffer, value):
    return buffer.get_next(num_steps=value)[0]


def _get_next_unstacked(buffer, value):
    return buffer.get_next(num_steps=2, time_stacked=value)[0]


STATIC_ARGUMENT_CASES = [  # (buffer, call, a constant the call refuses)
    *(("ReplayBuffer", _sample, bad) for bad in (256, "x", 1.0)),
    ("ReplayBuffer", _sample_with_indices, 0),
    ("ShardedReplayBuffer", _sample, 2),
    *(("TransitionReplayBuffer", _sample, bad) for bad in (0, -3, 2.5, True, "8")),
    ("TrajectoryReplayBuffer", _get_next_batch, 0),
    ("TrajectoryReplayBuffer", _get_next_steps, 5),
    ("TrajectoryReplayBuffer", _get_next_unstacked, 1),
]


@pytest.mark.parametrize("kind, call, bad", STATIC_ARGUMENT_CASES)
@pytest.mark.slow
def test_a_graph_refuses_the_constants_a_direct_call_refuses_with_the_same_error(kind, call, bad):
    # A Python constant a construct passes (ordered, batch_size, ...) is part of the graph: it is
    # checked when the graph is compiled, with the direct call's message, before anything runs.
    buffer = _filled(kind)
    with pytest.raises((TypeError, ValueError)) as direct:
        call(buffer, bad)
    before = [x.asnumpy().copy() for x in buffer.get_parameters()]

    class UserStep(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            return call(self.buffer, bad)

    with pytest.raises(direct.type) as compiled:
        UserStep()()
    assert str(compiled.value).splitlines()[0] == str(direct.value)
    assert all(np.array_equal(a, x.asnumpy()) for a, x in zip(before, buffer.get_parameters()))


MUTABLE_CASES = [  # (buffer, call, a value given as a mindspore.mutable, the argument it must be a constant of)
    ("ReplayBuffer", _sample, True, "ordered"),
    ("ReplayBuffer", _sample_with_indices, True, "ordered"),
    ("ShardedReplayBuffer", _sample, True, "ordered"),
    ("TransitionReplayBuffer", _sample, 2, "batch_size"),
]


@pytest.mark.parametrize("kind, call, value, arg", MUTABLE_CASES)
def test_a_graph_refuses_a_mutable_where_a_python_constant_fixes_the_graph(kind, call, value, arg):
    # A mutable reached the compile-time check as None, the default: `ordered` was ignored and a
    # TransitionReplayBuffer drew sample_size items, with no error. A direct call takes the value as a constant.
    buffer = _filled(kind)
    call(buffer, ms.mutable(value))
    before = [x.asnumpy().copy() for x in buffer.get_parameters()]

    class UserStep(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = buffer

        def construct(self, given):
            return call(self.buffer, given)

    expected, fixes = {"ordered": ("a bool or None", "the graph's control flow"),
                       "batch_size": ("an int or None", "the shape of the sample")}[arg]
    with pytest.raises(TypeError) as compiled:
        UserStep()(ms.mutable(value))
    assert str(compiled.value).splitlines()[0] == (
        f"For 'sample', '{arg}' must be a Python constant ({expected}) inside a graph, since it fixes {fixes}, but "
        f"got a graph variable of type {type(value).__name__} (a mindspore.mutable, say), whose value is known only "
        f"when the graph runs.")
    assert all(np.array_equal(a, x.asnumpy()) for a, x in zip(before, buffer.get_parameters()))


def _get_item(buffer, index):
    return buffer.get_item(index)[0]


def _update(buffer, indices, priorities):
    return buffer.update_priorities(indices, priorities)


I32, F32 = np.int32, np.float32
TENSOR_ARGUMENT_CASES = [  # (buffer, call, tensors the call refuses for their dtype or shape)
    ("ReplayBuffer", _get_item, (Tensor(1.7, ms.float32),)),
    ("ReplayBuffer", _get_item, (Tensor(np.array([0.0, 1.9])),)),
    ("ReplayBuffer", _get_item, (Tensor(True),)),
    ("ReplayBuffer", _get_item, (Tensor(np.array([[0, 1]], I32)),)),
    ("PriorityReplayBuffer", _update, (Tensor(np.array([1.7], F32)), Tensor(np.array([5.0], F32)))),
    ("PriorityReplayBuffer", _update, (Tensor(np.array([True])), Tensor(np.array([5.0], F32)))),
    ("PriorityReplayBuffer", _update, (Tensor(np.array([1], I32)), Tensor(np.array([5], I32)))),
    ("PriorityReplayBuffer", _update, (Tensor(np.array([[1]], I32)), Tensor(np.array([[5.0]], F32)))),
    ("PriorityReplayBuffer", _update, (Tensor(np.array([0, 1], I32)), Tensor(np.array([5.0], F32)))),
]


@pytest.mark.parametrize("kind, call, bad", TENSOR_ARGUMENT_CASES)
def test_a_graph_refuses_the_tensors_a_direct_call_refuses_with_the_same_error(kind, call, bad):
    # A tensor's dtype and shape are known when a graph compiles: a float, bool or 2-D index was
    # cast or read silently there (get_item(1.7) read item 1, update_priorities wrote slot 1).
    if kind == "PriorityReplayBuffer":
        buffer = PriorityReplayBuffer(0.6, 8, 4, SHAPES, MS_DTYPES, names=NAMES)
        buffer.insert(encoded_batch(0, 3))
    else:
        buffer = _filled(kind)
    with pytest.raises((TypeError, ValueError)) as direct:
        call(buffer, *bad)
    before = [x.asnumpy().copy() for x in buffer.get_parameters()]

    class UserStep(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = buffer

        def construct(self, *tensors):
            return call(self.buffer, *tensors)

    with pytest.raises(direct.type) as compiled:
        UserStep()(*bad)
    assert str(compiled.value).splitlines()[0] == str(direct.value)
    assert all(np.array_equal(a, x.asnumpy()) for a, x in zip(before, buffer.get_parameters()))
    good = (Tensor(np.array([1], I32)), Tensor(np.array([5.0], F32))) if kind == "PriorityReplayBuffer" else (
        Tensor(np.array([0, 2], I32)),)
    UserStep()(*good)  # the same graph takes tensors of the right dtype and shape
    if kind == "PriorityReplayBuffer":
        assert float(buffer.max_priority.asnumpy()) == 5.0
    else:
        np.testing.assert_array_equal(UserStep()(*good).asnumpy(), buffer.get_item(np.array([0, 2]))[0].asnumpy())


def test_a_graph_refuses_a_bool_get_item_index_as_a_direct_call_does():
    buffer = _filled("ReplayBuffer")
    with pytest.raises(TypeError) as direct:
        buffer.get_item(True)

    class UserStep(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            return self.buffer.get_item(True)[0]

    with pytest.raises(TypeError) as compiled:
        UserStep()()
    assert str(compiled.value).splitlines()[0] == str(direct.value)



def _first_column(buffer):
    return buffer.sample()[0]


def _prioritized_items(buffer):
    return buffer.sample(0.4)[2]


def _trajectory_values(buffer):
    items, (ids, _) = buffer.get_next(8)  # in a graph the info is the pair (ids, probabilities)
    return items["value"] + 0.0 * ids.astype(ms.float32)


def _transition_ids(buffer):
    items, (ids, probabilities) = buffer.sample_with_info()
    return items[0][:, 0] + 0.0 * ids.astype(ms.float32) * probabilities


def _seeded_with_items(kind):
    """``(buffer, draw)``: a buffer of ``kind`` seeded 5 holding 1,000 items (item ``i`` holds ``i``)."""
    items = np.arange(1000, dtype=np.float32)
    if kind == "TrajectoryReplayBuffer":
        segments = TrajectoryReplayBuffer(SPEC1, batch_size=1, max_length=1000, seed=5)
        for value in items[:40]:
            segments.add_batch({"value": Tensor(value[None])})
        return segments, _trajectory_values
    if kind.startswith("TransitionReplayBuffer"):
        steps = TransitionReplayBuffer(8, 1000, [(1,), (), (), (), ()],
                                       [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8], seed=5)
        zeros = np.zeros((1000, 1), np.uint8)
        steps.insert([Tensor(items[:, None, None]), Tensor(zeros.astype(np.int32)),
                      Tensor(zeros.astype(np.float32)), Tensor(zeros), Tensor(zeros)])
        return steps, _transition_ids if kind.endswith("with_info") else _first_column
    if kind == "PriorityReplayBuffer":
        buffer, draw = PriorityReplayBuffer(0.6, 1000, 8, [(1,)], [ms.float32], seed=5), _prioritized_items
    else:
        buffer, draw = {"ReplayBuffer": ReplayBuffer, "ShardedReplayBuffer": ShardedReplayBuffer}[kind](
            8, 1000, [(1,)], [ms.float32], seed=5), _first_column
    buffer.insert([items[:, None]])
    return buffer, draw


class _TwoDraws(ms.nn.Cell):
    def __init__(self, buffer, draw):
        super().__init__()
        self.buffer = buffer
        self.draw = draw

    def construct(self):
        return self.draw(self.buffer), self.draw(self.buffer)


@pytest.mark.parametrize("kind", ["ReplayBuffer", "ShardedReplayBuffer", "PriorityReplayBuffer",
                                  "TransitionReplayBuffer", "TransitionReplayBuffer.sample_with_info",
                                  "TrajectoryReplayBuffer"])
@pytest.mark.slow
def test_two_samples_in_one_graph_draw_apart_and_reproducibly(kind):
    # A seeded buffer's operators are seeded (seed, stream + 64 k), k numbering its operators as
    # they are compiled; unmarked, one graph's two samples compiled one body and drew the same items.
    buffer, draw = _seeded_with_items(kind)
    first, second = (x.asnumpy() for x in _TwoDraws(buffer, draws(draw))())
    assert not np.array_equal(first, second)
    twin, draw = _seeded_with_items(kind)  # built the same, compiled the same: the same draws
    again = [x.asnumpy() for x in _TwoDraws(twin, draws(draw))()]
    np.testing.assert_array_equal(again[0], first)
    np.testing.assert_array_equal(again[1], second)


class _TwoDirectSamples(ms.nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self):
        return self.buffer.sample()[0], self.buffer.sample()[0]


def test_two_samples_under_the_global_seed_draw_apart_called_directly_or_through_a_marked_helper():
    ms.set_seed(3)  # seed=None follows it; the unrolled learn steps of the DQN job are this case
    buffer = ReplayBuffer(8, 1000, [(1,)], [ms.float32])
    buffer.insert([np.arange(1000, dtype=np.float32)[:, None]])
    for graph in (_TwoDirectSamples(buffer), _TwoDraws(buffer, draws(_first_column))):
        first, second = (x.asnumpy() for x in graph())
        assert not np.array_equal(first, second)


# ------------------------------------------------------------------ no host step in a graph
def _host_steps(directory):
    """The host steps (``PyExecute`` / ``PyInterpret`` nodes) in the validated graphs MindSpore saved there."""
    found = set()
    for path in pathlib.Path(directory).rglob("*validate*.ir"):
        found.update(re.findall(r'Py(?:Execute|Interpret)\("[^"]*"', path.read_text()))
    return found


class _NamedtupleInGraph(ms.nn.Cell):
    def construct(self, x):
        info = BufferInfo(x * 2, x + 1)  # built in a graph only through MindSpore's host fallback
        return info.ids + info.probabilities


@pytest.mark.slow
def test_the_graphs_of_direct_calls_hold_no_host_step(tmp_path):
    # A graph returning a dict built it through host steps: direct get_next and gather_all of
    # a dict spec did, before the twins returned flat leaves for the host to rebuild.
    spec = {"value": TensorSpec([], ms.float32, "value"), "pair": (TensorSpec([2], ms.int32, "a"),)}
    trajectory = TrajectoryReplayBuffer(spec, batch_size=2, max_length=8, seed=7)
    for t in range(5):
        trajectory.add_batch({"value": np.full(2, t, np.float32), "pair": (np.full((2, 2), t, np.int32),)})
    transition, _ = _seeded_with_items("TransitionReplayBuffer")
    buffer = make()
    buffer.insert(encoded_batch(0, 3))
    control = tmp_path / "control"
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path / "calls"))
    try:
        items, info = trajectory.get_next(4, 2)
        first, _ = trajectory.get_next(num_steps=2, time_stacked=False)[0]
        stored = trajectory.gather_all()
        transition.sample_with_info()
        buffer.sample()
        buffer.get_item(-1)
        ms.set_context(save_graphs_path=str(control))
        _NamedtupleInGraph()(Tensor(np.ones(3, np.float32)))
    finally:
        ms.set_context(save_graphs=False)
    assert _host_steps(tmp_path / "calls") == set()
    assert _host_steps(control), "the scan found no host step where MindSpore makes one"
    # The host rebuilt the spec's structure from the leaves.
    assert set(items) == {"value", "pair"} and items["pair"][0].shape == (4, 2, 2)
    assert first["value"].shape == () and stored["value"].shape == (2, 5)
    np.testing.assert_array_equal(info.ids.asnumpy() // 2, items["value"].asnumpy().astype(np.int64))
    np.testing.assert_array_equal(stored["pair"][0].asnumpy()[:, :, 0], np.tile(np.arange(5), (2, 1)))
