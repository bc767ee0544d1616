"""Columns from an environment's spaces, as MindSpore Reinforcement's sessions fill a buffer entry.

Its DQN session declares ``[obs_shape, (1,), (1,), obs_shape]`` with the spaces' dtypes
(state, action, reward, next state); its DDPG, TD3 and SAC sessions add a done column of
shape ``(1,)`` and the done space's dtype (bool). :func:`space_columns` does the same from a
gymnasium environment (or anything with ``observation_space`` and ``action_space``).
"""
from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer.specs import to_dtype

COLUMN_NAMES = ("state", "action", "reward", "next_state", "done")


def _space(op: str, env: Any, name: str) -> Any:
    space = getattr(env, name, None)
    if space is None:
        raise TypeError(f"For '{op}', 'env' must have an '{name}' (a gymnasium environment, say), but got "
                        f"{type(env).__name__}.")
    return space


def _shape_and_dtype(space: Any, discrete_shape: tuple[int, ...]) -> tuple[tuple[int, ...], Any]:
    """A space's column: a discrete space (``n``) is one int32 per item, as MindSpore RL stores actions."""
    dtype = getattr(space, "ms_dtype", None)  # MindSpore Reinforcement's own spaces
    if hasattr(space, "n"):
        return discrete_shape, dtype or ms.int32
    shape = tuple(int(dim) for dim in space.shape)
    return shape, dtype or to_dtype(np.dtype(space.dtype), "space dtype")


def space_columns(env: Any, done: bool = False, op: str = "create_buffer") -> tuple[list[Any], list[Any], list[str]]:
    """``(data_shape, data_type, names)`` of a transition of ``env``, as MindSpore RL's sessions build them.

    Columns: ``state`` (the observation space), ``action`` (``(1,)`` int32 for a discrete
    space, else its shape and dtype), ``reward`` (``(1,)`` float32), ``next_state``, and with
    ``done=True`` a ``done`` column of ``(1,)`` bool.

    Args:
        env: An environment with ``observation_space`` and ``action_space``.
        done (bool): Add the done column. Default: ``False``.

    Raises:
        TypeError: If ``env`` has no such spaces, or ``done`` is not a bool.

    Examples:
        >>> import gymnasium
        >>> shapes, types, names = space_columns(gymnasium.make('CartPole-v1'), done=True)
        >>> shapes, [str(t) for t in types], names
        ([(4,), (1,), (1,), (4,), (1,)], ['Float32', 'Int32', 'Float32', 'Float32', 'Bool'], \
['state', 'action', 'reward', 'next_state', 'done'])
    """
    if not isinstance(done, bool):
        raise _errors.type_error(op, "done", "a bool", done)
    observation = _shape_and_dtype(_space(op, env, "observation_space"), (1,))
    action = _shape_and_dtype(_space(op, env, "action_space"), (1,))
    columns = [observation, action, ((1,), ms.float32), observation] + ([((1,), ms.bool_)] if done else [])
    return [shape for shape, _ in columns], [dtype for _, dtype in columns], list(COLUMN_NAMES[:len(columns)])
