"""The app's Adam against mindspore.nn.Adam (which builds a deprecated primitive) and Adam's definition."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
from mindspore_rl_buffer.apps.dqn.optimizer import Adam


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)


class Step(nn.Cell):
    """One step of a squared-output loss on a fixed batch."""

    def __init__(self, net: nn.Cell, optimizer: nn.Optimizer) -> None:
        super().__init__()
        self.net, self.optimizer = net, optimizer
        self.grad = ops.GradOperation(get_by_list=True)

    def loss(self, x):
        return (self.net(x) ** 2).mean()

    def construct(self, x):
        return ops.depend(self.loss(x), self.optimizer(self.grad(self.loss, self.optimizer.parameters)(x)))


def test_steps_agree_bit_for_bit_with_nn_adam():
    ours, theirs = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
    copy_weights(ours, theirs)
    step_ours = Step(ours, Adam(ours.trainable_params(), learning_rate=1e-2))
    step_theirs = Step(theirs, nn.Adam(theirs.trainable_params(), learning_rate=1e-2))
    x = Tensor(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32))
    for _ in range(6):
        assert step_ours(x).asnumpy() == step_theirs(x).asnumpy()
    for a, b in zip(ours.get_parameters(), theirs.get_parameters()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_three_steps_follow_the_definition():
    """Kingma and Ba's update with bias correction, written out in numpy for a constant gradient."""
    weight = Parameter(Tensor(np.array([1.0, -2.0], np.float32)), name="weight")
    optimizer = Adam([weight], learning_rate=0.1, beta1=0.9, beta2=0.99, eps=1e-8)
    gradient = np.array([0.5, -3.0], np.float32)
    w, m, v = np.array([1.0, -2.0]), np.zeros(2), np.zeros(2)
    for t in range(1, 4):
        optimizer((Tensor(gradient),))
        m, v = 0.9 * m + 0.1 * gradient, 0.99 * v + 0.01 * gradient**2
        w -= 0.1 * np.sqrt(1 - 0.99**t) / (1 - 0.9**t) * m / (np.sqrt(v) + 1e-8)
        np.testing.assert_allclose(weight.asnumpy(), w, rtol=1e-5)
