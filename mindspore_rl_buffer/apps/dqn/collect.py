"""The collect graph: the policy acts in the MindSpore CartPoles and the buffer stores the steps.

:class:`CollectStep` is one compiled graph: :class:`ActStep` (epsilon-greedy policy, one
step of the batched :class:`~mindspore_rl_buffer.apps.dqn.cartpole.CartPole`, the episode
returns) and ``_ = self.buffer.insert(...)``. A transition is ``(state, action, reward,
next_state, terminated)``, the five columns of the buffer declared in ``configs/dqn.py``.
With CartPoles in next-step autoreset mode (``configs/dqn_nstep.py``), each row is one
environment step as a :class:`~mindspore_rl_buffer.TransitionReplayBuffer` takes it,
``(observation, action, reward, terminated, truncated)``; the step after an episode's end
then carries the final observation with reward 0 and flags 0, as the buffer expects.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer, TransitionReplayBuffer
from mindspore_rl_buffer.apps.dqn.cartpole import OBSERVATION_SIZE, CartPole
from mindspore_rl_buffer.apps.dqn.draws import state, uniform
from mindspore_rl_buffer.apps.dqn.policy import EpsilonGreedy
from mindspore_rl_buffer.apps.dqn.primitives import ASSIGN, CAST, EXPAND_DIMS, LOGICAL_OR, REDUCE_SUM, STRIDED_SLICE


class EpisodeTracker(nn.Cell):
    """Running returns of a batch of environments, and the total over finished episodes.

    ``finished_return`` (float32) and ``finished_episodes`` (int32) only grow; the host reads
    them once per progress-bar update and takes differences.

    Args:
        num_envs (int): Environments tracked.

    Inputs:
        - **reward** (Tensor) - float32, ``(num_envs,)``.
        - **done** (Tensor) - bool, ``(num_envs,)``: the episode ended at this step.

    Outputs:
        Tensor, float32, ``(num_envs,)``: ``done`` as 0.0/1.0.
    """

    def __init__(self, num_envs: int) -> None:
        super().__init__()
        self.episode_return = Parameter(Tensor(np.zeros(num_envs, np.float32)), name="episode_return",
                                        requires_grad=False)
        self.finished_return = Parameter(Tensor(0.0, ms.float32), name="finished_return", requires_grad=False)
        self.finished_episodes = Parameter(Tensor(0, ms.int32), name="finished_episodes", requires_grad=False)

    def construct(self, reward, done):
        running = self.episode_return + reward
        done_f = CAST(done, ms.float32)
        ASSIGN(self.finished_return, self.finished_return + REDUCE_SUM(running * done_f))
        finished = CAST(REDUCE_SUM(done_f), ms.int32)  # exact: num_envs is far below 2**24
        ASSIGN(self.finished_episodes, self.finished_episodes + finished)
        ASSIGN(self.episode_return, running * (1.0 - done_f))
        return done_f

    def read(self) -> tuple[float, int]:
        """Host read: total return of the finished episodes, and how many finished."""
        return float(self.finished_return.asnumpy()), int(self.finished_episodes.asnumpy())


class ActStep(nn.Cell):
    """The policy acts in every environment once; returns the transitions, stores nothing.

    Every random number of the step, the policy's and the reset states', comes from one draw
    of the step's own generator state (``rng_key``, ``rng_counter``): a draw costs about 33
    small kernels, and one launch of them per step is cheaper than one per Cell.

    Args:
        policy (EpsilonGreedy): Chooses the actions.
        env (CartPole): The batch of environments.

    Outputs:
        Tuple of 5 tensors with leading dimension ``num_envs``: ``state`` (float32, 4),
        ``action`` (int32, 1), ``reward`` (float32, 1), ``next_state`` (float32, 4) and
        ``terminated`` (float32, 1), the columns of the replay buffer. If ``env`` resets on
        the next step (``autoreset_mode='next_step'``): the step's row, ``observation``
        (float32, 4), ``action`` (int32), ``reward`` (float32), ``terminated`` and
        ``truncated`` (uint8), the columns of a TransitionReplayBuffer.
    """

    def __init__(self, policy: EpsilonGreedy, env: CartPole) -> None:
        super().__init__()
        self.policy = policy
        self.env = env
        self.tracker = EpisodeTracker(env.num_envs)
        self.steps = env.next_step_reset
        self.rng_key, self.rng_counter = state("act_rng")

    def construct(self):
        # `+ 0.0` takes a copy: a plain read of the Parameter would see the step's assign.
        state = self.env.state + 0.0
        drawn = uniform((state.shape[0], 2 + OBSERVATION_SIZE), (self.rng_key, self.rng_counter))
        # The two blocks of columns by StridedSlice, the kernel ops.split runs, without its wrapper graphs.
        n = state.shape[0]
        policy_draws = STRIDED_SLICE(drawn, (0, 0), (n, 2), (1, 1))
        reset_draws = STRIDED_SLICE(drawn, (0, 2), (n, 2 + OBSERVATION_SIZE), (1, 1))
        action = self.policy(state, policy_draws)
        next_state, reward, terminated, truncated = self.env.step(action, reset_draws)
        _ = self.tracker(reward, LOGICAL_OR(terminated, truncated))
        if self.steps:  # the row of `state`; next_state is the next row's observation
            return (state, action, reward, CAST(terminated, ms.uint8),
                    ops.depend(CAST(truncated, ms.uint8), next_state))
        return (state, EXPAND_DIMS(action, 1), EXPAND_DIMS(reward, 1), next_state,
                EXPAND_DIMS(CAST(terminated, ms.float32), 1))


class CollectStep(nn.Cell):
    """:class:`ActStep` and ``insert`` of its transitions into the buffer: one graph.

    Args:
        act (ActStep): Produces the transitions (or, in next-step autoreset mode, the steps).
        buffer (Union[ReplayBuffer, ShardedReplayBuffer, TransitionReplayBuffer]): Stores them.

    Outputs:
        The transitions inserted (see :class:`ActStep`).
    """

    def __init__(self, act: ActStep, buffer: ReplayBuffer | ShardedReplayBuffer | TransitionReplayBuffer) -> None:
        super().__init__()
        self.act = act
        self.buffer = buffer

    def construct(self):
        columns = self.act()
        _ = self.buffer.insert(columns)
        return columns
