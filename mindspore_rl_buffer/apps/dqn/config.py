"""The DQN trainer's config checks: its sections, the environment, the buffer's columns."""
from __future__ import annotations

from typing import Any

from mindspore_rl_buffer.apps.dqn.cartpole import OBSERVATION_SIZE

SECTIONS = ("replay_buffer", "learner", "policy", "environment", "trainer")


def check_config(config: dict[str, Any]) -> None:
    """Check what the DQN trainer relies on: its sections, the environment and the buffer's columns.

    Raises:
        ValueError: Naming the first missing section, an environment other than
            CartPole-v1, or buffer columns other than (state, action, reward, next_state,
            terminated).
    """
    for section in SECTIONS:
        if section not in config:
            raise ValueError(f"For 'train', the algorithm config must have a '{section}' entry, "
                             f"but it has {sorted(config)}.")
    name = config["environment"].get("name", "CartPole-v1")
    if name != "CartPole-v1":
        raise ValueError(f"For 'train', 'environment.name' must be 'CartPole-v1' (the only environment "
                         f"implemented), but got {name!r}.")
    shapes = [tuple(s) for s in config["replay_buffer"]["data_shape"]]
    expected = [(OBSERVATION_SIZE,), (1,), (1,), (OBSERVATION_SIZE,), (1,)]
    if shapes != expected:
        raise ValueError(f"For 'train', the replay buffer's 'data_shape' must be {expected} (state, action, "
                         f"reward, next_state, terminated), but got {shapes}.")
