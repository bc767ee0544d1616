"""DQN on CartPole-v1 with n-step returns: ``mindspore-rl-buffer train --config configs/dqn_nstep.py``.

``configs/dqn.py`` with one change: the ``replay_buffer`` entry is a
:class:`~mindspore_rl_buffer.TransitionReplayBuffer`, which stores each environment step
once, ``(observation, action, reward, terminated, truncated)``, in the rows of gymnasium's
next-step autoreset (the MindSpore CartPoles then run in that mode), and samples
``(observation, action, n-step return, observation n steps on, discount)``. The learner's
target is ``return + discount * Q_target(s_{t+m}, argmax Q(s_{t+m}))``: the discount is
``gamma^m``, or 0 if the pole fell within the ``m <= n_step`` steps. ``n_step: 1`` gives the
one-step target through the same buffer. Its ``num_envs`` and ``gamma`` must be
``environment.num_envs`` and ``learner.gamma`` (``train`` checks both up front).
"""
import copy

import mindspore as ms
from mindspore_rl_buffer.configs.dqn import algorithm_config as one_step

from mindspore_rl_buffer import TransitionReplayBuffer

algorithm_config = copy.deepcopy(one_step)
algorithm_config["replay_buffer"] = {
    "number": 1,
    "type": TransitionReplayBuffer,
    "capacity": 100000,  # rows: 12,500 steps of 8 environments
    # observation, action, reward, terminated, truncated: one environment step
    "data_shape": [(4,), (), (), (), ()],
    "data_type": [ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8],
    "sample_size": one_step["replay_buffer"]["sample_size"],
    "num_envs": one_step["environment"]["num_envs"],
    "n_step": 3,
    "gamma": one_step["learner"]["gamma"],
}
