"""The Examples in the docstrings run, and print what they say."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["mindspore_rl_buffer.specs", "mindspore_rl_buffer.config", "mindspore_rl_buffer.replay_buffer",
           "mindspore_rl_buffer.ops.ring", "mindspore_rl_buffer.trajectory", "mindspore_rl_buffer.py_uniform",
           "mindspore_rl_buffer.apps.dqn.cartpole", "mindspore_rl_buffer.sharded", "mindspore_rl_buffer.ops.sharded",
           "mindspore_rl_buffer.priority_replay_buffer", "mindspore_rl_buffer.reservoir_replay_buffer",
           "mindspore_rl_buffer.ops.priority", "mindspore_rl_buffer.ops.reservoir", "mindspore_rl_buffer.ops.dedupe",
           "mindspore_rl_buffer.writer", "mindspore_rl_buffer.apps.dqn.config", "mindspore_rl_buffer.apps.dqn.networks",
           "mindspore_rl_buffer.apps.dqn.numpy_buffer"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
