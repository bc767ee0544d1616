"""The Atari training graph: one launch per agent step inserts its row, learns every few steps, and acts.

:class:`TrainStep` is the graph the trainer launches once per agent step:
``_ = buffer.insert(row)``; then ``learn_calls`` (0 or 1, a graph input) calls of
:class:`Learn` in a ``while`` loop over that input (so one compiled graph serves the steps
that learn and those that do not); then :class:`Act` picks the next action on the device from
its frame stack. :class:`Learn` samples the buffer inside the graph, computes the
importance-weighted Huber loss of double DQN with n-step returns, applies Adam, writes
``|TD error|`` back as the sampled starts' priorities, and copies the online network into the
target network every ``target_sync_period`` learn steps. Only the emulator runs on the host.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn import draws
from mindspore_rl_buffer.apps.dqn.learner import TargetSync, huber_loss


def is_prioritized(buffer: object) -> bool:
    """Whether ``buffer`` samples ``(ids, weights, ...)`` and takes priorities (``update_priorities``)."""
    return hasattr(buffer, "update_priorities") and hasattr(buffer, "max_priority")


class WeightedLoss(nn.Cell):
    """Importance-weighted mean Huber loss between ``Q(s, a)`` and a given target, and ``|TD error|``.

    Args:
        q_net (nn.Cell): The online network.
        huber_delta (float): Where the Huber loss turns linear. Default: ``1.0``.

    Inputs:
        - **observation** (Tensor) - uint8 ``(B, stack, H, W)``.
        - **action** (Tensor) - int32 ``(B,)``.
        - **target**, **weights** (Tensor) - float32 ``(B,)``.

    Outputs:
        Tuple ``(loss, abs_td_error)``: a float32 scalar and float32 ``(B,)``.
    """

    def __init__(self, q_net: nn.Cell, huber_delta: float = 1.0) -> None:
        super().__init__()
        self.q_net = q_net
        self.huber_delta = float(huber_delta)

    def construct(self, observation, action, target, weights):
        q_taken = ops.gather_elements(self.q_net(observation), 1, action.expand_dims(1)).squeeze(1)
        huber = huber_loss(q_taken, target, self.huber_delta, "none")
        return (weights * huber).mean(), ops.stop_gradient(ops.abs(q_taken - target))


class DoubleTarget(nn.Cell):
    """The double-DQN n-step target ``return + discount * Q_target(s', argmax_a Q(s', a))``, without gradient.

    ``discount`` is the sample's ``gamma^m`` (0 after a termination). Computed outside the
    differentiated function, so the backward pass covers only ``Q(s, a)``.

    Args:
        q_net (nn.Cell): The online network.
        target_net (nn.Cell): The target network.

    Inputs:
        - **reward**, **discount** (Tensor) - float32 ``(B,)``.
        - **next_observation** (Tensor) - uint8 ``(B, stack, H, W)``.

    Outputs:
        Tensor, float32 ``(B,)``.
    """

    def __init__(self, q_net: nn.Cell, target_net: nn.Cell) -> None:
        super().__init__()
        self.q_net = q_net
        self.target_net = target_net

    def construct(self, reward, next_observation, discount):
        next_action = ops.argmax(self.q_net(next_observation), dim=1, keepdim=True).astype(ms.int32)
        next_value = ops.gather_elements(self.target_net(next_observation), 1, next_action).squeeze(1)
        return ops.stop_gradient(reward + discount * next_value)


class Learn(nn.Cell):
    """One learn step inside the graph: sample, targets, loss, Adam, priorities, target sync.

    The importance weights enter the loss divided by the batch's largest one, so the largest
    weight of every batch is 1.

    Args:
        buffer: A ``PrioritizedTransitionReplayBuffer`` (or a ``TransitionReplayBuffer``, sampled
            uniformly with weights of 1 and no priorities written).
        loss_net (WeightedLoss): The loss of the online network.
        target (DoubleTarget): The targets, holding both networks.
        optimizer (nn.Optimizer): Updates the online network.
        target_sync_period (int): Learn steps between copies into the target network.

    Inputs:
        - **beta** (Tensor) - float32 scalar: the importance-sampling exponent.

    Outputs:
        Tensor, float32 scalar: the loss before the update.
    """

    def __init__(self, buffer: nn.Cell, loss_net: WeightedLoss, target: DoubleTarget, optimizer: nn.Optimizer,
                 target_sync_period: int) -> None:
        super().__init__()
        self.buffer = buffer
        self.double_target = target
        self.prioritized = is_prioritized(buffer)
        self.batch_size = buffer.sample_size
        self.single_frames = buffer.stack_size == 1  # sampled without a stack axis, which the networks take
        self.loss_net = loss_net
        self.optimizer = optimizer
        self.grad = ms.value_and_grad(loss_net, None, optimizer.parameters, has_aux=True)
        self.sync = TargetSync(target.q_net, target.target_net, target_sync_period)

    @property
    def learn_steps(self) -> Parameter:
        """The learn steps taken, an int32 Parameter (counted by
        :class:`~mindspore_rl_buffer.apps.dqn.learner.TargetSync`)."""
        return self.sync.learn_steps

    def construct(self, beta):
        if self.prioritized:
            ids, weights, observation, action, reward, next_observation, discount = self.buffer.sample(
                beta, self.batch_size)
            # Scaled by the batch's largest weight, as Dopamine's and Acme's prioritized agents do: the
            # buffer's weights are relative to the smallest leaf of all, which a few near-zero TD errors
            # make tiny, and would shrink every update with it.
            weights = weights / weights.max()
        else:
            observation, action, reward, next_observation, discount = self.buffer.sample(self.batch_size)
            weights = ops.ones((self.batch_size,), ms.float32)
        if self.single_frames:
            observation, next_observation = observation.expand_dims(1), next_observation.expand_dims(1)
        target = self.double_target(reward, next_observation, discount)
        (loss, error), grads = self.grad(observation, action, target, weights)
        loss = ops.depend(loss, self.optimizer(grads))
        if self.prioritized:
            _ = self.buffer.update_priorities(ids, error)
        return self.sync(loss)


class Act(nn.Cell):
    """Epsilon-greedy action on the device from a frame stack it keeps.

    The stack (a ``uint8`` Parameter ``(1, stack_size, H, W)``) is updated first: filled with
    ``observation`` when ``row_starts`` (the row's observation begins an episode), then shifted
    by ``next_observation``, or filled with it when ``next_starts``.

    Args:
        q_net (nn.Cell): The online network.
        num_actions (int): Actions.
        stack_size (int): Frames per stack. Default: ``4``.
        frame_shape (tuple[int, int]): A frame's height and width. Default: ``(84, 84)``.

    Inputs:
        - **observation**, **next_observation** (Tensor) - uint8 ``(1, H, W)``.
        - **row_starts**, **next_starts** (Tensor) - bool scalars.
        - **epsilon** (Tensor) - float32 scalar.

    Outputs:
        Tensor, int32 ``(1,)``: the action to take on ``next_observation``.
    """

    def __init__(self, q_net: nn.Cell, num_actions: int, stack_size: int = 4,
                 frame_shape: tuple[int, int] = (84, 84)) -> None:
        super().__init__()
        self.q_net = q_net
        self.num_actions = int(num_actions)
        self.stack_size = int(stack_size)
        self.stack = Parameter(Tensor(ops.zeros((1, stack_size, *frame_shape), ms.uint8)), name="act_stack",
                               requires_grad=False)
        self.rng_key, self.rng_counter = draws.state("act_rng")

    def _filled(self, frame):
        return ops.tile(frame.expand_dims(1), (1, self.stack_size, 1, 1))

    def construct(self, observation, row_starts, next_observation, next_starts, epsilon):
        shape = self.stack.shape
        current = ops.select(ops.broadcast_to(row_starts, shape), self._filled(observation), self.stack)
        shifted = ops.concat((current[:, 1:], next_observation.expand_dims(1)), axis=1)
        stack = ops.select(ops.broadcast_to(next_starts, shape), self._filled(next_observation), shifted)
        ops.assign(self.stack, stack)
        greedy = ops.argmax(self.q_net(stack), dim=1).astype(ms.int32)
        explore = draws.uniform((1,), (self.rng_key, self.rng_counter)) < epsilon
        random = draws.integers((1,), self.num_actions, (self.rng_key, self.rng_counter))
        return ops.select(explore, random, greedy)


class TrainStep(nn.Cell):
    """One agent step: insert its row, ``learn_calls`` learn steps, the next action. One graph.

    Args:
        buffer: The replay buffer (``num_envs=1``).
        learn (Learn): The learn step (samples ``buffer``).
        act (Act): The policy.

    Inputs:
        - **observation** (Tensor) - uint8 ``(1, H, W)``: the row's observation.
        - **action** (Tensor) - int32 ``(1,)``; **reward** float32 ``(1,)``; **terminated**,
          **truncated** uint8 ``(1,)``: the row.
        - **row_starts**, **next_starts**, **epsilon**: as :class:`Act`, with **next_observation**.
        - **beta** (Tensor) - float32 scalar.
        - **learn_calls** (Tensor) - int32 scalar: learn steps to run (0 or 1).

    Outputs:
        Tuple ``(next_action, loss)``: int32 ``(1,)`` and the float32 sum of the learn steps' losses.
    """

    def __init__(self, buffer: nn.Cell, learn: Learn, act: Act) -> None:
        super().__init__()
        self.buffer = buffer
        self.learn = learn
        self.act = act

    def construct(self, observation, action, reward, terminated, truncated, row_starts, next_observation,
                  next_starts, epsilon, beta, learn_calls):
        _ = self.buffer.insert([observation, action, reward, terminated, truncated])
        loss = Tensor(0.0, ms.float32)
        called = Tensor(0, ms.int32)
        while called < learn_calls:
            loss = loss + self.learn(beta)
            called = called + 1
        next_action = self.act(observation, row_starts, next_observation, next_starts, epsilon)
        return next_action, loss
