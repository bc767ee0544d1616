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

from mindspore_rl_buffer import PyUniformReplayBuffer, TrajectoryReplayBuffer
from tests.reference import DTYPES, SHAPES, RingModel, decode, encoded_batch
from tests.test_replay_buffer import make, state_of
from tests.test_tf_agents import SPEC1, SegmentModel, step_values

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


TRAJECTORY_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3)),
    st.tuples(st.just("get_next"), st.sampled_from([None, 1, 2, 4])),
    st.tuples(st.just("clear"), st.none()),
    st.tuples(st.just("save_load"), st.none()),
), min_size=1, max_size=12)


@SETTINGS
@given(TRAJECTORY_OPERATIONS)
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
                                 else rb.get_next(3, arg)[0]["value"]).astype(np.int64)
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
