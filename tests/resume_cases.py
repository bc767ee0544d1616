"""One small buffer of every type, with its draws, for the resume tests (tests/test_resume.py).

Run as a script (``python -m tests.resume_cases FOLDER``) it is the fresh process of the slow
test: for every case it builds the buffer with another seed, loads ``FOLDER/<case>.ckpt`` and
writes the draws that follow to ``FOLDER/<case>.npz``.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import (
    PriorityReplayBuffer,
    PyUniformReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
    TensorSpec,
    TrajectoryReplayBuffer,
    TransitionReplayBuffer,
)

SHAPES, TYPES = [(2,), ()], [ms.float32, ms.int32]
DRAWS = 3  # draws compared after the load


def rows(start: int, n: int) -> list[np.ndarray]:
    values = np.arange(start, start + n)
    return [np.stack([values, -values], 1).astype(np.float32), values.astype(np.int32)]


def steps(t: int, num_envs: int = 2) -> list[np.ndarray]:
    """Step ``t`` of a transition buffer's environments: episodes end at t = 4 and 9 in the first."""
    return [np.full((num_envs, 2), t, np.float32), np.full(num_envs, t % 2, np.int32),
            np.full(num_envs, t, np.float32), np.array([t % 5 == 4] + [0] * (num_envs - 1), np.uint8),
            np.zeros(num_envs, np.uint8)]


def flat(outputs: Any) -> list[np.ndarray]:
    """Every array in ``outputs`` (tensors, arrays, tuples, dicts, named tuples), in order."""
    if isinstance(outputs, (Tensor, np.ndarray, np.generic)):
        return [np.asarray(outputs.asnumpy() if isinstance(outputs, Tensor) else outputs)]
    if isinstance(outputs, dict):
        return [x for key in sorted(outputs) for x in flat(outputs[key])]
    return [x for item in outputs for x in flat(item)]


def _reservoir_draw(buffer: ReservoirReplayBuffer) -> list[np.ndarray]:
    """A reservoir's draws are its insert decisions as well as its samples."""
    buffer.insert(rows(1000 + int(buffer.seen), 7))
    return [*flat(buffer.sample()), buffer.columns[1].asnumpy()]


def _reservoir_writer_draw(buffer: ReservoirReplayBuffer) -> list[np.ndarray]:
    with buffer.writer(batch_size=3) as writer:
        for item in zip(*rows(2000 + int(buffer.seen), 5)):
            writer.insert(*item)
    return [buffer.columns[1].asnumpy()]


def _fill_transition(buffer: TransitionReplayBuffer) -> None:
    for t in range(12):
        buffer.insert(steps(t))


# name -> (build(seed), fill(buffer), draw(buffer) -> arrays)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], None], Callable[[Any], list[np.ndarray]]]] = {
    "uniform": (lambda seed: ReplayBuffer(4, 9, SHAPES, TYPES, seed=seed),
                lambda b: b.insert(rows(0, 13)),
                lambda b: flat(b.sample_with_indices()) + flat(b.sample(ordered=True))),
    "without_replacement": (lambda seed: ReplayBuffer(4, 9, SHAPES, TYPES, replace=False, seed=seed),
                            lambda b: b.insert(rows(0, 13)), lambda b: flat(b.sample())),
    "priority": (lambda seed: PriorityReplayBuffer(0.6, 9, 4, SHAPES, TYPES, seed=seed),
                 lambda b: b.insert(rows(0, 13)), lambda b: flat(b.sample(0.4))),
    "reservoir": (lambda seed: ReservoirReplayBuffer(4, 6, SHAPES, TYPES, seed=seed),
                  lambda b: b.insert(rows(0, 13)), _reservoir_draw),
    "reservoir_writer": (lambda seed: ReservoirReplayBuffer(4, 6, SHAPES, TYPES, seed=seed),
                         lambda b: b.insert(rows(0, 13)), _reservoir_writer_draw),
    "transition": (lambda seed: TransitionReplayBuffer(4, 16, [(2,), (), (), (), ()],
                                                       [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8],
                                                       num_envs=2, stack_size=2, n_step=2, seed=seed),
                   _fill_transition, lambda b: flat(b.sample_with_info())),
    "trajectory": (lambda seed: TrajectoryReplayBuffer(TensorSpec([2], ms.float32, "x"), batch_size=2,
                                                       max_length=8, seed=seed),
                   lambda b: [b.add_batch(Tensor(np.full((2, 2), t, np.float32))) for t in range(6)],
                   lambda b: flat(b.get_next(sample_batch_size=3, num_steps=2))),
    "numpy": (lambda seed: PyUniformReplayBuffer({"x": TensorSpec([2], "float32")}, capacity=8, seed=seed),
              lambda b: [b.add_batch({"x": np.full((1, 2), t, np.float32)}) for t in range(11)],
              lambda b: flat(b.get_next(sample_batch_size=3, num_steps=2))),
    "sharded": (lambda seed: ShardedReplayBuffer(4, 9, SHAPES, TYPES, sampling="global", seed=seed),
                lambda b: b.insert(rows(0, 13)), lambda b: flat(b.sample_with_indices())),
}


def saved_run(name: str, path: Path, before: int = 2) -> list[list[np.ndarray]]:
    """Build case ``name`` with seed 11, fill it, draw ``before`` times, save it to ``path``, and
    return the :data:`DRAWS` draws the uninterrupted buffer makes next."""
    build, fill, draw = CASES[name]
    buffer = build(11)
    fill(buffer)
    for _ in range(before):
        draw(buffer)
    buffer.save(path)
    return [draw(buffer) for _ in range(DRAWS)]


def resumed_run(name: str, path: Path) -> list[list[np.ndarray]]:
    """A buffer of case ``name`` built with another seed, loaded from ``path``: its next draws."""
    build, _, draw = CASES[name]
    buffer = build(5)
    buffer.load(path)
    return [draw(buffer) for _ in range(DRAWS)]


def main(folder: str) -> None:
    for name in CASES:
        drawn = resumed_run(name, Path(folder) / f"{name}.ckpt")
        np.savez(Path(folder) / f"{name}.npz", *[x for draw in drawn for x in draw])


if __name__ == "__main__":
    main(sys.argv[1])
