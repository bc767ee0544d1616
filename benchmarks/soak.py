"""Soak: a million inserts and samples with wraparound; memory must not grow once allocated.

    python -m benchmarks.soak [--steps 1000000] [--max-seconds 1500] [--capacity 100000] [--out DIR]

Each step inserts one W1 transition and samples 64, inside one compiled user graph (the
production path); a second phase does the same through direct calls. Resident memory is
read every ``--every`` steps; the figure reported is its growth after the first 5%. The
figures, with the run's provenance, go to ``DIR/soak.json`` (default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import time

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from benchmarks.common import W1_SHAPES, mib, provenance, results_path, rss, write_results
from mindspore_rl_buffer import ReplayBuffer
from mindspore_rl_buffer.specs import numpy_dtype

W1_TYPES = [ms.float32, ms.int32, ms.float32, ms.float32]


class Step(nn.Cell):
    """A collect-and-learn step as users write it: insert one transition, sample a batch."""

    def __init__(self, buffer: ReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action, reward, next_state):
        _ = self.buffer.insert([state, action, reward, next_state])
        s, _, r, _ = self.buffer.sample()
        return s.sum() + r.sum()


def phase(name: str, step, steps: int, every: int, deadline: float) -> dict[str, float]:
    rng = np.random.default_rng(0)
    pool = [[Tensor(rng.standard_normal(4).astype(np.float32)), Tensor(np.array([i % 2], np.int32)),
             Tensor(np.array([1.0], np.float32)), Tensor(rng.standard_normal(4).astype(np.float32))]
            for i in range(64)]
    readings, start, done = [], time.perf_counter(), 0
    for done in range(1, steps + 1):
        step(pool[done % 64])
        if done % every == 0:
            readings.append((done, rss()))
            if time.perf_counter() > deadline:
                break
    elapsed = time.perf_counter() - start
    settled = [r for d, r in readings if d >= max(every, steps // 20)] or [r for _, r in readings]
    growth = settled[-1] - settled[0] if settled else 0
    print(f"{name}: {done:,} steps in {elapsed:.0f} s ({elapsed / done * 1e6:.0f} us/step); "
          f"resident {mib(settled[0])} -> {mib(settled[-1])} (growth {mib(growth)}); "
          f"max {mib(max(r for _, r in readings))}")
    return {"steps": done, "seconds": elapsed, "growth_bytes": growth}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--direct-steps", type=int, default=100_000)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--max-seconds", type=float, default=1500.0)
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    before = rss()
    rb = ReplayBuffer(64, args.capacity, W1_SHAPES, W1_TYPES)
    rb.insert([np.zeros((args.capacity, *spec.shape), numpy_dtype(spec.dtype)) for spec in rb.specs])
    print(f"buffer allocated and prefilled: resident {mib(rss())} (+{mib(rss() - before)})")
    deadline = time.perf_counter() + args.max_seconds
    graph = Step(rb)
    results = {"in_graph": phase("in-graph insert+sample", lambda t: graph(*t), args.steps, args.every, deadline)}

    def direct(transition):
        rb.insert(transition)
        rb.sample()

    results["direct"] = phase("direct insert+sample", direct, args.direct_steps, args.every,
                              time.perf_counter() + args.max_seconds)
    print(f"wrapped {int(results['in_graph']['steps'] + results['direct']['steps']) // args.capacity} times; "
          f"head {int(rb.head)}, count {int(rb.count)}")
    path = results_path("soak", args.out)
    write_results({"run": run, "capacity": args.capacity, **results}, path)
    print(f"figures: {path}")
    return results


if __name__ == "__main__":
    main()
