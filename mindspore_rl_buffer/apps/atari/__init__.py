"""DQN on Atari games (the Arcade Learning Environment): ``mindspore-rl-buffer train --config configs/dqn_atari.py``.

An application of the library, beside :mod:`mindspore_rl_buffer.apps.dqn`; the library never
imports it. The agent is the Nature-DQN network with a dueling head, double DQN on 3-step
returns of 4-frame stacks from a
:class:`~mindspore_rl_buffer.PrioritizedTransitionReplayBuffer`, with importance weights in a
Huber loss and the absolute TD errors written back as priorities.

- :mod:`.env`: the game through gymnasium's ``AtariPreprocessing``, as the buffer's rows.
- :mod:`.networks`: the Q-network; convolutions as unfold + matmul on CPU, ``nn.Conv2d`` elsewhere.
- :mod:`.graph`: the training graph, one launch per agent step.
- :mod:`.trainer`: the host loop, the random baseline, the run's files.
- :mod:`.cli`: what ``train`` does with an Atari config.
"""
