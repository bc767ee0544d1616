"""The DQN trainer's config checks: the sections it reads, the environment, the buffer's columns.

The ``replay_buffer`` entry is read only through the library's config loader,
:func:`mindspore_rl_buffer.config.buffer_arguments`, never through its raw keys, so every
form the loader accepts works here: flat or nested under ``params``, ``type`` a class or its
name, dtypes MindSpore dtypes or their names.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mindspore as ms

from mindspore_rl_buffer import PriorityReplayBuffer
from mindspore_rl_buffer.apps.dqn.cartpole import OBSERVATION_SIZE
from mindspore_rl_buffer.config import buffer_arguments

SECTIONS = ("replay_buffer", "learner", "policy", "environment", "trainer")
ENVIRONMENT = "CartPole-v1"
# One transition: (state, action, reward, next_state, terminated).
COLUMNS = ("state", "action", "reward", "next_state", "terminated")
COLUMN_SHAPES = ((OBSERVATION_SIZE,), (1,), (1,), (OBSERVATION_SIZE,), (1,))
COLUMN_TYPES = (ms.float32, ms.int32, ms.float32, ms.float32, ms.float32)


@dataclass(frozen=True)
class BufferEntry:
    """What the trainer takes from a checked ``replay_buffer`` entry.

    Args:
        buffer_type (type): The buffer class the entry names.
        capacity (int): Items the buffer holds.
        sample_size (int): Items per sample.
    """

    buffer_type: type
    capacity: int
    sample_size: int


def _names(types: Any) -> list[str]:
    return [str(dtype).lower() for dtype in types]


def check_config(config: Mapping[str, Any]) -> BufferEntry:
    """Check what the DQN trainer relies on: its sections, the environment and the buffer's columns.

    Args:
        config (dict): The ``algorithm_config`` (see ``configs/dqn.py``); it is not changed.

    Returns:
        BufferEntry, the replay buffer entry as the trainer uses it.

    Raises:
        TypeError: If the config or one of its sections is not a dict, or the buffer entry
            has a value of the wrong type (as :func:`~mindspore_rl_buffer.config.buffer_arguments`).
        ValueError: Naming the first missing section, an environment other than
            CartPole-v1, a buffer entry the library's loader refuses, ``number`` other than 1,
            a ``PriorityReplayBuffer`` (its ``sample`` returns weights and slots too), or
            buffer columns other than (state, action, reward, next_state, terminated).

    Examples:
        >>> import copy
        >>> from mindspore_rl_buffer.apps.dqn.config import check_config
        >>> from mindspore_rl_buffer.configs.dqn import algorithm_config
        >>> config = copy.deepcopy(algorithm_config)
        >>> entry = check_config(config)
        >>> entry.buffer_type.__name__, entry.capacity, entry.sample_size
        ('ReplayBuffer', 100000, 64)
        >>> config['replay_buffer'] = {'number': 1, 'type': 'ReplayBuffer', 'params': {
        ...     'capacity': 256, 'sample_size': 32, 'data_shape': [(4,), (1,), (1,), (4,), (1,)],
        ...     'data_type': ['float32', 'int32', 'float32', 'float32', 'float32']}}
        >>> check_config(config).capacity
        256
        >>> config['environment'] = {'name': 'Pendulum-v1', 'num_envs': 8}
        >>> check_config(config)
        Traceback (most recent call last):
        ...
        ValueError: For 'train', the 'environment.name' must be 'CartPole-v1' ..., but got 'Pendulum-v1'.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"For 'train', the 'algorithm_config' must be a dict, but got {type(config).__name__}.")
    for section in SECTIONS:
        if section not in config:
            raise ValueError(f"For 'train', the 'algorithm_config' must have a '{section}' entry, "
                             f"but got the entries {sorted(config)}.")
        if not isinstance(config[section], Mapping):
            raise TypeError(f"For 'train', the '{section}' entry must be a dict, "
                            f"but got {type(config[section]).__name__}.")
    name = config["environment"].get("name", ENVIRONMENT)
    if name != ENVIRONMENT:
        raise ValueError(f"For 'train', the 'environment.name' must be '{ENVIRONMENT}' (the only environment "
                         f"implemented), but got {name!r}.")
    buffer_type, number, arguments = buffer_arguments(config["replay_buffer"])
    if number != 1:
        raise ValueError(f"For 'train', the replay buffer's 'number' must be 1, but got {number}.")
    if issubclass(buffer_type, PriorityReplayBuffer):
        raise ValueError(f"For 'train', the replay buffer's 'type' must be a buffer whose sample() returns "
                         f"the columns, such as 'ReplayBuffer' or 'ShardedReplayBuffer', but got "
                         f"'{buffer_type.__name__}'.")
    shapes = [tuple(shape) for shape in arguments["data_shape"]]
    if shapes != list(COLUMN_SHAPES):
        raise ValueError(f"For 'train', the replay buffer's 'data_shape' must be {list(COLUMN_SHAPES)} "
                         f"({', '.join(COLUMNS)}), but got {shapes}.")
    if list(arguments["data_type"]) != list(COLUMN_TYPES):
        raise ValueError(f"For 'train', the replay buffer's 'data_type' must be {_names(COLUMN_TYPES)} "
                         f"({', '.join(COLUMNS)}), but got {_names(arguments['data_type'])}.")
    return BufferEntry(buffer_type, arguments["capacity"], arguments["sample_size"])
