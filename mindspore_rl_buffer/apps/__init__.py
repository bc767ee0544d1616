"""Applications of the replay buffer library, kept apart from its core.

An application reads the library through its public API (``mindspore_rl_buffer``'s top-level
names, :func:`~mindspore_rl_buffer.create_buffer`, :func:`~mindspore_rl_buffer.load_config`,
:func:`mindspore_rl_buffer.config.buffer_arguments`,
:func:`mindspore_rl_buffer.config_yaml.yaml_number_spelling`, :mod:`mindspore_rl_buffer.host_ring`),
never through raw config keys or private members; ``import mindspore_rl_buffer`` imports no
application.

- :mod:`mindspore_rl_buffer.apps.dqn`: the main job, DQN on CartPole-v1
  (``mindspore-rl-buffer train``).
"""
