"""Settings of the main job against each other, to a held solve: ``python -m benchmarks.dqn_sweep``.

Each ``--variant`` is a name and the settings it changes in ``--config`` (default
``configs/dqn.py``), as
``NAME:SECTION.KEY=VALUE,...`` (``shipped`` alone changes nothing), for example
``sync50:learner.target_sync_period=50``. For every seed, ``train`` runs each variant on the
fused loop until a held solve (the mean return of 100 greedy episodes >= 475 at 3 consecutive
evaluations) or the budget, the variants one after the other so they see the same machine
load. It prints a Markdown table (held solves, median steps and seconds, each seed's) and
writes ``dqn_sweep.json`` (with the run's provenance) to ``--out`` (default
``benchmarks/results``) after every run. ``--smoke`` runs the variants at tiny sizes (no
claims) and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import ast
import copy
import statistics
from pathlib import Path
from typing import Any

import mindspore as ms

from benchmarks.common import provenance, record_run, results_path, table
from benchmarks.dqn_solve import held_solve
from mindspore_rl_buffer import load_config
from mindspore_rl_buffer.apps.dqn.config import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
# The shipped config against the settings it replaced (learning rate 1e-3, a sync every 100 learn steps).
DEFAULT_VARIANTS = ("shipped", "former:learner.learning_rate=1e-3,learner.target_sync_period=100")


def parse_variant(text: str) -> tuple[str, dict[tuple[str, str], Any]]:
    """``'NAME:SECTION.KEY=VALUE,...'`` -> ``(NAME, {(SECTION, KEY): VALUE})``; values are Python literals.

    Examples:
        >>> parse_variant("fast:learner.learning_rate=2e-3,policy.hidden_sizes=(64, 64)")
        ('fast', {('learner', 'learning_rate'): 0.002, ('policy', 'hidden_sizes'): (64, 64)})
    """
    name, _, settings = text.partition(":")
    changes: dict[tuple[str, str], Any] = {}
    key = None
    for part in settings.split(",") if settings else []:
        if "=" in part and "." in part.split("=", 1)[0]:
            dotted, value = part.split("=", 1)
            section, _, setting = dotted.strip().partition(".")
            key = (section, setting)
            changes[key] = value
        elif key is not None:  # a comma inside a value, as in a tuple
            changes[key] += "," + part
        else:
            raise ValueError(f"variant {text!r}: expected NAME:SECTION.KEY=VALUE,..., but got {part!r}")
    try:
        return name, {key: ast.literal_eval(value.strip()) for key, value in changes.items()}
    except (ValueError, SyntaxError) as error:
        raise ValueError(f"variant {text!r}: each VALUE must be a Python literal ({error})") from None


def with_changes(config: dict[str, Any], changes: dict[tuple[str, str], Any],
                 name: str = "configs/dqn.py") -> dict[str, Any]:
    """A copy of ``config`` with ``changes`` applied; a section or key it does not have is refused."""
    config = copy.deepcopy(config)
    for (section, key), value in changes.items():
        if section not in config or (key not in config[section] and (section, key) not in SETTINGS):
            raise KeyError(f"{name} has no setting {section}.{key}")
        config[section][key] = value
    return config


def report(results: dict[str, Any]) -> str:
    seeds = ", ".join(str(seed) for seed in dict.fromkeys(run["seed"] for run in results["runs"]))
    rows = []
    for variant, s in results["summary"].items():
        rates = [run["steps_per_second"] for run in results["runs"] if run["variant"] == variant]
        rows.append([variant, f"{s['held']}/{s['seeds']}", s["median_steps"], s["median_seconds"], s["steps"],
                     s["seconds"], f"{statistics.median(rates):,.0f}"])
    header = ["variant", "held solves", "median env steps", "median seconds", f"env steps per seed ({seeds})",
              "seconds per seed", "env steps/s"]
    run = results["run"]
    return (f"measured {run['date']}, commit {run['commit']}, MindSpore {run['mindspore']}, {run['cpu']}\n\n"
            + table(rows, header))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", dest="variants", metavar="NAME:SECTION.KEY=VALUE,...",
                        help=f"repeat for each variant (default: {' '.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--config", default="configs/dqn.py", help="the config the variants change")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--max-steps", type=int, default=100_000, help="budget of each run")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no claims")
    args = parser.parse_args(argv)
    run = provenance(argv)
    variants = [parse_variant(text) for text in args.variants or DEFAULT_VARIANTS]
    shipped = load_config(ROOT / args.config)
    # Refused before any run:
    configs = {name: with_changes(shipped, changes, args.config) for name, changes in variants}
    if args.smoke:
        for config in configs.values():
            config["trainer"].update(learning_starts=64, eval_starts=0, eval_interval=64, eval_episodes=4)
        args.seeds, args.max_steps = args.seeds[:1], 128
    ms.set_context(mode=ms.GRAPH_MODE)
    path = results_path("dqn_sweep", args.out, args.smoke)
    results: dict[str, Any] = {
        "run": run,
        "config": args.config, "max_steps": args.max_steps,
        "variants": [f"{name}: {changes}" for name, changes in variants], "runs": []}
    for seed in args.seeds:  # the variants one after the other for each seed: the same machine state
        for name, config in configs.items():
            record_run(results, {**held_solve(config, seed, "fused", args.max_steps), "variant": name},
                       path)
    print(report(results))
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}")
    return results


if __name__ == "__main__":
    main()
