"""DQN on CartPole-v1: the algorithm config read by ``mindspore-rl-buffer train``.

``algorithm_config['replay_buffer']`` is the core issue's entry with one extra column: DQN
needs to know whether ``next_state`` is terminal (then the target does not bootstrap), so
each transition is ``(state, action, reward, next_state, terminated)`` and the buffer has 5
columns. ``terminated`` is 1.0 only when the pole fell or the cart left the track; an episode
cut at 500 steps (truncation) stores 0.0 and still bootstraps.
"""
import mindspore as ms

from mindspore_rl_buffer import ReplayBuffer

algorithm_config = {
    "replay_buffer": {
        "number": 1,
        "type": ReplayBuffer,
        "capacity": 100000,
        # state, action, reward, next_state, terminated
        "data_shape": [(4,), (1,), (1,), (4,), (1,)],
        "data_type": [ms.float32, ms.int32, ms.float32, ms.float32, ms.float32],
        "sample_size": 128,  # with 2 learn steps per collect: the fastest held solve measured (docs/benchmarks.md)
    },
    "learner": {
        "gamma": 0.99,
        "learning_rate": 2e-3,  # with a sync every 50: the fastest held solve measured (docs/benchmarks.md)
        "double_dqn": True,  # the online network picks the next action, the target network values it
        "huber_delta": 1.0,  # Huber (smooth L1) TD loss
        "target_sync_period": 50,  # learn steps between hard copies into the target network
    },
    "policy": {
        "hidden_sizes": (128, 128),
        "epsilon_start": 1.0,
        "epsilon_end": 0.05,
        "epsilon_decay_steps": 10000,  # environment steps of linear decay
    },
    "environment": {
        "name": "CartPole-v1",
        "num_envs": 8,
        "max_episode_steps": 500,
    },
    "trainer": {
        "max_steps": 150000,  # environment-step budget
        "learning_starts": 1000,  # environment steps collected before the first learn step
        "learn_steps_per_collect": 2,  # after each collect of num_envs transitions: one update per 4 environment steps
        "eval_interval": 2500,  # environment steps between evaluations
        # First evaluation once epsilon has annealed: judge what DQN learned, not luck (with seed 0 the
        # barely trained greedy network balanced all 100 eval episodes at 2,500 steps).
        "eval_starts": 10000,
        "eval_episodes": 100,  # the greedy policy plays them in parallel; gymnasium defines solving over 100
        "solve_threshold": 475.0,  # CartPole-v1's reward threshold, for the mean over eval_episodes
        "solve_evaluations": 3,  # solved = threshold reached at this many consecutive evaluations (a held solve)
        "log_interval": 50,  # collect steps per launch of the fused loop and between progress-bar updates
        "seed": 0,
    },
}
