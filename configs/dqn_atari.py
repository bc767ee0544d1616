"""DQN on Atari Breakout: ``mindspore-rl-buffer train --config configs/dqn_atari.py``.

Needs the ``atari`` extra (``pip install 'mindspore_rl_buffer[atari]'``: ale-py, which ships
the ROMs, gymnasium and OpenCV). The agent: the Nature-DQN network with a dueling head, double
DQN, 3-step returns of 4-frame stacks from a prioritized replay buffer, importance weights in
a Huber loss, one update per 4 agent steps. The environment follows Dopamine's Atari 100k
configs (``DER.gin``): no sticky actions, a life lost ends the learning episode, at most 108,000
frames per game; gymnasium's ``AtariPreprocessing`` adds up to 30 no-op actions after a reset.
The learning rate, Adam's epsilon and the 1,600-step warm-up are DER's too. The
``environment`` section's ``game`` makes ``train`` run the Atari trainer
(:mod:`mindspore_rl_buffer.apps.atari`).
"""
import mindspore as ms

from mindspore_rl_buffer import PrioritizedTransitionReplayBuffer

algorithm_config = {
    "replay_buffer": {
        "number": 1,
        "type": PrioritizedTransitionReplayBuffer,  # or TransitionReplayBuffer without "alpha": uniform, weights 1
        "capacity": 100000,  # rows: every agent step of a 100,000-step run (Atari 100k) is kept
        # observation (one 84x84 grayscale frame), action, clipped reward, terminated, truncated
        "data_shape": [(84, 84), (), (), (), ()],
        "data_type": [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8],
        "sample_size": 32,
        "num_envs": 1,
        "stack_size": 4,
        "n_step": 3,
        "gamma": 0.99,
        "alpha": 0.5,  # priority exponent: Rainbow's (Hessel et al., 2018) and Dopamine's
    },
    "learner": {
        "gamma": 0.99,
        "learning_rate": 1e-4,  # Adam, as Dopamine's data-efficient agents
        "adam_epsilon": 1.5e-4,
        "huber_delta": 1.0,  # Huber loss, weighted by the importance weights
        "target_sync_period": 500,  # learn steps (2,000 agent steps) between copies into the target network
        "beta_start": 0.4,  # importance-sampling exponent, annealed linearly to beta_end over the run
        "beta_end": 1.0,
    },
    "policy": {
        "epsilon_start": 1.0,
        "epsilon_end": 0.01,
        "epsilon_decay_steps": 10000,  # agent steps of linear decay
    },
    "environment": {
        "game": "Breakout",
        "terminal_on_life_loss": True,
        "max_frames_per_episode": 108000,  # 27,000 agent steps at frame skip 4
        "repeat_action_probability": 0.0,
    },
    "trainer": {
        "max_steps": 100000,  # agent steps (400,000 frames)
        "learning_starts": 1600,  # agent steps collected before the first update
        "update_period": 4,  # agent steps per update
        "log_interval": 1000,  # agent steps between progress lines
        "seed": 0,
    },
}
