"""One DQN learn step with the buffer sampled inside the compiled graph, against the same
step fed from a numpy buffer (sample on the host, convert to tensors, call the graph)."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor

from benchmarks.common import in_rounds, ratio
from mindspore_rl_buffer import ReplayBuffer
from mindspore_rl_buffer.apps.dqn.learner import DQNLoss, LearnStep, Update
from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
from mindspore_rl_buffer.apps.dqn.optimizer import Adam

SHAPES = [(4,), (1,), (1,), (4,), (1,)]  # state, action, reward, next state, terminated
TYPES = [ms.float32, ms.int32, ms.float32, ms.float32, ms.float32]


def _update(hidden: tuple[int, ...]) -> Update:
    q_net, target = QNetwork(4, 2, hidden), QNetwork(4, 2, hidden)
    copy_weights(q_net, target)
    return Update(DQNLoss(q_net, target, 0.99), Adam(q_net.trainable_params(), 1e-3), 100)


def learn_step(capacity: int, repeats: int, sample_size: int = 64, hidden: tuple[int, ...] = (64, 64)) -> dict:
    """Median seconds per learn step, in-graph and numpy-fed, on the same prefilled data."""
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((capacity, 4)).astype(np.float32), rng.integers(0, 2, (capacity, 1), np.int32),
            np.ones((capacity, 1), np.float32), rng.standard_normal((capacity, 4)).astype(np.float32),
            (rng.random((capacity, 1)) < 0.05).astype(np.float32)]
    device = ReplayBuffer(sample_size, capacity, SHAPES, TYPES)
    device.insert(data)
    host = NumpyReplayBuffer(sample_size, capacity, SHAPES, TYPES, seed=0)
    host.insert(data)
    in_graph, update = LearnStep(device, _update(hidden)), _update(hidden)

    def numpy_fed():
        return update(*(Tensor(column) for column in host.sample()))

    def sync(loss):
        loss.asnumpy()

    # Alternate the two in rounds, so both see the same machine load.
    times = in_rounds({"in_graph": in_graph, "numpy_fed": numpy_fed}, repeats, rounds=8, sync=sync)
    result = {key: float(np.median(value)) * 1e6 for key, value in times.items()}
    result["speedup"] = ratio(times, "numpy_fed", "in_graph")
    result["speedup_per_round"] = [a / b for a, b in zip(times["numpy_fed"], times["in_graph"])]
    return result
