"""Property-based tests: random operation sequences against the numpy models never disagree.

Each test drives one buffer (created once, so graphs compile once per batch size) through
examples that start with ``reset``/``clear``; hypothesis is derandomized so CI runs are
reproducible.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mindspore import Tensor

from mindspore_rl_buffer import PyUniformReplayBuffer, TrajectoryReplayBuffer
from tests.helpers import (
    DTYPES,
    SHAPES,
    SPEC1,
    PriorityModel,
    RingModel,
    SegmentModel,
    decode,
    encoded_batch,
    make,
    state_of,
    step_values,
)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
CHECKPOINT = Path(tempfile.mkdtemp(prefix="properties-")) / "buffer.safetensors"

# Batch sizes: 0, one item without a batch dimension, and batches below, at and over capacity 5.
INSERT = st.tuples(st.just("insert"), st.sampled_from([0, -1, 1, 2, 3, 5, 6, 11]))
GET = st.tuples(st.just("get_item"), st.integers(-7, 6))
SAMPLE = st.tuples(st.just("sample"), st.booleans())
RESET = st.tuples(st.just("reset"), st.none())
SAVE_LOAD = st.tuples(st.just("save_load"), st.none())
OPERATIONS = st.lists(st.one_of(INSERT, INSERT, GET, SAMPLE, RESET, SAVE_LOAD), min_size=1, max_size=14)

_buffers: dict[str, object] = {}


def buffer(key, factory):
    if key not in _buffers:
        _buffers[key] = factory()
    return _buffers[key]


@SETTINGS
@given(OPERATIONS)
@pytest.mark.slow
def test_replay_buffer_never_disagrees_with_the_model(operations):
    ms.set_context(mode=ms.GRAPH_MODE)
    rb, model, start = buffer("ring", lambda: make(capacity=5, sample_size=6)), RingModel(5, SHAPES, DTYPES), 0
    rb.reset()
    for name, arg in operations:
        if name == "insert":
            single = arg == -1
            n = 1 if single else arg
            rb.insert(encoded_batch(start, n, single=single))
            model.insert(encoded_batch(start, n))
            start += n
        elif name == "get_item":
            if -model.count <= arg < model.count:
                assert decode(*rb.get_item(arg)) == model.item(arg)[1]
            else:
                with pytest.raises(IndexError):
                    rb.get_item(arg)
        elif name == "sample":
            if model.count == 0:
                with pytest.raises(ValueError, match="empty"):
                    rb.sample(ordered=arg)
            else:
                logical, sampled = rb.sample_with_indices(ordered=arg)
                ids, logical = decode(*sampled), logical.asnumpy()
                assert ((logical >= 0) & (logical < model.count)).all()
                np.testing.assert_array_equal(ids, [model.item(int(i))[1] for i in logical])
                if arg:
                    assert (np.diff(ids) >= 0).all()
        elif name == "reset":
            rb.reset()
            model.reset()
        else:
            rb.save(CHECKPOINT)
            rb.insert(encoded_batch(10_000, 3))  # changed after the save, undone by the load
            rb.load(CHECKPOINT)
        # Cursors and every stored row (rows past `count` after a reset are stale and unreachable).
        columns, head, count = state_of(rb)
        assert (head, count) == (model.head, model.count)
        stored = [model.row(i) for i in range(model.count)]
        for got, want in zip(columns, model.columns):
            np.testing.assert_array_equal(got[stored], want[stored])



WRITER_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.sampled_from([-1, -1, 0, 1, 2, 3, 6, 11])),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("insert"), st.sampled_from([-1, 2])),
    st.tuples(st.just("sample"), st.none()),
    st.tuples(st.just("reset"), st.none()),
), min_size=1, max_size=16)


@SETTINGS
@given(WRITER_OPERATIONS)
def test_a_writer_beside_direct_inserts_never_disagrees_with_the_model(operations):
    ms.set_context(mode=ms.GRAPH_MODE)
    rb, model, start = buffer("ring", lambda: make(capacity=5, sample_size=6)), RingModel(5, SHAPES, DTYPES), 0
    rb.reset()
    writer, staged = rb.writer(4), []
    for name, arg in operations:
        single = arg == -1
        n = 1 if single else arg
        if name == "write":
            writer.insert(encoded_batch(start, n, single=single))
            staged.extend(range(start, start + n))
            start += n
            while len(staged) >= 4:  # a full stage goes in
                for i in staged[:4]:
                    model.insert(encoded_batch(i, 1))
                staged = staged[4:]
        elif name == "flush":
            writer.flush()
            for i in staged:
                model.insert(encoded_batch(i, 1))
            staged = []
        elif name == "insert":  # a direct insert overtakes the staged transitions
            rb.insert(encoded_batch(10_000 + start, n, single=single))
            model.insert(encoded_batch(10_000 + start, n))
            start += n
        elif name == "sample":
            if model.count == 0:
                with pytest.raises(ValueError, match="empty"):
                    rb.sample()
            else:
                stored = {model.item(i)[1] for i in range(model.count)}
                assert set(decode(*rb.sample())) <= stored
        else:
            rb.reset()  # staged transitions stay staged
            model.reset()
        assert writer.pending == len(staged)
        columns, head, count = state_of(rb)
        assert (head, count) == (model.head, model.count)
        rows = [model.row(i) for i in range(model.count)]
        for got, want in zip(columns, model.columns):
            np.testing.assert_array_equal(got[rows], want[rows])
    writer.flush()

TRAJECTORY_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3)),
    st.tuples(st.just("get_next"), st.sampled_from([None, 1, 2, 4])),
    st.tuples(st.just("clear"), st.none()),
    st.tuples(st.just("save_load"), st.none()),
), min_size=1, max_size=12)


@SETTINGS
@given(TRAJECTORY_OPERATIONS)
@pytest.mark.slow
def test_trajectory_buffers_never_disagree_with_the_model(operations):
    ms.set_context(mode=ms.GRAPH_MODE)
    device = buffer("trajectory", lambda: TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4))
    host = buffer("py", lambda: PyUniformReplayBuffer(SPEC1, capacity=4, seed=3))
    device.clear()
    host.clear()
    segments, items, t = SegmentModel(2, 4), SegmentModel(1, 4), 0
    for name, arg in operations:
        if name == "add":
            for _ in range(arg):
                values = step_values(t, 2)
                device.add_batch({"value": values.astype(np.float32)})
                host.add_batch({"value": values[:1].astype(np.float32)})
                segments.add(values)
                items.add(values[:1])
                t += 1
        elif name == "get_next":
            stored = len(segments.steps[0])
            for rb in (device, host):
                if stored == 0 or (arg or 1) > stored:
                    with pytest.raises(ValueError):
                        rb.get_next(3, arg)
                    continue
                got = np.asarray(rb.get_next(3, arg)[0]["value"].asnumpy() if rb is device
                                 else rb.get_next(3, arg)["value"]).astype(np.int64)  # numpy: items alone
                if arg is not None:
                    assert (np.diff(got // 1000, axis=1) == 1).all() and (got % 1000 == got[:, :1] % 1000).all()
                assert set(got.reshape(-1)) <= set(segments.stored().reshape(-1))
        elif name == "clear":
            device.clear()
            host.clear()
            segments, items = SegmentModel(2, 4), SegmentModel(1, 4)
        else:
            for rb in (device, host):
                rb.save(CHECKPOINT)
                rb.clear()
                rb.load(CHECKPOINT)
        np.testing.assert_array_equal(device.gather_all()["value"].asnumpy(), segments.stored().reshape(2, -1))
        np.testing.assert_array_equal(host.gather_all()["value"], items.stored().reshape(1, -1))


PRIORITY_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.sampled_from([1, 2, 3, 6, 11])),
    st.tuples(st.just("update"), st.lists(st.tuples(st.integers(0, 4), st.floats(0.0, 5.0)), min_size=1, max_size=4)),
    st.tuples(st.just("sample"), st.sampled_from([0.0, 0.4, 1.0])),
    st.tuples(st.just("reset"), st.none()),
    st.tuples(st.just("save_load"), st.none()),
), min_size=1, max_size=10)


@SETTINGS
@given(PRIORITY_OPERATIONS)
@pytest.mark.slow
def test_priority_buffer_never_disagrees_with_the_model(operations):
    from mindspore_rl_buffer.ops import tree_size

    from mindspore_rl_buffer import PriorityReplayBuffer

    ms.set_context(mode=ms.GRAPH_MODE)
    types = [ms.float32, ms.int32, ms.float32]
    prb = buffer("priority", lambda: PriorityReplayBuffer(0.7, 5, 16, SHAPES, types))
    model, start = PriorityModel(0.7, 5, SHAPES, DTYPES), 0
    prb.reset()
    for name, arg in operations:
        if name == "insert":
            prb.insert(encoded_batch(start, arg))
            model.insert(encoded_batch(start, arg))
            start += arg
        elif name == "update":
            slots = [slot for slot, _ in arg if slot < model.count]
            if slots:
                priorities = np.array([p for slot, p in arg if slot < model.count], np.float32)
                prb.update_priorities(Tensor(np.array(slots, np.int32)), Tensor(priorities))
                model.update(slots, priorities)
        elif name == "sample":
            if model.count == 0:
                with pytest.raises(ValueError, match="empty"):
                    prb.sample(arg)
                continue
            indices, weights, *transitions = prb.sample(arg)
            slots = indices.asnumpy()
            assert ((slots >= 0) & (slots < model.count)).all() and (model.leaves()[slots] > 0).all()
            np.testing.assert_array_equal(decode(*transitions), model.columns[1][slots])
            np.testing.assert_allclose(weights.asnumpy(), model.weights(slots, arg), rtol=1e-4)
        elif name == "reset":
            prb.reset()
            model.reset()
        else:
            prb.save(CHECKPOINT)
            prb.insert(encoded_batch(10_000, 2))
            prb.load(CHECKPOINT)
        assert (int(prb.head), int(prb.count)) == (model.head, model.count)
        leaves = prb.sum_tree.asnumpy()[tree_size(5):tree_size(5) + 5]
        np.testing.assert_allclose(leaves[: model.count], model.leaves()[: model.count], rtol=1e-5)
        stored = [model.row(i) for i in range(model.count)]
        np.testing.assert_array_equal(prb.columns[1].asnumpy()[stored], model.columns[1][stored])


@SETTINGS
@given(st.lists(st.sampled_from([1, 2, 3, 5, 9, "reset", "save_load"]), min_size=1, max_size=10))
@pytest.mark.slow
def test_reservoir_buffer_keeps_algorithm_r_invariants(operations):
    from mindspore_rl_buffer import ReservoirReplayBuffer

    ms.set_context(mode=ms.GRAPH_MODE)
    rrb = buffer("reservoir", lambda: ReservoirReplayBuffer(4, 3, SHAPES, [ms.float32, ms.int32, ms.float32]))
    rrb.reset()
    seen, inserted = 0, []
    for operation in operations:
        if operation == "reset":
            rrb.reset()
            seen, inserted = 0, []
        elif operation == "save_load":
            rrb.save(CHECKPOINT)
            rrb.insert(encoded_batch(10_000, 3))
            rrb.load(CHECKPOINT)
        else:
            rrb.insert(encoded_batch(1000 * seen, operation))
            inserted += list(range(1000 * seen, 1000 * seen + operation))
            seen += operation
        assert (int(rrb.seen), int(rrb.size()), int(rrb.head)) == (seen, min(seen, 4), 0)
        if seen:
            stored = decode(*rrb.get_item(Tensor(np.arange(min(seen, 4), dtype=np.int32))))
            assert len(set(stored)) == len(stored) and set(stored) <= set(inserted)  # intact, distinct, real
            if seen <= 4:
                np.testing.assert_array_equal(stored, inserted)  # before full, every item, in order


@SETTINGS
@given(OPERATIONS)
@pytest.mark.slow
def test_a_single_process_sharded_buffer_is_a_replay_buffer(operations):
    from mindspore_rl_buffer import ShardedReplayBuffer

    ms.set_context(mode=ms.GRAPH_MODE)
    sharded = buffer("sharded", lambda: ShardedReplayBuffer(6, 5, SHAPES, [ms.float32, ms.int32, ms.float32],
                                                           names=["state", "action", "reward"]))
    model, start = RingModel(5, SHAPES, DTYPES), 0
    sharded.reset()
    for name, arg in operations:
        if name == "insert":
            n = 1 if arg == -1 else arg
            sharded.insert(encoded_batch(start, n, single=arg == -1))
            model.insert(encoded_batch(start, n))
            start += n
        elif name == "sample" and model.count:
            ids = decode(*sharded.sample(ordered=arg))
            assert set(ids) <= {int(model.item(i)[1]) for i in range(model.count)}
        elif name == "reset":
            sharded.reset()
            model.reset()
        assert (int(sharded.size()), int(sharded.local_size())) == (model.count, model.count)
        storage = sharded.storage
        assert (int(storage.head), int(storage.count)) == (model.head, model.count)
        stored = [model.row(i) for i in range(model.count)]
        np.testing.assert_array_equal(storage.columns[1].asnumpy()[stored], model.columns[1][stored])
