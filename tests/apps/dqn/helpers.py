"""What the DQN app's tests share: the shipped config and a shrunk copy of it for short runs."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mindspore_rl_buffer import load_config

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "dqn.py"


def small_config(**trainer: Any) -> dict:
    """The shipped config, shrunk for a test run of a few hundred steps."""
    config = copy.deepcopy(load_config(CONFIG))
    config["replay_buffer"]["capacity"] = 256
    config["environment"]["num_envs"] = 4
    config["learner"]["target_sync_period"] = 10_000  # a fixed target: the loss is a regression
    config["trainer"].update(learning_starts=100, learn_steps_per_collect=4, eval_interval=10_000,
                             eval_episodes=2, log_interval=5, max_steps=600)
    config["trainer"].update(trainer)
    return config
