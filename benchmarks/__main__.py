"""Run the benchmarks and print Markdown tables: ``python -m benchmarks [--smoke] [--out DIR]``.

``--smoke`` runs every section at tiny sizes (what CI runs); it asserts nothing about time.
The figures, with the run's provenance, go to ``DIR/buffer_speed.json`` (default
``benchmarks/results``; a smoke run without ``--out`` records nothing);
``python -m benchmarks.report`` renders them and their plots into the docs.
"""
from __future__ import annotations

import argparse
import time

import mindspore as ms

from benchmarks import buffer_speed, launch_cost, learn_step
from benchmarks.common import provenance, results_path, table, write_results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no timing claims")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    if args.smoke:
        sizes = {"w1": 1000, "w3": 300, "repeats": 5, "capacities": [100, 1000], "batches": [1, 16],
                 "memory": 200}
    else:
        sizes = {"w1": 100_000, "w3": 50_000, "repeats": 2000, "capacities": [10**3, 10**4, 10**5, 10**6, 10**7],
                 "batches": [1, 4, 16, 64, 256, 1024, 4096], "memory": 50_000}
    started = time.perf_counter()
    results = {"run": run, "sizes": sizes, "compile_seconds": buffer_speed.compile_times()}
    results["direct_us"] = buffer_speed.direct_calls(sizes["w1"], sizes["repeats"])
    results["atari"] = buffer_speed.atari_bandwidth(sizes["w3"], max(5, sizes["repeats"] // 4))
    results["scaling_us"] = buffer_speed.scaling(sizes["capacities"], sizes["batches"], max(5, sizes["repeats"] // 4))
    results["memory"] = buffer_speed.memory(sizes["memory"])
    results["learn_step_us"] = learn_step.learn_step(sizes["w1"], max(8, sizes["repeats"] // 2))
    results["launch_cost_us"] = launch_cost.launch_cost(sizes["repeats"], rows=sizes["w1"])
    print(buffer_speed.report(results["direct_us"], results["atari"], results["memory"]))
    print()
    print(launch_cost.report(results["launch_cost_us"]))
    step = results["learn_step_us"]
    print()
    print(table([["in the compiled graph (buffer.sample() inside)", f"{step['in_graph']:.0f}",
                  f"{step['speedup']:.2f}x"],
                 ["numpy-fed (host sample, convert, call the graph)", f"{step['numpy_fed']:.0f}", "1.00x"]],
                ["DQN learn step, sample 64", "median us", "speed vs numpy-fed (median of per-round ratios)"]))
    print()
    print(table([[name, f"{seconds:.2f}"] for name, seconds in results["compile_seconds"].items()],
                ["first call (compile + run)", "seconds"]))
    scaling = results["scaling_us"]
    print()
    print(table([[f"{c:,}", f"{scaling['sample_vs_capacity'][c]:.0f}", f"{scaling['insert_vs_capacity'][c]:.0f}"]
                 for c in sorted(scaling["sample_vs_capacity"])], ["capacity", "sample 64 us", "insert 1 us"]))
    path = results_path("buffer_speed", args.out, args.smoke)
    write_results(results, path)
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}; {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
