"""What the buffers' counter-based generator costs against MindSpore's own random kernel.

In one run, side by side in rounds, inside a user's compiled Cell:

* ``kernel``: ``ops.uniform`` of ``n`` int32 indexes below a ``count`` Parameter, the draw the
  samplers made with MindSpore's stateful kernel (deprecated in 2.10, state not saveable);
* ``generator``: :func:`mindspore_rl_buffer.ops.uniform_int` of the same draw, from a
  ``(key, counter)`` pair of Parameters;
* ``bare_sample``: the kernel's draw and four gathers of W1 columns (a sample as bare
  MindSpore ops), and ``buffer_sample``: ``ReplayBuffer.sample()`` of the same size.

It also records the generator's uniformity over 10**6 draws: chi-square p-values of the
values (below 1,000) and of the low 1, 4 and 8 bits of indexes below ``2**20``.

``python -m benchmarks.rng_cost [--repeats 2000] [--out DIR] [--smoke]`` prints the table and
writes ``DIR/rng_cost.json`` (default ``benchmarks/results``) with the run's provenance.
"""
from __future__ import annotations

import argparse
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore_rl_buffer.ops import random_state, uniform_int
from scipy import stats

from benchmarks.common import W1_SHAPES, in_rounds, provenance, ratio, results_path, table, write_results
from mindspore_rl_buffer import ReplayBuffer

SIZES = (64, 1024, 16384)
ZERO = Tensor(0, ms.int32)


class _Kernel(nn.Cell):
    def __init__(self, n: int, count: Parameter) -> None:
        super().__init__()
        self.n, self.count = n, count

    def construct(self):
        return ops.uniform((self.n,), ZERO, self.count, dtype=ms.int32)


class _Generator(nn.Cell):
    def __init__(self, n: int, count: Parameter) -> None:
        super().__init__()
        self.n, self.count = n, count
        self.key, self.counter = random_state(0, name=f"bench_{n}")

    def construct(self):
        return uniform_int((self.n,), self.count, (self.key, self.counter))


class _BareSample(nn.Cell):
    def __init__(self, buffer: ReplayBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def construct(self):
        rows = ops.uniform((self.buffer.sample_size,), ZERO, self.buffer.count, dtype=ms.int32)
        return tuple(ops.gather(column, rows, 0) for column in self.buffer.columns)


class _BufferSample(_BareSample):
    def construct(self):
        return self.buffer.sample()


def _wait(outputs: Any) -> None:
    (outputs[0] if isinstance(outputs, tuple) else outputs).asnumpy()


def costs(repeats: int, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Median microseconds per call and the ratios, per draw size."""
    out: dict[str, Any] = {}
    for n in sizes:
        count = Parameter(Tensor(100_000, ms.int32), name=f"count_{n}", requires_grad=False)
        buffer = ReplayBuffer(n, 100_000, W1_SHAPES, [ms.float32] * 4, seed=0)
        buffer.insert([np.ones((100_000, *shape), np.float32) for shape in W1_SHAPES])
        calls = {"kernel": _Kernel(n, count), "generator": _Generator(n, count),
                 "bare_sample": _BareSample(buffer), "buffer_sample": _BufferSample(buffer)}
        times = in_rounds(calls, repeats, sync=_wait)
        out[str(n)] = {**{name: 1e6 * float(np.median(t)) for name, t in times.items()},
                       "generator_vs_kernel": ratio(times, "generator", "kernel"),
                       "buffer_vs_bare_sample": ratio(times, "buffer_sample", "bare_sample")}
    return out


def uniformity(draws: int = 1_000_000) -> dict[str, float]:
    """Chi-square p-values of the generator's draws (values, and low bits of wide indexes)."""
    rng = random_state(2024, name="uniformity")
    values = uniform_int((draws,), Tensor(1000, ms.int32), rng).asnumpy()
    wide = uniform_int((draws,), Tensor(2**20, ms.int32), rng).asnumpy()
    result = {"values_below_1000": float(stats.chisquare(np.bincount(values, minlength=1000)).pvalue)}
    for bits in (1, 4, 8):
        low = np.bincount(wide % 2**bits, minlength=2**bits)
        result[f"low_{bits}_bits"] = float(stats.chisquare(low).pvalue)
    return result


def report(figures: dict[str, Any], uniform: dict[str, float]) -> str:
    rows = [[n, f"{f['kernel']:.1f}", f"{f['generator']:.1f}", f"{f['generator_vs_kernel']:.2f}x",
             f"{f['bare_sample']:.1f}", f"{f['buffer_sample']:.1f}", f"{f['buffer_vs_bare_sample']:.2f}x"]
            for n, f in figures.items()]
    header = ["draws", "kernel us", "generator us", "ratio", "bare sample us", "buffer sample us", "ratio"]
    pvalues = ", ".join(f"{name} p={p:.3f}" for name, p in uniform.items())
    return f"{table(rows, header)}\n\nuniformity over 10**6 draws: {pvalues}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="a few calls of the smallest size; records nothing")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    figures = costs(20 if args.smoke else args.repeats, SIZES[:1] if args.smoke else SIZES)
    uniform = uniformity(10_000 if args.smoke else 1_000_000)
    print(report(figures, uniform))
    path = results_path("rng_cost", args.out, args.smoke)
    results = {"run": run, "repeats": args.repeats, "costs_us": figures, "uniformity_pvalues": uniform}
    write_results(results, path)
    if path is not None:
        print(f"figures: {path}")
    return results


if __name__ == "__main__":
    main()
