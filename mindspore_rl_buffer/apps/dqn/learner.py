"""The learn graph: ``self.buffer.sample()``, the (Double) DQN Huber loss, Adam and the target sync.

:class:`Update` learns from a batch it is given (the numpy baseline feeds it from the host);
:class:`LearnStep` samples the batch from the device buffer inside the same graph. A
:class:`~mindspore_rl_buffer.TransitionReplayBuffer` samples n-step transitions whose fifth
column is the bootstrap discount itself (``gamma^m``, or 0 after a termination), which
:class:`DQNLoss` then uses as it is (``discounted=True``).
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer, TransitionReplayBuffer
from mindspore_rl_buffer.apps.dqn.primitives import ADD_N, ARGMAX, ASSIGN, EXPAND_DIMS, GATHER_D, MAP, STOP_GRADIENT


def huber_loss(prediction, target, delta: float, reduction: str = "mean"):
    """The Huber loss of ``prediction - target``, quadratic within ``delta`` and linear beyond.

    Huber with delta d is d times SmoothL1 with beta d: one ``SmoothL1Loss`` kernel forward and
    one backward, where ``abs``, ``minimum`` and the arithmetic written out took about 20 (a CPU
    launches each kernel at a cost, docs/platforms.md).

    Args:
        prediction (Tensor): float32.
        target (Tensor): float32, of the shape of ``prediction``.
        delta (float): Where the loss turns linear, > 0.
        reduction (str): ``'mean'``, ``'sum'`` or ``'none'`` (per element). Default: ``'mean'``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.learner import huber_loss
        >>> errors, zeros = ms.Tensor(np.array([0.5, 3.0], np.float32)), ms.Tensor(np.zeros(2, np.float32))
        >>> huber_loss(errors, zeros, 2.0, "none").asnumpy().tolist()  # 0.5 e**2 within 2; 2 (|e| - 1) beyond
        [0.125, 4.0]
    """
    return _huber_from_smooth_l1(ops.smooth_l1_loss(prediction, target, delta, reduction), delta)


def _huber_from_smooth_l1(loss, delta: float):
    """The Huber loss with delta d from the SmoothL1 loss with beta d: d times it."""
    return loss if delta == 1.0 else delta * loss


class DQNLoss(nn.Cell):
    """Mean Huber loss between ``Q(s, a)`` and the (Double) DQN target.

    Target: ``r + gamma * (1 - terminated) * Q_target(s', a')`` with ``a'`` the online
    network's argmax (Double DQN) or the target network's (DQN); no gradient flows into it.
    With ``discounted=True`` the fifth input is the discount itself (an n-step sample of a
    :class:`~mindspore_rl_buffer.TransitionReplayBuffer`: ``r`` is the n-step return, ``s'``
    the observation ``m`` steps on, the discount ``gamma^m`` or 0 after a termination), and
    the target is ``r + discount * Q_target(s', a')``: no further ``gamma``, no ``1 - terminated``.

    Args:
        q_net (nn.Cell): The online network.
        target_net (nn.Cell): The target network.
        gamma (float): Discount (unused with ``discounted=True``: the samples carry it).
        double_dqn (bool): Let the online network pick ``a'``. Default: ``True``.
        huber_delta (float): Where the Huber loss turns linear. Default: ``1.0``.
        discounted (bool): The fifth input is the bootstrap discount, not ``terminated``.
            Default: ``False``.

    Inputs:
        - **state**, **action**, **reward**, **next_state**, **terminated** - a batch of
          transitions with leading dimension ``b``: float32 ``(b, 4)``, int32 ``(b, 1)``,
          float32 ``(b, 1)``, float32 ``(b, 4)``, float32 ``(b, 1)`` (the discount with
          ``discounted=True``).

    Outputs:
        Tensor, float32 scalar.
    """

    def __init__(self, q_net: nn.Cell, target_net: nn.Cell, gamma: float, double_dqn: bool = True,
                 huber_delta: float = 1.0, discounted: bool = False) -> None:
        super().__init__()
        self.discounted = bool(discounted)
        self.q_net = q_net
        self.target_net = target_net
        self.gamma = float(gamma)
        self.double_dqn = bool(double_dqn)
        self.huber_delta = float(huber_delta)
        # huber_loss's kernel as a primitive instance: one node to compile, where the ops wrapper is a graph.
        self.smooth_l1 = ops.SmoothL1Loss(beta=self.huber_delta, reduction="mean")

    def construct(self, state, action, reward, next_state, terminated):
        q_taken = GATHER_D(self.q_net(state), 1, action)
        next_target = self.target_net(next_state)
        if self.double_dqn:
            next_action = EXPAND_DIMS(ARGMAX(self.q_net(next_state)), 1)
        else:
            next_action = EXPAND_DIMS(ARGMAX(next_target), 1)
        next_value = GATHER_D(next_target, 1, next_action)
        discount = terminated if self.discounted else self.gamma * (1.0 - terminated)
        target = STOP_GRADIENT(reward + discount * next_value)
        return _huber_from_smooth_l1(self.smooth_l1(q_taken, target), self.huber_delta)


class TargetSync(nn.Cell):
    """Count the learn steps; every ``period`` of them copy the online weights into the target network.

    The copy is a graph branch taken only then: a branch-free ``where`` on every target
    parameter cost 24 more kernels in every learn step (a copy, a select and an assign per
    parameter) and measured 4-6% fewer environment steps/s in the fused loop on this
    project's CPU. A Cell, not a function: MindSpore compiled a function given the
    ``ParameterTuple`` s through its JIT fallback.

    Args:
        online (nn.Cell): The online network.
        target (nn.Cell): The target network, of the same parameters' shapes.
        period (int): Learn steps between copies.

    Inputs:
        - **loss** (Tensor) - The learn step's loss: the step counts once it is computed.

    Outputs:
        Tensor, the loss.
    """

    def __init__(self, online: nn.Cell, target: nn.Cell, period: int) -> None:
        super().__init__()
        self.online = ParameterTuple(online.get_parameters())
        self.target = ParameterTuple(target.get_parameters())
        self.period = int(period)
        self.learn_steps = Parameter(Tensor(0, ms.int32), name="learn_steps", requires_grad=False)

    def construct(self, loss):
        steps = ops.depend(self.learn_steps + 1, loss)
        ASSIGN(self.learn_steps, steps)
        if steps % self.period == 0:
            _ = MAP(ASSIGN, self.target, self.online)
        return loss


class Update(nn.Cell):
    """One learn step from a given batch: loss, Adam update, periodic target sync (:class:`TargetSync`).

    Args:
        loss_net (DQNLoss): The loss, holding the online and target networks.
        optimizer (nn.Optimizer): Updates the online network.
        target_sync_period (int): Calls between copies into the target network.
        data_parallel_degree (int): Ranks whose gradients are averaged (a
            :class:`~mindspore_rl_buffer.ShardedReplayBuffer` over msrun ranks); 1 averages
            nothing. Default: ``1``.

    Inputs:
        The five batch columns of :class:`DQNLoss`.

    Outputs:
        Tensor, float32 scalar: the loss before the update.
    """

    def __init__(self, loss_net: DQNLoss, optimizer: nn.Optimizer, target_sync_period: int,
                 data_parallel_degree: int = 1) -> None:
        super().__init__()
        self.loss_net = loss_net
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        # The loss and its gradients from one forward pass (a separate loss call ran the networks twice).
        self.loss_and_grads = ops.value_and_grad(loss_net, None, self.weights)
        self.reduce = int(data_parallel_degree) > 1
        if self.reduce:
            self.reducer = nn.DistributedGradReducer(self.weights, mean=True, degree=int(data_parallel_degree))
        self.sync = TargetSync(loss_net.q_net, loss_net.target_net, target_sync_period)

    @property
    def learn_steps(self) -> Parameter:
        """The learn steps taken, an int32 Parameter (:class:`TargetSync` counts them)."""
        return self.sync.learn_steps

    def construct(self, state, action, reward, next_state, terminated):
        loss, grads = self.loss_and_grads(state, action, reward, next_state, terminated)
        if self.reduce:
            grads = self.reducer(grads)
        return self.sync(ops.depend(loss, self.optimizer(grads)))


class LearnStep(nn.Cell):
    """One sample inside the graph, and ``steps`` :class:`Update` s on it.

    Only a :class:`~mindspore_rl_buffer.TransitionReplayBuffer` takes a batch size: it is
    sampled once for several steps (``sample(steps * sample_size)``, split into ``steps``
    batches), the same draws as ``steps`` samples of ``sample_size`` (uniform, with
    replacement, from a buffer that does not change between them) at the cost of one. Its
    sample ``(observation, action, n-step return, next_observation, discount)`` has scalar
    columns of shape ``(b,)``; they are given a trailing axis, so :class:`Update` sees the
    five-column layout (its :class:`DQNLoss` must be built with ``discounted=True``). Other
    buffers take ``steps=1``: a collect step's learn steps are then that many calls.

    Args:
        buffer (Union[ReplayBuffer, ShardedReplayBuffer, TransitionReplayBuffer]): Sampled inside the graph.
        update (Update): Learns from each batch.
        steps (int): Updates per call, from one sample. Default: ``1``.

    Outputs:
        Tensor, float32 scalar: the sum of the updates' losses.

    Raises:
        ValueError: If ``steps`` is not an int >= 1, or is more than 1 for a buffer other than
            a TransitionReplayBuffer.
    """

    def __init__(self, buffer: ReplayBuffer | ShardedReplayBuffer | TransitionReplayBuffer, update: Update,
                 steps: int = 1) -> None:
        super().__init__()
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"For 'LearnStep', 'steps' must be an int >= 1, but got {steps!r}.")
        self.transitions = isinstance(buffer, TransitionReplayBuffer)
        if steps > 1 and not self.transitions:
            raise ValueError(f"For 'LearnStep', 'steps' must be 1 for a {type(buffer).__name__}, which samples "
                             f"its own sample_size: call the learn step once per update, but got {steps}.")
        self.buffer = buffer
        self.update = update
        self.steps = steps
        self.sample_size = buffer.sample_size
        self.split = ops.Split(axis=0, output_num=steps)

    def construct(self):
        if not self.transitions:
            return self.update(*self.buffer.sample())
        state, action, reward, next_state, discount = self.buffer.sample(self.steps * self.sample_size)
        # The scalar columns (b,) get the trailing axis of the five-column layout (b, 1); each column is cut
        # into `steps` batches by one Split kernel. Unpacked by name and primitives, not a loop over the
        # columns: each iteration of a loop over a tuple is a function graph of its own to compile.
        action, reward, discount = EXPAND_DIMS(action, 1), EXPAND_DIMS(reward, 1), EXPAND_DIMS(discount, 1)
        if self.steps == 1:
            return self.update(state, action, reward, next_state, discount)
        # One update per batch, in order (each reads the weights the one before wrote): ops.Map applies
        # the update to the batches as a Python loop over the steps would, without a function graph per
        # step and per tuple index for type inference to compile.
        losses = MAP(self.update, self.split(state), self.split(action), self.split(reward), self.split(next_state),
                     self.split(discount))
        return ADD_N(losses)


def learn_calls(buffer: object, learn_steps_per_collect: int) -> tuple[int, int]:
    """``(steps per LearnStep call, calls per collect step)`` for ``learn_steps_per_collect`` updates:
    one call of all of them for a TransitionReplayBuffer (one sample), else one call per update."""
    if isinstance(buffer, TransitionReplayBuffer):
        return learn_steps_per_collect, 1
    return 1, learn_steps_per_collect
