"""Atari scale: bytes per transition, a 1,000,000-transition buffer, stacked n-step sampling speed.

    python -m benchmarks.transition [--smoke] [--out DIR]

The figures, with the run's provenance, go to ``DIR/transition.json`` (default
``benchmarks/results``; a smoke run without ``--out`` records nothing).

Three sections, every ratio measured in this run:

* **bytes per transition** of a ``TransitionReplayBuffer`` of ``(84, 84)`` uint8 frames with
  ``stack_size=4`` against one frame plus the scalar columns, and the naive layout (stacked
  observation and next observation stored whole) beside it;
* **the 1,000,000-transition buffer**, allocated and filled in batches, in a child process (so
  its ~7 GB are returned when the section ends): resident memory against the payload and the
  process's baseline before allocation;
* **sampling speed**: ``sample(32)`` and ``sample(256)`` of stacked (4) 3-step transitions,
  called directly and inside a compiled graph, against ``numpy.take`` of the very frame rows
  the sampler gathered (every frame encodes its row) and against a plain ``ReplayBuffer`` whose
  rows hold the stacked observation and next observation whole (the same bytes per sample),
  measured side by side in rounds (``benchmarks.common.in_rounds``).
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore_rl_buffer.ops import draw_starts

from benchmarks.common import in_rounds, mib, provenance, ratio, results_path, rss, table, write_results
from mindspore_rl_buffer import ReplayBuffer, TransitionReplayBuffer
from mindspore_rl_buffer.specs import numpy_dtype

FRAME = (84, 84)
STACK, N_STEP = 4, 3
SHAPES = [FRAME, (), (), (), ()]
TYPES = [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8]
SCALAR_BYTES = 4 + 4 + 1 + 1  # action int32, reward float32, terminated and truncated uint8
# Atari episodes at frame skip 4 run from a few hundred to a few thousand agent steps.
EPISODE_STEPS = (200, 2000)


def transitions(capacity: int, sample_size: int = 32) -> TransitionReplayBuffer:
    return TransitionReplayBuffer(sample_size, capacity, SHAPES, TYPES, stack_size=STACK, n_step=N_STEP,
                                  gamma=0.99, seed=0)


def episode_flags(steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(terminated, truncated)`` of ``steps`` steps of one environment, ``(steps, 1)`` uint8: episodes of
    random length, 4 in 5 terminated and 1 in 5 truncated, each followed by its final-observation row."""
    terminated, truncated = np.zeros((steps, 1), np.uint8), np.zeros((steps, 1), np.uint8)
    end = -1
    while True:
        end += int(rng.integers(*EPISODE_STEPS))
        if end >= steps:
            return terminated, truncated
        (terminated if rng.random() < 0.8 else truncated)[end] = 1
        end += 1  # the final row


def fill(rb: TransitionReplayBuffer, steps: int, batch: int, seed: int = 0) -> float:
    """Insert ``steps`` steps in batches; frame ``i`` holds ``i`` in its first 4 bytes. Returns seconds."""
    rng = np.random.default_rng(seed)
    terminated, truncated = episode_flags(steps, rng)
    frames = np.zeros((batch, 1, *FRAME), np.uint8)
    started = time.perf_counter()
    for start in range(0, steps, batch):
        n = min(batch, steps - start)
        frames[:n, 0, 0, :4] = np.arange(start, start + n, dtype="<u4").view(np.uint8).reshape(n, 4)
        frames[:n, 0, 1:, :] = start % 251
        rb.insert([frames[:n], np.zeros((n, 1), np.int32), np.ones((n, 1), np.float32),
                   terminated[start:start + n], truncated[start:start + n]])
    int(rb.size())
    return time.perf_counter() - started


def settle(rb: TransitionReplayBuffer, calls: int = 100) -> None:
    """Sample until the machine has settled after a fill: here the first ~20 samples after writing
    7 GB took ~200 ms each (the system settling the freshly written pages), then ~2 ms."""
    for _ in range(calls):
        rb.sample(32)[0].asnumpy()


def frame_rows(frames: np.ndarray) -> np.ndarray:
    """The rows that sampled frames (``(..., 84, 84)`` uint8) were gathered from."""
    return np.ascontiguousarray(frames[..., 0, :4]).view("<u4")[..., 0]


# ------------------------------------------------------------------------------ bytes
def allocated(rb: TransitionReplayBuffer) -> int:
    """Bytes of every Parameter of ``rb`` (allocated lazily: counting touches nothing)."""
    return sum(int(np.prod(p.shape)) * numpy_dtype(p.dtype).itemsize for p in rb.get_parameters())


def bytes_per_transition(capacity: int) -> dict[str, float]:
    """Bytes the buffer allocates per row, against one frame plus the scalars and the naive layout."""
    frame = int(np.prod(FRAME))
    terminated, truncated = episode_flags(capacity, np.random.default_rng(0))
    return {"per_row": allocated(transitions(capacity)) / capacity, "frame_plus_scalars": frame + SCALAR_BYTES,
            "naive_per_transition": 2 * STACK * frame + SCALAR_BYTES + 4,  # + a float32 discount
            "mean_episode_steps": capacity / int(terminated.sum() + truncated.sum())}


# --------------------------------------------------------------------------- memory
def memory_child(capacity: int, batch: int) -> dict[str, Any]:
    """Allocate and fill a ``capacity``-transition buffer; resident memory against the payload."""
    gc.collect()
    baseline = rss()
    rb = transitions(capacity)
    payload = allocated(rb)
    seconds = fill(rb, capacity, batch)
    gc.collect()
    resident = rss()
    valid = int(rb.valid_starts())
    settle(rb)
    sample = {}
    for size in (32, 256):
        times = []
        for _ in range(60):
            started = time.perf_counter()
            rb.sample(size)[0].asnumpy()
            times.append(time.perf_counter() - started)
        sample[size] = statistics.median(times[10:]) * 1e6
    return {"capacity": capacity, "payload_bytes": payload, "baseline_bytes": baseline, "resident_bytes": resident,
            "fill_seconds": seconds, "valid_starts": valid, "sample_us": sample,
            "growth_over_payload": (resident - baseline) / payload}


def memory(capacity: int, batch: int) -> dict[str, Any]:
    """:func:`memory_child` in a child process, whose memory is returned to the system when it exits."""
    result = subprocess.run([sys.executable, "-m", "benchmarks.transition", "--memory-child", str(capacity),
                             str(batch)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- speed
class Sampler(nn.Cell):
    """A user's graph that samples: ``buffer.sample(batch)`` compiled in."""

    def __init__(self, buffer: Any, batch: int | None = None) -> None:
        super().__init__()
        self.buffer, self.batch = buffer, batch

    def construct(self):
        if self.batch is None:
            return self.buffer.sample()
        return self.buffer.sample(self.batch)


class StartDraw(nn.Cell):
    """``draw_starts`` of ``batch`` starts from ``buffer``'s state, compiled: with its start table
    (what ``sample`` runs), or with ``table=False`` the search of the ranks it replaced."""

    def __init__(self, buffer: TransitionReplayBuffer, batch: int, table: bool) -> None:
        super().__init__()
        self.buffer, self.batch, self.table = buffer, batch, table

    def construct(self):
        rb, storage = self.buffer, self.buffer.storage
        return draw_starts(rb.ranks, storage.head, storage.count, self.batch, rb.max_length, rb.stack_size,
                           rb.n_step, 0, True, rb.start_table if self.table else None)


def _sync(result: Any) -> None:
    first = result[0]
    if not isinstance(first, np.ndarray):
        first.asnumpy()


def plain_buffer(capacity: int, sample_size: int) -> ReplayBuffer:
    """Stacked observation and next observation stored whole, with the action, return and discount."""
    stacked = (STACK, *FRAME)
    rb = ReplayBuffer(sample_size, capacity, [stacked, (), (), stacked, ()],
                      [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.float32])
    chunk = 512
    for start in range(0, capacity, chunk):
        n = min(chunk, capacity - start)
        rb.insert([np.full((n, *stacked), start % 251, np.uint8), np.zeros(n, np.int32), np.ones(n, np.float32),
                   np.full((n, *stacked), start % 7, np.uint8), np.ones(n, np.float32)])
    return rb


def speed(capacity: int, plain_capacity: int, repeats: int) -> dict[str, Any]:
    rb = transitions(capacity, 256)
    fill(rb, capacity, 8192)
    settle(rb)
    frames = rb.frames.asnumpy()
    bytes_per_sample = 2 * STACK * int(np.prod(FRAME))
    out: dict[str, Any] = {"capacity": capacity, "plain_capacity": plain_capacity}
    rounds = 4
    for size in (32, 256):
        plain = plain_buffer(plain_capacity, size)
        draws = []
        for _ in range(rounds * (20 + max(1, repeats // rounds))):
            observation, _, _, next_observation, _ = rb.sample(size)
            draws.append(np.concatenate([frame_rows(observation.asnumpy()), frame_rows(next_observation.asnumpy())],
                                        1))
        cycle = itertools.cycle(draws)
        graph, plain_graph = Sampler(rb, size), Sampler(plain)
        take = {"take": lambda cycle=cycle: (np.take(frames, next(cycle), axis=0),)}
        # Direct calls and compiled graphs are timed in separate rounds: interleaved with graph
        # calls, direct samples of 256 turned bimodal here (4 or 12 ms) as the allocator paged in
        # fresh output memory (raising glibc's MALLOC_MMAP_THRESHOLD_ removed most of it).
        times = in_rounds({"direct": lambda size=size: rb.sample(size), "plain_direct": plain.sample, **take},
                          repeats, rounds, sync=_sync)
        times.update(in_rounds({"graph": graph, "plain_graph": plain_graph, "take_again": take["take"],
                                "draw_table": StartDraw(rb, size, True), "draw_search": StartDraw(rb, size, False)},
                               repeats, rounds, sync=_sync))
        seconds = {name: statistics.median(values) for name, values in times.items()}
        out[size] = {"us": {name: value * 1e6 for name, value in seconds.items()},
                     "gbps": {name: size * bytes_per_sample / value / 1e9 for name, value in seconds.items()},
                     "direct_vs_take": ratio(times, "take", "direct"),
                     "graph_vs_take": ratio(times, "take_again", "graph"),
                     "graph_vs_plain_graph": ratio(times, "graph", "plain_graph"),
                     "direct_vs_plain_direct": ratio(times, "direct", "plain_direct"),
                     "plain_graph_vs_take": ratio(times, "take_again", "plain_graph"),
                     "draw_search_vs_table": ratio(times, "draw_search", "draw_table")}
        del plain, plain_graph
        gc.collect()
    return out


# --------------------------------------------------------------------------- report
def at(fast: dict[Any, Any], size: int) -> dict[str, Any]:
    """The speed figures of one sample size, keyed by int when measured, by str when read from JSON."""
    return fast[str(size)] if str(size) in fast else fast[size]


def report(sizes: dict[str, float], mem: dict[str, Any], fast: dict[str, Any]) -> str:
    per_transition = mem["payload_bytes"] / mem["valid_starts"]
    lines = [table([
        ["allocated per row", f"{sizes['per_row']:,.1f}", f"{sizes['per_row'] / sizes['frame_plus_scalars']:.4f}x"],
        [f"per valid start of the filled buffer below (episodes of {sizes['mean_episode_steps']:.0f} steps on "
         f"average; final rows and the oldest stacks are not starts)", f"{per_transition:,.1f}",
         f"{per_transition / sizes['frame_plus_scalars']:.4f}x"],
        ["one (84, 84) frame plus the scalar columns", f"{sizes['frame_plus_scalars']:,}", "1.0000x"],
        ["naive: stacked observation and next observation stored whole", f"{sizes['naive_per_transition']:,}",
         f"{sizes['naive_per_transition'] / sizes['frame_plus_scalars']:.2f}x"]],
        ["bytes per transition (stack_size=4)", "bytes", "vs one frame + scalars (target <= 1.05x)"])]
    naive = mem["capacity"] * sizes["naive_per_transition"]
    lines.append(
        f"{mem['capacity']:,}-transition buffer: payload {mib(mem['payload_bytes'])}, filled in "
        f"{mem['fill_seconds']:.0f} s; resident {mib(mem['resident_bytes'])} against a baseline of "
        f"{mib(mem['baseline_bytes'])} before allocation: growth {mem['growth_over_payload']:.3f}x the payload "
        f"(target <= 1.1x); {mem['valid_starts']:,} valid starts; sample(32) {mem['sample_us']['32']:.0f} us, "
        f"sample(256) {mem['sample_us']['256']:.0f} us at this size. The naive layout would need {mib(naive)}.")
    rows = []
    for size in (32, 256):
        figures = at(fast, size)
        us, gbps = figures["us"], figures["gbps"]
        rows.append([f"sample({size})", f"{us['direct']:.0f} / {us['graph']:.0f}",
                     f"{gbps['direct']:.2f} / {gbps['graph']:.2f}", f"{us['take']:.0f} / {us['take_again']:.0f}",
                     f"{figures['direct_vs_take']:.2f}x / {figures['graph_vs_take']:.2f}x",
                     f"{us['plain_direct']:.0f} / {us['plain_graph']:.0f}",
                     f"{figures['direct_vs_plain_direct']:.2f}x / {figures['graph_vs_plain_graph']:.2f}x",
                     f"{figures['plain_graph_vs_take']:.2f}x"])
    lines.append(table(rows, ["stacked 3-step", "us direct / in a graph", "GB/s direct / graph",
                              "numpy.take of the same rows, us", "bandwidth vs take (target >= 0.7x)",
                              "plain ReplayBuffer us direct / graph", "time vs plain (graph target <= 1.5x)",
                              "plain graph vs take"]))
    draws = []
    for size in (32, 256):
        figures = at(fast, size)
        us = figures["us"]
        draws.append(f"{size}: {us['draw_table']:.0f} us with the start table, {us['draw_search']:.0f} us searching "
                     f"the ranks ({figures['draw_search_vs_table']:.2f}x)")
    lines.append("Locating the starts (draw_starts alone, a launch each): " + "; ".join(draws))
    return "\n\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no timing claims")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--memory-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    if args.memory_child:
        print(json.dumps(memory_child(*args.memory_child)))
        return {}
    run = provenance(argv)
    sizes = ({"memory": 20_000, "batch": 4096, "speed": 4096, "plain": 512, "repeats": 8} if args.smoke else
             {"memory": 1_000_000, "batch": 20_000, "speed": 200_000, "plain": 10_000, "repeats": 400})
    started = time.perf_counter()
    results = {"run": run, "sizes": sizes, "bytes": bytes_per_transition(1_000_000),
               "memory": memory(sizes["memory"], sizes["batch"]),
               "speed": speed(sizes["speed"], sizes["plain"], sizes["repeats"])}
    print(report(results["bytes"], results["memory"], results["speed"]))
    path = results_path("transition", args.out, args.smoke)
    write_results(results, path)
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}; {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
