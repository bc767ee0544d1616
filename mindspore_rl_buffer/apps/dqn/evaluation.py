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

from mindspore_rl_buffer.apps.dqn.cartpole import (
    OBSERVATION_SIZE,
    PUSH_PER_MASS,
    TAU,
    THETA_THRESHOLD,
    X_THRESHOLD,
    CartPole,
    accelerations,
)
from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy, GreedyAction
from mindspore_rl_buffer.apps.dqn.primitives import (
    ABS,
    ADDCMUL,
    ADDCMUL_ONE,
    ARGMAX,
    CAST,
    LOGICAL_AND,
    REDUCE_ANY,
    REDUCE_MAX,
    REDUCE_SUM,
    RESHAPE,
    SELECT,
    STACK_COLUMNS,
    UNSTACK_COLUMNS,
)

# CartPole's termination limits on the augmented state (x, x_dot, theta, theta_dot, 1)
_LIMITS_AUGMENTED = Tensor(np.array([X_THRESHOLD, np.inf, THETA_THRESHOLD, np.inf, np.inf], np.float32))


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
        # An evaluation episode is played once: the states a step resets ended episodes to are never
        # played, so none is drawn (the generator then draws only restart()'s, as EvalLoop's reset does).
        self.unplayed_resets = Tensor(np.zeros((n, OBSERVATION_SIZE), np.float32))

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
        next_state, reward, terminated, truncated = self.env.step(action, self.unplayed_resets)
        ops.assign(self.returns, self.returns + self.alive * reward)
        alive = self.alive * (1.0 - CAST(ops.logical_or(terminated, truncated), ms.float32))
        ops.assign(self.alive, alive)
        return CAST(REDUCE_SUM(CAST(alive > 0, ms.float32)), ms.int32), next_state  # exact: num_envs < 2**24


class EvalLoop(nn.Cell):
    """Greedy episodes on a batch of MindSpore CartPoles, all played to their end in one launch.

    Each call draws fresh start states (``env``'s reset), then steps the dynamics inside a
    graph ``while`` loop until every episode has ended (terminated, or truncated at
    ``max_episode_steps``), counting each episode's steps, the terminating one included (its
    return). Written for few kernels a step (each costs a few microseconds on a CPU, whatever
    its size): the state is carried by the loop, not written to ``env``'s Parameters, with the
    column of ones the folded policy reads its biases from (:class:`FoldedGreedy`, its weights
    folded once per launch), and finished episodes are not restarted; each pass of the loop
    plays ``unroll`` steps and then, once for all of them, finds where each episode fell
    first. The dynamics are :func:`~.cartpole.cartpole_step`'s operations in the same order,
    so both play the same episodes.

    Args:
        q_net (QNetwork): The network whose greedy actions are evaluated.
        env (CartPole): One environment per evaluation episode.
        unroll (int): Steps per pass of the loop, a divisor of ``env.max_episode_steps``;
            ``None`` takes the largest divisor up to 10. Default: ``None``.

    Outputs:
        Tensor, float32, ``(env.num_envs,)``: the return of each episode.

    Raises:
        ValueError: If ``unroll`` is not an int >= 1 dividing ``env.max_episode_steps``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.cartpole import CartPole
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
            unroll = max(k for k in range(1, 11) if limit % k == 0)
        if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 1 or limit % unroll:
            raise ValueError(f"For 'EvalLoop', 'unroll' must be an int >= 1 dividing max_episode_steps ({limit}), "
                             f"but got {unroll!r}.")
        self.policy = FoldedGreedy(q_net)
        self.env = env
        self.unroll = unroll
        self.max_episode_steps = Tensor(limit, ms.int32)
        n = env.num_envs
        self.push = Tensor(np.full(n, PUSH_PER_MASS, np.float32))
        self.pull = Tensor(np.full(n, -PUSH_PER_MASS, np.float32))
        self.tau = Tensor(np.array([TAU] * 4 + [0.0], np.float32))  # the column of ones stays 1
        self.zero = Tensor(np.zeros(n, np.float32))  # the column of ones' change; an ended episode's alive mark
        self.ones = Tensor(np.ones(n, np.float32))  # every episode alive at the start
        # steps of the pass left after a fall at each of its steps; the steps an episode plays in a pass
        self.left_after = Tensor(np.tile(np.arange(unroll - 1, -1, -1, dtype=np.float32), (n, 1)))
        self.whole = Tensor(np.full(n, unroll, np.float32))
        self.none_left = Tensor(np.zeros((n, unroll), np.float32))

    def _step(self, state, weights):
        """One greedy step of the augmented states ``(n, 5)``: the dynamics of ``cartpole_step``."""
        scores = self.policy.scores(state, weights)
        push = RESHAPE(scores > 0, (-1,)) if self.policy.two_actions else ARGMAX(scores) == 1
        _, x_dot, theta, theta_dot, _ = UNSTACK_COLUMNS(state)
        xacc, thetaacc = accelerations(theta, theta_dot, SELECT(push, self.push, self.pull))
        return ADDCMUL(state, STACK_COLUMNS((x_dot, xacc, theta_dot, thetaacc, self.zero)), self.tau,
                       ADDCMUL_ONE)

    def construct(self):
        weights = self.policy.fold()
        state = self.policy.augment(self.env.reset())
        returns = self.zero
        alive = self.ones
        steps = Tensor(0, ms.int32)
        while LOGICAL_AND(steps < self.max_episode_steps, REDUCE_SUM(alive) > 0):
            states = ()
            for _ in range(self.unroll):
                state = self._step(state, weights)
                states = (*states, state)
            # (n, unroll): |x| > 2.4 or |theta| > 12 degrees after each step of the pass
            fell = REDUCE_ANY(ABS(STACK_COLUMNS(states)) > _LIMITS_AUGMENTED, 2)
            # an episode still going plays the whole pass, or up to its first fall, that step included
            played = self.whole - REDUCE_MAX(SELECT(fell, self.left_after, self.none_left), 1)
            returns = returns + alive * played
            alive = SELECT(REDUCE_ANY(fell, 1), self.zero, alive)
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
