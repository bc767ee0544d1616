"""mindspore_rl_buffer: replay buffers that live on the device and compile into MindSpore graphs."""
from mindspore_rl_buffer.config import create_buffer, load_config
from mindspore_rl_buffer.priority_replay_buffer import PriorityReplayBuffer
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.reservoir_replay_buffer import ReservoirReplayBuffer
from mindspore_rl_buffer.specs import TensorSpec

__version__ = "0.1.0"
__all__ = [
    "PriorityReplayBuffer",
    "ReplayBuffer",
    "ReservoirReplayBuffer",
    "TensorSpec",
    "create_buffer",
    "load_config",
]
