"""mindspore_rl_buffer: replay buffers that live on the device and compile into MindSpore graphs."""
import gc as _gc

# Importing MindSpore creates hundreds of thousands of Python objects, and Python's cyclic garbage
# collector walks all of them again at each full collection while the imports below run: about a tenth
# of the import time of a command such as `mindspore-rl-buffer train`. The collector is paused while
# this package imports, and left as it was found.
_COLLECTING = _gc.isenabled()
_gc.disable()
try:
    from mindspore_rl_buffer._graph import DIRECT_CALLS
    from mindspore_rl_buffer.checkpoint import load_checkpoint, save_checkpoint
    from mindspore_rl_buffer.compat import UniformReplayBuffer
    from mindspore_rl_buffer.config import create_buffer, register_buffer_type
    from mindspore_rl_buffer.config_files import load_config
    from mindspore_rl_buffer.prioritized_transition import PrioritizedTransitionReplayBuffer
    from mindspore_rl_buffer.priority_replay_buffer import PriorityReplayBuffer
    from mindspore_rl_buffer.py_uniform import PyUniformReplayBuffer
    from mindspore_rl_buffer.replay_buffer import ReplayBuffer
    from mindspore_rl_buffer.reservoir_replay_buffer import ReservoirReplayBuffer
    from mindspore_rl_buffer.sharded import ShardedReplayBuffer
    from mindspore_rl_buffer.specs import TensorSpec
    from mindspore_rl_buffer.tf_agents import BufferInfo
    from mindspore_rl_buffer.trajectory import TrajectoryReplayBuffer
    from mindspore_rl_buffer.transition import TransitionReplayBuffer
    from mindspore_rl_buffer.writer import BufferWriter, DroppedTransitionsWarning, TransitionWriter
finally:
    if _COLLECTING:
        _gc.enable()


#: The lock every direct call, save and load holds; hold it around your own graph's call when
#: another thread may save, load or call a buffer directly meanwhile (see the checkpoints guide).
lock = DIRECT_CALLS

register_buffer_type(ShardedReplayBuffer)
register_buffer_type(TransitionReplayBuffer)
register_buffer_type(PrioritizedTransitionReplayBuffer)

__version__ = "0.1.0"
__all__ = [
    "BufferInfo",
    "BufferWriter",
    "DroppedTransitionsWarning",
    "PrioritizedTransitionReplayBuffer",
    "PriorityReplayBuffer",
    "PyUniformReplayBuffer",
    "ReplayBuffer",
    "ReservoirReplayBuffer",
    "ShardedReplayBuffer",
    "TensorSpec",
    "TrajectoryReplayBuffer",
    "TransitionReplayBuffer",
    "TransitionWriter",
    "UniformReplayBuffer",
    "create_buffer",
    "load_checkpoint",
    "load_config",
    "lock",
    "register_buffer_type",
    "save_checkpoint",
]
