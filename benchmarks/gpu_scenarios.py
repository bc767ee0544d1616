"""Every graph the library builds, compiled once each: the scenarios of the GPU kernel inventory.

Each scenario builds one kind of buffer (or the DQN main job) with columns of every dtype it
accepts, then calls its operators directly (which compiles the direct twins) and inside a
user's ``nn.Cell`` (which compiles them into the user's graph). ``python -m
benchmarks.gpu_inventory`` runs them under MindSpore's IR dump and reads each compiled graph's
primitives and input dtypes out of the dump; the scenarios themselves only need to compile
and run every graph once.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from mindspore_rl_buffer import (
    PrioritizedTransitionReplayBuffer,
    PriorityReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TrajectoryReplayBuffer,
    TransitionReplayBuffer,
    UniformReplayBuffer,
)

# One column per dtype a user may declare; bool is stored as uint8 inside (docs/platforms.md, "Dtypes").
DTYPES = (ms.float32, ms.float16, ms.float64, ms.int32, ms.int64, ms.uint8, ms.bool_)
SHAPES = [(3,), (), (2,), (), (1,), (2, 2), ()]


def batch(shapes: list[tuple[int, ...]], dtypes: tuple[Any, ...], rows: int, start: int = 0) -> list[np.ndarray]:
    """``rows`` items per column whose values encode their row (bools alternate)."""
    columns = []
    for shape, dtype in zip(shapes, dtypes):
        values = np.arange(start, start + rows).reshape((rows,) + (1,) * len(shape))
        values = np.broadcast_to(values, (rows, *shape))
        numpy_dtype = ms.dtype_to_nptype(dtype)
        columns.append((values % 2 == 1) if numpy_dtype is np.bool_ else (values % 200).astype(numpy_dtype))
    return columns


class UserGraph(nn.Cell):
    """The base of the users' graphs below: a Cell that owns a buffer and calls it in ``construct``."""

    def __init__(self, buffer: nn.Cell) -> None:
        super().__init__()
        self.buffer = buffer


class InsertSample(UserGraph):
    """A user's training-graph fragment: insert a batch, then sample (and read items)."""

    def __init__(self, buffer: nn.Cell, read: bool = True) -> None:
        super().__init__(buffer)
        self.read = read

    def construct(self, *columns):
        _ = self.buffer.insert(list(columns))
        sample = self.buffer.sample()
        if self.read:
            return sample, self.buffer.get_item(Tensor(np.array([0, 1], np.int32))), self.buffer.size()
        return sample, self.buffer.size()


def replay_buffer() -> None:
    """ReplayBuffer: insert, sample (with and without replacement, ordered and not), get_item, reset."""
    for replace in (True, False):
        rb = ReplayBuffer(4, 8, SHAPES, list(DTYPES), replace=replace, seed=1)
        rb.insert(batch(SHAPES, DTYPES, 5))
        rb.insert([c[0] for c in batch(SHAPES, DTYPES, 1, 5)])  # one item, no batch axis
        for ordered in (False, True):
            rb.sample(ordered)
            rb.sample_with_indices(ordered)
        rb.get_item(np.array([0, 2], np.int32))
        rb.get_item(np.array([1], np.int64))
        rb.size(), rb.full()
        InsertSample(rb)(*[Tensor(c) for c in batch(SHAPES, DTYPES, 3, 10)])
        rb.reset()
    ordered = ReplayBuffer(4, 8, SHAPES, list(DTYPES), ordered=True, seed=1)
    InsertSample(ordered)(*[Tensor(c) for c in batch(SHAPES, DTYPES, 6)])
    long = ReplayBuffer(5000, 6000, [()], [ms.int32], seed=1)
    long.insert([np.arange(6000, dtype=np.int32)])
    long.sample(True)


def writer_flushes() -> None:
    """BufferWriter: batches and the power-of-two pieces of a partial flush."""
    rb = ReplayBuffer(4, 16, SHAPES, list(DTYPES), seed=1)
    with rb.writer(4) as writer:
        for row in range(7):
            writer.insert([c[0] for c in batch(SHAPES, DTYPES, 1, row)])
    rb.sample()


def compat_faces() -> None:
    """MindSpore Reinforcement's names: UniformReplayBuffer, insert(*columns), the flat priority sample."""
    urb = UniformReplayBuffer(4, 8, SHAPES, list(DTYPES))
    urb.insert(*batch(SHAPES, DTYPES, 3))
    urb.sample()
    prb = PriorityReplayBuffer(0.6, 8, 4, SHAPES, list(DTYPES), seed0=1, seed1=2)
    prb.push(*batch(SHAPES, DTYPES, 3))
    prb.sample(1.0)


class PriorityStep(UserGraph):
    """A user's graph: insert, sample with weights, update the sampled slots' priorities."""

    def construct(self, *columns):
        _ = self.buffer.insert(list(columns))
        sample = self.buffer.sample(0.4)  # (slots, weights, *columns)
        _ = self.buffer.update_priorities(sample[0], sample[1] + 1.0)
        return sample


def priority() -> None:
    """PriorityReplayBuffer: insert, sample, update_priorities (int32 and int64 slots), in a graph."""
    prb = PriorityReplayBuffer(0.6, 8, 4, SHAPES, list(DTYPES), seed=1)
    prb.insert(batch(SHAPES, DTYPES, 5))
    slots, *_ = prb.sample(0.4)
    prb.update_priorities(slots, np.full(4, 2.0, np.float32))
    prb.update_priorities(np.array([0, 1], np.int64), np.array([1.0, 3.0], np.float64))
    prb.get_item(np.array([0], np.int32))
    PriorityStep(prb)(*[Tensor(c) for c in batch(SHAPES, DTYPES, 2, 7)])
    # Past 4,096 rows sorts and the last-occurrence rule take their long-row forms.
    big = PriorityReplayBuffer(0.6, 6000, 5000, [()], [ms.float32], seed=1)
    big.insert([np.zeros(5000, np.float32)])
    slots, *_ = big.sample(0.4)
    big.update_priorities(slots, np.ones(5000, np.float32))


def reservoir() -> None:
    """ReservoirReplayBuffer: insert past capacity (the reservoir draws), sample, in a graph."""
    rrb = ReservoirReplayBuffer(4, 6, SHAPES, list(DTYPES), seed=1)
    rrb.insert(batch(SHAPES, DTYPES, 9))
    rrb.sample()
    InsertSample(rrb)(*[Tensor(c) for c in batch(SHAPES, DTYPES, 3, 20)])
    big = ReservoirReplayBuffer(5000, 6000, [()], [ms.int32], seed=1)
    big.insert([np.arange(13000, dtype=np.int32)])
    big.sample()


class AddAndGather(UserGraph):
    """A user's graph: add a batch of steps, then read every stored step back."""

    def construct(self, *leaves):
        _ = self.buffer.add_batch(leaves)
        return self.buffer.gather_all(), self.buffer.num_frames()


def trajectory() -> None:
    """TrajectoryReplayBuffer: add_batch, windows with and without a batch size, gather_all, the pass."""
    spec = tuple(TensorSpec(shape, dtype, f"c{i}") for i, (shape, dtype) in enumerate(zip(SHAPES, DTYPES)))
    rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=6, seed=1)
    for t in range(8):
        rb.add_batch(tuple(batch(SHAPES, DTYPES, 2, t)))
    AddAndGather(rb)(*[Tensor(c) for c in batch(SHAPES, DTYPES, 2, 8)])
    rb.get_next(sample_batch_size=3)
    rb.get_next(sample_batch_size=3, num_steps=2)
    rb.get_next(num_steps=2)
    rb.gather_all()
    for _ in rb.as_dataset(num_steps=2, single_deterministic_pass=True):
        pass
    rb.clear()


def sharded() -> None:
    """ShardedReplayBuffer in one process: local and global sampling."""
    for sampling in ("local", "global"):
        # Global sampling refuses float64 columns (the all-gather cannot move them exactly).
        shapes, dtypes = zip(*[(s, d) for s, d in zip(SHAPES, DTYPES) if sampling == "local" or d != ms.float64])
        rb = ShardedReplayBuffer(4, 8, list(shapes), list(dtypes), sampling=sampling)
        rb.insert(batch(list(shapes), dtypes, 5))
        rb.sample()
        rb.size(), rb.local_size(), rb.full()
        InsertSample(rb, read=False)(*[Tensor(c) for c in batch(list(shapes), dtypes, 3, 5)])


class TransitionStep(UserGraph):
    """A user's graph: insert one step of every environment, then sample transitions."""

    def construct(self, *columns):
        _ = self.buffer.insert(list(columns))
        return self.buffer.sample()


def transition() -> None:
    """TransitionReplayBuffer: frame stacks and n-step returns, direct, in a graph, through a writer."""
    shapes = [(2, 2), (), (), (), (), (1,)]
    for obs_dtype, flag_dtype, stack_size, n_step in ((ms.uint8, ms.uint8, 4, 3), (ms.float32, ms.bool_, 1, 1),
                                                     (ms.float16, ms.float32, 2, 2)):
        dtypes = (obs_dtype, ms.int32, ms.float32, flag_dtype, flag_dtype, ms.int64)
        rb = TransitionReplayBuffer(4, 24, shapes, list(dtypes), num_envs=2, stack_size=stack_size,
                                    n_step=n_step, gamma=0.9, seed=1)

        def step(t: int, dtypes: tuple[Any, ...] = dtypes) -> list[np.ndarray]:
            columns = batch(shapes, dtypes, 2, t)
            return [*columns[:3], np.zeros_like(columns[3]), np.zeros_like(columns[4]), *columns[5:]]

        for t in range(9):
            rb.insert(step(t))
        rb.sample()
        rb.sample_with_info()
        TransitionStep(rb)(*[Tensor(c) for c in step(9)])
        with rb.writer(2) as writer:
            for t in range(3):
                writer.insert(step(10 + t))


class PrioritizedTransitionStep(UserGraph):
    """A user's graph: insert one step, sample with a tensor beta, update the priorities of the draw."""

    def construct(self, *columns):
        _ = self.buffer.insert(list(columns))
        ids, weights, *items = self.buffer.sample(Tensor(0.4, ms.float32))
        return self.buffer.update_priorities(ids, weights), items


def prioritized_transition() -> None:
    """PrioritizedTransitionReplayBuffer: trees over the valid starts, direct, in a graph, through a writer."""
    shapes = [(2, 2), (), (), (), (), (1,)]
    for obs_dtype, flag_dtype, stack_size, n_step in ((ms.uint8, ms.uint8, 4, 3), (ms.float32, ms.bool_, 1, 1)):
        dtypes = (obs_dtype, ms.int32, ms.float32, flag_dtype, flag_dtype, ms.int64)
        rb = PrioritizedTransitionReplayBuffer(4, 24, shapes, list(dtypes), alpha=0.6, num_envs=2,
                                               stack_size=stack_size, n_step=n_step, gamma=0.9, seed=1)

        def step(t: int, dtypes: tuple[Any, ...] = dtypes) -> list[np.ndarray]:
            columns = batch(shapes, dtypes, 2, t)
            return [*columns[:3], np.zeros_like(columns[3]), np.zeros_like(columns[4]), *columns[5:]]

        for t in range(9):
            rb.insert(step(t))
        ids = rb.sample(0.4)[0]
        rb.update_priorities(ids, np.ones(ids.shape, np.float32))
        rb.update_priorities(ids.asnumpy().astype(np.int64), np.ones((ids.shape[0], 1), np.float64))
        PrioritizedTransitionStep(rb)(*[Tensor(c) for c in step(9)])
        with rb.writer(2) as writer:
            for t in range(3):
                writer.insert(step(10 + t))
        rb.reset()


def dqn() -> None:
    """The DQN main job: the collect, learn and evaluation graphs, both loops, both buffer entries."""
    from mindspore_rl_buffer.configs import dqn as one_step
    from mindspore_rl_buffer.configs import dqn_nstep

    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.dqn import train

    for module in (one_step, dqn_nstep):
        config = copy.deepcopy(load_config(module.__file__))
        config["trainer"].update(max_steps=96, learning_starts=48, eval_interval=48, eval_starts=0,
                                 eval_episodes=2, log_interval=2)
        config["environment"]["max_episode_steps"] = 20
        config["replay_buffer"]["capacity"] = 256
        config["replay_buffer"]["sample_size"] = 8
        for loop in ("fused", "host"):
            train(config, seed=0, loop=loop, progress=False, stop_when_solved=False)


class InfoInGraph(UserGraph):
    """A user's graph that reads a draw's info: the plain pair ``(ids, probabilities)`` inside a graph."""

    def construct(self, *leaves):
        if isinstance(self.buffer, TrajectoryReplayBuffer):
            _ = self.buffer.add_batch(leaves)
            items, (ids, _) = self.buffer.get_next(3, 2)
            return items, ids
        items, (_, probabilities) = self.buffer.sample_with_info()
        return items, probabilities


def info_in_graph() -> None:
    """add_batch and get_next, and sample_with_info, inside a user's graph, reading the info's fields there."""
    spec = (TensorSpec((2,), ms.float32, "x"),)
    trajectories = TrajectoryReplayBuffer(spec, batch_size=2, max_length=4, seed=1)
    for t in range(3):
        trajectories.add_batch((np.full((2, 2), t, np.float32),))
    shapes, dtypes = [(2,), (), (), (), ()], (ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8)
    transitions = TransitionReplayBuffer(4, 8, shapes, list(dtypes), seed=1)
    for t in range(4):
        transitions.insert([np.full((1, 2), t, np.float32), np.zeros(1, np.int32), np.ones(1, np.float32),
                            np.zeros(1, np.uint8), np.zeros(1, np.uint8)])
    InfoInGraph(trajectories)(Tensor(np.full((2, 2), 3, np.float32)))
    InfoInGraph(transitions)()


SCENARIOS: dict[str, Callable[[], None]] = {
    "replay_buffer": replay_buffer, "writer": writer_flushes, "compat": compat_faces, "priority": priority,
    "reservoir": reservoir, "trajectory": trajectory, "sharded": sharded, "transition": transition, "dqn": dqn,
    "info_in_graph": info_in_graph, "prioritized_transition": prioritized_transition,
}
