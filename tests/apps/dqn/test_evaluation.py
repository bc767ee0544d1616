"""Evaluation inside one graph (EvalLoop) against the same episodes stepped one launch at a time."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, jit, nn, ops

from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop, EvalStep, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.networks import QNetwork
from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy


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


@pytest.mark.parametrize("max_episode_steps", [30, 23])  # 5 steps a pass; a prime, 1 step a pass
def test_episodes_are_truncated_at_max_episode_steps(max_episode_steps):
    loop = EvalLoop(balancing_network(), CartPole(8, max_episode_steps=max_episode_steps))
    assert loop.unroll == (10 if max_episode_steps == 30 else 1)
    np.testing.assert_array_equal(loop().asnumpy(), float(max_episode_steps))


@pytest.mark.parametrize("unroll", [1, 2, 4])
def test_any_unroll_plays_the_same_episodes(unroll):
    q_net = QNetwork(4, 2, (16,))
    loop = EvalLoop(q_net, CartPole(32, max_episode_steps=48), unroll=unroll)
    returns = loop().asnumpy()
    np.testing.assert_array_equal(returns, play_per_step(q_net, loop.env.state.asnumpy(), 48))


@pytest.mark.parametrize("unroll", [0, 7, 2.5, True])
def test_an_unroll_that_does_not_divide_the_episode_is_refused(unroll):
    with pytest.raises(ValueError, match=r"'unroll' must be an int >= 1 dividing max_episode_steps \(30\)"):
        EvalLoop(QNetwork(4, 2, (8,)), CartPole(2, max_episode_steps=30), unroll=unroll)


def test_every_call_starts_from_fresh_states_and_agrees_with_the_per_step_evaluator():
    q_net = balancing_network()
    loop = EvalLoop(q_net, CartPole(16))
    first, start = loop().asnumpy(), loop.env.state.asnumpy().copy()
    second = loop().asnumpy()
    assert not np.array_equal(start, loop.env.state.asnumpy())
    np.testing.assert_array_equal(first, 500.0)
    np.testing.assert_array_equal(second, 500.0)
    np.testing.assert_array_equal(evaluate_mindspore(EvalStep(q_net, CartPole(16)), 500), 500.0)


@pytest.mark.parametrize("num_actions, hidden", [(2, (8,)), (2, (64, 64)), (2, (128, 128)), (3, (32, 16))])
def test_the_folded_greedy_action_is_argmax_of_the_q_network(num_actions, hidden):
    q_net = QNetwork(4, num_actions, hidden)
    observations = Tensor(np.random.default_rng(num_actions + len(hidden)).normal(0, 5.0, (512, 4)).astype(np.float32))
    greedy = FoldedGreedy(q_net)

    @jit
    def folded(observation):
        return greedy(observation, greedy.fold())

    expected = np.argmax(q_net(observations).asnumpy(), axis=1)
    np.testing.assert_array_equal(folded(observations).asnumpy(), expected)
    assert len(np.unique(expected)) > 1  # not one action everywhere


@pytest.mark.parametrize("network", [nn.Dense(4, 2), QNetwork(4, 2, (8,)).layers, nn.SequentialCell([nn.Dense(4, 2)]),
                                     nn.SequentialCell([nn.Dense(4, 8), nn.Tanh(), nn.Dense(8, 2)])])
def test_a_network_that_is_not_dense_relu_layers_is_refused(network):
    with pytest.raises(TypeError, match="For 'FoldedGreedy', 'q_net' must be a QNetwork"):
        FoldedGreedy(network)


def test_the_host_evaluator_folds_the_current_weights_at_every_restart():
    q_net, other = QNetwork(4, 2, (16,)), QNetwork(4, 2, (16,))
    step = EvalStep(q_net, CartPole(32, max_episode_steps=60))

    for network in (q_net, other):
        for target, value in zip(q_net.get_parameters(), network.get_parameters()):
            target.copy_(value.data.copy())  # in place, as the optimizer writes: the storage the graphs read
        start = step.restart().asnumpy()
        for _ in range(60):
            step()
        np.testing.assert_array_equal(step.returns.asnumpy(), play_per_step(network, start, 60))


def test_with_three_actions_only_action_1_pushes_right_as_in_cartpole_step():
    q_net = QNetwork(4, 3, (16,))
    loop = EvalLoop(q_net, CartPole(32, max_episode_steps=40))
    returns = loop().asnumpy()
    np.testing.assert_array_equal(returns, play_per_step(q_net, loop.env.state.asnumpy(), 40))
    assert len(np.unique(returns)) > 1
