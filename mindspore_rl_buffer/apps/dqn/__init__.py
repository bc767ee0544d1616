"""DQN on CartPole-v1, the main job: an application of the replay buffer library."""
