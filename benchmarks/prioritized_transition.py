"""Prioritized stacked n-step replay at Atari scale: its cost against the uniform transition buffer.

    python -m benchmarks.prioritized_transition [--smoke] [--out DIR]

The figures, with the run's provenance, go to ``DIR/prioritized_transition.json`` (default
``benchmarks/results``; a smoke run without ``--out`` records nothing).

Two sections, every ratio measured in this run:

* **speed**: a ``PrioritizedTransitionReplayBuffer`` and a ``TransitionReplayBuffer`` of
  ``(84, 84)`` uint8 frames, ``stack_size=4``, ``n_step=3``, filled alike (the prioritized
  one's priorities then spread over six orders of magnitude), each called inside a user's
  compiled graph: ``sample(32)`` against ``sample(32)``, a learn step's buffer work
  (``sample`` then ``update_priorities`` of the 32 ids) against the uniform sample, and the
  insert of one time step against the uniform insert, side by side in rounds
  (``benchmarks.common.in_rounds``);
* **memory**: resident memory of each buffer at 1,000,000 rows, filled in inserts of 1,000
  steps (a writer's flush; a larger batch grows MindSpore's workspace for the insert graph,
  the prioritized one's more), each in a child process, against the frame payload: what the
  trees add.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from benchmarks.common import in_rounds, mib, provenance, ratio, results_path, rss, table, write_results
from benchmarks.transition import FRAME, N_STEP, SHAPES, STACK, TYPES, allocated, fill, settle
from mindspore_rl_buffer import PrioritizedTransitionReplayBuffer, TransitionReplayBuffer

ALPHA, BETA = 0.5, 0.4


def buffers(capacity: int, prioritized: bool) -> TransitionReplayBuffer:
    if prioritized:
        return PrioritizedTransitionReplayBuffer(32, capacity, SHAPES, TYPES, alpha=ALPHA, stack_size=STACK,
                                                 n_step=N_STEP, gamma=0.99, seed=0)
    return TransitionReplayBuffer(32, capacity, SHAPES, TYPES, stack_size=STACK, n_step=N_STEP, gamma=0.99, seed=0)


def spread_priorities(rb: PrioritizedTransitionReplayBuffer, rounds: int, seed: int = 0) -> None:
    """Give the starts drawn over ``rounds`` samples of 256 priorities from 1e-3 to 1e3 (log-uniform)."""
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        ids = rb.sample(BETA, 256)[0]
        rb.update_priorities(ids, (10.0 ** rng.uniform(-3, 3, 256)).astype(np.float32))


class Sample(nn.Cell):
    """A user's graph: ``sample(32)`` (uniform), or ``sample(beta, 32)`` and, with ``update``, the
    priorities of the 32 ids set from their weights (the buffer work of a learn step)."""

    def __init__(self, buffer: TransitionReplayBuffer, update: bool = False) -> None:
        super().__init__()
        self.buffer, self.update = buffer, update
        self.beta = Tensor(BETA, ms.float32)

    def construct(self):
        if isinstance(self.buffer, PrioritizedTransitionReplayBuffer):
            out = self.buffer.sample(self.beta, 32)
            if self.update:
                return self.buffer.update_priorities(out[0], out[1] + 0.5), out[2]
            return out
        return self.buffer.sample(32)


class InsertOne(nn.Cell):
    """A user's graph: insert one time step (the collect side of an Atari agent step)."""

    def __init__(self, buffer: TransitionReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer
        self.step = [Tensor(np.full((1, *FRAME), 7, np.uint8)), Tensor(np.zeros(1, np.int32)),
                     Tensor(np.ones(1, np.float32)), Tensor(np.zeros(1, np.uint8)), Tensor(np.zeros(1, np.uint8))]

    def construct(self):
        _ = self.buffer.insert(self.step)
        return self.buffer.size()


def _sync(result: Any) -> None:
    while isinstance(result, (tuple, list)):
        result = result[0]
    result.asnumpy()


def speed(capacity: int, repeats: int) -> dict[str, Any]:
    uniform, prioritized = buffers(capacity, False), buffers(capacity, True)
    for rb in (uniform, prioritized):
        fill(rb, capacity, 8192)
        settle(rb)
    spread_priorities(prioritized, max(4, capacity // 2048))
    calls = {"uniform_sample": Sample(uniform), "prioritized_sample": Sample(prioritized),
             "prioritized_sample_update": Sample(prioritized, update=True),
             "uniform_insert": InsertOne(uniform), "prioritized_insert": InsertOne(prioritized)}
    times = in_rounds(calls, repeats, 4, sync=_sync)
    return {"capacity": capacity, "valid_starts": int(prioritized.valid_starts()),
            "us": {name: statistics.median(values) * 1e6 for name, values in times.items()},
            "sample_vs_uniform": ratio(times, "prioritized_sample", "uniform_sample"),
            "sample_update_vs_uniform_sample": ratio(times, "prioritized_sample_update", "uniform_sample"),
            "insert_vs_uniform": ratio(times, "prioritized_insert", "uniform_insert")}


def memory_child(capacity: int, batch: int, prioritized: bool) -> dict[str, Any]:
    """Allocate and fill one buffer; its resident memory against the process before allocation."""
    baseline = rss()
    rb = buffers(capacity, prioritized)
    payload = allocated(rb)
    frames = int(np.prod(rb.frames.shape))
    seconds = fill(rb, capacity, batch)
    sampled = rb.sample(BETA)[0] if prioritized else rb.sample()[0]
    sampled.asnumpy()
    return {"prioritized": prioritized, "capacity": capacity, "allocated_bytes": payload, "frame_bytes": frames,
            "baseline_bytes": baseline, "resident_bytes": rss(), "fill_seconds": seconds}


def memory(capacity: int, batch: int) -> dict[str, Any]:
    """:func:`memory_child` of each buffer, each in a child process (its memory returned when it exits)."""
    runs = {}
    for name, flag in (("uniform", "0"), ("prioritized", "1")):
        result = subprocess.run([sys.executable, "-m", "benchmarks.prioritized_transition", "--memory-child",
                                 str(capacity), str(batch), flag], capture_output=True, text=True, check=True)
        runs[name] = json.loads(result.stdout.strip().splitlines()[-1])
    grown = {name: run["resident_bytes"] - run["baseline_bytes"] for name, run in runs.items()}
    frames = runs["prioritized"]["frame_bytes"]
    return {**runs, "tree_bytes": runs["prioritized"]["allocated_bytes"] - runs["uniform"]["allocated_bytes"],
            "resident_added_bytes": grown["prioritized"] - grown["uniform"],
            "resident_added_over_resident": (grown["prioritized"] - grown["uniform"]) / grown["uniform"],
            "tree_bytes_over_frames": (runs["prioritized"]["allocated_bytes"] - runs["uniform"]["allocated_bytes"])
            / frames}


def report(fast: dict[str, Any], mem: dict[str, Any]) -> str:
    us = fast["us"]
    rows = [["sample(32)", f"{us['prioritized_sample']:.0f}", f"{us['uniform_sample']:.0f}",
             f"{fast['sample_vs_uniform']:.2f}x (target <= 1.5x)"],
            ["sample(32) + update_priorities(32)", f"{us['prioritized_sample_update']:.0f}",
             f"{us['uniform_sample']:.0f} (sample only)", f"{fast['sample_update_vs_uniform_sample']:.2f}x"],
            ["insert of one time step", f"{us['prioritized_insert']:.0f}", f"{us['uniform_insert']:.0f}",
             f"{fast['insert_vs_uniform']:.2f}x"]]
    lines = [f"{fast['capacity']:,} rows, {fast['valid_starts']:,} valid starts, inside a compiled graph:",
             table(rows, ["(84, 84) frames, stack 4, 3-step", "prioritized, us", "uniform, us", "ratio"])]
    lines.append(
        f"{mem['prioritized']['capacity']:,} rows, filled: the trees allocate {mib(mem['tree_bytes'])} "
        f"({mem['tree_bytes_over_frames']:.2%} of the {mib(mem['prioritized']['frame_bytes'])} of frames); resident "
        f"growth {mib(mem['prioritized']['resident_bytes'] - mem['prioritized']['baseline_bytes'])} prioritized "
        f"against {mib(mem['uniform']['resident_bytes'] - mem['uniform']['baseline_bytes'])} uniform: "
        f"{mib(mem['resident_added_bytes'])} more ({mem['resident_added_over_resident']:.2%}; target <= 1%).")
    return "\n\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no timing claims")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--memory-child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    if args.memory_child:
        capacity, batch, flag = args.memory_child
        print(json.dumps(memory_child(capacity, batch, bool(flag))))
        return {}
    run = provenance(argv)
    sizes = ({"speed": 4096, "memory": 8192, "batch": 4096, "repeats": 8} if args.smoke else
             {"speed": 200_000, "memory": 1_000_000, "batch": 1_000, "repeats": 400})
    started = time.perf_counter()
    results = {"run": run, "sizes": sizes, "speed": speed(sizes["speed"], sizes["repeats"]),
               "memory": memory(sizes["memory"], sizes["batch"])}
    print(report(results["speed"], results["memory"]))
    path = results_path("prioritized_transition", args.out, args.smoke)
    write_results(results, path)
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}; {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
