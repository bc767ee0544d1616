"""The three ways to collect transitions, one class each, behind one small interface.

=====================================  ==========================  ==================================
collector                              environment                 buffer
=====================================  ==========================  ==================================
:class:`DeviceCollector`               MindSpore CartPole (graph)  device, inserted in the same graph
:class:`DeviceEnvHostBufferCollector`  MindSpore CartPole (graph)  numpy, on the host
:class:`GymCollector`                  gymnasium, on the host      either, by direct ``insert`` calls
=====================================  ==========================  ==================================

Each has ``collect()`` (one transition per environment into the buffer) and ``episodes()``
(the total return of the finished episodes and their number, both only growing).
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer
from mindspore_rl_buffer.apps.dqn.collect import ActStep, CollectStep
from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
from mindspore_rl_buffer.apps.dqn.policy import EpsilonGreedy


class Collector(Protocol):
    """What the training loop asks of a collector."""

    def collect(self) -> None:
        """Step every environment once and store the transitions."""

    def episodes(self) -> tuple[float, int]:
        """Total return of the finished episodes, and how many finished."""


class DeviceCollector:
    """MindSpore CartPole and the device buffer: one compiled graph per collect step."""

    def __init__(self, act: ActStep, buffer: ReplayBuffer | ShardedReplayBuffer) -> None:
        self.act = act
        self.step = CollectStep(act, buffer)
        # Reset op by op, once: a few dozen small kernels take milliseconds, where compiling them as a
        # graph of their own took about a fifth of a second.
        act.env.reset()

    def collect(self) -> None:
        self.step()

    def episodes(self) -> tuple[float, int]:
        return self.act.tracker.read()


class DeviceEnvHostBufferCollector:
    """MindSpore CartPole feeding a numpy buffer: the transitions come back to the host."""

    def __init__(self, act: ActStep, buffer: NumpyReplayBuffer) -> None:
        self.act = act
        self.buffer = buffer
        act.env.reset()  # op by op, as DeviceCollector's

    def collect(self) -> None:
        self.buffer.insert([x.asnumpy() for x in self.act()])

    def episodes(self) -> tuple[float, int]:
        return self.act.tracker.read()


class GymCollector:
    """gymnasium CartPole-v1 on the host; each step goes into the buffer by a direct call."""

    def __init__(self, policy: EpsilonGreedy, envs: list[Any],
                 buffer: ReplayBuffer | ShardedReplayBuffer | NumpyReplayBuffer) -> None:
        self.policy = policy
        self.envs = envs
        self.buffer = buffer
        self.observations = np.stack([env.reset()[0] for env in envs]).astype(np.float32)
        self.running = np.zeros(len(envs), np.float64)
        self.finished_return = 0.0
        self.finished_episodes = 0

    def collect(self) -> None:
        actions = self.policy(Tensor(self.observations)).asnumpy()
        next_states = np.empty_like(self.observations)
        terminated = np.zeros((len(self.envs), 1), np.float32)
        rewards = np.zeros((len(self.envs), 1), np.float32)
        states = self.observations.copy()
        for i, env in enumerate(self.envs):
            observation, reward, term, trunc, _ = env.step(int(actions[i]))
            next_states[i], rewards[i, 0], terminated[i, 0] = observation, reward, float(term)
            self.running[i] += reward
            if term or trunc:
                self.finished_return += self.running[i]
                self.finished_episodes += 1
                self.running[i] = 0.0
                observation = env.reset()[0]
            self.observations[i] = observation
        actions = actions.astype(np.int32).reshape(-1, 1)
        self.buffer.insert([states, actions, rewards, next_states, terminated])

    def episodes(self) -> tuple[float, int]:
        return self.finished_return, self.finished_episodes


def make_gym_envs(num_envs: int, seed: int) -> list[Any]:
    """``num_envs`` gymnasium CartPole-v1 environments, reset and seeded with ``seed + i``.

    Raises:
        ImportError: If gymnasium is not installed.
    """
    try:
        import gymnasium
    except ImportError as error:
        raise ImportError("The gymnasium environment needs gymnasium: pip install gymnasium "
                          "(or pip install 'mindspore_rl_buffer[test]').") from error
    envs = [gymnasium.make("CartPole-v1") for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
        env.action_space.seed(seed + i)
    return envs
