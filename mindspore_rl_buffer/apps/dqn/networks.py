"""The Q-network and the host-side copy of its weights into the target network."""
from __future__ import annotations

from collections.abc import Sequence

from mindspore import nn


class QNetwork(nn.Cell):
    """A multilayer perceptron from observations to one Q-value per action.

    Args:
        observation_size (int): Inputs.
        num_actions (int): Outputs.
        hidden_sizes (Sequence[int]): Widths of the ReLU hidden layers. Default: ``(128, 128)``.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, float32, ``(n, num_actions)``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork
        >>> q_net = QNetwork(4, 2, hidden_sizes=(8,))
        >>> q_net(ms.Tensor(np.zeros((3, 4), np.float32))).shape
        (3, 2)
    """

    def __init__(self, observation_size: int, num_actions: int, hidden_sizes: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        layers: list[nn.Cell] = []
        width = observation_size
        for hidden in hidden_sizes:
            layers += [nn.Dense(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Dense(width, num_actions))
        self.layers = nn.SequentialCell(layers)

    def construct(self, observation):
        return self.layers(observation)


def copy_weights(source: nn.Cell, target: nn.Cell) -> None:
    """Copy ``source``'s parameters into ``target``'s, in place (host side, before compiling).

    Examples:
        >>> import numpy as np
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
        >>> online, target = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
        >>> copy_weights(online, target)
        >>> all(np.array_equal(a.asnumpy(), b.asnumpy())
        ...     for a, b in zip(online.get_parameters(), target.get_parameters()))
        True
    """
    for src, dst in zip(source.get_parameters(), target.get_parameters()):
        dst.set_data(src.data.copy())
