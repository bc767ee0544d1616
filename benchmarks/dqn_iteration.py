"""Where a training iteration's time goes: ``python -m benchmarks.dqn_iteration``.

One iteration of the main job's fused loop (``configs/dqn_nstep.py``) is a collect step of 8
CartPoles (the epsilon-greedy policy, the environments, the insert) and a learn step (one
``sample(256)`` and two updates of 128). This script times the iteration and its parts, each
in a compiled ``while`` loop of its own, and counts the kernels each launches per pass with
MindSpore's profiler; it does so in fresh processes, alternating, ``--rounds`` times, for three
trees (:data:`TREES`): the baseline commit (``--baseline``, checked out by ``git worktree``), this
checkout with MindSpore's default runtime threads, and this checkout with the threads ``train``
sets. It reports each part's milliseconds and kernels per pass, and the checkout's time over the
other two round by round. It also times what MindSpore's CPU runtime costs for control flow and
for each kernel, on loops of small ``add`` kernels, with either thread setting: these set the
floor of an iteration.

``--smoke`` runs one round of few passes against this checkout itself (no claims) and records
nothing without ``--out``. The figures, with the run's provenance, go to
``DIR/dqn_iteration.json`` (``--out DIR``, default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MARK = "DQN_ITERATION "
BASELINE = "812a0ff"
BASE, DEFAULT, NEW = "baseline", "candidate, default threads", "candidate"
TREES = {BASE: "the baseline commit, MindSpore's default runtime threads",
         DEFAULT: "this checkout with MindSpore's default runtime threads (one actor thread below 12 cores)",
         NEW: "this checkout as `train` runs it (`runtime.pipeline_cpu_runtime`: two actor threads below 12 cores)"}
PARTS = {
    "iteration": "a collect step and its learn step: one pass of the training loop",
    "collect": "the training loop with no learn step: policy, CartPoles, insert",
    "learn": "the learn step: sample(256) and two updates of 128",
    "sample": "sample(256) of the n-step buffer, and a sum of its returns",
    "update": "one update of 128 given transitions: loss, gradients, Adam, target-sync check",
}
RUNTIME = {
    "kernel_us": "one more small add kernel",
    "loop_pass_us": "one pass of a graph while loop, beyond its kernels",
    "if_us": "a graph if in the loop's body",
    "inner_while_us": "an inner while loop of one pass in the body",
    "matmul_us": "a MatMul of two 128 x 128 matrices, the shape of the updates' hidden layer",
}
KERNEL_TYPES = 8  # the iteration's kernel types listed, those with the most run time; the rest summed


# -- the child: one tree's figures ----------------------------------------------------------------

def _cells(agent: Any) -> dict[str, Any]:
    """A callable per part of :data:`PARTS`, taking the number of passes; each returns a tensor."""
    import mindspore as ms
    from mindspore import Tensor, nn

    class Repeat(nn.Cell):
        def __init__(self, kind: str, target: Any, batch: tuple = ()) -> None:
            super().__init__()
            self.kind, self.target, self.batch = kind, target, batch

        def construct(self, n):
            done, acc = Tensor(0, ms.int32), Tensor(0.0, ms.float32)
            while done < n:
                if self.kind == "sample":
                    acc = acc + self.target.sample(256)[2].sum()
                elif self.kind == "update":
                    acc = acc + self.target(*self.batch)
                else:
                    acc = acc + self.target()
                done = done + 1
            return acc

    columns = [x.asnumpy() for x in agent.buffer.sample(128)]
    batch = tuple(Tensor(x if x.ndim > 1 else x.reshape((-1, 1))) for x in columns)
    calls, zero = Tensor(agent.learn_calls, ms.int32), Tensor(0, ms.int32)
    return {"iteration": lambda n: agent.train_loop(n, calls), "collect": lambda n: agent.train_loop(n, zero),
            "learn": Repeat("learn", agent.learn), "sample": Repeat("sample", agent.buffer),
            "update": Repeat("update", agent.update, batch)}


def _runtime_cells() -> dict[str, Any]:
    """Loops of small add kernels: 10 or 100 a pass, and 10 with half of them under an if or an inner while."""
    import mindspore as ms
    import numpy as np
    from mindspore import Tensor, nn, ops

    x = Tensor(np.ones((8, 4), np.float32))
    square = Tensor(np.full((128, 128), 1 / 128, np.float32))  # square @ square == square: the values stay put
    matmul = ops.MatMul()

    class Adds(nn.Cell):
        def __init__(self, k: int, wrap: str = "") -> None:
            super().__init__()
            self.k, self.wrap = k, wrap

        def construct(self, n):
            done, acc = Tensor(0, ms.int32), x
            one = ops.minimum(n, 1)  # a graph input's value, before the loop: the branch is taken at run time
            while done < n:
                for _ in range(self.k // 2):
                    acc = acc + x
                if self.wrap == "if":
                    if one > 0:
                        for _ in range(self.k - self.k // 2):
                            acc = acc + x
                elif self.wrap == "while":
                    inner = Tensor(0, ms.int32)
                    while inner < one:
                        for _ in range(self.k - self.k // 2):
                            acc = acc + x
                        inner = inner + 1
                else:
                    for _ in range(self.k - self.k // 2):
                        acc = acc + x
                done = done + 1
            return acc

    class MatMuls(nn.Cell):
        def construct(self, n):
            done, acc = Tensor(0, ms.int32), square
            while done < n:
                for _ in range(10):
                    acc = matmul(acc, square)
                done = done + 1
            return acc

    return {"adds_10": Adds(10), "adds_100": Adds(100), "adds_10_if": Adds(10, "if"),
            "adds_10_while": Adds(10, "while"), "matmuls_10": MatMuls()}


def _per_pass_ms(cells: dict[str, Any], passes: int, repeats: int) -> dict[str, float]:
    """Median milliseconds per pass of each cell; the cells take turns, repeat after repeat."""
    import mindspore as ms
    from mindspore import Tensor

    n = Tensor(passes, ms.int32)
    times: dict[str, list[float]] = {name: [] for name in cells}
    for _ in range(repeats):
        for name, cell in cells.items():
            start = time.perf_counter()
            cell(n).asnumpy()
            times[name].append((time.perf_counter() - start) * 1e3 / passes)
    return {name: statistics.median(values) for name, values in times.items()}


def count_kernels(call: Any, passes: int) -> tuple[float, float, dict[str, list[float]]]:
    """Kernels launched per pass of ``call(passes)``, their own run time per pass in milliseconds (launch
    excluded), and both per kernel type (``{type: [kernels, ms]}`` per pass), from MindSpore's profiler (its CPU
    kernel records)."""
    import mindspore as ms
    from mindspore import Profiler, Tensor

    with tempfile.TemporaryDirectory(prefix="dqn_iteration_profile_") as folder:
        profiler = Profiler(output_path=folder)
        call(Tensor(passes, ms.int32)).asnumpy()
        profiler.stop()
        profiler.analyse()
        found = list(Path(folder).glob("**/cpu_op_detail_info_*.csv"))
        if not found:
            raise RuntimeError(f"the profiler wrote no CPU kernel records under {folder}")
        with found[0].open(newline="") as file:
            rows = list(csv.DictReader(file))
    launched = sum(int(row["op_occurrences"]) for row in rows)
    types: dict[str, list[float]] = {}
    for row in rows:
        entry = types.setdefault(row["op_type"], [0.0, 0.0])
        entry[0] += int(row["op_occurrences"]) / passes
        entry[1] += float(row["op_total_time(ms)"]) / passes
    return launched / passes, sum(float(row["op_total_time(ms)"]) for row in rows) / passes, types


def child(passes: int, repeats: int, runtime: bool, threads: bool) -> dict[str, Any]:
    """This process's tree: every part's milliseconds and kernels per pass, and the runtime's costs; with
    ``threads``, the runtime threads ``train`` sets (the tree must set them)."""
    import mindspore as ms
    from mindspore import Tensor

    ms.set_context(mode=ms.GRAPH_MODE)
    if threads:
        from mindspore_rl_buffer.apps.dqn.runtime import pipeline_cpu_runtime

        pipeline_cpu_runtime()
    from mindspore_rl_buffer.configs.dqn_nstep import algorithm_config as config

    import mindspore_rl_buffer
    from mindspore_rl_buffer.apps.dqn.agent import build_agent

    agent = build_agent(config, "device", "mindspore", 0)
    warm = config["trainer"]["learning_starts"] // config["environment"]["num_envs"] + 5
    agent.train_loop(Tensor(warm, ms.int32), Tensor(0, ms.int32)).asnumpy()  # enough rows to learn from
    cells = _cells(agent)
    for cell in cells.values():
        cell(Tensor(2, ms.int32)).asnumpy()  # compiled before any timing
    figures: dict[str, Any] = {"package": mindspore_rl_buffer.__file__, "ms": _per_pass_ms(cells, passes, repeats),
                               "modules": {name: module.__file__ for name, module in sys.modules.items()
                                           if name.partition(".")[0] == "mindspore_rl_buffer" and module.__file__}}
    if runtime:
        probes = _runtime_cells()
        for cell in probes.values():
            cell(Tensor(2, ms.int32)).asnumpy()
        us = {name: value * 1e3 for name, value in _per_pass_ms(probes, 20 * passes, repeats).items()}
        kernel = (us["adds_100"] - us["adds_10"]) / 90
        figures["runtime_us"] = {"kernel_us": kernel, "loop_pass_us": us["adds_10"] - 10 * kernel,
                                 "if_us": us["adds_10_if"] - us["adds_10"],
                                 "inner_while_us": us["adds_10_while"] - us["adds_10"],
                                 # ten MatMuls in place of the ten adds, each launched at an add's cost
                                 "matmul_us": (us["matmuls_10"] - us["adds_10"]) / 10 + kernel}
    # Profiled last, so that the profiler touches none of the timed launches.
    profiles = {name: count_kernels(cell, 20) for name, cell in cells.items()}
    figures["kernels"] = {name: kernels for name, (kernels, _, _) in profiles.items()}
    figures["kernel_ms"] = {name: run for name, (_, run, _) in profiles.items()}
    figures["kernel_types"] = profiles["iteration"][2]
    return figures


def spawn(root: Path, passes: int, repeats: int, runtime: bool, threads: bool) -> dict[str, Any]:
    """:func:`child` in a fresh process importing the tree ``root``."""
    from benchmarks.common import run_in_tree

    return run_in_tree(Path(__file__).resolve(), root,
                       ["--passes", str(passes), "--repeats", str(repeats), *(["--runtime"] if runtime else []),
                        *(["--threads"] if threads else [])],
                       MARK, 30 * 60, {"MSRB_COMPILE_CACHE": "off"})


# -- the parent: rounds, ratios, the record -------------------------------------------------------

def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per part: each tree's medians over the rounds of its milliseconds, kernels and kernels' own milliseconds
    per pass, and the medians of the rounds' time ratios of the candidate over the baseline (``ratio``) and over
    the candidate with the default threads (``threads_ratio``); the runtime's costs per thread setting, medians."""
    parts = {}
    for part in PARTS:
        entry: dict[str, Any] = {}
        for tree in TREES:
            entry[tree] = {key: statistics.median(r[tree][key][part] for r in rounds)
                           for key in ("ms", "kernels", "kernel_ms")}
        entry["ratio"] = statistics.median(r[NEW]["ms"][part] / r[BASE]["ms"][part] for r in rounds)
        entry["threads_ratio"] = statistics.median(r[NEW]["ms"][part] / r[DEFAULT]["ms"][part] for r in rounds)
        parts[part] = entry
    runtime = {tree: {name: statistics.median(r[tree]["runtime_us"][name] for r in rounds) for name in RUNTIME}
               for tree in (DEFAULT, NEW)}
    return {"parts": parts, "runtime_us": runtime,
            "kernel_types": kernel_types([r[NEW]["kernel_types"] for r in rounds])}


def kernel_types(profiles: list[dict[str, list[float]]], top: int = KERNEL_TYPES) -> list[list[Any]]:
    """``[type, kernels, ms]`` per pass for the ``top`` kernel types with the most run time, then ``'other'`` for
    the rest: medians over the rounds' profiles (a type a round did not launch counts 0 there).

    Examples:
        >>> kernel_types([{"MatMul": [3, 0.6], "Add": [2, 0.1], "Mul": [1, 0.05]},
        ...               {"MatMul": [3, 0.8], "Add": [2, 0.2]}, {"MatMul": [3, 0.7], "Add": [2, 0.1]}], top=1)
        [['MatMul', 3, 0.7], ['other', 2, 0.1]]
    """
    names = {name for profile in profiles for name in profile}
    medians = {name: [statistics.median(p.get(name, [0, 0])[i] for p in profiles) for i in (0, 1)] for name in names}
    ranked = sorted(medians.items(), key=lambda item: (-item[1][1], item[0]))
    rest = ranked[top:]
    listed = [[name, kernels, ms] for name, (kernels, ms) in ranked[:top]]
    return listed + ([["other", sum(k for _, (k, _) in rest), sum(m for _, (_, m) in rest)]] if rest else [])


def report(results: dict[str, Any]) -> str:
    from benchmarks.report import section_dqn_iteration

    return "\n\n".join(section_dqn_iteration(results, {}))


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="processes per tree, alternating (default: 5)")
    parser.add_argument("--passes", type=int, default=100, help="passes of each loop per timing (default: 100)")
    parser.add_argument("--repeats", type=int, default=9, help="timings per part and process (default: 9)")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the baseline (default: {BASELINE})")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="one round of few passes, this checkout as the baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runtime", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the tree on PYTHONPATH, not this folder's modules
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        print(MARK + json.dumps(child(args.passes, args.repeats, args.runtime, args.threads)), flush=True)
        return None
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from benchmarks.common import checkout, commit_of, finish, provenance, results_path

    run = provenance(argv)
    if args.smoke:
        args.rounds, args.passes, args.repeats = 1, 10, 1
    path = results_path("dqn_iteration", args.out, args.smoke)
    started = time.perf_counter()
    rounds = []
    with checkout(None if args.smoke else args.baseline, root) as base_root:
        for number in range(args.rounds):
            rounds.append({BASE: spawn(base_root, args.passes, args.repeats, False, False),
                           DEFAULT: spawn(root, args.passes, args.repeats, True, False),
                           NEW: spawn(root, args.passes, args.repeats, True, True)})
            print(f"round {number + 1} of {args.rounds}: {time.perf_counter() - started:.0f} s", flush=True)
        resolved = commit_of(base_root)
    results = {"run": run, "config": "configs/dqn_nstep.py",
               "baseline": {"commit": "this checkout (smoke run)" if args.smoke else args.baseline,
                            "resolved": resolved},
               "passes": args.passes, "repeats": args.repeats, "trees": TREES, "parts_described": PARTS,
               "runtime_described": RUNTIME,
               "rounds": rounds}
    results["summary"] = summarize(rounds)
    return finish(results, path, report(results), started)


if __name__ == "__main__":
    main()
