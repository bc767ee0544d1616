"""DQN on CartPole trained data-parallel: ``configs/dqn.py`` with a sharded buffer.

Run on 2 ranks (each rank collects from its own CartPoles into its own shard, samples it
locally inside its learn graph, and the gradients are averaged across ranks)::

    msrun --worker_num=2 --local_worker_num=2 --master_port=29500 --log_dir=logs --join=True \\
          mindspore_rl_buffer/__main__.py train --config configs/dqn_data_parallel.py --no-progress

Without msrun the same config trains on one process (a one-rank ShardedReplayBuffer is a
ReplayBuffer).
"""
import copy

from mindspore_rl_buffer.configs.dqn import algorithm_config as _single_process

algorithm_config = copy.deepcopy(_single_process)
algorithm_config["replay_buffer"].update(
    {"type": "ShardedReplayBuffer", "sampling": "local"})  # 100,000 rows split over the ranks
