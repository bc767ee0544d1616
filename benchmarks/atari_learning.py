"""Does DQN learn Breakout? ``python -m benchmarks.atari_learning``.

For each seed (default 0, 1, 2), a fresh process runs the Atari job (``configs/dqn_atari.py``)
for ``--steps`` agent steps (default 50,000: one update per 4 steps, 12,100 updates after the
1,600-step warm-up) and a uniformly random agent through the same wrappers and seed for as many
steps. A game's score is its unclipped reward summed over all its lives. The figure compared
is the mean score of the games that ended in the last fifth of the steps (the last game if none
ended there); the published random and human scores of DQN Zoo's ``atari_data.py`` stand
beside it, with the human-normalized score ``(score - random) / (human - random)``.

It writes ``atari_learning.json`` (every game's step and score per seed and agent, the summary,
the run's provenance) after each seed and ``atari_learning.png`` (the learning curves) to
``--out`` (default ``benchmarks/results``). ``--jobs 2`` runs two seeds at a time. ``--quick``
runs one seed for 400 steps (updates from step 200) and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, provenance, results_path, write_results

CONFIG = "configs/dqn_atari.py"
# DQN Zoo (github.com/deepmind/dqn_zoo, dqn_zoo/atari_data.py): (random, human) game scores.
PUBLISHED = {"Breakout": (1.7, 30.5), "Boxing": (0.1, 12.1)}
FINAL_FRACTION = 0.2  # the last fifth of the steps: the games whose scores are compared


def final_score(returns: list[list[float]], steps: int) -> float | None:
    """Mean score of the games that ended in the last :data:`FINAL_FRACTION` of ``steps``; else the last game's."""
    late = [score for step, score in returns if step > steps * (1 - FINAL_FRACTION)]
    if late:
        return statistics.fmean(late)
    return returns[-1][1] if returns else None


def normalized(score: float | None, game: str) -> float | None:
    """The human-normalized score: 0 at the published random score, 1 at the human score."""
    if score is None or game not in PUBLISHED:
        return None
    random, human = PUBLISHED[game]
    return (score - random) / (human - random)


def child(seed: int, steps: int, learning_starts: int | None, path: str, deadline: float | None = None) -> None:
    """One seed's DQN and random runs in this process; their games to ``path`` (JSON)."""
    import mindspore as ms

    ms.set_context(mode=ms.GRAPH_MODE)
    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.atari import trainer

    config = load_config(ROOT / CONFIG)
    if learning_starts is not None:
        config["trainer"]["learning_starts"] = learning_starts
    config["trainer"]["log_interval"] = max(1000, steps // 50)
    result, agent = trainer.train(config, max_steps=steps, seed=seed, log=lambda line: print(line, flush=True),
                                  deadline=deadline)
    asked, steps = steps, result.env_steps  # fewer than asked if the deadline came first
    baseline = trainer.play_random(config, steps, seed)
    record = {"seed": seed, "steps": steps, "steps_asked": asked, "game": config["environment"]["game"],
              "buffer": type(agent.buffer).__name__, "learn_steps": result.learn_steps,
              "train_seconds": result.wall_time, "agent_steps_per_second": result.steps_per_second,
              "dqn": result.returns, "random": baseline.returns, "losses": result.losses}
    Path(path).write_text(json.dumps(record) + "\n")


def deadline_epoch(text: str) -> float:
    """Seconds since the epoch of the next ``HH:MM`` UTC."""
    hour, minute = (int(part) for part in text.split(":"))
    now = datetime.datetime.now(datetime.timezone.utc)
    moment = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= now:
        moment += datetime.timedelta(days=1)
    return moment.timestamp()


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per seed: games and final scores of DQN and random; their means over seeds."""
    rows = []
    for run in runs:
        game, steps = run["game"], run["steps"]
        dqn, random = final_score(run["dqn"], steps), final_score(run["random"], steps)
        rows.append({"seed": run["seed"], "dqn_games": len(run["dqn"]), "random_games": len(run["random"]),
                     "dqn_final": dqn, "random_final": random,
                     "dqn_all": statistics.fmean(s for _, s in run["dqn"]) if run["dqn"] else None,
                     "random_all": statistics.fmean(s for _, s in run["random"]) if run["random"] else None,
                     "dqn_normalized": normalized(dqn, game), "hours": run["train_seconds"] / 3600})
    finals = [row["dqn_final"] for row in rows if row["dqn_final"] is not None]
    randoms = [row["random_final"] for row in rows if row["random_final"] is not None]
    return {"per_seed": rows, "dqn_mean": statistics.fmean(finals) if finals else None,
            "random_mean": statistics.fmean(randoms) if randoms else None,
            "dqn_above_random_seeds": sum(row["dqn_final"] is not None and row["random_final"] is not None
                                          and row["dqn_final"] > row["random_final"] for row in rows)}


def curves_png(results: dict[str, Any]) -> bytes:
    """The learning curves as PNG bytes: each seed's game scores (a running mean of 10 games) against
    agent steps, the random agent's dotted, the published scores as lines (drawn without a timestamp,
    so the bytes depend only on the figures)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.style.use("default")
    figure, axes = plt.subplots(figsize=(7, 4))
    for run in results["runs"]:
        for kind, style in (("dqn", "-"), ("random", ":")):
            games = run[kind]
            if not games:
                continue
            scores = [score for _, score in games]
            means = [statistics.fmean(scores[max(0, i - 9):i + 1]) for i in range(len(scores))]
            name = "DQN" if kind == "dqn" else "random"
            axes.plot([step for step, _ in games], means, style, linewidth=1, label=f"{name}, seed {run['seed']}")
    game = results["game"]
    if game in PUBLISHED:
        random, human = PUBLISHED[game]
        axes.axhline(random, color="grey", linewidth=0.8, linestyle="--", label=f"published random ({random})")
        axes.axhline(human, color="black", linewidth=0.8, linestyle="--", label=f"published human ({human})")
    axes.set_xlabel("agent steps")
    axes.set_ylabel("game score, mean of the last 10 games")
    axes.set_title(f"DQN on {game}: game scores while training", fontsize=10)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="agent steps per seed (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at the same time (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="one seed, 400 steps; records nothing without --out")
    parser.add_argument("--out", default=None, help="folder of the JSON and PNG (default: benchmarks/results)")
    parser.add_argument("--deadline", default=None, metavar="HH:MM",
                        help="UTC time at which a seed still training stops and records the steps it ran "
                             "(the random agent then plays as many)")
    parser.add_argument("--child", nargs=3, metavar=("SEED", "STEPS", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-deadline", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--learning-starts", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.learning_starts, args.child[2], args.child_deadline)
        return 0
    run = provenance(argv)
    steps, seeds = (400, args.seeds[:1]) if args.quick else (args.steps, args.seeds)
    starts = ["--learning-starts", "200"] if args.quick else []
    if args.deadline is not None:
        starts += ["--child-deadline", str(deadline_epoch(args.deadline))]
    path = results_path("atari_learning", args.out, smoke=args.quick)
    results: dict[str, Any] = {"run": run, "config": CONFIG, "game": "Breakout", "steps": steps, "seeds": seeds,
                               "published": {"source": "DQN Zoo atari_data.py", "random": PUBLISHED["Breakout"][0],
                                             "human": PUBLISHED["Breakout"][1]}, "runs": []}
    with tempfile.TemporaryDirectory() as folder:
        pending = list(seeds)
        running: list[tuple[int, subprocess.Popen, str]] = []
        while pending or running:
            while pending and len(running) < max(1, args.jobs):
                seed = pending.pop(0)
                out = os.path.join(folder, f"seed{seed}.json")
                command = [sys.executable, "-m", "benchmarks.atari_learning", "--child", str(seed), str(steps), out,
                           *starts]
                running.append((seed, subprocess.Popen(command, cwd=ROOT), out))
                print(f"seed {seed}: started", flush=True)
            time.sleep(1)
            for entry in list(running):
                seed, process, out = entry
                if process.poll() is None:
                    continue
                running.remove(entry)
                if process.returncode != 0:
                    print(f"seed {seed}: failed with exit status {process.returncode}", file=sys.stderr, flush=True)
                    continue
                results["runs"].append(json.loads(Path(out).read_text()))
                results["runs"].sort(key=lambda r: r["seed"])
                results["summary"] = summarize(results["runs"])
                write_results(results, path)
                row = next(r for r in results["summary"]["per_seed"] if r["seed"] == seed)
                print(f"seed {seed}: DQN {row['dqn_final']}, random {row['random_final']} (final mean game score)",
                      flush=True)
    if path is not None and results["runs"]:
        path.with_suffix(".png").write_bytes(curves_png(results))
    print(json.dumps(results.get("summary", {}), indent=1))
    return 0 if len(results["runs"]) == len(seeds) else 1


if __name__ == "__main__":
    sys.exit(main())
