"""Speed of the Atari job: ``python -m benchmarks.atari_throughput``.

In one process, with ``configs/dqn_atari.py``'s agent on Breakout:

* **emulator**: agent steps/s of a random agent through the wrappers alone (ALE,
  ``AtariPreprocessing``, the row bookkeeping): the ceiling the host sets;
* **acting**: agent steps/s of the job without updates (one launch per step: insert, act);
* **learning**: launches/s with one update each (insert, sample, update, priorities, act), so
  learn steps/s;
* **job**: agent steps/s of the job as it trains, one update per 4 agent steps.

The buffer is first filled with ``learning_starts`` steps; graphs are compiled before timing.
It writes ``atari_throughput.json`` to ``--out`` (default ``benchmarks/results``). ``--quick``
fills 200 steps, times a few hundred and records nothing without ``--out``.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor

from benchmarks.common import ROOT, provenance, results_path, write_results

CONFIG = "configs/dqn_atari.py"
QUICK_FILL = 200  # agent steps stored before a quick run's timing: enough for a batch of stacks and n-step returns


class Driver:
    """The trainer's host loop, one agent step per :meth:`step`, with the update choice given."""

    def __init__(self, config: dict[str, Any], seed: int = 0) -> None:
        from mindspore_rl_buffer.apps.atari import trainer

        ms.set_seed(seed)
        self.steps = trainer.atari_steps(config, seed)
        self.agent = trainer.build(config, self.steps.num_actions)
        self.action, self.observation, self.starts = 0, self.steps.observation, True

    def step(self, learn: bool) -> None:
        nxt = self.steps.step(self.action)
        action, loss = self.agent.train_step(
            Tensor(self.observation[None]), Tensor(np.array([self.action], np.int32)),
            Tensor(np.array([nxt.reward], np.float32)), Tensor(np.array([nxt.terminated], np.uint8)),
            Tensor(np.array([nxt.truncated], np.uint8)), Tensor(self.starts), Tensor(nxt.observation[None]),
            Tensor(nxt.starts), Tensor(0.1, ms.float32), Tensor(0.5, ms.float32), Tensor(int(learn), ms.int32))
        self.action = int(action.asnumpy()[0])
        float(loss.asnumpy())
        self.observation, self.starts = nxt.observation, nxt.starts


def rate(call: Any, count: int) -> float:
    """Calls per second of ``call`` over ``count`` calls."""
    start = time.perf_counter()
    for i in range(count):
        call(i)
    return count / (time.perf_counter() - start)


def measure(steps: int, learns: int, fill: int | None = None) -> dict[str, float]:
    """The rates, after ``fill`` agent steps are stored (default: the config's ``learning_starts``)."""
    ms.set_context(mode=ms.GRAPH_MODE)
    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.atari import trainer

    config = load_config(ROOT / CONFIG)
    if fill is not None:
        config["trainer"]["learning_starts"] = fill
    emulator = trainer.atari_steps(config, 1)
    rng = np.random.default_rng(1)
    figures = {"emulator_steps_per_second": rate(lambda _: emulator.step(int(rng.integers(4))), steps)}
    driver = Driver(config)
    for _ in range(config["trainer"]["learning_starts"]):
        driver.step(False)
    driver.step(True)  # compiled with one update
    figures["acting_steps_per_second"] = rate(lambda _: driver.step(False), steps)
    figures["learn_steps_per_second"] = rate(lambda _: driver.step(True), learns)
    period = config["trainer"]["update_period"]
    figures["job_steps_per_second"] = rate(lambda i: driver.step((i + 1) % period == 0), learns * period)
    figures["job_learn_steps_per_second"] = figures["job_steps_per_second"] / period
    figures["buffer"] = type(driver.agent.buffer).__name__
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed acting steps (default: %(default)s)")
    parser.add_argument("--learns", type=int, default=300, help="timed updates (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="a few hundred steps; records nothing without --out")
    parser.add_argument("--out", default=None, help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    steps, learns = (200, 20) if args.quick else (args.steps, args.learns)
    figures = measure(steps, learns, QUICK_FILL if args.quick else None)
    write_results({"run": run, "config": CONFIG, "steps": steps, "learns": learns, **figures},
                  results_path("atari_throughput", args.out, smoke=args.quick))
    for key, value in figures.items():
        print(f"{key}: {value:,.1f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
