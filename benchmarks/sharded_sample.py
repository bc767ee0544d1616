"""Time a global sample against a local one on every rank of an msrun job.

    PATH=/path/to/venv/bin:$PATH msrun --worker_num=2 --local_worker_num=2 \\
        benchmarks/sharded_sample.py [--calls 300] [--out DIR]

Columns as the DQN config's (W1): state (4,) float32, action (1,) int32, reward (1,) float32,
next state (4,) float32; sample_size 64; each rank's shard holds 10,000 transitions. Two
paths per mode: the direct call (host checks, one compiled graph) and a sample compiled
inside a user's Cell. Every timed call waits for its result (``asnumpy`` of a column).
Rank 0 prints the medians and writes them, with the run's provenance, to
``DIR/sharded_sample.json`` (``--out DIR``, default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn

if not __package__:  # run as a file (msrun, or python benchmarks/x.py): the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import provenance, results_path, write_results
from mindspore_rl_buffer import ShardedReplayBuffer

SHAPES = [(4,), (1,), (1,), (4,)]
TYPES = [ms.float32, ms.int32, ms.float32, ms.float32]
SAMPLE_SIZE = 64
FILL = 10_000


class Sampler(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self):
        return self.buffer.sample()


def median_ms(call, calls: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        call()[0].asnumpy()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()[0].asnumpy()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    buffers = {mode: ShardedReplayBuffer(SAMPLE_SIZE, 100_000, SHAPES, TYPES, sampling=mode)
               for mode in ("local", "global")}
    rng = np.random.default_rng(buffers["local"].rank)
    batch = [rng.standard_normal((FILL, 4)).astype(np.float32), rng.integers(0, 2, (FILL, 1)).astype(np.int32),
             rng.standard_normal((FILL, 1)).astype(np.float32), rng.standard_normal((FILL, 4)).astype(np.float32)]
    for buffer in buffers.values():
        buffer.insert(batch)
    results = {"run": run, "world_size": buffers["local"].world_size, "sample_size": SAMPLE_SIZE, "calls": args.calls}
    # Alternate the modes so that load from other processes on the machine hits both alike.
    for mode in ("local", "global", "local", "global"):
        buffer = buffers[mode]
        direct = median_ms(buffer.sample, args.calls)
        in_graph = median_ms(Sampler(buffer), args.calls)
        results.setdefault(f"{mode}_direct_ms", []).append(round(direct, 3))
        results.setdefault(f"{mode}_in_graph_ms", []).append(round(in_graph, 3))
    if buffers["local"].rank == 0:
        print(json.dumps(results))
        write_results(results, results_path("sharded_sample", args.out))
    return results


if __name__ == "__main__":
    main()
