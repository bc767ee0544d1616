"""What the DQN app's tests share: the shipped config, a shrunk copy of it for short runs, gymnasium's
steps from given states, a buffer's contents, the Q-network in numpy, whether the target network
is the online one, and a stand-in for ``Update`` that records its batches."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium
import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops

from mindspore_rl_buffer import ReplayBuffer, load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "dqn.py"


def small_config(**trainer: Any) -> dict:
    """The shipped config, shrunk for a test run of a few hundred steps."""
    config = copy.deepcopy(load_config(CONFIG))
    config["replay_buffer"]["capacity"] = 256
    config["replay_buffer"]["sample_size"] = 64  # the tests' figures do not follow the shipped batch
    config["environment"]["num_envs"] = 4
    config["learner"]["target_sync_period"] = 10_000  # a fixed target: the loss is a regression
    config["trainer"].update(learning_starts=100, learn_steps_per_collect=4, eval_interval=10_000,
                             eval_episodes=2, log_interval=5, max_steps=600)
    config["trainer"].update(trainer)
    return config


def gym_reference(states: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gymnasium's CartPole-v1 stepped from each state: next states and terminal flags."""
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    next_states, terminals = [], []
    for state, action in zip(states, actions):
        env.state = state.astype(np.float64)
        env.steps_beyond_terminated = None
        next_state, _, terminated, _, _ = env.step(int(action))
        next_states.append(next_state)
        terminals.append(terminated)
    return np.stack(next_states), np.array(terminals, np.float32)


def q_values(q_net: nn.Cell, observation: np.ndarray) -> np.ndarray:
    """The Q-network in numpy (float64): Dense layers with ReLU between them."""
    parameters = [p.asnumpy().astype(np.float64) for p in q_net.get_parameters()]
    x = observation.astype(np.float64)
    for layer in range(0, len(parameters), 2):
        x = x @ parameters[layer].T + parameters[layer + 1]
        if layer + 2 < len(parameters):
            x = np.maximum(x, 0.0)
    return x


def same_networks(agent: Any) -> bool:
    """Whether the agent's target network holds the online network's weights, bit for bit."""
    pairs = zip(agent.q_net.get_parameters(), agent.target_net.get_parameters())
    return all(np.array_equal(online.asnumpy(), target.asnumpy()) for online, target in pairs)


def stored(buffer: ReplayBuffer) -> list[np.ndarray]:
    """Every stored item, oldest first, per column."""
    size = int(buffer.size().asnumpy())
    return [column.asnumpy() for column in buffer.get_item(ms.Tensor(np.arange(size, dtype=np.int32)))]


class RecordingUpdate(nn.Cell):
    """Stands in for ``Update``: keeps the batch of each call (``steps`` of them) and returns its reward sum."""

    def __init__(self, steps: int, batch: int) -> None:
        super().__init__()
        self.calls = Parameter(Tensor(0, ms.int32), name="calls", requires_grad=False)
        self.batches = ParameterTuple(Parameter(Tensor(np.zeros((steps, batch, *shape), np.float32)), name=name,
                                                requires_grad=False)
                                      for name, shape in (("observation", (4,)), ("action", (1,)), ("reward", (1,)),
                                                          ("next_observation", (4,)), ("discount", (1,))))

    def construct(self, observation, action, reward, next_observation, discount):
        call = self.calls.reshape((1,))
        for stored, column in zip(self.batches, (observation, action, reward, next_observation, discount)):
            ops.scatter_update(stored, call, column.astype(ms.float32).expand_dims(0))
        ops.assign(self.calls, self.calls + 1)
        return reward.sum()
