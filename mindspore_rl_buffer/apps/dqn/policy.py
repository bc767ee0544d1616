"""The policies: epsilon-greedy for collecting, greedy for evaluating; both compile into graphs."""
from __future__ import annotations

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS
from mindspore_rl_buffer.apps.dqn.draws import integers, uniform


class EpsilonGreedy(nn.Cell):
    """Epsilon-greedy actions over a Q-network; epsilon decays linearly with the steps taken.

    The number of environment steps taken so far lives in the ``steps`` Parameter, so the
    schedule needs nothing from the host.

    Args:
        q_net (nn.Cell): Maps observations to Q-values.
        epsilon_start (float): Epsilon at step 0.
        epsilon_end (float): Epsilon after ``epsilon_decay_steps`` environment steps.
        epsilon_decay_steps (int): Length of the linear decay.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, int32, ``(n,)``: the actions.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, q_net: nn.Cell, epsilon_start: float, epsilon_end: float, epsilon_decay_steps: int) -> None:
        super().__init__()
        self.q_net = q_net
        self.epsilon_start = float(epsilon_start)
        self.epsilon_end = float(epsilon_end)
        self.epsilon_decay_steps = float(max(int(epsilon_decay_steps), 1))
        self.steps = Parameter(Tensor(0, ms.int32), name="policy_steps", requires_grad=False)

    def epsilon(self):
        """The current epsilon, a float32 scalar tensor."""
        fraction = ops.minimum(self.steps.astype(ms.float32) / self.epsilon_decay_steps, 1.0)
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)

    def construct(self, observation):
        n = observation.shape[0]
        greedy = ops.argmax(self.q_net(observation), dim=1).astype(ms.int32)
        random_action = integers((n,), NUM_ACTIONS)
        explore = uniform((n,)) < self.epsilon()
        ops.assign(self.steps, self.steps + n)
        return ops.where(explore, random_action, greedy)


class GreedyAction(nn.Cell):
    """The greedy action of a Q-network: the evaluation policy.

    Args:
        q_net (nn.Cell): Maps observations to Q-values.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, int32, ``(n,)``.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, q_net: nn.Cell) -> None:
        super().__init__()
        self.q_net = q_net

    def construct(self, observation):
        return ops.argmax(self.q_net(observation), dim=1).astype(ms.int32)
