"""n-step returns on the main job: ``python -m benchmarks.dqn_nstep``.

For every seed, ``train`` runs ``configs/dqn_nstep.py`` (a TransitionReplayBuffer, MindSpore
CartPoles with next-step autoreset, the fused loop) until a held solve (the mean return of
100 greedy episodes >= 475 at 3 consecutive evaluations) or the budget, once with
``n_step=1`` and once with ``n_step=3``, one after the other, so both see the same machine
load; the two differ in ``n_step`` only. ``--variants 1 3 dqn.py`` adds the shipped
``configs/dqn.py`` (a ReplayBuffer of five-column transitions, same-step autoreset) as a
reference. It prints a Markdown table and writes ``dqn_nstep.json`` (with the run's
provenance) to ``--out`` (default ``benchmarks/results``), after every run, so an interrupted
measurement keeps what it finished. ``--smoke`` runs both variants at tiny sizes (no claims)
and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import mindspore as ms

from benchmarks.common import provenance, record_run, results_path, table
from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn import train

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("1", "3", "dqn.py")  # n_step of configs/dqn_nstep.py, or the one-step configs/dqn.py


def label(variant: str) -> str:
    return "configs/dqn.py (ReplayBuffer)" if variant == "dqn.py" else f"configs/dqn_nstep.py, n_step={variant}"


def with_n_step(config: dict[str, Any], n_step: int) -> dict[str, Any]:
    """``config`` with another ``n_step`` in its replay buffer entry (a copy)."""
    config = copy.deepcopy(config)
    config["replay_buffer"]["n_step"] = n_step
    return config


def held_solve(config: dict[str, Any], variant: str, seed: int, max_steps: int) -> dict[str, Any]:
    """One ``train`` run (fused loop) to a held solve or the budget: steps, times, evaluations."""
    start = time.perf_counter()
    result = train(config, seed=seed, max_steps=max_steps, progress=False)
    return {"seed": seed, "variant": label(variant), "solved": result.solved,
            "solved_at": result.solved_at if result.solved else None,
            "solve_time": result.solve_time if result.solved else None,
            "train_seconds": time.perf_counter() - start, "env_steps": result.env_steps,
            "final_eval_return": result.final_eval_return, "evaluations": result.eval_history}



def report(results: dict[str, Any]) -> str:
    seeds = ", ".join(str(seed) for seed in dict.fromkeys(run["seed"] for run in results["runs"]))
    rows = [[variant, f"{s['held']}/{s['seeds']}", s["median_steps"], s["median_seconds"], s["steps"],
             s["seconds"]] for variant, s in results["summary"].items()]
    header = ["config", "held solves", "median env steps", "median seconds",
              f"env steps per seed ({seeds})", "seconds per seed"]
    run = results["run"]
    return (f"measured {run['date']}, commit {run['commit']}, MindSpore {run['mindspore']}, {run['cpu']}\n\n"
            + table(rows, header))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["1", "3"],
                        help="n_step values of configs/dqn_nstep.py, and 'dqn.py' for the one-step reference")
    parser.add_argument("--max-steps", type=int, default=80_000, help="budget of each run")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no claims")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    path = results_path("dqn_nstep", args.out, args.smoke)
    config = load_config(ROOT / "configs" / "dqn_nstep.py")
    reference = load_config(ROOT / "configs" / "dqn.py")
    if args.smoke:
        for shrunk in (config, reference):
            shrunk["trainer"].update(learning_starts=64, eval_starts=0, eval_interval=64, eval_episodes=4)
        args.seeds, args.max_steps = args.seeds[:1], 128
    results: dict[str, Any] = {
        "run": run,
        "max_steps": args.max_steps, "config": json.loads(json.dumps(config, default=str)), "runs": []}
    for seed in args.seeds:  # both variants one after the other for each seed: the same machine state
        for variant in args.variants:
            chosen = reference if variant == "dqn.py" else with_n_step(config, int(variant))
            record_run(results, held_solve(chosen, variant, seed, args.max_steps), path)
    print(report(results))
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}")
    return results


if __name__ == "__main__":
    main()
