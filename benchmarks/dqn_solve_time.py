"""Time of ``mindspore-rl-buffer train`` to a held solve, and where it goes: ``python -m benchmarks.dqn_solve_time``.

For every seed, fresh processes run the command's default (``configs/dqn_nstep.py`` on the
fused loop) from two code trees, one after the other, so all see the same machine load:

* **baseline**: the commit ``--baseline`` (default ``812a0ff``), checked out by ``git worktree``
  into a temporary folder that is removed afterwards (the main checkout is not touched);
* **candidate, no cache**: this checkout with ``--no-compile-cache``: every graph compiled;
* **candidate, first run**: this checkout's default with an empty compile cache (a machine's
  first run of the setting): it compiles, and stores the graphs;
* **candidate, later run**: this checkout's default with the cache a run of another seed
  (:data:`CACHE_SEED`, stored once before the seeds) left: the graphs are loaded.

For the further seeds (``--more-seeds``, default 5-24) it runs one process each of the baseline,
the candidate without the cache and the candidate's later run, one seed after the other: over
five seeds the steps to a held solve differ by chance as much as by any change (the two trees
draw different random numbers), and the steps and seconds over every seed say more.

Each process is timed from its spawn (the interpreter's start included) to the end of the
evaluation that completes the held solve, and split into phases: ``startup`` (interpreter,
imports, arguments, config), ``build`` (the agent, the environments' reset graph),
``first_launch`` (compiling the training graph, and its first collect steps), ``first_evaluation``
(compiling the evaluation graph, and one evaluation), ``training`` (every later launch),
``evaluations`` (every later evaluation) and ``other`` (host work between them). The phases are
read by wrapping ``build_agent``, ``FusedLoop.run`` and ``FusedLoop.evaluate`` in the child
process, the same way for both trees.

It writes ``dqn_solve_time.json`` (every process's figures, the medians per variant, the targets
as ratios of each candidate variant over the baseline, the steps and seconds over every seed, and
the run's provenance) to ``--out`` (default
``benchmarks/results``) after every process. ``--smoke`` runs one seed with a tiny budget
against this checkout itself (no worktree, no timing claims) and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "812a0ff"
MARK = "DQN_SOLVE_TIME "
BASE, NEW = "baseline", "candidate, no cache"
FILLS, LOADS = "candidate, first run", "candidate, later run"
OFF = "off"  # spawn()'s cache for --no-compile-cache
CACHE_SEED = 1000  # the seed of the run that stores the later runs' graphs: none of the measured ones
PHASES = ("startup", "build", "first_launch", "first_evaluation", "training", "evaluations", "other")
MORE = (BASE, NEW, LOADS)  # the variants run for the further seeds
# candidate / baseline limits; "held" is a count of seeds, not a ratio
TARGETS = {"wall": 0.7, "first_launch": 0.5, "steps": 1.2}


# -- the child process ----------------------------------------------------------------------------

def child(seed: int, max_steps: int, spawned: float, out: str, extra: list[str]) -> dict[str, Any]:
    """Run ``mindspore-rl-buffer train`` of the tree on ``PYTHONPATH`` in this process; its phases, from ``spawned``."""
    import mindspore_rl_buffer
    from mindspore_rl_buffer.apps.dqn import cli, loops, trainer

    marks: dict[str, Any] = {"runs": [], "evaluations": []}
    run, evaluate, build, train = loops.FusedLoop.run, loops.FusedLoop.evaluate, trainer.build_agent, trainer.train

    def timed(kind: str, call: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.time()
            value = call(*args, **kwargs)
            marks[kind].append((start - spawned, time.time() - spawned))
            return value
        return wrapper

    def train_and_keep(*args: Any, **kwargs: Any) -> Any:
        marks["result"] = train(*args, **kwargs)
        return marks["result"]

    marks["build"] = []
    loops.FusedLoop.run, loops.FusedLoop.evaluate = timed("runs", run), timed("evaluations", evaluate)
    trainer.build_agent, trainer.train = timed("build", build), train_and_keep
    status = cli.main(["train", "--seed", str(seed), "--max-steps", str(max_steps), "--out", out, "--no-progress",
                       *extra])
    result = marks["result"]
    (build_start, build_end), = marks["build"]
    runs, evaluations = marks["runs"], marks["evaluations"]
    # the held solve is known after its evaluation; a run that did not hold ends with the budget's evaluation
    end = evaluations[-1][1] if result.solved else max(b for _, b in runs + evaluations)
    spans = {"startup": build_start, "build": build_end - build_start,
             "first_launch": runs[0][1] - runs[0][0],
             "first_evaluation": evaluations[0][1] - evaluations[0][0] if evaluations else 0.0,
             "training": sum(b - a for a, b in runs[1:] if b <= end),
             "evaluations": sum(b - a for a, b in evaluations[1:] if b <= end)}
    spans["other"] = end - sum(spans.values())
    return {"status": status, "seed": seed, "solved": result.solved, "solved_at": result.solved_at,
            "env_steps": result.env_steps, "wall": end, "phases": spans, "launches": len(runs),
            "evaluations": result.eval_history, "package": str(Path(mindspore_rl_buffer.__file__).parent),
            "modules": {name: module.__file__ for name, module in sys.modules.items()
                        if name.partition(".")[0] == "mindspore_rl_buffer" and module.__file__}}


# -- the parent -----------------------------------------------------------------------------------

def spawn(root: Path, seed: int, max_steps: int, timeout: float, cache: str | None = None) -> dict[str, Any]:
    """One fresh process of ``train`` on the tree ``root``, its figures: with ``--compile-cache cache``, with
    ``--no-compile-cache`` for ``cache`` :data:`OFF`, or with neither for ``None`` (the baseline's tree)."""
    from benchmarks.common import run_in_tree

    with tempfile.TemporaryDirectory(prefix="dqn_solve_time_") as out:
        # No default cache: a smoke run's baseline is this checkout, and it must compile as the baseline does.
        return run_in_tree(Path(__file__).resolve(), root,
                           ["--seed", str(seed), "--max-steps", str(max_steps), "--spawned", repr(time.time()),
                            "--child-out", out, *([] if cache is None else ["--child-cache", cache])],
                           MARK, timeout, {"MSRB_COMPILE_CACHE": OFF})


def results_commit(args: argparse.Namespace, run: dict[str, Any]) -> str:
    """The baseline's commit as the figures name it (a smoke run's baseline is this checkout)."""
    return run["commit"] if args.smoke else args.baseline


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tree: held solves, medians over the seeds (each seed's median over its repeats)."""
    summary = {}
    for variant in dict.fromkeys(run["variant"] for run in runs):
        mine = [run for run in runs if run["variant"] == variant]
        seeds = sorted({run["seed"] for run in mine})

        def per_seed(key: Any, mine: list[dict[str, Any]] = mine, seeds: list[int] = seeds) -> list[float]:
            return [statistics.median(key(run) for run in mine if run["seed"] == seed) for seed in seeds]

        held = [seed for seed in seeds if all(run["solved"] for run in mine if run["seed"] == seed)]
        summary[variant] = {
            "seeds": len(seeds), "held": len(held),
            "steps": {seed: next(r["solved_at"] for r in mine if r["seed"] == seed) for seed in held},
            "median_steps": statistics.median(per_seed(lambda r: r["solved_at"] if r["solved"] else r["env_steps"])),
            "wall": dict(zip(seeds, per_seed(lambda r: r["wall"]))),
            "median_wall": statistics.median(per_seed(lambda r: r["wall"])),
            "median_phases": {phase: statistics.median(per_seed(lambda r, p=phase: r["phases"][p]))
                              for phase in PHASES}}
    return summary


def targets(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per candidate variant, the targets as ratios of its medians over the baseline's, with the limits and whether
    each is met."""
    base = summary[BASE]
    checks = {}
    for variant, new in summary.items():
        if variant == BASE:
            continue
        ratios = {"wall": new["median_wall"] / base["median_wall"],
                  "first_launch": new["median_phases"]["first_launch"] / base["median_phases"]["first_launch"],
                  "steps": new["median_steps"] / base["median_steps"]}
        checks[variant] = {name: {"ratio": round(value, 3), "at_most": TARGETS[name], "met": value <= TARGETS[name]}
                           for name, value in ratios.items()}
        checks[variant]["held"] = {"candidate": f"{new['held']}/{new['seeds']}", "met": new["held"] == new["seeds"]}
    return checks


def compared(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per candidate variant, over the seeds both trees held: median steps and seconds over the baseline's, and on
    how many seeds the candidate needed fewer, the same or more steps.

    Examples:
        >>> base = {"seeds": 3, "held": 3, "steps": {0: 100, 1: 200, 2: 300}, "median_steps": 200,
        ...         "median_wall": 10.0}
        >>> new = {"seeds": 3, "held": 2, "steps": {0: 100, 2: 200}, "median_steps": 150, "median_wall": 6.0}
        >>> compared({"baseline": base, "candidate": new})["candidate"]
        {'held': '2/3', 'steps': 0.75, 'wall': 0.6, 'fewer': 1, 'same': 1, 'more': 0}
    """
    base = summary[BASE]
    out = {}
    for variant, new in summary.items():
        if variant == BASE:
            continue
        both = [seed for seed in new["steps"] if seed in base["steps"]]
        signs = [(new["steps"][seed] > base["steps"][seed]) - (new["steps"][seed] < base["steps"][seed])
                 for seed in both]
        out[variant] = {"held": f"{new['held']}/{new['seeds']}",
                        "steps": round(new["median_steps"] / base["median_steps"], 3),
                        "wall": round(new["median_wall"] / base["median_wall"], 3),
                        "fewer": signs.count(-1), "same": signs.count(0), "more": signs.count(1)}
    return out


def every_seed(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The variants of :data:`MORE` over every seed they ran: :func:`summarize` and :func:`compared`."""
    summary = summarize([run for run in runs if run["variant"] in MORE])
    return {"seeds": sorted({run["seed"] for run in runs}), "summary": summary, "compared": compared(summary)}


def report(results: dict[str, Any]) -> str:
    lines = []
    for variant, part in results["summary"].items():
        phases = ", ".join(f"{phase} {seconds:.2f}" for phase, seconds in part["median_phases"].items())
        lines.append(f"{variant}: held {part['held']}/{part['seeds']}, median {part['median_wall']:.2f} s, "
                     f"{part['median_steps']:,.0f} env steps; median phases (s): {phases}")
    for variant, checks in results.get("targets", {}).items():
        for name, check in checks.items():
            lines.append(f"{variant}, target {name}: {check}")
    everything = results.get("every_seed")
    if everything:
        for variant, figures in everything["compared"].items():
            lines.append(f"{variant} over {len(everything['seeds'])} seeds, over the baseline: {figures}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--repeats", type=int, default=2, help="processes per seed and tree (default: 2)")
    parser.add_argument("--more-seeds", type=int, nargs="*", default=list(range(5, 25)),
                        help="further seeds, one process each of the baseline, the candidate without the cache and "
                             "its later run (default: 5-24)")
    parser.add_argument("--max-steps", type=int, default=150_000, help="budget of each run")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the baseline (default: {BASELINE})")
    parser.add_argument("--candidate-root", type=Path, default=ROOT,
                        help="tree of the candidate (default: this checkout)")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="one seed, a tiny budget, this checkout as the baseline")
    for hidden in ("--child-out", "--child-cache", "--spawned"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the tree on PYTHONPATH, not this folder's modules
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
        # no option (the baseline's tree has none), --no-compile-cache, or --compile-cache DIR
        extra = {None: [], OFF: ["--no-compile-cache"]}.get(args.child_cache, ["--compile-cache", args.child_cache])
        figures = child(args.seeds[0], args.max_steps, float(args.spawned), args.child_out, extra)
        print(MARK + json.dumps(figures), flush=True)
        return None
    sys.path.insert(0, str(ROOT))
    from benchmarks.common import checkout, commit_of, finish, provenance, results_path, write_results

    run = provenance(argv)
    if set(args.more_seeds) & set(args.seeds):
        parser.error(f"--more-seeds must not repeat a seed of --seeds, but both have "
                     f"{sorted(set(args.more_seeds) & set(args.seeds))}")
    if args.smoke:
        args.seeds, args.more_seeds, args.repeats, args.max_steps = args.seeds[:1], args.more_seeds[:1], 1, 1200
    path = results_path("dqn_solve_time", args.out, args.smoke)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dqn_solve_time_") as folder, \
            checkout(None if args.smoke else args.baseline, args.candidate_root) as base_root:
        results: dict[str, Any] = {
            "run": run, "command": "mindspore-rl-buffer train --seed SEED (configs/dqn_nstep.py, fused loop)",
            "baseline": {"commit": results_commit(args, run),
                         "resolved": commit_of(base_root)},
            "candidate": {"commit": run["commit"], "dirty": run["dirty"], "root": str(args.candidate_root)},
            "variants": {BASE: f"train at commit {results_commit(args, run)}",
                         NEW: "this checkout's train --no-compile-cache",
                         FILLS: "this checkout's train with an empty compile cache: compiles and stores",
                         LOADS: f"this checkout's train with the compile cache a run of seed {CACHE_SEED} "
                                f"stored: loads the graphs"},
            "phases": list(PHASES), "targets_at_most": TARGETS, "runs": [], "more_runs": []}
        stored = Path(folder) / "stored"  # the later runs' cache: another seed's graphs
        spawn(args.candidate_root, CACHE_SEED, 1200, 30 * 60, str(stored))
        results["cache_seed"] = CACHE_SEED
        def variants(empty: str) -> tuple[tuple[str, Path, str | None], ...]:
            """Each variant's tree and cache (``empty``: a fresh folder for the first run's)."""
            return ((BASE, base_root, None), (NEW, args.candidate_root, OFF), (FILLS, args.candidate_root, empty),
                    (LOADS, args.candidate_root, str(stored)))

        def measure(seed: int, variant: str, root: Path, cached: str | None, repeat: int, into: str) -> None:
            """One process, added to ``results[into]``; the summaries refreshed and the file written."""
            figures = spawn(root, seed, args.max_steps, 30 * 60, cached)
            results[into].append({**figures, "variant": variant, "repeat": repeat})
            results["summary"] = summarize(results["runs"])
            results["every_seed"] = every_seed(results["runs"] + results["more_runs"])
            write_results(results, path)
            print(f"seed {seed}, {variant}: held at {figures['solved_at']} env steps, {figures['wall']:.2f} s",
                  flush=True)

        for seed in args.seeds:
            for repeat in range(args.repeats):  # the variants one after the other: the same load
                with tempfile.TemporaryDirectory(prefix="dqn_solve_time_cache_") as empty:
                    for variant, root, cached in variants(empty):
                        measure(seed, variant, root, cached, repeat, "runs")
        results["targets"] = targets(results["summary"])
        for seed in args.more_seeds:  # the first run's steps are the no-cache run's, so MORE leaves it out
            for variant, root, cached in variants(""):
                if variant in MORE:
                    measure(seed, variant, root, cached, 0, "more_runs")
    return finish(results, path, report(results), started)


if __name__ == "__main__":
    main()
