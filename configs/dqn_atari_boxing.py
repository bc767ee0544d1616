"""DQN on Atari Boxing: ``mindspore-rl-buffer train --config configs/dqn_atari_boxing.py``.

``configs/dqn_atari.py`` with one change: the ``environment`` section's ``game`` is Boxing
(18 actions in its minimal set; the network's output follows the game).
"""
import copy

from mindspore_rl_buffer.configs.dqn_atari import algorithm_config as breakout

algorithm_config = copy.deepcopy(breakout)
algorithm_config["environment"]["game"] = "Boxing"
