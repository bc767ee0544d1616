"""Three threads and MindSpore's dataset pipeline against one TrajectoryReplayBuffer.

Run by tests/test_graph.py in a process of its own; prints "threads ok" when every call
succeeded and the final state is the model's.
"""
from __future__ import annotations

import random
import time

import mindspore as ms
import numpy as np

from mindspore_rl_buffer import TensorSpec, TrajectoryReplayBuffer
from mindspore_rl_buffer._graph import DIRECT_CALLS
from tests.helpers import run_threads, step_values

SECONDS = 3.0
# int32, not float32: a fast machine adds more than 16,777 steps in SECONDS, and 1000 * t + segment
# then passes 2**24, past which float32 no longer holds every integer.
SPEC = {"value": TensorSpec([], ms.int32, "value")}


def main():
    # A clear followed by two adds is made one critical section by holding the library's
    # reentrant lock around them (its own calls inside take it again), so MindSpore's pipeline
    # thread never finds fewer steps than its windows need: every call must then succeed.
    buffer = TrajectoryReplayBuffer(SPEC, batch_size=3, max_length=8)
    steps: list[int] = []

    def add_step():
        with DIRECT_CALLS:
            t = len(steps)
            buffer.add_batch({"value": step_values(t, 3).astype(np.int32)})
            steps.append(t)

    for _ in range(2):
        add_step()

    def add(stop):
        deadline, rng = time.monotonic() + SECONDS, random.Random(8)
        while time.monotonic() < deadline and not stop.is_set():
            add_step()
            if rng.random() < 0.03:
                with DIRECT_CALLS:
                    buffer.clear()
                    add_step()
                    add_step()
        stop.set()

    def read(stop):
        rng = random.Random(4)
        while not stop.is_set():
            choice = rng.random()
            if choice < 0.5:
                items, _ = buffer.get_next(4, 2)
                step = items["value"].asnumpy().astype(np.int64) // 1000
                assert (np.diff(step, axis=1) == 1).all(), "a window is consecutive steps of one segment"
            elif choice < 0.98:
                gathered = buffer.gather_all()["value"].asnumpy().astype(np.int64)
                assert (np.diff(gathered // 1000, axis=1) == 1).all()
            else:
                with DIRECT_CALLS:
                    buffer.clear()
                    add_step()
                    add_step()

    def stream(stop):
        dataset = buffer.as_mindspore_dataset(sample_batch_size=4, num_steps=2, num_samples=10**6)
        for values, _, _ in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
            assert (np.diff(values.astype(np.int64) // 1000, axis=1) == 1).all()
            if stop.is_set():
                return

    errors = run_threads(add, read, stream)
    assert not errors, errors
    stored = buffer.gather_all()["value"].asnumpy().astype(np.int64)  # [segments, time]
    time_steps = stored[0] // 1000
    assert 2 <= len(time_steps) <= 8 and (np.diff(time_steps) == 1).all()
    assert time_steps[-1] == steps[-1], "the newest step is the last one added"
    np.testing.assert_array_equal(stored, np.stack([step_values(t, 3) for t in time_steps], 1).reshape(3, -1))


if __name__ == "__main__":
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    main()
    print("threads ok")
