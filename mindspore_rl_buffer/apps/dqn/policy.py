"""The policies: epsilon-greedy for collecting, greedy for evaluating; both compile into graphs."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS
from mindspore_rl_buffer.apps.dqn.draws import below, state, uniform
from mindspore_rl_buffer.apps.dqn.primitives import (
    ARGMAX,
    ASSIGN,
    CAST,
    CONCAT_COLUMNS,
    CONCAT_ROWS,
    MATMUL,
    MINIMUM,
    ONES,
    RELU,
    RESHAPE,
    SELECT,
    TRANSPOSE,
    UNSTACK_COLUMNS,
)


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
        - **uniforms** (Tensor) - float32, ``(n, 2)``, uniform in ``[0, 1)``: per row the draw
          that decides exploring and the one that picks the random action (a caller drawing
          for several Cells at once gives them); ``None`` draws them from the policy's own
          generator state (``rng_key``, ``rng_counter``). Default: ``None``.

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
        self.rng_key, self.rng_counter = state("policy_rng")

    def epsilon(self):
        """The current epsilon, a float32 scalar tensor."""
        fraction = MINIMUM(CAST(self.steps, ms.float32) / self.epsilon_decay_steps, 1.0)
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)

    def construct(self, observation, uniforms=None):
        n = observation.shape[0]
        greedy = ARGMAX(self.q_net(observation))
        if uniforms is None:
            uniforms = uniform((n, 2), (self.rng_key, self.rng_counter))
        coin, pick = UNSTACK_COLUMNS(uniforms)
        random_action = below(pick, NUM_ACTIONS)
        explore = coin < self.epsilon()
        ASSIGN(self.steps, self.steps + n)
        return SELECT(explore, random_action, greedy)


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
        return ARGMAX(self.q_net(observation))


class FoldedGreedy(nn.Cell):
    """The greedy action of a :class:`~mindspore_rl_buffer.apps.dqn.networks.QNetwork` in fewer
    kernels, for evaluation, where the weights stay fixed over many steps.

    :meth:`fold` builds, once, weight matrices with the biases folded in: the observation
    carries a column of ones and every hidden layer a unit fixed at 1, so each layer is one
    ``MatMul`` (and a ``ReLU``) instead of ``MatMul`` and ``BiasAdd``; with two actions the
    last layer gives ``Q1 - Q0``, whose sign is the action (ties go to action 0, as
    ``argmax`` breaks them). ``construct`` then costs 7 kernels a step where
    :class:`GreedyAction` over the same network costs 10. The actions are ``argmax``'s up to
    float rounding (the bias is summed inside the product); ``tests/apps/dqn`` checks them
    against it.

    Args:
        q_net (QNetwork): A network of ``Dense`` layers with ``ReLU`` between them.

    Inputs of ``construct``:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.
        - **weights** (tuple) - what :meth:`fold` returned for the current weights.

    Outputs:
        Tensor, int32, ``(n,)``.

    Raises:
        TypeError: If ``q_net`` is not such a sequence of layers.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork
        >>> from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy, GreedyAction
        >>> q_net, observation = QNetwork(4, 2, (8,)), ms.Tensor(np.random.rand(6, 4).astype(np.float32))
        >>> greedy = FoldedGreedy(q_net)
        >>> bool((greedy(observation, greedy.fold()) == GreedyAction(q_net)(observation)).all())
        True
    """

    def __init__(self, q_net: nn.Cell) -> None:
        super().__init__()
        layers = list(getattr(getattr(q_net, "layers", None), "cell_list", []))
        dense = layers[::2]
        plain = all(isinstance(d, nn.Dense) and d.has_bias and not d.activation_flag for d in dense)
        if not layers or len(layers) % 2 == 0 or not plain or not all(isinstance(r, nn.ReLU) for r in layers[1::2]):
            raise TypeError(f"For 'FoldedGreedy', 'q_net' must be a QNetwork (Dense layers with ReLU between "
                            f"them), but got {type(q_net).__name__}.")
        self.q_net = q_net  # not its layers: they would take this Cell's name path, and checkpoints their names
        self.num_layers = len(dense)
        self.two_actions = dense[-1].out_channels == 2
        # Each hidden layer's unit fixed at 1: a column of zeros below its inputs, then the one that carries
        # the bias row of the next layer through (one (inputs + 1, 1) column per hidden layer).
        self.units = tuple(Tensor(np.eye(d.in_channels + 1, 1, -d.in_channels, dtype=np.float32), d.weight.dtype)
                           for d in dense[:-1])
        self.split_actions = ops.Split(axis=1, output_num=2)

    def fold(self):
        """The folded weight matrices, a tuple with one ``(inputs + 1, outputs)`` matrix per layer."""
        # Primitives throughout: the evaluation graph compiles fold() once per launch, and each ops
        # wrapper (concat, ones, .T, a slice) is a function graph of its own to compile.
        folded = ()
        last = self.num_layers - 1
        for i in range(self.num_layers):
            layer = self.q_net.layers[2 * i]
            weight = CONCAT_ROWS((TRANSPOSE(layer.weight, (1, 0)), RESHAPE(layer.bias, (1, -1))))
            if i < last:  # one more unit, fixed at 1 after the ReLU: the next layer's bias input
                weight = CONCAT_COLUMNS((weight, self.units[i]))
            elif self.two_actions:
                q0, q1 = self.split_actions(weight)
                weight = q1 - q0
            folded = (*folded, weight)
        return folded

    def augment(self, observation):
        """``observation`` with the column of ones from which the first folded layer reads its bias."""
        return CONCAT_COLUMNS((observation, ONES((observation.shape[0], 1), observation.dtype)))

    def scores(self, augmented, weights):
        """The last layer's output for augmented observations: ``Q1 - Q0`` (``(n, 1)``) with two
        actions, else the Q-values."""
        h = augmented
        for weight in weights[:-1]:
            h = RELU(MATMUL(h, weight))
        return MATMUL(h, weights[-1])

    def construct(self, observation, weights):
        q = self.scores(self.augment(observation), weights)
        if self.two_actions:
            return CAST(q.reshape((-1,)) > 0, ms.int32)
        return ARGMAX(q)
