"""Evaluation inside one graph (EvalLoop) against the same episodes stepped one launch at a time."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, jit, ops

from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop, EvalStep, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.networks import QNetwork


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)


def balancing_network() -> QNetwork:
    """A Q-network whose greedy action is a linear controller that balances for 500 steps (see test_cartpole.py)."""
    q_net = QNetwork(4, 2, (2,))
    controller = np.array([0.05, 0.1, 1.0, 1.0], np.float32)
    values = [np.stack([controller, -controller]), np.zeros(2), np.array([[0, 0], [1, -1]]), np.zeros(2)]
    for parameter, value in zip(q_net.get_parameters(), values):
        parameter.set_data(Tensor(np.asarray(value, np.float32)))
    return q_net


def play_per_step(q_net: QNetwork, start: np.ndarray, max_episode_steps: int) -> np.ndarray:
    """The returns of greedy episodes from ``start``, one launch per step, bookkeeping in numpy."""

    @jit
    def step(state):
        return cartpole_step(state, ops.argmax(q_net(state), dim=1).astype(ms.int32))

    state, returns, alive = Tensor(start), np.zeros(len(start), np.float32), np.ones(len(start), bool)
    for _ in range(max_episode_steps):
        state, terminated = step(state)
        returns += alive
        alive &= ~terminated.asnumpy()
        if not alive.any():
            break
    return returns


@pytest.mark.parametrize("hidden", [(16,), (64, 64)])
def test_one_launch_plays_the_episodes_a_step_at_a_time_would(hidden):
    q_net = QNetwork(4, 2, hidden)
    loop = EvalLoop(q_net, CartPole(32, max_episode_steps=200))
    returns = loop().asnumpy()
    start = loop.env.state.asnumpy()  # the reset leaves the start states in the Parameter
    np.testing.assert_array_equal(returns, play_per_step(q_net, start, 200))
    assert returns.min() >= 1 and len(np.unique(returns)) > 1  # untrained: short, different episodes


def test_episodes_are_truncated_at_max_episode_steps():
    returns = EvalLoop(balancing_network(), CartPole(8, max_episode_steps=30))().asnumpy()
    np.testing.assert_array_equal(returns, 30.0)


def test_every_call_starts_from_fresh_states_and_agrees_with_the_per_step_evaluator():
    q_net = balancing_network()
    loop = EvalLoop(q_net, CartPole(16))
    first, start = loop().asnumpy(), loop.env.state.asnumpy().copy()
    second = loop().asnumpy()
    assert not np.array_equal(start, loop.env.state.asnumpy())
    np.testing.assert_array_equal(first, 500.0)
    np.testing.assert_array_equal(second, 500.0)
    np.testing.assert_array_equal(evaluate_mindspore(EvalStep(q_net, CartPole(16)), 500), 500.0)
