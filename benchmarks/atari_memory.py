"""Resident memory of the Atari job's buffer and networks: ``python -m benchmarks.atari_memory``.

A child process builds what ``configs/dqn_atari.py`` builds (the replay buffer, the online and
target networks, Adam, the training graph) with a capacity of ``--capacity`` rows (default
1,000,000), then writes every row once through ``insert`` (random frames, so every page of
the frames is written and resident), and reports its resident memory before building, after
building, and after the writes. The figure compared is the growth from before building to
after the writes, against the frame payload, ``capacity * 84 * 84`` bytes, and against the
sum of the buffer's Parameters (frames, the other columns, ranks, start table, sum and min
trees). ``--quick`` uses 20,000 rows and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import numpy as np

from benchmarks.common import ROOT, provenance, results_path, rss, write_results

CONFIG = "configs/dqn_atari.py"
CHUNK = 2000  # time rows per insert


def child(capacity: int) -> dict[str, Any]:
    """Build the job at ``capacity`` rows, write every row, and measure; run in a fresh process."""
    import mindspore as ms

    ms.set_context(mode=ms.GRAPH_MODE)
    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.atari import trainer

    config = load_config(ROOT / CONFIG)
    config["replay_buffer"]["capacity"] = capacity
    before = rss()
    agent = trainer.build(config, num_actions=4)
    built = rss()
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (CHUNK, 1, 84, 84), dtype=np.uint8)
    zeros = np.zeros((CHUNK, 1), np.uint8)
    columns = [frames, np.zeros((CHUNK, 1), np.int32), np.zeros((CHUNK, 1), np.float32), zeros, zeros]
    written = 0
    while written < capacity:
        count = min(CHUNK, capacity - written)
        agent.buffer.insert([column[:count] for column in columns])
        written += count
    filled = rss()
    buffer_bytes = sum(int(np.prod(p.shape)) * p.itemsize for p in agent.buffer.get_parameters())
    everything = sum(int(np.prod(p.shape)) * p.itemsize for p in agent.train_step.get_parameters())
    network_bytes = everything - buffer_bytes  # online and target networks, Adam's moments, the frame stack
    return {"capacity": capacity, "rows_written": written, "buffer": type(agent.buffer).__name__,
            "rss_before": before, "rss_built": built, "rss_filled": filled, "growth": filled - before,
            "frame_payload": capacity * 84 * 84, "buffer_parameter_bytes": buffer_bytes,
            "network_parameter_bytes": network_bytes, "size": int(agent.buffer.size())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="rows (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="20,000 rows; records nothing without --out")
    parser.add_argument("--out", default=None, help="folder of the JSON (default: benchmarks/results)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print("ATARI_MEMORY " + json.dumps(child(args.child)), flush=True)
        return 0
    run = provenance(argv)
    capacity = 20_000 if args.quick else args.capacity
    done = subprocess.run([sys.executable, "-m", "benchmarks.atari_memory", "--child", str(capacity)], cwd=ROOT,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("ATARI_MEMORY ")]
    if done.returncode != 0 or not lines:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    figures = json.loads(lines[-1].removeprefix("ATARI_MEMORY "))
    figures["growth_over_payload"] = figures["growth"] / figures["frame_payload"]
    figures["growth_over_parameters"] = figures["growth"] / (figures["buffer_parameter_bytes"]
                                                             + figures["network_parameter_bytes"])
    write_results({"run": run, "config": CONFIG, **figures}, results_path("atari_memory", args.out, smoke=args.quick))
    gib = 2**30
    print(f"{figures['buffer']} of {capacity:,} rows, every row written: resident memory grew by "
          f"{figures['growth'] / gib:.2f} GiB; frame payload {figures['frame_payload'] / gib:.2f} GiB "
          f"({figures['growth_over_payload']:.3f}x); buffer Parameters "
          f"{figures['buffer_parameter_bytes'] / gib:.2f} GiB, "
          f"networks and Adam {figures['network_parameter_bytes'] / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
