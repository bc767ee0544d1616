"""The graph bodies of the buffer methods, run eagerly, against the reference models.

Inside a user's ``construct`` every buffer method *is* its graph body (``buffer_method`` in
``mindspore_rl_buffer._graph``); MindSpore compiles it, so Python never runs those lines. Here
``in_graph()`` is made true in PyNative mode, so each body runs op by op in Python, guards
included, and its state after every call is held against the numpy models of
``tests/helpers.py``: an eager check of the very code a compiled graph holds, next to the
compiled checks of the other modules.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

import mindspore_rl_buffer._graph as graph
from mindspore_rl_buffer import (
    PriorityReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
    TrajectoryReplayBuffer,
)
from tests.helpers import (
    MS_DTYPES,
    NAMES,
    SHAPES,
    SPEC1,
    EpisodeStream,
    PriorityModel,
    RingModel,
    SegmentModel,
    assert_transitions_match,
    decode,
    encoded_batch,
    step_values,
)
from tests.test_transition import make as make_transition
from tests.test_transition import model_of

# Batches through a ring of 7 rows: from empty, nothing, across the end, one item, larger than the ring.
BATCHES = [3, 0, 6, 1, 10, 2]


@pytest.fixture
def eager(graph_mode, monkeypatch):
    """Buffer methods run their graph bodies in Python (PyNative), as a compiled graph would run them."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    monkeypatch.setattr(graph, "in_graph", lambda: True)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def _ring(buffer):
    return buffer.storage if isinstance(buffer, ShardedReplayBuffer) else buffer


def _tensors(batch):
    return [Tensor(column) for column in batch]


def _fed(buffer, model):
    """Insert :data:`BATCHES` of encoded items into the buffer and the model; yield the items so far."""
    start = 0
    for size in BATCHES:
        batch = encoded_batch(start, size)
        _ = buffer.insert(_tensors(batch))
        model.insert(batch)
        start += size
        yield start


@pytest.mark.parametrize("kind", [ReplayBuffer, ShardedReplayBuffer])
def test_ring_bodies_insert_read_and_sample_as_the_model(eager, kind):
    ms.set_seed(0)
    buffer = kind(5, 7, SHAPES, MS_DTYPES, names=NAMES)
    model = RingModel(7, [(2,), (), (1,)], [np.float32, np.int32, np.float32])
    for _ in _fed(buffer, model):
        ring = _ring(buffer)
        assert (int(ring.head.asnumpy()), int(ring.count.asnumpy())) == (model.head, model.count)
        for column, expected in zip(ring.columns, model.columns):
            np.testing.assert_array_equal(column.asnumpy()[: model.count], expected[: model.count])
        assert int(buffer.size().asnumpy()) == model.count
        assert bool(buffer.full().asnumpy()) == (model.count == 7)
        if model.count:
            for logical in (0, model.count - 1, -1):
                got = decode(*(x.asnumpy() for x in buffer.get_item(Tensor(logical, ms.int32))))
                assert got == decode(*model.item(logical))
            stored = {int(decode(*model.item(i))) for i in range(model.count)}
            assert set(decode(*(x.asnumpy() for x in buffer.sample()))) <= stored
    ordered = decode(*(x.asnumpy() for x in _ring(buffer).sample(ordered=True)))
    assert (np.diff(ordered) >= 0).all()  # logical order is item order here: oldest first
    _ = buffer.reset()
    assert int(buffer.size().asnumpy()) == 0


def test_reservoir_bodies_keep_what_was_offered(eager):
    ms.set_seed(1)
    buffer = ReservoirReplayBuffer(7, 4, SHAPES, MS_DTYPES, names=NAMES)  # capacity 7, samples of 4
    offered = 0
    for size in BATCHES:
        _ = buffer.insert(_tensors(encoded_batch(offered, size)))
        offered += size
        count = int(buffer.count.asnumpy())
        assert count == min(offered, 7)
        kept = decode(*(column.asnumpy()[:count] for column in buffer.columns))
        assert len(set(kept)) == count and set(kept) <= set(range(offered))
        if offered <= 7:  # still filling: every item offered is kept, in order
            assert kept.tolist() == list(range(offered))
        if count:
            assert set(decode(*(x.asnumpy() for x in buffer.sample()))) <= set(kept)


def test_priority_bodies_keep_the_trees_of_the_model(eager):
    ms.set_seed(2)
    buffer = PriorityReplayBuffer(0.6, 7, 4, SHAPES, MS_DTYPES, names=NAMES)
    model = PriorityModel(0.6, 7, [(2,), (), (1,)], [np.float32, np.int32, np.float32])
    for start in _fed(buffer, model):
        if not model.count:
            continue
        np.testing.assert_allclose(_leaves(buffer), model.leaves(), rtol=1e-5)
        slots, weights, *columns = (x.asnumpy() for x in buffer.sample(Tensor(0.4, ms.float32)))
        assert ((slots >= 0) & (slots < model.count)).all()
        np.testing.assert_allclose(weights, model.weights(slots, 0.4), rtol=1e-4)
        assert (decode(*columns) == decode(*(c[slots] for c in model.columns))).all()
        priorities = np.linspace(0.5, 3.0, len(slots)).astype(np.float32) * (start % 5 + 1)
        _ = buffer.update_priorities(Tensor(slots.astype(np.int32)), Tensor(priorities))
        model.update(slots, priorities)
        np.testing.assert_allclose(_leaves(buffer), model.leaves(), rtol=1e-5)


def _leaves(buffer) -> np.ndarray:
    """The sum tree's leaves, one per slot: a tree of ``2 * size`` nodes keeps them from node ``size``."""
    tree = buffer.sum_tree.asnumpy()
    size = len(tree) // 2
    return tree[size: size + buffer.capacity]


@pytest.mark.parametrize("num_envs, stack_size, n_step", [(1, 2, 3), (2, 3, 2)])
def test_transition_bodies_store_and_sample_as_the_model(eager, num_envs, stack_size, n_step):
    ms.set_seed(3)
    buffer = make_transition(num_envs, stack_size, n_step, max_length=stack_size + n_step + 3, sample_size=16)
    model, stream = model_of(buffer), EpisodeStream(num_envs, seed=5, end_probability=0.3)
    for size in [2, "single", 6, 0, 9]:
        batch = stream.take(1 if size == "single" else size)
        _ = buffer.insert([Tensor(column[0]) for column in batch] if size == "single" else _tensors(batch))
        model.insert(batch)
        assert int(buffer.size().asnumpy()) == len(model.stored) * num_envs
        assert int(buffer.valid_starts().asnumpy()) == len(model.valid_starts())
        if model.valid_starts():
            items, (ids, probabilities) = buffer.sample_with_info()
            assert_transitions_match(model, items, ids, probabilities)
    _ = buffer.reset()
    assert int(buffer.size().asnumpy()) == 0


def test_trajectory_bodies_add_and_read_segments_as_the_model(eager):
    ms.set_seed(4)
    buffer = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    model = SegmentModel(2, 4)
    for t in range(6):  # wraps after 4 steps
        values = step_values(t, 2).astype(np.float32)
        _ = buffer.add_batch({"value": Tensor(values)})
        model.add(values)
        stored = model.stored()
        gathered = buffer.gather_all()["value"].asnumpy()  # the body's fixed shape: max_length steps
        np.testing.assert_array_equal(gathered[:, : stored.shape[1]], stored)
        items, (ids, probabilities) = buffer.get_next(3)  # inside a graph the info is a plain pair
        assert set(items["value"].asnumpy().ravel()) <= set(stored.ravel())
        assert ids.shape == probabilities.shape == (3,)


@pytest.mark.parametrize("num_envs, stack_size, n_step", [(1, 2, 3), (2, 3, 2)])
def test_prioritized_transition_bodies_keep_the_trees_of_the_model(eager, num_envs, stack_size, n_step):
    from tests.prioritized_model import assert_sample_matches, assert_trees_match, update_batch
    from tests.test_prioritized_transition import make as make_prioritized
    from tests.test_prioritized_transition import model_of as prioritized_model_of

    buffer = make_prioritized(num_envs, stack_size, n_step, max_length=stack_size + n_step + 3, seed=6)
    model, stream, drawn = prioritized_model_of(buffer), EpisodeStream(num_envs, seed=7, end_probability=0.3), []
    for step, size in enumerate([2, 6, 0, 9, 3]):
        batch = stream.take(size)
        _ = buffer.insert(_tensors(batch))
        model.insert(batch)
        if model.valid():
            drawn += assert_sample_matches(model, buffer.sample(Tensor(0.4, ms.float32)), 0.4).tolist()
            ids, priorities = update_batch(model, drawn, step, 8)
            _ = buffer.update_priorities(Tensor(ids), Tensor(priorities))
            model.update(ids, priorities)
        assert_trees_match(buffer, model)
    _ = buffer.reset()
    assert int(buffer.size().asnumpy()) == 0 and float(buffer.max_priority.asnumpy()) == 1.0
    assert not buffer.tree_leaves()[0].any()
