"""Where an evaluation's time goes: ``python -m benchmarks.dqn_eval_parts``.

Evaluations of 500 steps over 100 CartPoles, interleaved in rounds: the host loop's (one
launch per step, :func:`~mindspore_rl_buffer.apps.dqn.evaluation.evaluate_mindspore`), the
shipped :class:`~mindspore_rl_buffer.apps.dqn.evaluation.EvalLoop` (128x128 Q-network, 10
steps a pass of its ``while`` loop, :class:`~mindspore_rl_buffer.apps.dqn.policy.FoldedGreedy`),
the loop it replaced (the episodes' bookkeeping at every step on the ``(n, 4)`` state, 5 steps a
pass), the shipped loop with the ``argmax`` policy, and with 1 step a pass; then compiled loops of
the greedy policy alone (the 128x128 network, then an 8x8 one), and of the dynamics with the
loop under a fixed linear rule that balances the pole. It prints the milliseconds per
evaluation, the microseconds per step and the host loop's time over each, in the same
rounds. ``--smoke`` runs 20 steps of 4 environments, 2 rounds (no claims). The figures, with
the run's provenance, go to ``DIR/dqn_eval_parts.json`` (``--out DIR``, default
``benchmarks/results``; a smoke run without ``--out`` records nothing).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from benchmarks.common import provenance, results_path, table, write_results
from benchmarks.dqn_solve import balancing_network
from mindspore_rl_buffer.apps.dqn import cartpole
from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop, EvalStep, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.networks import QNetwork
from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy, GreedyAction


class PolicyLoop(nn.Cell):
    """``steps`` greedy actions on a state that depends on the previous ones, nothing else."""

    def __init__(self, q_net: nn.Cell, envs: int, steps: int) -> None:
        super().__init__()
        self.policy = GreedyAction(q_net)
        self.envs, self.steps = envs, Tensor(steps, ms.int32)

    def construct(self):
        state = ops.zeros((self.envs, 4), ms.float32) + 0.01
        done = Tensor(0, ms.int32)
        actions = ops.zeros((self.envs,), ms.int32)
        while done < self.steps:
            actions = actions + self.policy(state + 0.0 * actions.astype(ms.float32).reshape((-1, 1)))
            done = done + 1
        return actions


class _Unfolded:
    """What ``EvalLoop`` asks of a policy beyond :class:`FoldedGreedy`'s, for one that folds nothing."""

    def fold(self):
        return ()

    def augment(self, state):
        return FoldedGreedy.augment(self, state)


class LinearRule(_Unfolded, nn.Cell):
    """Push towards where the pole is falling: a fixed rule that balances CartPole, in 4 kernels."""

    two_actions = True

    def scores(self, state, weights):
        return state[:, 2:3] + 0.3 * state[:, 3:4]

    def construct(self, state, weights):
        return (self.scores(state, weights).reshape((-1,)) > 0).astype(ms.int32)


class ArgmaxPolicy(_Unfolded, GreedyAction):
    """:class:`GreedyAction` (``argmax`` over the Q-network, 10 kernels) where ``EvalLoop`` takes its policy."""

    two_actions = False

    def scores(self, state, weights):
        return self.q_net(state[:, :4])

    def construct(self, state, weights):
        return super().construct(state)


class StepwiseEvalLoop(EvalLoop):
    """``EvalLoop`` as it was until 2026-11-26: the policy's ``construct`` and ``cartpole_step`` on the
    ``(n, 4)`` state, the returns and the alive marks updated at every step, 5 steps a pass."""

    def construct(self):
        state = self.env.reset()
        weights = self.policy.fold()
        returns = ops.zeros_like(state[:, 0])
        alive = ops.ones_like(returns)
        steps = Tensor(0, ms.int32)
        while ops.logical_and(steps < self.max_episode_steps, alive.sum() > 0):
            for _ in range(self.unroll):
                state, terminated = cartpole_step(state, self.policy(state, weights))
                returns = returns + alive
                alive = alive * (1.0 - terminated.astype(ms.float32))
            steps = steps + self.unroll
        return returns


def gymnasium_order_accelerations(theta, theta_dot, force):
    """``cartpole.accelerations`` until 2026-11-26: gymnasium's order of operations, 20 kernels."""
    costheta = ops.cos(theta)
    sintheta = ops.sin(theta)
    temp = (force + cartpole.POLE_MASS_LENGTH * theta_dot * theta_dot * sintheta) / cartpole.TOTAL_MASS
    thetaacc = (cartpole.GRAVITY * sintheta - costheta * temp) / (
        cartpole.LENGTH * (4.0 / 3.0 - cartpole.MASS_POLE * costheta * costheta / cartpole.TOTAL_MASS))
    return temp - cartpole.POLE_MASS_LENGTH * thetaacc * costheta / cartpole.TOTAL_MASS, thetaacc


class GymnasiumOrderEvalLoop(EvalLoop):
    """``EvalLoop`` until 2026-11-26, before the dynamics' constants were folded into ``addcmul``
    kernels: :func:`gymnasium_order_accelerations`, a push of ``FORCE_MAG``, ``state + TAU * ...``."""

    def __init__(self, q_net: QNetwork, env: CartPole) -> None:
        super().__init__(q_net, env)
        self.push = Tensor(np.full(env.num_envs, cartpole.FORCE_MAG, np.float32))
        self.pull = -self.push

    def _step(self, state, weights):
        push = (self.policy.scores(state, weights) > 0).reshape((-1,))
        _, x_dot, theta, theta_dot, _ = ops.unstack(state, axis=1)
        xacc, thetaacc = gymnasium_order_accelerations(theta, theta_dot, ops.select(push, self.push, self.pull))
        return state + cartpole.TAU * ops.stack((x_dot, xacc, theta_dot, thetaacc, self.zero), axis=1)


def dynamics_loop(env: CartPole) -> EvalLoop:
    """``EvalLoop`` (1 step a pass) with :class:`LinearRule` in place of the Q-network: the dynamics and the loop."""
    loop = EvalLoop(QNetwork(4, 2, (8,)), env, unroll=1)
    loop.policy = LinearRule()
    return loop


def argmax_loop(q_net: QNetwork, env: CartPole) -> EvalLoop:
    """``EvalLoop`` with the ``argmax`` policy it had before ``FoldedGreedy``."""
    loop = EvalLoop(q_net, env)
    loop.policy = ArgmaxPolicy(q_net)
    return loop


HOST = "host loop, one launch per step"
GYMNASIUM_ORDER = "EvalLoop until 2026-11-26 (the dynamics in gymnasium's order of operations)"
STEPWISE = "EvalLoop until 2026-11-26 (bookkeeping every step, 5 steps a pass)"


def measure(envs: int, steps: int, rounds: int) -> dict[str, Any]:
    q_net = balancing_network()
    host = EvalStep(q_net, CartPole(envs, steps))
    cells = {HOST: lambda: evaluate_mindspore(host, steps),
             "EvalLoop as shipped (128x128 Q-network)": EvalLoop(q_net, CartPole(envs, steps)),
             GYMNASIUM_ORDER: GymnasiumOrderEvalLoop(q_net, CartPole(envs, steps)),
             STEPWISE: StepwiseEvalLoop(q_net, CartPole(envs, steps), unroll=5),
             "EvalLoop with the argmax policy (before FoldedGreedy)": argmax_loop(q_net, CartPole(envs, steps)),
             "EvalLoop, 1 step a pass": EvalLoop(q_net, CartPole(envs, steps), unroll=1),
             "greedy policy alone, 128x128": PolicyLoop(q_net, envs, steps),
             "greedy policy alone, 8x8": PolicyLoop(QNetwork(4, 2, (8, 8)), envs, steps),
             "dynamics and loop, fixed linear rule": dynamics_loop(CartPole(envs, steps))}
    returns = {name: float(np.asarray(_run(cell)).mean()) for name, cell in cells.items()}  # compiles
    times: dict[str, list[float]] = {name: [] for name in cells}
    for _ in range(rounds):
        for name, cell in cells.items():
            start = time.perf_counter()
            _run(cell)
            times[name].append(time.perf_counter() - start)
    return {name: {"ms": statistics.median(values) * 1e3, "us_per_step": statistics.median(values) / steps * 1e6,
                   "host_over_this": statistics.median(h / t for h, t in zip(times[HOST], values)),
                   "mean_output": returns[name]} for name, values in times.items()}


def _run(cell: Any) -> np.ndarray:
    out = cell()
    return out if isinstance(out, np.ndarray) else out.asnumpy()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI; no claims")
    parser.add_argument("--out", default=None, help="folder of the JSON (default benchmarks/results)")
    args = parser.parse_args(argv)
    run = provenance(argv)
    ms.set_context(mode=ms.GRAPH_MODE)
    envs, steps, rounds = (4, 20, 2) if args.smoke else (100, 500, 9)
    parts = measure(envs, steps, rounds)
    print(table([[name, f"{part['ms']:.1f}", f"{part['us_per_step']:.1f}", f"{part['host_over_this']:.2f}x"]
                 for name, part in parts.items()],
                [f"{steps} steps of {envs} CartPoles", "ms (median of rounds)", "us per step",
                 "host loop's time over this"]))
    path = results_path("dqn_eval_parts", args.out, args.smoke)
    write_results({"run": run, "sizes": {"envs": envs, "steps": steps, "rounds": rounds}, "baseline": HOST,
                   "parts": parts}, path)
    print(f"figures: {path or 'not recorded (smoke run without --out)'}")
    return parts


if __name__ == "__main__":
    main()
