"""A brute-force numpy model of PrioritizedTransitionReplayBuffer, from its contract.

It keeps every time step inserted since the last reset (all environments) in the
transition model of ``tests.helpers`` (which holds the validity rule of a start and what a
sample of it holds), and beside it one priority per start, keyed by the start's absolute
time index ``T`` and environment ``e``. Everything else is computed from scratch on each
call: the valid starts, their flat slots ``s = p * num_envs + e`` and ids
``T * num_envs + e`` (modulo ``id_bound``), leaves, probabilities and weights.
:func:`assert_trees_match` and :func:`assert_sample_matches` compare a buffer with it.

Priority rules (the contract):

* priorities are float32, clamped (NaN to the floor, +inf to the ceiling, as a graph reads them);
* a start gets ``max_priority`` at the insert where it becomes valid;
* ``update`` with a fresh id (one of a start valid now) sets that start's priority, clamped
  to ``[PRIORITY_FLOOR, PRIORITY_CEILING]``; of several fresh occurrences the last wins;
  ``max_priority`` becomes the maximum of itself and the applied priorities;
* an id of no valid start (overwritten, gone invalid, a final row, not yet valid) changes
  nothing, and the start is never revived;
* the leaf of a valid start is ``float32(priority) ** float32(alpha)`` clamped to
  ``[LEAF_FLOOR, LEAF_CEILING]``; an invalid start's leaf is 0.
"""
from __future__ import annotations

import numpy as np
from mindspore import Parameter, Tensor
from mindspore_rl_buffer.ops import LEAF_CEILING, LEAF_FLOOR, PRIORITY_CEILING, PRIORITY_FLOOR

from tests.helpers import TransitionModel


def clamp(priority: float) -> float:
    """A priority as the buffer records it: float32, in ``[PRIORITY_FLOOR, PRIORITY_CEILING]``."""
    value = float(np.float32(priority))
    if np.isnan(value):  # as a graph reads it (a direct call refuses it)
        return float(np.float32(PRIORITY_FLOOR))
    return float(np.float32(min(max(value, PRIORITY_FLOOR), PRIORITY_CEILING)))


def leaf(priority: float, alpha: float) -> float:
    """``float32(clamp(priority)) ** alpha``, clamped to ``[LEAF_FLOOR, LEAF_CEILING]`` (float64).

    The exponent is ``alpha`` as float32, the one a float32 graph raises to: for ``alpha = 0.6``
    it differs by 2.4e-8, which moves the leaf of a priority of 2**126 by 2e-6 (relative).
    """
    return min(max(clamp(priority) ** float(np.float32(alpha)), LEAF_FLOOR), LEAF_CEILING)


class PrioritizedTransitionModel:
    """The buffer's state from its definitions; ``id_bound`` as the buffer reports it (ids are
    taken modulo it; ``None``: never)."""

    def __init__(self, max_length: int, num_envs: int, stack_size: int, n_step: int, gamma: float,
                 alpha: float, id_bound: int | None = None) -> None:
        self.steps = TransitionModel(max_length, num_envs, stack_size, n_step, gamma)
        self.max_length, self.num_envs, self.alpha, self.id_bound = max_length, num_envs, alpha, id_bound
        self.priorities: dict[tuple[int, int], float] = {}  # (T, env) -> priority, for every start ever valid
        self.max_priority = 1.0
        self._valid: dict[tuple[int, int], tuple] | None = None  # computed again after each insert or reset

    @property
    def capacity(self) -> int:
        return self.max_length * self.num_envs

    # ------------------------------------------------------------------ the state
    def insert(self, batch) -> None:
        """``batch``: the columns, each ``(n, num_envs, ...)``; the steps go in one at a time."""
        for j in range(len(batch[0])):
            self.steps.insert([column[j:j + 1] for column in batch])
            self._valid = None
            for start in self.valid():
                self.priorities.setdefault(start, self.max_priority)

    def reset(self) -> None:
        self.steps.reset()
        self._valid = None
        self.priorities = {}
        self.max_priority = 1.0

    def first_time(self) -> int:
        """The absolute time index of the oldest stored row."""
        return len(self.steps.steps) - len(self.steps.stored)

    def valid(self) -> dict[tuple[int, int], tuple]:
        """``{(T, env): sample}`` of every valid start."""
        if self._valid is None:
            first = self.first_time()
            self._valid = {(first + t, env): sample for (t, env), sample in self.steps.valid_starts().items()}
        return self._valid

    def slot(self, time: int, env: int) -> int:
        return (time % self.max_length) * self.num_envs + env

    def id_of(self, time: int, env: int) -> int:
        start = time * self.num_envs + env
        return start if self.id_bound is None else start % self.id_bound

    def id_of_slot(self, slot: int) -> int:
        """The id of the start stored at flat slot ``slot`` (stored row; valid or not)."""
        row, env = divmod(slot, self.num_envs)
        first = self.first_time()
        time = first + (row - first) % self.max_length
        return self.id_of(time, env)

    def by_id(self) -> dict[int, tuple[int, int]]:
        """``{id: (T, env)}`` of the valid starts."""
        return {self.id_of(*start): start for start in self.valid()}

    def update(self, ids, priorities) -> None:
        """Fresh ids set their start's priority (the last occurrence wins); stale ones are ignored."""
        fresh, written = self.by_id(), {}
        for index, priority in zip(np.asarray(ids).reshape(-1).tolist(), np.asarray(priorities).reshape(-1)):
            if int(index) in fresh:
                written[fresh[int(index)]] = clamp(priority)
        self.priorities.update(written)
        self.max_priority = max([self.max_priority, *written.values()])

    # ---------------------------------------------------------------- derived values
    def leaves(self) -> np.ndarray:
        """``(capacity,)`` float64: each valid start's leaf at its slot, 0 elsewhere."""
        leaves = np.zeros(self.capacity)
        for start in self.valid():
            leaves[self.slot(*start)] = leaf(self.priorities[start], self.alpha)
        return leaves

    def valid_slots(self) -> set[int]:
        return {self.slot(*start) for start in self.valid()}

    def probabilities(self) -> np.ndarray:
        leaves = self.leaves()
        return leaves / leaves.sum()

    def weights(self, ids, beta: float) -> np.ndarray:
        """``(min_leaf / leaf) ** beta`` of each id's start."""
        leaves, fresh = self.leaves(), self.by_id()
        smallest = leaves[leaves > 0].min()
        return np.array([(smallest / leaves[self.slot(*fresh[int(i)])]) ** beta for i in np.asarray(ids)])

    def sample_of(self, index: int) -> tuple:
        """``(observation, action, return, next_observation, discount, *extras)`` of the start ``index`` (an id)."""
        return self.valid()[self.by_id()[int(index)]]


def largest(alpha):
    """The largest priority a direct call accepts: ``PRIORITY_CEILING``, or less when its leaf would pass
    ``LEAF_CEILING`` (2**96 for alpha 1)."""
    return PRIORITY_CEILING if alpha <= 96 / 126 else LEAF_CEILING ** (1 / alpha)


def adversarial_priorities(n, alpha):
    """Named patterns of ``n`` priorities, from 0 to the largest a direct call accepts."""
    top, rng = largest(alpha), np.random.default_rng(5)
    return {"zeros": np.zeros(n), "floor": np.full(n, 1e-8), "ceiling": np.full(n, min(PRIORITY_CEILING, top)),
            "leaf ceiling": np.full(n, top), "equal": np.full(n, 3.0),
            "floor and top": np.where(rng.random(n) < 0.5, 1e-8, top),
            "one huge": np.where(np.arange(n) == n // 2, top, 1e-8),
            "one tiny": np.where(np.arange(n) == 0, 1e-8, top), "three kinds": rng.choice([1e-8, 1.0, top], n)}


def update_batch(model, drawn, seed, size):
    """``size`` ids: drawn ones (fresh or stale by now) and ids of stored rows that are not valid
    starts (final rows, rows too new or too old), with duplicates; random priorities, zeros among them."""
    rng = np.random.default_rng(seed)
    stored = [model.id_of_slot(s) for s in range(model.capacity) if s // model.num_envs < len(model.steps.stored)]
    pool = drawn + stored
    ids = np.array([pool[i] for i in rng.integers(0, len(pool), size)], np.int32)
    ids[rng.integers(0, size, 2)] = ids[rng.integers(0, size)]  # a duplicate, whatever else repeats
    priorities = (10.0 ** rng.uniform(-3, 3, size) * (rng.random(size) > 0.15)).astype(np.float32)
    return ids, priorities.reshape(size, 1) if rng.random() < 0.5 else priorities


# ------------------------------------------------------------- a buffer against the model
def parameters(rb):
    """The whole state of a buffer: every Parameter, as numpy copies, by its name in the buffer."""
    return {name: param.asnumpy().copy() for name, param in rb.parameters_and_names()}


def assert_same(before, after, names=None):
    assert before.keys() == after.keys()
    for name in names or before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def levels(tree) -> list[np.ndarray]:
    """A tree's levels, leaves first, root last: from one ``(2P,)`` Parameter (node ``v`` has the
    children ``2v`` and ``2v + 1``, leaf ``s`` at ``P + s``) or from a tuple of one Parameter per level."""
    if isinstance(tree, Parameter):
        nodes, size = tree.asnumpy(), tree.shape[0] // 2
        assert nodes.shape == (2 * size,) and size & (size - 1) == 0, "a binary tree of 2P nodes"
        return [nodes[n:2 * n] for n in (size >> i for i in range(size.bit_length()))]
    return [level.asnumpy() for level in tree]


def tree_names(rb) -> list[str]:
    """The names of the Parameters of the trees and of ``max_priority``."""
    return [name for name in parameters(rb) if name.split(".")[-1].startswith(("sum_tree", "min_tree", "max_prio"))]


def assert_trees_match(rb, model, rtol=1e-6):
    """Leaves > 0 exactly at the model's valid starts, equal to its leaves; every inner node made of
    its children; the roots and ``max_priority`` as the model says."""
    capacity, sums, mins = model.capacity, levels(rb.sum_tree), levels(rb.min_tree)
    assert [x.shape for x in sums] == [x.shape for x in mins] and sums[-1].shape == (1,)
    assert all(x.dtype == np.float32 for x in sums + mins)
    want, got = model.leaves(), sums[0][:capacity]
    assert set(np.flatnonzero(got > 0).tolist()) == model.valid_slots()
    assert (got >= 0).all() and (sums[0][capacity:] == 0).all()
    np.testing.assert_allclose(got, want, rtol=rtol)
    np.testing.assert_array_equal(mins[0], np.concatenate([np.where(want > 0, got, np.inf),
                                                           np.full(len(mins[0]) - capacity, np.inf)]))
    for below, above, low, high in zip(sums, sums[1:], mins, mins[1:]):  # float32 sums in any order
        fanout = len(below) // len(above)
        assert len(below) == fanout * len(above)
        np.testing.assert_allclose(above, below.reshape(-1, fanout).sum(axis=1), rtol=2e-6)
        np.testing.assert_array_equal(high, low.reshape(-1, fanout).min(axis=1))
    np.testing.assert_allclose(mins[-1][0], want[want > 0].min() if want.any() else np.inf, rtol=rtol)
    np.testing.assert_allclose(sums[-1][0], want.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(rb.max_priority.asnumpy()), model.max_priority, rtol=1e-6)
    assert int(rb.valid_starts()) == len(model.valid_slots())


def assert_sample_matches(model, outputs, beta, rtol=1e-5):
    """Every drawn id is a valid start of the model; its weight and items are the model's."""
    ids, weights, *items = (np.asarray(x.asnumpy() if isinstance(x, Tensor) else x) for x in outputs)
    assert ids.dtype == np.int32 and weights.dtype == np.float32 and ids.shape == weights.shape
    fresh = {model.id_of(*start): sample for start, sample in model.valid().items()}
    for index in np.unique(ids).tolist():  # all draws of one start at once
        assert index in fresh, f"id {index} is not a valid start; valid: {sorted(fresh)}"
        rows = ids == index
        for k, (got, want) in enumerate(zip(items, fresh[index])):
            want = np.broadcast_to(np.asarray(want, got.dtype), got[rows].shape)
            if k in (2, 4):  # the return and the discount
                np.testing.assert_allclose(got[rows], want, rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(got[rows], want)
    assert np.isfinite(weights).all() and (weights > 0).all() and (weights <= 1).all()
    np.testing.assert_allclose(weights, model.weights(ids, beta), rtol=rtol)
    return ids


def sanity_check() -> None:
    """Hand-worked cases: run ``python -m tests.prioritized_model``."""
    from tests.helpers import EpisodeStream

    # One environment, stack 1, n_step 1, 6 rows: row t is valid iff 1 <= t <= count - 2.
    model = PrioritizedTransitionModel(6, 1, 1, 1, 0.9, alpha=0.5, id_bound=6 * 4)
    stream = EpisodeStream(1, seed=0, end_probability=0.0)
    model.insert(stream.take(4))  # rows 0..3: valid 1, 2
    assert sorted(model.valid()) == [(1, 0), (2, 0)] and model.valid_slots() == {1, 2}
    np.testing.assert_allclose(model.leaves(), [0, 1, 1, 0, 0, 0])
    model.update([1, 2, 1, 3, 0], [4.0, 9.0, 16.0, 100.0, 100.0])  # 3 not yet valid, 0 never: ignored
    assert model.max_priority == 16.0
    np.testing.assert_allclose(model.leaves(), [0, 4, 3, 0, 0, 0])
    np.testing.assert_allclose(model.probabilities().sum(), 1.0)
    np.testing.assert_allclose(model.weights([1, 2], 1.0), [3 / 4, 1.0])
    model.insert(stream.take(1))  # row 3 becomes valid at max_priority 16: leaf 4
    np.testing.assert_allclose(model.leaves(), [0, 4, 3, 4, 0, 0])
    model.insert(stream.take(3))  # 8 rows in a ring of 6: rows 2..7 stored, slot 0 = T 6, slot 1 = T 7
    assert sorted(model.valid()) == [(3, 0), (4, 0), (5, 0), (6, 0)]  # T 2 is the oldest (t = 0): invalid
    assert model.id_of_slot(0) == 6 and model.id_of_slot(2) == 2
    before = model.leaves()
    model.update([1, 2], [1000.0, 1000.0])  # overwritten (T 1), gone invalid (T 2): nothing changes
    np.testing.assert_array_equal(model.leaves(), before)
    assert model.max_priority == 16.0
    np.testing.assert_allclose(model.probabilities()[[0, 3, 4, 5]], np.array([4, 4, 4, 4]) / 16)
    assert model.sample_of(4)[1] == 4  # the action encodes the step
    # Clamping: zero and negative to the floor, +inf to the ceiling; leaves to their range.
    assert clamp(0.0) == clamp(-1.0) == clamp(np.nan) == np.float32(PRIORITY_FLOOR)
    assert clamp(np.inf) == PRIORITY_CEILING
    assert leaf(2.0**120, 1.0) == LEAF_CEILING and leaf(0.0, 0.0) == 1.0
    # Several environments: slots interleave, ids count time rows.
    model = PrioritizedTransitionModel(5, 3, 2, 2, 0.5, alpha=1.0)
    stream = EpisodeStream(3, seed=3, end_probability=0.3)
    for size in (3, 4, 9, 1):
        model.insert(stream.take(size))
        for (time, env) in model.valid():
            assert model.id_of_slot(model.slot(time, env)) == model.id_of(time, env)
            assert model.id_of(time, env) % model.capacity == model.slot(time, env)
        if model.valid():
            np.testing.assert_allclose(model.probabilities().sum(), 1.0)
        assert set(np.flatnonzero(model.leaves())) == model.valid_slots()
    print("prioritized model: sanity checks passed")


if __name__ == "__main__":
    sanity_check()
