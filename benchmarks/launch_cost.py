"""What a direct call costs on this MindSpore build, piece by piece.

Small ``@jit`` graphs that each add one ingredient of the buffer's operators (a first
kernel, more kernels, inputs, an in-place row write, cursor updates, no tensor output) are
timed side by side in rounds, so the buffer's direct-call figures can be read against
them: ``python -m benchmarks.launch_cost [--repeats 2000] [--out DIR]`` prints the table on its
own and writes the figures, with the run's provenance, to ``DIR/launch_cost.json`` (default
``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, jit, ops

from benchmarks.common import in_rounds, provenance, results_path, table, write_results

PROBES = {
    "empty": "an empty compiled call (the floor)",
    "one_kernel": "one add kernel",
    "ten_kernels": "ten add kernels",
    "four_inputs": "one kernel, four input tensors",
    "one_write": "one in-place row write (scatter_update)",
    "four_writes": "four row writes, one per W1 column",
    "four_writes_cursor": "four row writes and a cursor assign",
    "four_writes_no_output": "four row writes, no tensor output",
    "draw_and_four_gathers": "uniform draw of 64 and four gathers (a bare sample)",
}


def probes(rows: int = 100_000) -> dict[str, Callable[[], object]]:
    """One compiled call per entry of :data:`PROBES`; each returns a tensor to wait on."""
    x = Tensor(np.ones(4, np.float32))
    inputs = [Tensor(np.ones((1, 4), np.float32)) for _ in range(4)]
    columns = [Parameter(Tensor(np.zeros((rows, 4), np.float32)), name=f"probe_{i}", requires_grad=False)
               for i in range(4)]
    count = Parameter(Tensor(1, ms.int32), name="probe_count", requires_grad=False)
    row = Tensor(np.array([3], np.int32))
    zero = Tensor(0, ms.int32)

    @jit
    def empty(a):
        return a

    @jit
    def one_kernel(a):
        return a + 1

    @jit
    def ten_kernels(a):
        for _ in range(10):
            a = a + 1
        return a

    @jit
    def four_inputs(a, b, c, d):
        return a + 1

    @jit
    def one_write(a, b, c, d):
        ops.scatter_update(columns[0], row, a)
        return count + 0

    @jit
    def four_writes(a, b, c, d):
        for column, value in zip(columns, (a, b, c, d)):
            ops.scatter_update(column, row, value)
        return count + 0

    @jit
    def four_writes_cursor(a, b, c, d):
        for column, value in zip(columns, (a, b, c, d)):
            ops.scatter_update(column, row, value)
        ops.assign(count, ops.minimum(count + 1, rows))
        return count + 0

    @jit
    def four_writes_no_output(a, b, c, d):
        for column, value in zip(columns, (a, b, c, d)):
            ops.scatter_update(column, row, value)

    @jit
    def draw_and_four_gathers():
        drawn = ops.uniform((64,), zero, count, dtype=ms.int32)
        return tuple(ops.gather(column, drawn, 0) for column in columns)

    def no_output_then_read():
        four_writes_no_output(*inputs)
        return count

    return {"empty": lambda: empty(x), "one_kernel": lambda: one_kernel(x), "ten_kernels": lambda: ten_kernels(x),
            "four_inputs": lambda: four_inputs(*inputs), "one_write": lambda: one_write(*inputs),
            "four_writes": lambda: four_writes(*inputs), "four_writes_cursor": lambda: four_writes_cursor(*inputs),
            "four_writes_no_output": no_output_then_read, "draw_and_four_gathers": draw_and_four_gathers}


def launch_cost(repeats: int, rows: int = 100_000) -> dict[str, float]:
    """Median microseconds per call of each probe, every call waiting for its result."""
    times = in_rounds(probes(rows), repeats,
                      sync=lambda result: (result[0] if isinstance(result, tuple) else result).asnumpy())
    return {name: statistics.median(values) * 1e6 for name, values in times.items()}


def report(costs: dict[str, float]) -> str:
    return table([[what, f"{costs[name]:.0f}", f"{costs[name] / costs['empty']:.1f}x"]
                  for name, what in PROBES.items()],
                 ["compiled call (direct)", "median us", "vs the empty call"])


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    costs = launch_cost(args.repeats)
    print(report(costs))
    path = results_path("launch_cost", args.out)
    write_results({"run": run, "repeats": args.repeats, "baseline": "empty", "launch_cost_us": costs}, path)
    print(f"figures: {path}")
    return costs


if __name__ == "__main__":
    main()
