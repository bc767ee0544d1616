"""Cost of PriorityReplayBuffer.sample and update_priorities against capacity.

Sampling and updating walk the sum and min trees one level at a time, so their cost must
grow like log2(capacity) (10 levels at 1e3, 20 at 1e6), not like capacity. One filled
buffer per capacity is built and every call warmed up (compiled); then the calls are timed
round-robin over the capacities, ``--repeats`` rounds, so that the load of a shared machine
falls on all capacities alike. Printed: the median per call, the 10th percentile (less
sensitive to load), and the ratio of each to the smallest capacity. Each timed call ends
with a host read of its result, so the time includes the device work.

    python -m benchmarks.priority [--repeats 300] [--sample-size 64] [--capacities 1e3 1e4 1e5 1e6] [--out DIR]

The figures, with the run's provenance, go to ``DIR/priority.json`` (default ``benchmarks/results``).

"compiled" columns time the compiled graph alone (no host checks), "direct" ones the public
method (host checks, then the graph), "step in a Cell" a user's graph that inserts 8 items,
updates ``sample_size`` priorities and samples. Not a test: numbers depend on the machine
and its load.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

if not __package__:  # run as a file (msrun, or python benchmarks/x.py): the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import provenance, results_path, write_results
from mindspore_rl_buffer import PriorityReplayBuffer


class _Step(nn.Cell):
    """A training step's buffer work in one user graph: insert, update, sample."""

    def __init__(self, buffer: PriorityReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, indices, priorities):
        _ = self.buffer.insert([state, action])
        self.buffer.update_priorities(indices, priorities)
        return self.buffer.sample(0.4)[0]


class _Sample(nn.Cell):
    """The sample graph alone, compiled in a user's Cell (no host checks)."""

    def __init__(self, buffer: PriorityReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def construct(self, beta):
        return self.buffer.sample(beta)[0]


class _Update(nn.Cell):
    """The update graph alone, compiled in a user's Cell (no host checks); returns the largest priority."""

    def __init__(self, buffer: PriorityReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def construct(self, indices, priorities):
        return self.buffer.update_priorities(indices, priorities)


def calls(capacity: int, sample_size: int, rng: np.random.Generator) -> dict[str, Callable[[], object]]:
    """The timed calls on a filled buffer of ``capacity`` items, each ending in a host read."""
    prb = PriorityReplayBuffer(0.6, capacity, sample_size, [(4,), ()], [ms.float32, ms.int32])
    prb.insert([np.zeros((capacity, 4), np.float32), np.arange(capacity, dtype=np.int32)])
    slots = rng.integers(0, capacity, sample_size).astype(np.int32)
    priorities = (rng.random(sample_size) * 10).astype(np.float32)
    slots_tensor, priorities_tensor, beta = Tensor(slots), Tensor(priorities), Tensor(0.4, ms.float32)
    step, sample, update = _Step(prb), _Sample(prb), _Update(prb)
    state, action = Tensor(np.zeros((8, 4), np.float32)), Tensor(np.arange(8, dtype=np.int32))
    return {
        "sample, direct": lambda: prb.sample(0.4)[0].asnumpy(),
        "update, direct": lambda: (prb.update_priorities(slots, priorities), prb.max_priority.asnumpy()),
        "sample, compiled": lambda: sample(beta).asnumpy(),
        "update, compiled": lambda: update(slots_tensor, priorities_tensor).asnumpy(),
        "step in a Cell": lambda: step(state, action, slots_tensor, priorities_tensor).asnumpy(),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--sample-size", type=int, default=64)
    parser.add_argument("--capacities", type=float, nargs="+", default=[1e3, 1e4, 1e5, 1e6])
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    rng = np.random.default_rng(0)
    capacities = [int(c) for c in args.capacities]
    table = {capacity: calls(capacity, args.sample_size, rng) for capacity in capacities}
    names = list(table[capacities[0]])
    times: dict[tuple[int, str], list[float]] = {(c, n): [] for c in capacities for n in names}
    for capacity in capacities:
        for call in table[capacity].values():
            for _ in range(5):
                call()
    for _ in range(args.repeats):
        for capacity in capacities:
            for name, call in table[capacity].items():
                start = time.perf_counter()
                call()
                times[capacity, name].append(1e3 * (time.perf_counter() - start))
    base = capacities[0]
    print(f"sample_size={args.sample_size}, {args.repeats} rounds; ms per call, median / 10th percentile "
          f"(ratio to {base:.0e}); tree levels: "
          + ", ".join(f"{c:.0e}: {math.ceil(math.log2(c))}" for c in capacities))
    width = 27
    print(f"| {'capacity':>8} | " + " | ".join(f"{name:>{width}}" for name in names) + " |")
    print(f"| {'-' * 8} | " + " | ".join("-" * width for _ in names) + " |")
    for capacity in capacities:
        cells = []
        for name in names:
            median, low = np.median(times[capacity, name]), np.percentile(times[capacity, name], 10)
            median_base, low_base = np.median(times[base, name]), np.percentile(times[base, name], 10)
            cells.append(f"{median:.2f} ({median / median_base:.2f}x) / {low:.2f} ({low / low_base:.2f}x)")
        print(f"| {capacity:>8.0e} | " + " | ".join(f"{cell:>{width}}" for cell in cells) + " |")
    results = {"run": run, "sample_size": args.sample_size, "repeats": args.repeats, "baseline": base,
               "ms": {str(c): {name: {"median": float(np.median(times[c, name])),
                                      "p10": float(np.percentile(times[c, name], 10))} for name in names}
                      for c in capacities}}
    path = results_path("priority", args.out)
    write_results(results, path)
    print(f"figures: {path}")
    return results


if __name__ == "__main__":
    main()
