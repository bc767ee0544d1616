"""Direct-call speed, bandwidth, scaling, memory and compile time of ReplayBuffer.

Every figure is a median over many calls after warm-up, and every comparison a ratio taken
in the same run against a baseline measured right beside it (the machine is shared and
noisy). A call's time includes waiting for its result (``sync``), so asynchronous launches
are not flattered.
"""
from __future__ import annotations

import gc
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor

from benchmarks.common import W1_SHAPES, W3_SHAPES, in_rounds, median_seconds, mib, ratio, rss, table
from mindspore_rl_buffer import ReplayBuffer
from mindspore_rl_buffer._graph import BufferCell, buffer_method
from mindspore_rl_buffer.specs import numpy_dtype

W1_TYPES = [ms.float32, ms.int32, ms.float32, ms.float32]
W3_TYPES = [ms.uint8, ms.int32, ms.float32, ms.float32]
# MindSpore RL 0.7's native-kernel buffer on this machine (MindSpore 2.7), from the issue.
NATIVE_INSERT_US, NATIVE_SAMPLE64_US = 120.0, 170.0
WRITER_BATCH = 32


class Floor(BufferCell):
    """An empty compiled call on the buffers' own direct-call path: the seam's lock, host step and twin."""

    @buffer_method()
    def call(self, x, *, check=True):
        return x


def prefilled(capacity: int, shapes, types, sample_size: int, chunk: int = 8192) -> ReplayBuffer:
    rb = ReplayBuffer(sample_size, capacity, shapes, types)
    rng = np.random.default_rng(0)
    for start in range(0, capacity, chunk):
        n = min(chunk, capacity - start)
        rb.insert([rng.integers(0, 255, (n, *spec.shape)).astype(numpy_dtype(spec.dtype)) for spec in rb.specs])
    return rb


def transition(rb: ReplayBuffer, n: int | None) -> list[Tensor]:
    """One transition (``n`` None) or a batch of ``n``, as tensors ready on the device."""
    outer = () if n is None else (n,)
    return [Tensor(np.ones((*outer, *s.shape), numpy_dtype(s.dtype))) for s in rb.specs]


def writer_cycle(rb: ReplayBuffer, one: list[Tensor]) -> Callable[[], Tensor]:
    """A call inserting ``one`` WRITER_BATCH times through a writer: one full stage, host-side
    copies and the batched insert they trigger; it returns the count to wait on."""
    writer, one_host = rb.writer(WRITER_BATCH), [t.asnumpy() for t in one]

    def cycle() -> Tensor:
        for _ in range(WRITER_BATCH):
            writer.insert(one_host)
        return rb.count

    return cycle


def _sync(result: Any) -> None:
    first = result[0] if isinstance(result, tuple) else result
    if isinstance(first, Tensor):
        first.asnumpy()


def direct_calls(capacity: int, repeats: int) -> dict[str, Any]:
    """W1 and W2 direct calls against the empty-call floor, measured side by side in rounds."""
    rb = prefilled(capacity, W1_SHAPES, W1_TYPES, 64)
    floor, x = Floor(), Tensor(np.ones(1, np.float32))
    one, batch32 = transition(rb, None), transition(rb, 32)
    index = Tensor(np.arange(1, dtype=np.int32))
    # insert returns nothing: wait for it by reading the count after the call.
    calls = {
        "floor": lambda: floor.call(x),
        "insert_1": lambda: (rb.insert(one), rb.count)[1],
        "writer_cycle": writer_cycle(rb, one),
        "insert_32": lambda: (rb.insert(batch32), rb.count)[1],
        "sample_64": rb.sample,
        "sample_64_ordered": lambda: rb.sample(ordered=True),
        "get_item": lambda: rb.get_item(index),
        "size": rb.size,
    }
    times = in_rounds(calls, repeats, sync=_sync)
    times["writer_insert_1"] = [t / WRITER_BATCH for t in times.pop("writer_cycle")]
    out: dict[str, Any] = {name: statistics.median(t) * 1e6 for name, t in times.items()}
    out["vs_floor"] = {name: ratio(times, name, "floor") for name in times}
    out["insert_32_vs_insert_1"] = ratio(times, "insert_32", "insert_1")
    out["rounds_us"] = {name: [t * 1e6 for t in values] for name, values in times.items()}
    return out


def sample_rows(buffer: ReplayBuffer) -> tuple[np.ndarray, tuple[Tensor, ...]]:
    """One draw of the buffer's sampler: the physical rows it read, and the items."""
    logical, items = buffer.sample_with_indices()
    return (int(buffer.head) + logical.asnumpy()) % buffer.capacity, items


def drawn_rows(buffer: ReplayBuffer, calls: int) -> list[np.ndarray]:
    """The physical rows of ``calls`` draws of the buffer's sampler (one array each)."""
    return [sample_rows(buffer)[0] for _ in range(calls)]


def atari_bandwidth(capacity: int, repeats: int) -> dict[str, float]:
    """W3: sample 32 and 256 as GB/s, against numpy.take of the same rows (the memory floor).

    The floor takes, call after call, the very rows the buffer's sampler draws (fresh random
    rows each call, as a sample reads them) from numpy copies of the same columns. Taking one
    fixed set of rows again and again (``take_repeated``) reads them from the CPU cache instead
    and is reported only to show that effect.
    """
    out: dict[str, float] = {}
    rb = prefilled(capacity, W3_SHAPES, W3_TYPES, 256, chunk=2048)
    rb32 = ReplayBuffer(32, capacity, W3_SHAPES, W3_TYPES)
    for target, source in zip(rb32.columns, rb.columns):
        target.copy_(source)
    rb32.head.copy_(rb.head)
    rb32.count.copy_(rb.count)
    columns = [column.asnumpy() for column in rb.columns]
    row_bytes = sum(s.nbytes for s in rb.specs)
    one = transition(rb, None)
    times = in_rounds({"insert": lambda: (rb.insert(one), rb.count)[1], "writer_cycle": writer_cycle(rb, one)},
                      repeats, sync=_sync)
    out["insert_1_us"] = statistics.median(times["insert"]) * 1e6
    out["writer_insert_1_us"] = statistics.median(times["writer_cycle"]) / WRITER_BATCH * 1e6
    rounds = 4
    for size, buffer in ((32, rb32), (256, rb)):
        draws = itertools.cycle(drawn_rows(buffer, rounds * (20 + max(1, repeats // rounds))))
        repeated = next(draws)

        def take(rows: np.ndarray) -> list[np.ndarray]:
            return [np.take(column, rows, axis=0) for column in columns]

        times = in_rounds({"sample": buffer.sample, "take": lambda draws=draws: take(next(draws)),
                           "take_repeated": lambda rows=repeated: take(rows)}, repeats, rounds, sync=_sync)
        seconds = {name: statistics.median(values) for name, values in times.items()}
        out[f"sample_{size}_us"] = seconds["sample"] * 1e6
        for name in seconds:
            out[f"{name}_{size}_gbps"] = size * row_bytes / seconds[name] / 1e9
        # Bandwidth ratio = inverse time ratio, the same bytes moved.
        out[f"sample_{size}_vs_take"] = ratio(times, "take", "sample")
    return out


def scaling(capacities: list[int], batch_sizes: list[int], repeats: int) -> dict[str, dict[int, float]]:
    """Sample(64)/insert(1) time against capacity, and sample time against batch size."""
    result: dict[str, dict[int, float]] = {"sample_vs_capacity": {}, "insert_vs_capacity": {},
                                           "sample_vs_batch": {}}
    for capacity in capacities:
        rb = prefilled(capacity, W1_SHAPES, W1_TYPES, 64, chunk=min(capacity, 1 << 20))
        one = transition(rb, None)
        result["sample_vs_capacity"][capacity] = median_seconds(rb.sample, repeats, sync=_sync) * 1e6
        result["insert_vs_capacity"][capacity] = median_seconds(
            lambda rb=rb, one=one: (rb.insert(one), rb.count)[1], repeats, sync=_sync) * 1e6
        del rb
        gc.collect()
    capacity = max(capacities[0], 100_000 if 100_000 in capacities else capacities[-1])
    base = prefilled(capacity, W1_SHAPES, W1_TYPES, 1)
    for batch in batch_sizes:
        rb = ReplayBuffer(batch, capacity, W1_SHAPES, W1_TYPES)
        for target, source in zip(rb.get_parameters(), base.get_parameters()):
            target.copy_(source)
        result["sample_vs_batch"][batch] = median_seconds(rb.sample, repeats, sync=_sync) * 1e6
    return result


_IMPORT_BASELINE = (
    "import psutil, mindspore, mindspore_rl_buffer\n"
    "print(psutil.Process().memory_info().rss)\n"
)


def memory(capacity: int) -> dict[str, float]:
    """Resident memory after prefill against the raw bytes plus a fresh process's import baseline,
    and growth over many calls."""
    baseline = int(subprocess.run([sys.executable, "-c", _IMPORT_BASELINE], capture_output=True, text=True,
                                  check=True).stdout.split()[-1])
    gc.collect()
    before = rss()
    rb = prefilled(capacity, W3_SHAPES, W3_TYPES, 32, chunk=1024)
    gc.collect()
    after = rss()
    raw = capacity * sum(s.nbytes for s in rb.specs)
    one = transition(rb, None)
    for _ in range(200):
        rb.insert(one)
        rb.sample()
    settled = rss()
    for _ in range(2000):
        rb.insert(one)
        rb.sample()
    return {"raw_bytes": raw, "prefill_bytes": after - before, "import_baseline_bytes": baseline,
            "growth_over_2000_calls": rss() - settled}


def compile_times() -> dict[str, float]:
    """Seconds of each operator's first direct call on a fresh buffer (compile + run)."""
    rb = ReplayBuffer(64, 1000, W1_SHAPES, W1_TYPES)
    one, batch = transition(rb, None), transition(rb, 32)
    calls = [("insert (one)", lambda: rb.insert(one)), ("insert (batch of 32)", lambda: rb.insert(batch)),
             ("sample", rb.sample), ("sample ordered", lambda: rb.sample(ordered=True)),
             ("get_item", lambda: rb.get_item(0)), ("size", rb.size), ("full", rb.full), ("reset", rb.reset)]
    out = {}
    for name, call in calls:
        start = time.perf_counter()
        _sync(call())
        out[name] = time.perf_counter() - start
    return out


def report(direct: dict[str, Any], atari: dict[str, float], mem: dict[str, float]) -> str:
    rows = [[name, f"{direct[key]:.0f}", f"{direct['vs_floor'][key]:.2f}x"] for name, key in (
        ("empty compiled call (floor)", "floor"), ("insert 1 (W1)", "insert_1"),
        (f"writer({WRITER_BATCH}).insert 1 (W1, numpy; flushes included)", "writer_insert_1"),
        ("insert 32 (W2)", "insert_32"),
        ("sample 64 (W1)", "sample_64"), ("sample 64 ordered", "sample_64_ordered"),
        ("get_item", "get_item"), ("size", "size"))]
    lines = [table(rows, ["direct call", "median us", "vs floor (per-round ratio)"])]
    lines.append(f"W2/W1 insert: {direct['insert_32_vs_insert_1']:.2f}x; vs MindSpore RL 0.7 native "
                 f"(~{NATIVE_INSERT_US:.0f} us insert, ~{NATIVE_SAMPLE64_US:.0f} us sample 64): "
                 f"insert {NATIVE_INSERT_US / direct['insert_1']:.2f}x, "
                 f"writer insert {NATIVE_INSERT_US / direct['writer_insert_1']:.2f}x, "
                 f"sample {NATIVE_SAMPLE64_US / direct['sample_64']:.2f}x as fast")
    bandwidth = [[f"sample {n} (W3)", f"{atari[f'sample_{n}_us']:.0f}", f"{atari[f'sample_{n}_gbps']:.2f}",
                  f"{atari[f'take_{n}_gbps']:.2f}", f"{atari[f'sample_{n}_vs_take']:.2f}x",
                  f"{atari[f'take_repeated_{n}_gbps']:.2f}"]
                 for n in (32, 256)]
    lines.append(table(bandwidth, ["W3", "median us", "GB/s", "numpy.take of the same rows GB/s", "ratio",
                                   "numpy.take, one fixed set of rows (cache-hot) GB/s"]))
    lines.append(f"W3 insert one transition: {atari['insert_1_us']:.0f} us direct, "
                 f"{atari['writer_insert_1_us']:.0f} us through writer({WRITER_BATCH}) (flushes included)")
    lines.append(f"memory (W3 prefilled): raw data {mib(mem['raw_bytes'])}; resident growth at prefill "
                 f"{mib(mem['prefill_bytes'])} ({mem['prefill_bytes'] / mem['raw_bytes']:.3f}x the data); "
                 f"import baseline of a fresh process {mib(mem['import_baseline_bytes'])}; growth over 2000 "
                 f"insert+sample calls {mib(mem['growth_over_2000_calls'])}")
    return "\n\n".join(lines)
