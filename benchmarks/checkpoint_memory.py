"""Peak memory of saving and loading a 1 GiB buffer, beyond the buffer itself.

    python -m benchmarks.checkpoint_memory [--gib 1.0] [--dir /tmp] [--out DIR]

The figures, with the run's provenance, go to ``DIR/checkpoint_memory.json`` (default
``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import mindspore as ms
import numpy as np

from benchmarks.common import PeakRSS, mib, provenance, results_path, rss, write_results
from mindspore_rl_buffer import ReplayBuffer
from mindspore_rl_buffer.checkpoint import checksum

ROW = (84, 84, 4)  # one Atari observation, uint8


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="buffer size in GiB (default 1)")
    parser.add_argument("--dir", default=None, help="where to write the checkpoint (default: a temp dir)")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    before_alloc = rss()
    capacity = int(args.gib * 2**30 // np.prod(ROW))
    rb = ReplayBuffer(32, capacity, [ROW], [ms.uint8], names=["observation"])
    chunk = 1024
    for start in range(0, capacity, chunk):
        n = min(chunk, capacity - start)
        rb.insert([np.full((n, *ROW), start % 251, np.uint8)])
    gc.collect()
    data = capacity * int(np.prod(ROW))
    result = {"run": run, "gib": args.gib, "buffer_bytes": data, "rss_after_fill": rss() - before_alloc}
    print(f"buffer {mib(data)} ({capacity} rows of {ROW} uint8); resident after fill, over the "
          f"pre-allocation baseline: {mib(result['rss_after_fill'])}")
    # What the checksums add to a save, and again to a load: hashing every tensor once.
    start = time.perf_counter()
    for tensor in rb.checkpoint_tensors().values():
        checksum(tensor)
    result["checksum_seconds"] = time.perf_counter() - start
    print(f"xxh3 checksums of every tensor: {result['checksum_seconds']:.3f} s (paid once by save, once by load)")
    for suffix in (".safetensors", ".ckpt"):
        with tempfile.TemporaryDirectory(dir=args.dir) as directory:
            path = Path(directory) / f"buffer{suffix}"
            start = time.perf_counter()
            with PeakRSS() as saving:
                rb.save(path)
            saved = time.perf_counter() - start
            start = time.perf_counter()
            with PeakRSS() as loading:
                rb.load(path)
            loaded = time.perf_counter() - start
            save_extra, load_extra = saving.peak - saving.baseline, loading.peak - loading.baseline
            result[suffix] = {"file_bytes": path.stat().st_size, "save_peak_extra": save_extra,
                              "load_peak_extra": load_extra, "save_seconds": saved, "load_seconds": loaded}
        gc.collect()
        print(f"{suffix:12s} file {mib(result[suffix]['file_bytes'])}; peak memory beyond the buffer: "
              f"save {mib(save_extra)} ({save_extra / data:.2f}x the data, {saved:.1f} s), "
              f"load {mib(load_extra)} ({load_extra / data:.2f}x, {loaded:.1f} s)")
    path = results_path("checkpoint_memory", args.out)
    write_results(result, path)
    print(f"figures: {path}")
    return result


if __name__ == "__main__":
    main()
