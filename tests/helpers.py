"""What the tests share: independent numpy reference models, encoded data, buffer factories.

The models are written from the definitions (the cursor contract, the paper's priorities,
algorithm R, TF-Agents' segments), never from the library's code: items go in one at a
time, so batch inserts, wraparound and overflow are checked against the plain definition
rather than against the vectorised arithmetic of ``ops``.
"""
from __future__ import annotations

import collections
import functools
import os
import threading
from pathlib import Path

import mindspore as ms
import numpy as np
import optree
import pytest
from mindspore import Parameter, ParameterTuple, Tensor, nn

from mindspore_rl_buffer import ReplayBuffer, TensorSpec


class RingModel:
    """Columns of ``capacity`` rows plus ``head`` and ``count``, updated item by item."""

    def __init__(self, capacity: int, shapes, dtypes) -> None:
        self.capacity = capacity
        self.columns = [np.zeros((capacity, *shape), dtype) for shape, dtype in zip(shapes, dtypes)]
        self.head = 0
        self.count = 0

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            row = (self.head + self.count) % self.capacity
            for column, values in zip(self.columns, batch):
                column[row] = values[j]
            if self.count < self.capacity:
                self.count += 1
            else:
                self.head = (self.head + 1) % self.capacity

    def row(self, logical: int) -> int:
        if logical < 0:
            logical += self.count
        assert 0 <= logical < self.count
        return (self.head + logical) % self.capacity

    def item(self, logical: int):
        return [column[self.row(logical)] for column in self.columns]

    def reset(self) -> None:
        self.head = self.count = 0


def encoded_batch(start: int, n: int, single: bool = False):
    """Items ``start .. start+n-1`` whose every column encodes the item number ``i``.

    Columns: state ``(2,)`` float32 ``[i, -i]``, action ``()`` int32 ``i``, reward ``(1,)``
    float32 ``[i / 2]``. A sampled row is intact iff all three decode to the same ``i``.
    """
    ids = np.arange(start, start + n)
    batch = [np.stack([ids, -ids], 1).astype(np.float32), ids.astype(np.int32),
             (ids / 2).astype(np.float32).reshape(n, 1)]
    if single:
        return [column[0] for column in batch]
    return batch


SHAPES = [(2,), (), (1,)]
DTYPES = [np.float32, np.int32, np.float32]


def decode(state, action, reward) -> np.ndarray:
    """The item numbers of sampled rows; raises if a row is torn across columns."""
    state, action, reward = (np.asarray(x) for x in (state, action, reward))
    ids = action.astype(np.int64)
    assert np.array_equal(state[..., 0], ids) and np.array_equal(state[..., 1], -ids), "torn row"
    assert np.array_equal(reward[..., 0], (ids / 2).astype(np.float32)), "torn row"
    return ids


class PriorityModel(RingModel):
    """The ring plus one float64 priority per physical slot, from the paper's definitions.

    New items get the largest priority stored so far (1 at first); priorities are clamped
    to ``[floor, 2**126]`` (NaN to the floor, +inf to the ceiling) and leaves
    ``p ** alpha`` to ``[smallest normal float32, 2**96]``, as the buffer documents; of
    repeated indexes in one update the last wins; sampling probabilities are
    ``leaf / sum(leaves)`` over the stored slots ``[0, count)``.
    """

    LEAF_RANGE = (float(np.finfo(np.float32).tiny), 2.0**96)

    def __init__(self, alpha: float, capacity: int, shapes, dtypes, floor: float = 1e-8) -> None:
        super().__init__(capacity, shapes, dtypes)
        self.alpha, self.floor = alpha, floor
        self.ceiling = 2.0**126
        self.priorities = np.zeros(capacity)
        self.max_priority = 1.0

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            row = (self.head + self.count) % self.capacity
            super().insert([column[j:j + 1] for column in batch])
            self.priorities[row] = self.max_priority

    def update(self, indices, priorities) -> None:
        written = {}
        for index, priority in zip(indices, priorities):
            priority = float(priority)
            written[int(index)] = self.floor if np.isnan(priority) else min(max(priority, self.floor), self.ceiling)
        for index, priority in written.items():
            self.priorities[index] = priority
        self.max_priority = max([self.max_priority, *written.values()])

    def leaves(self) -> np.ndarray:
        """``p ** alpha`` for stored slots, 0 for the others."""
        stored = np.arange(self.capacity) < self.count
        with np.errstate(over="ignore"):
            leaves = np.clip(self.priorities ** self.alpha, *self.LEAF_RANGE)
        return np.where(stored, leaves, 0.0)

    def probabilities(self) -> np.ndarray:
        leaves = self.leaves()
        return leaves / leaves.sum()

    def weights(self, slots, beta: float) -> np.ndarray:
        """``(N * P(i)) ** -beta`` over its maximum across the stored items, for each slot."""
        probabilities = self.probabilities()[: self.count]
        return (self.count * probabilities[slots]) ** -beta / (self.count * probabilities.min()) ** -beta

    def reset(self) -> None:
        super().reset()
        self.priorities[:] = 0.0
        self.max_priority = 1.0


class ReservoirModel:
    """Vitter's algorithm R, one item at a time, with numpy's random generator."""

    def __init__(self, capacity: int, rng: np.random.Generator) -> None:
        self.capacity, self.rng = capacity, rng
        self.items = np.full(capacity, -1)
        self.seen = 0

    def offer(self, item: int) -> None:
        self.seen += 1
        if self.seen <= self.capacity:
            self.items[self.seen - 1] = item
        else:
            slot = self.rng.integers(self.seen)
            if slot < self.capacity:
                self.items[slot] = item


def ring_rows_item_by_item(head: int, count: int, batch_size: int, capacity: int):
    """Append ``batch_size`` items one at a time under the cursor contract (write at
    ``(head + count) % capacity``; once full, overwrite the oldest and move ``head``).

    Returns the physical rows of the ``min(batch_size, capacity)`` newest items, oldest
    first (the rows that hold the batch afterwards), and the cursors after the batch.
    """
    rows = []
    for _ in range(batch_size):
        rows.append((head + count) % capacity)
        if count < capacity:
            count += 1
        else:
            head = (head + 1) % capacity
    return rows[len(rows) - min(batch_size, capacity):], head, count


def apply_in_order(old: np.ndarray, rows, values, order) -> np.ndarray:
    """A scatter that applies its writes in ``order`` (to mimic any order a device takes)."""
    result = old.copy()
    for j in order:
        result[rows[j]] = values[j]
    return result


# ----------------------------------------------------------------- the W-test ReplayBuffer
MS_DTYPES = [ms.float32, ms.int32, ms.float32]
NAMES = ["state", "action", "reward"]

# Batch sizes that cross every boundary of a capacity-7 ring: from empty, crossing the end
# before full, exactly capacity, larger than capacity, empty batches, single items.
SEQUENCE = [("single", 1), ("batch", 3), ("batch", 0), ("batch", 2), ("single", 1), ("batch", 3),
            ("batch", 7), ("batch", 9), ("single", 1), ("batch", 2), ("batch", 16), ("batch", 3)]


def make(capacity=7, sample_size=5, **kwargs) -> ReplayBuffer:
    """A ReplayBuffer of the encoded columns (see :func:`encoded_batch`)."""
    return ReplayBuffer(sample_size, capacity, SHAPES, MS_DTYPES, names=NAMES, **kwargs)


def state_of(rb):
    """The whole state of a ring buffer: its columns (copies), ``head`` and ``count``."""
    return [c.asnumpy().copy() for c in rb.columns], int(rb.head), int(rb.count)


def assert_matches(rb, model: RingModel) -> None:
    """The buffer's whole state, ``size()`` and ``full()`` equal the model's."""
    columns, head, count = state_of(rb)
    assert (head, count) == (model.head, model.count)
    for got, want in zip(columns, model.columns):
        np.testing.assert_array_equal(got, want)
    assert int(rb.size()) == model.count
    assert bool(rb.full()) == (model.count == model.capacity)


def assert_state_unchanged(before, after) -> None:
    """Two :func:`state_of` results are identical, byte for byte."""
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]


class Learner(nn.Cell):
    """A user's Cell: insert, then read the buffer, all in one compiled graph."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, reward):
        _ = self.buffer.insert([state, action, reward])
        logical, sampled = self.buffer.sample_with_indices()
        ordered = self.buffer.sample(True)
        return self.buffer.size(), self.buffer.full(), self.buffer.get_item(-1), logical, sampled, ordered


# ------------------------------------------------------------------------- bad calls
GOOD = encoded_batch(0, 2)
F32, I32 = np.float32, np.int32

# Each malformed insert, with the error it gets: shared by the direct path and the writer.
BAD_CALLS = [
    ("insert a tensor, not a list", lambda rb: rb.insert(Tensor(GOOD[0])), TypeError,
     r"'transition' must be a list or tuple"),
    ("insert too few columns", lambda rb: rb.insert(GOOD[:2]), ValueError,
     r"must have 3 columns \('state', 'action', 'reward'\), but got 2"),
    ("insert too many columns", lambda rb: rb.insert([*GOOD, GOOD[0]]), ValueError, "must have 3 columns"),
    ("insert a wrong item shape", lambda rb: rb.insert([np.zeros(3, F32), I32(1), np.zeros(1, F32)]),
     ValueError, r"shape of column 'state' must be \(2,\) \(one item\) or \(n, 2\) \(a batch\), but got \(3,\)"),
    ("insert a wrong batch shape", lambda rb: rb.insert([np.zeros((2, 5), F32), GOOD[1], GOOD[2]]),
     ValueError, r"column 'state' .* but got \(2, 5\)"),
    ("insert a wrong dtype", lambda rb: rb.insert([GOOD[0].astype(np.float64), GOOD[1], GOOD[2]]),
     ValueError, r"dtype of column 'state' must be Float32, but got Float64"),
    ("insert batches of different sizes", lambda rb: rb.insert([GOOD[0], GOOD[1][:1], GOOD[2]]),
     ValueError, "every column must hold the same number of items"),
    ("insert a single item beside a batch", lambda rb: rb.insert([GOOD[0][0], GOOD[1], GOOD[2]]),
     ValueError, "every column must hold the same number of items"),
    ("insert a python list column", lambda rb: rb.insert([[0.0, 1.0], GOOD[1], GOOD[2]]), TypeError,
     "column 'state' must be a mindspore.Tensor or a numpy array, but got list"),
    ("get_item past the newest", lambda rb: rb.get_item(2), IndexError, r"\[-2, 2\) .* but got 2"),
    ("get_item before the oldest", lambda rb: rb.get_item(-3), IndexError, "but got -3"),
    ("get_item a float", lambda rb: rb.get_item(1.0), TypeError, "'index' must be an int or an int tensor"),
    ("get_item a bool", lambda rb: rb.get_item(True), TypeError, "'index' must be an int"),
    ("get_item a float tensor", lambda rb: rb.get_item(Tensor(np.zeros(2, F32))), TypeError, "dtype Float32"),
    ("get_item a 2-D tensor", lambda rb: rb.get_item(Tensor(np.zeros((1, 2), I32))), ValueError,
     "a scalar or 1-D tensor"),
    ("get_item a tensor with one bad index", lambda rb: rb.get_item(Tensor(np.array([0, 5], I32))),
     IndexError, "but got 5"),
    ("sample with a non-bool ordered", lambda rb: rb.sample(ordered="yes"), TypeError, "'ordered' must be a bool"),
]


# --------------------------------------------------------------------- TF-Agents face
TUTORIAL_SPEC = (TensorSpec([3], ms.float32, "action"),
                 (TensorSpec([5], ms.float32, "lidar"), TensorSpec([3, 2], ms.float32, "camera")))
SPEC1 = {"value": TensorSpec([], ms.float32, "value")}


class SegmentModel:
    """``segments`` independent deques of at most ``max_length`` time steps (no ring arithmetic)."""

    def __init__(self, segments: int, max_length: int) -> None:
        self.steps = [collections.deque(maxlen=max_length) for _ in range(segments)]

    def add(self, values_per_segment) -> None:
        for segment, value in zip(self.steps, values_per_segment):
            segment.append(value)

    def stored(self) -> np.ndarray:  # [segments, time]
        return np.array([list(s) for s in self.steps])


def step_values(t: int, segments: int) -> np.ndarray:
    """Time step t of every segment, encoded as ``1000 * t + segment``."""
    return 1000 * t + np.arange(segments)


def tutorial_items(t: int, batch_size: int = 32):
    """Items of TF-Agents' tutorial spec for time step ``t``, every leaf encoding it."""
    v = step_values(t, batch_size).astype(np.float32)
    camera = np.broadcast_to(v[:, None, None], (batch_size, 3, 2)).copy()
    return np.repeat(v[:, None], 3, 1), (np.repeat(v[:, None], 5, 1), camera)


def to_np(tree):
    """Every leaf of a nest as a numpy array."""
    return optree.tree_map(lambda x: x.asnumpy() if isinstance(x, Tensor) else np.asarray(x), tree)


def fill(rb, model, steps, segments, start=0):
    """Add ``steps`` time steps of encoded values to a trajectory buffer and its model."""
    for t in range(start, start + steps):
        v = step_values(t, segments)
        rb.add_batch({"value": v.astype(np.float32)})
        model.add(v)


# ------------------------------------------------------------------ operator tests
PATHS = ("direct", "compiled")


class UserCell(nn.Cell):
    """A user's Cell that owns ``parameters`` and calls ``function(*parameters, *inputs)``."""

    def __init__(self, function, parameters):
        super().__init__()
        self.function = function
        self.parameters = ParameterTuple(parameters)

    def construct(self, *inputs):
        return self.function(*self.parameters, *inputs)


def on_path(path: str, function, parameters=()):
    """``function(*parameters, *inputs)`` as a callable of ``inputs``: op by op ("direct"), or
    compiled ("compiled"): inside a :class:`UserCell` that owns the ``parameters`` it writes,
    or with ``mindspore.jit`` when it takes none. Every call of ``on_path`` compiles afresh."""
    if path == "direct":
        return functools.partial(function, *parameters)
    return UserCell(function, parameters) if parameters else ms.jit(function)


def parameter(array: np.ndarray, name: str) -> Parameter:
    """A Parameter holding a copy of ``array``, as a buffer's column or tree."""
    return Parameter(Tensor(np.array(array)), name=name, requires_grad=False)


def leaves_of(outputs) -> list:
    """The tensors of a nest of tuples."""
    if isinstance(outputs, (tuple, list)):
        return [leaf for output in outputs for leaf in leaves_of(output)]
    return [outputs]


def assert_guard_fails(run, *inputs) -> None:
    """``run(*inputs)`` fails its runtime guard: ``RuntimeError: assert failed``.

    The outputs are read inside the check: a compiled graph runs asynchronously and reports
    its failure at the next synchronisation, which must not be a later test's.
    """
    with pytest.raises(RuntimeError, match="assert failed"):
        for output in leaves_of(run(*inputs)):
            output.asnumpy()


# ------------------------------------------------------------------------- threads
def run_threads(*targets):
    """Run ``targets`` in threads until the first returns; return the exceptions they raised."""
    errors, stop = [], threading.Event()

    def guard(target):
        try:
            target(stop)
        except BaseException as error:
            errors.append(error)
            stop.set()

    threads = [threading.Thread(target=guard, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return errors
# ---------------------------------------------------------------- transition buffers
# Columns: observation (2,) = [step, env]; action = step; reward; terminated; truncated;
# an extra column (3,) = [step, env, 7]. Every row encodes where it came from.
TRANSITION_SHAPES = [(2,), (), (), (), (), (3,)]
TRANSITION_TYPES = [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8, ms.float32]
TRANSITION_NAMES = ["observation", "action", "reward", "terminated", "truncated", "extra"]


class EpisodeStream:
    """Time steps of ``num_envs`` environments as gymnasium's next-step autoreset gives them.

    An environment's episode ends after each step with probability ``end_probability``
    (terminated, truncated or both, at random); its next row then carries the episode's
    final observation with both flags 0 and a random reward (which no sample may read).
    Observations, actions and the extra column encode the global step number and the
    environment; rewards are random multiples of 0.25.
    """

    def __init__(self, num_envs: int, seed: int, end_probability: float = 0.2) -> None:
        self.num_envs, self.end_probability = num_envs, end_probability
        self.rng = np.random.default_rng(seed)
        self.step = 0
        self.needs_final = np.zeros(num_envs, bool)

    def take(self, steps: int):
        """``steps`` time steps as the six columns, each with leading ``(steps, num_envs)``."""
        columns = [[] for _ in TRANSITION_SHAPES]
        envs = np.arange(self.num_envs)
        for _ in range(steps):
            ends = (self.rng.random(self.num_envs) < self.end_probability) & ~self.needs_final
            kind = self.rng.integers(0, 3, self.num_envs)  # 0: terminated, 1: truncated, 2: both
            terminated = (ends & (kind != 1)).astype(np.uint8)
            truncated = (ends & (kind != 0)).astype(np.uint8)
            step = np.full(self.num_envs, self.step)
            row = [np.stack([step, envs], 1).astype(np.float32), step.astype(np.int32),
                   (self.rng.integers(-4, 9, self.num_envs) / 4).astype(np.float32), terminated, truncated,
                   np.stack([step, envs, np.full(self.num_envs, 7)], 1).astype(np.float32)]
            for column, value in zip(columns, row):
                column.append(value)
            self.needs_final = ends
            self.step += 1
        if not steps:
            return [np.zeros((0, self.num_envs, *shape), dtype) for shape, dtype in
                    zip(TRANSITION_SHAPES, (np.float32, np.int32, np.float32, np.uint8, np.uint8, np.float32))]
        return [np.stack(column) for column in columns]


class NotStoredError(Exception):
    """A row a sample would need is not stored."""


class TransitionModel:
    """A transition buffer from its definitions: rows in plain lists, samples by walking them.

    Stored are the newest ``max_length`` time steps since the last reset. Episodes: the row
    after a row with a flag holds that episode's final observation and starts no transition;
    the next episode begins after it. A start ``t`` is valid iff
    ``stack_size <= t <= stored - 1 - n_step`` and ``t`` is not such a final row; its sample
    is computed by walking the rows, which must all be stored (:class:`NotStoredError`).
    """

    def __init__(self, max_length: int, num_envs: int, stack_size: int, n_step: int, gamma: float) -> None:
        self.max_length, self.num_envs = max_length, num_envs
        self.stack_size, self.n_step, self.gamma = stack_size, n_step, gamma
        self.steps: list[list[np.ndarray]] = []

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            self.steps.append([np.asarray(column[j]) for column in batch])

    def reset(self) -> None:
        self.steps = []

    @property
    def stored(self):
        return self.steps[-self.max_length:]

    @property
    def head(self) -> int:
        """Where the ring keeps the oldest stored step: the cursor contract, step by step."""
        return (len(self.steps) - len(self.stored)) % self.max_length

    def slot(self, t: int, env: int) -> int:
        return ((self.head + t) % self.max_length) * self.num_envs + env

    def _row(self, t: int, env: int):
        if not 0 <= t < len(self.stored):
            raise NotStoredError
        return [column[env] for column in self.stored[t]]

    def _ended(self, t: int, env: int) -> bool:
        row = self._row(t, env)
        return bool(row[3] != 0 or row[4] != 0)

    def _is_final(self, t: int, env: int) -> bool:
        return self._ended(t - 1, env)

    def _stack(self, t: int, env: int) -> np.ndarray:
        """The last ``stack_size`` observations of ``t``'s episode, the first repeated before its start."""
        first = t
        for _ in range(self.stack_size - 1):
            if self._is_final(first - 1, env):  # first - 1 ends the previous episode
                break
            first -= 1
        frames = [self._row(max(t - k, first), env)[0] for k in range(self.stack_size - 1, -1, -1)]
        return np.stack(frames) if self.stack_size > 1 else frames[0]

    def sample(self, t: int, env: int):
        """``(observation, action, return, next_observation, discount, extra)`` of start ``(t, env)``,
        or None if it is not a valid start."""
        if not self.stack_size <= t <= len(self.stored) - 1 - self.n_step:
            return None
        try:
            if self._is_final(t, env):
                return None
            total, steps, terminal = 0.0, 0, False
            while steps < self.n_step:
                row = self._row(t + steps, env)
                total += self.gamma ** steps * float(row[2])
                steps += 1
                if self._ended(t + steps - 1, env):
                    terminal = bool(row[3] != 0)
                    break
            discount = 0.0 if terminal else self.gamma ** steps
            start = self._row(t, env)
            return (self._stack(t, env), start[1], total, self._stack(t + steps, env), discount, start[5])
        except NotStoredError:
            return None

    def valid_starts(self) -> dict[tuple[int, int], tuple]:
        """Every valid start ``(t, env)`` with its sample."""
        found = {}
        for t in range(len(self.stored)):
            for env in range(self.num_envs):
                sample = self.sample(t, env)
                if sample is not None:
                    found[(t, env)] = sample
        return found


def assert_transitions_match(model: TransitionModel, items, ids, probabilities=None) -> None:
    """Every sampled transition is a valid start of ``model`` and equals its sample, field by field."""
    valid = model.valid_starts()
    by_slot = {model.slot(t, env): sample for (t, env), sample in valid.items()}
    items = [np.asarray(x.asnumpy() if isinstance(x, Tensor) else x) for x in items]
    ids = np.asarray(ids.asnumpy() if isinstance(ids, Tensor) else ids)
    for i, slot in enumerate(ids.tolist()):
        assert slot in by_slot, f"slot {slot} is not a valid start; valid: {sorted(by_slot)}"
        want = by_slot[slot]
        np.testing.assert_array_equal(items[0][i], want[0])
        assert items[1][i] == want[1]
        np.testing.assert_allclose(items[2][i], want[2], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(items[3][i], want[3])
        np.testing.assert_allclose(items[4][i], want[4], rtol=1e-6)
        np.testing.assert_array_equal(items[5][i], want[5])
    if probabilities is not None:
        np.testing.assert_allclose(np.asarray(probabilities.asnumpy()), 1 / len(valid), rtol=1e-6)


def refuse_to_open(monkeypatch, path) -> None:
    """``os.open`` of ``path`` fails as for a file without read permission (as root, every file reads)."""
    opened = os.open

    def refused(file, *args, **kwargs):
        if Path(file) == Path(path):
            raise PermissionError(13, "Permission denied", str(file))
        return opened(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)


class ConstantBetaSample(nn.Cell):
    """A graph sampling a prioritized buffer with a Python constant ``beta``; returns the weights."""

    def __init__(self, buffer, beta):
        super().__init__()
        self.buffer = buffer
        self.beta = beta

    def construct(self):
        return self.buffer.sample(self.beta)[1]
