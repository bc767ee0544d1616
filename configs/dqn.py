"""DQN on CartPole: the algorithm config, in MindSpore RL's format.

``mindspore_rl_buffer.load_config('configs/dqn.py')`` reads ``algorithm_config``;
``create_buffer(config['replay_buffer'])`` builds the buffer it declares.
"""
import mindspore as ms

from mindspore_rl_buffer import ReplayBuffer

algorithm_config = {
    # state, action, reward, next state
    'replay_buffer': {'number': 1, 'type': ReplayBuffer, 'capacity': 100000,
                      'data_shape': [(4,), (1,), (1,), (4,)],
                      'data_type': [ms.float32, ms.int32, ms.float32, ms.float32],
                      'sample_size': 64},
}
