"""Evaluation: the greedy policy plays one episode per environment; the returns come back.

On the MindSpore CartPoles :class:`EvalStep` steps every environment in one compiled graph
and :func:`evaluate_mindspore` reads whether any is still playing every 50 steps; on
gymnasium's CartPole-v1, :func:`evaluate_gymnasium` steps them in a host loop.
"""
from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, jit, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import CartPole
from mindspore_rl_buffer.apps.dqn.policy import GreedyAction


class EvalStep(nn.Cell):
    """One greedy step of a batch of MindSpore CartPoles, each playing one episode.

    ``returns`` accumulates each environment's reward until its first episode ends;
    ``alive`` marks those still playing. :meth:`restart` resets both and the environments.

    Args:
        q_net (nn.Cell): The network whose greedy actions are evaluated.
        env (CartPole): One environment per evaluation episode.

    Outputs:
        Tuple of 2 tensors: environments still playing (int32 scalar) and the states reached
        (returned so that no output of the environment step is discarded).
    """

    def __init__(self, q_net: nn.Cell, env: CartPole) -> None:
        super().__init__()
        self.policy = GreedyAction(q_net)
        self.env = env
        n = env.num_envs
        self.returns = Parameter(Tensor(np.zeros(n, np.float32)), name="eval_returns", requires_grad=False)
        self.alive = Parameter(Tensor(np.ones(n, np.float32)), name="eval_alive", requires_grad=False)

    @jit
    def restart(self):
        """Reset the environments, the returns and the alive marks (compiled)."""
        ops.assign(self.returns, ops.zeros_like(self.returns))
        ops.assign(self.alive, ops.ones_like(self.alive))
        return self.env.reset()

    def construct(self):
        action = self.policy(self.env.state + 0.0)
        next_state, reward, terminated, truncated = self.env.step(action)
        ops.assign(self.returns, self.returns + self.alive * reward)
        alive = self.alive * (1.0 - ops.logical_or(terminated, truncated).astype(ms.float32))
        ops.assign(self.alive, alive)
        return (alive > 0).astype(ms.int32).sum().astype(ms.int32), next_state


def evaluate_mindspore(step: EvalStep, max_episode_steps: int) -> np.ndarray:
    """Play one greedy episode per environment of ``step``; return the episode returns."""
    step.restart()
    for t in range(max_episode_steps):
        alive, _ = step()
        if t % 50 == 49 and int(alive.asnumpy()) == 0:
            break
    return step.returns.asnumpy().copy()


def evaluate_gymnasium(policy: GreedyAction, envs: list[Any]) -> np.ndarray:
    """Play one greedy episode in each gymnasium env (host loop); return the returns."""
    observations = np.stack([env.reset()[0] for env in envs]).astype(np.float32)
    returns = np.zeros(len(envs), np.float32)
    alive = np.ones(len(envs), bool)
    while alive.any():
        actions = policy(Tensor(observations)).asnumpy()
        for i, env in enumerate(envs):
            if not alive[i]:
                continue
            observation, reward, terminated, truncated, _ = env.step(int(actions[i]))
            observations[i] = observation
            returns[i] += reward
            alive[i] = not (terminated or truncated)
    return returns
