"""Evaluation: the greedy policy plays one episode per environment; the returns come back.

On the MindSpore CartPoles, :class:`EvalLoop` plays every episode to its end inside one
compiled graph (a ``while`` loop over the environment steps): one launch per evaluation, what
the fused training loop uses. :class:`EvalStep` is the host loop's evaluator, one launch per
environment step, with :func:`evaluate_mindspore` reading whether any episode is still going
every 50 steps. On gymnasium's CartPole-v1, :func:`evaluate_gymnasium` steps them on the host.
"""
from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, jit, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step
from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy, GreedyAction


class EvalStep(nn.Cell):
    """One greedy step of a batch of MindSpore CartPoles, each playing one episode.

    ``returns`` accumulates each environment's reward until its first episode ends;
    ``alive`` marks those still playing. :meth:`restart` resets both and the environments,
    and folds the network's current weights for :class:`FoldedGreedy` (what :class:`EvalLoop`
    does at the start of its launch, so both play the same actions).

    Args:
        q_net (QNetwork): The network whose greedy actions are evaluated.
        env (CartPole): One environment per evaluation episode.

    Outputs:
        Tuple of 2 tensors: environments still playing (int32 scalar) and the states reached
        (returned so that no output of the environment step is discarded).
    """

    def __init__(self, q_net: nn.Cell, env: CartPole) -> None:
        super().__init__()
        self.policy = FoldedGreedy(q_net)
        self.weights = ParameterTuple(
            Parameter(Tensor(np.zeros(w.shape, np.float32)), name=f"eval_folded_{i}", requires_grad=False)
            for i, w in enumerate(self.policy.fold()))
        self.env = env
        n = env.num_envs
        self.returns = Parameter(Tensor(np.zeros(n, np.float32)), name="eval_returns", requires_grad=False)
        self.alive = Parameter(Tensor(np.ones(n, np.float32)), name="eval_alive", requires_grad=False)

    @jit
    def restart(self):
        """Reset the environments, the returns and the alive marks; fold the weights (compiled)."""
        for weight, folded in zip(self.weights, self.policy.fold()):
            ops.assign(weight, folded)
        ops.assign(self.returns, ops.zeros_like(self.returns))
        ops.assign(self.alive, ops.ones_like(self.alive))
        return self.env.reset()

    def construct(self):
        action = self.policy(self.env.state + 0.0, self.weights)
        next_state, reward, terminated, truncated = self.env.step(action)
        ops.assign(self.returns, self.returns + self.alive * reward)
        alive = self.alive * (1.0 - ops.logical_or(terminated, truncated).astype(ms.float32))
        ops.assign(self.alive, alive)
        return (alive > 0).astype(ms.int32).sum().astype(ms.int32), next_state


class EvalLoop(nn.Cell):
    """Greedy episodes on a batch of MindSpore CartPoles, all played to their end in one launch.

    Each call draws fresh start states (``env``'s reset), then steps the dynamics inside a
    graph ``while`` loop until every episode has ended (terminated, or truncated at
    ``max_episode_steps``), summing each episode's reward as it goes. The state is carried by
    the loop, not written to ``env``'s Parameters, and finished episodes are not restarted:
    about half the kernels of a training step of the environments. Each pass of the loop plays
    ``unroll`` steps (a pass's test and jump cost about as much as 30 small kernels on a CPU);
    the steps after an episode's end add nothing to its return. The greedy actions come from
    :class:`FoldedGreedy`, its weights folded once per launch.

    Args:
        q_net (QNetwork): The network whose greedy actions are evaluated.
        env (CartPole): One environment per evaluation episode.
        unroll (int): Steps per pass of the loop, a divisor of ``env.max_episode_steps``;
            ``None`` takes the largest divisor up to 5. Default: ``None``.

    Outputs:
        Tensor, float32, ``(env.num_envs,)``: the return of each episode.

    Raises:
        ValueError: If ``unroll`` is not an int >= 1 dividing ``env.max_episode_steps``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step
        >>> from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork
        >>> returns = EvalLoop(QNetwork(4, 2, (8,)), CartPole(5, max_episode_steps=20))().asnumpy()
        >>> returns.shape, bool(((1 <= returns) & (returns <= 20)).all())
        ((5,), True)
    """

    def __init__(self, q_net: nn.Cell, env: CartPole, unroll: int | None = None) -> None:
        super().__init__()
        limit = env.max_episode_steps
        if unroll is None:
            unroll = max(k for k in range(1, 6) if limit % k == 0)
        if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 1 or limit % unroll:
            raise ValueError(f"For 'EvalLoop', 'unroll' must be an int >= 1 dividing max_episode_steps ({limit}), "
                             f"but got {unroll!r}.")
        self.policy = FoldedGreedy(q_net)
        self.env = env
        self.unroll = unroll
        self.max_episode_steps = Tensor(limit, ms.int32)

    def construct(self):
        state = self.env.reset()
        weights = self.policy.fold()
        returns = ops.zeros_like(state[:, 0])
        alive = ops.ones_like(returns)
        steps = Tensor(0, ms.int32)
        while ops.logical_and(steps < self.max_episode_steps, alive.sum() > 0):
            for _ in range(self.unroll):
                state, terminated = cartpole_step(state, self.policy(state, weights))
                returns = returns + alive  # a reward of 1 for every step, the terminating one included
                alive = alive * (1.0 - terminated.astype(ms.float32))
            steps = steps + self.unroll
        return returns


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
