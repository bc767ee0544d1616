"""The main job, host loop against fused loop, in one run: ``python -m benchmarks.dqn_solve``.

Three measurements, each interleaved so both loops see the same machine load:

* **throughput**: environment steps/s of training (collect and learn steps, no evaluation) for
  the host loop and the fused loop on the same config, in alternating rounds, at today's
  learn ratio (4 learn steps per collect of 8 environments), at ``configs/dqn.py``'s and with
  the default, ``configs/dqn_nstep.py``;
* **evaluation**: one evaluation of 100 greedy 500-step episodes, the host loop's evaluator
  (one launch per environment step) against the fused loop's (one launch), alternating;
* **held solve**: for every seed, ``train`` until a held solve (the mean return of 100 greedy
  episodes >= 475 at 3 consecutive evaluations, 2,500 environment steps apart) with today's
  default (host loop, 4 learn steps per collect, batch 64, target sync every 100 learn steps, learning rate 1e-3),
  then ``configs/dqn.py`` (one-step transitions) on the host loop and on the fused loop, then
  ``configs/dqn_nstep.py`` (the same settings, a TransitionReplayBuffer with 3-step returns;
  what ``mindspore-rl-buffer train`` runs by default) on the fused loop, one after the other.

It prints Markdown tables and writes ``dqn_solve.json`` (with every seed's evaluations and the
run's provenance) to ``--out`` (default ``benchmarks/results``) after every run;
``python -m benchmarks.report`` renders it, with a plot, into the docs. ``--smoke`` runs every
part at tiny sizes (no timing claims) and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor

from benchmarks.common import provenance, record_run, results_path, table, time_ratios, write_results
from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn import build_agent, train
from mindspore_rl_buffer.apps.dqn.cartpole import CartPole
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop, EvalStep, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.loops import FusedLoop, HostLoop
from mindspore_rl_buffer.apps.dqn.networks import QNetwork

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = 4200  # Flashbax's host-loop DQN example on CartPole, environment steps/s on CPU
TODAY = {"learn_steps_per_collect": 4, "sample_size": 64, "target_sync_period": 100, "learning_rate": 1e-3}
BASELINE = "today's default, host loop"
ONE_STEP = "configs/dqn.py (one-step)"
DEFAULT = "configs/dqn_nstep.py (n_step=3, the default), fused loop"


def with_settings(config: dict[str, Any], learn_steps_per_collect: int, sample_size: int,
                  target_sync_period: int, learning_rate: float | None = None) -> dict[str, Any]:
    """``config`` with another learn ratio, batch, target-sync period and (if given) learning rate."""
    config = copy.deepcopy(config)
    config["trainer"]["learn_steps_per_collect"] = learn_steps_per_collect
    config["replay_buffer"]["sample_size"] = sample_size
    config["learner"]["target_sync_period"] = target_sync_period
    if learning_rate is not None:
        config["learner"]["learning_rate"] = learning_rate
    return config


def settings_of(config: dict[str, Any]) -> dict[str, float]:
    return {"learn_steps_per_collect": config["trainer"]["learn_steps_per_collect"],
            "sample_size": config["replay_buffer"]["sample_size"],
            "target_sync_period": config["learner"]["target_sync_period"],
            "learning_rate": config["learner"]["learning_rate"]}


def throughput(config: dict[str, Any], iterations: int, rounds: int) -> dict[str, Any]:
    """Training environment steps/s of the host and the fused loop, alternating round by round."""
    loops = {}
    for name in ("host", "fused"):
        agent = build_agent(config, seed=0)
        loop = FusedLoop(agent) if name == "fused" else HostLoop(agent)
        warmup = -(-config["trainer"]["learning_starts"] // config["environment"]["num_envs"])
        loop.run(warmup, learn=False)
        loop.run(2, learn=True)  # compiles
        loops[name] = loop
    steps = iterations * config["environment"]["num_envs"]
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            start = time.perf_counter()
            loop.run(iterations, learn=True)
            rates[name].append(steps / (time.perf_counter() - start))
    return {"steps_per_second": {name: statistics.median(values) for name, values in rates.items()},
            "ratio": statistics.median(f / h for f, h in zip(rates["fused"], rates["host"])),
            "per_round": rates}


def balancing_network() -> QNetwork:
    """A 128x128 Q-network whose greedy action balances the pole for 500 steps: full-length evaluations."""
    q_net = QNetwork(4, 2, (128, 128))
    controller = np.array([0.05, 0.1, 1.0, 1.0], np.float32)
    values = [np.zeros(p.shape, np.float32) for p in q_net.get_parameters()]
    values[0][0], values[0][1] = controller, -controller
    values[2][0, 0] = values[2][1, 1] = 1.0
    values[4][1, 0], values[4][1, 1] = 1.0, -1.0
    for parameter, value in zip(q_net.get_parameters(), values):
        parameter.set_data(Tensor(value))
    return q_net


def evaluation(episodes: int, rounds: int) -> dict[str, Any]:
    """Seconds per evaluation of ``episodes`` 500-step greedy episodes: per-step launches against one launch."""
    q_net = balancing_network()
    step, loop = EvalStep(q_net, CartPole(episodes)), EvalLoop(q_net, CartPole(episodes))
    calls = {"host": lambda: evaluate_mindspore(step, 500), "fused": lambda: loop().asnumpy()}
    times: dict[str, list[float]] = {name: [] for name in calls}
    returns = {name: float(np.mean(call())) for name, call in calls.items()}  # compiles
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {"seconds": {name: statistics.median(values) for name, values in times.items()},
            "ratio": statistics.median(h / f for h, f in zip(times["host"], times["fused"])),
            "mean_return": returns, "per_round": times}


def held_solve(config: dict[str, Any], seed: int, loop: str, max_steps: int) -> dict[str, Any]:
    """One ``train`` run to a held solve (or the budget): steps, times, evaluations."""
    start = time.perf_counter()
    result = train(config, seed=seed, max_steps=max_steps, progress=False, loop=loop)
    return {"seed": seed, "loop": loop, "settings": settings_of(config), "solved": result.solved,
            "solved_at": result.solved_at, "solve_time": result.solve_time,
            "train_seconds": time.perf_counter() - start,
            "env_steps": result.env_steps, "steps_per_second": result.steps_per_second,
            "evaluations": result.eval_history}


def report(results: dict[str, Any]) -> str:
    run = results["run"]
    lines = [f"measured {run['date']}, commit {run['commit']}, MindSpore {run['mindspore']}, {run['cpu']}", ""]
    rows = []
    for name, part in results["throughput"].items():
        rate = part["steps_per_second"]
        rows.append([name, f"{rate['host']:,.0f}", f"{rate['fused']:,.0f}", f"{part['ratio']:.2f}x",
                     f"{rate['fused'] / ANCHOR:.2f}x"])
    lines.append(table(rows, ["training throughput (no evaluation)", "host loop, env steps/s",
                              "fused loop, env steps/s", "fused / host (median of rounds)",
                              f"fused / {ANCHOR:,} (Flashbax anchor)"]))
    ev = results["evaluation"]
    lines += ["", table([["100 greedy 500-step episodes", f"{ev['seconds']['host'] * 1e3:,.0f}",
                          f"{ev['seconds']['fused'] * 1e3:,.0f}", f"{ev['ratio']:.1f}x"]],
                        ["evaluation", "host: one launch per step, ms", "fused: one launch, ms",
                         "speed-up (median of rounds)"])]
    rows = []
    for run in results["runs"]:
        held = f"{run['solved_at']:,}" if run["solved"] else f"not held in {run['env_steps']:,}"
        time_to = f"{run['solve_time']:.1f}" if run["solved"] else "-"
        rows.append([run["variant"], run["seed"], held, time_to, f"{run['steps_per_second']:,.0f}"])
    lines += ["", table(rows, ["variant", "seed", "env steps to a held solve", "seconds to a held solve",
                               "env steps/s (with evaluations)"])]
    rows = []
    for variant, summary in results["summary"].items():
        rows.append([variant, f"{summary['held']}/{summary['seeds']}", summary["median_steps"],
                     summary["median_seconds"], summary["seconds"]])
    lines += ["", table(rows, ["variant", "held solves", "median env steps", "median seconds", "seconds per seed"])]
    rows = [[variant, " / ".join(f"{r:.2f}" for r in part["per_seed"].values()), f"{part['of_medians']:.2f}x"]
            for variant, part in results["time_ratios"].items()]
    lines += ["", table(rows, [f"seconds to a held solve / {BASELINE}'s", "per seed", "of the medians"])]
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--max-steps", type=int, default=150_000, help="budget of each run")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no timing claims")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    path = results_path("dqn_solve", args.out, args.smoke)
    shipped = load_config(ROOT / "configs" / "dqn.py")
    today = with_settings(shipped, **TODAY)
    nstep = load_config(ROOT / "configs" / "dqn_nstep.py")  # what `train` runs without --config
    if args.smoke:
        for config in (shipped, today, nstep):
            config["trainer"].update(learning_starts=64, eval_starts=0, eval_interval=64, eval_episodes=4)
        args.seeds, args.max_steps = args.seeds[:1], 192
    sizes = (5, 2) if args.smoke else (50, 8)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "run": run,
        "solve": {"threshold": shipped["trainer"].get("solve_threshold", 475.0),
                  "evaluations": shipped["trainer"].get("solve_evaluations", 3)},
        "settings": {"today": settings_of(today), "shipped": settings_of(shipped)}}
    results["throughput"] = {
        f"today's ratio ({TODAY['learn_steps_per_collect']} learn steps per collect)": throughput(today, *sizes),
        f"shipped ratio ({shipped['trainer']['learn_steps_per_collect']} per collect)": throughput(shipped, *sizes),
        "the default, configs/dqn_nstep.py": throughput(nstep, *sizes)}
    results["evaluation"] = evaluation(4 if args.smoke else 100, 2 if args.smoke else 8)
    results["runs"] = []
    for seed in args.seeds:  # the variants one after the other for each seed: the same machine state
        for variant, config, loop in ((BASELINE, today, "host"),
                                      (f"{ONE_STEP}, host loop", shipped, "host"),
                                      (f"{ONE_STEP}, fused loop", shipped, "fused"),
                                      (DEFAULT, nstep, "fused")):
            record_run(results, {**held_solve(config, seed, loop, args.max_steps), "variant": variant},
                       path)
    runs = results["runs"]
    results["time_ratios"] = time_ratios(runs, BASELINE)
    print(report(results))
    write_results(results, path)
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}; {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
