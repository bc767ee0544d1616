"""One DQN learn step with the buffer sampled inside the compiled graph, against the same
step fed from a numpy buffer (sample on the host, convert to tensors, call the graph)."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from benchmarks.common import median_seconds
from mindspore_rl_buffer import ReplayBuffer
from mindspore_rl_buffer.dqn import DQNLoss, LearnStep, NumpyReplayBuffer, QNetwork, Update, copy_weights

SHAPES = [(4,), (1,), (1,), (4,), (1,)]  # state, action, reward, next state, terminated
TYPES = [ms.float32, ms.int32, ms.float32, ms.float32, ms.float32]


def _update(hidden: tuple[int, ...]) -> Update:
    q_net, target = QNetwork(4, 2, hidden), QNetwork(4, 2, hidden)
    copy_weights(q_net, target)
    return Update(DQNLoss(q_net, target, 0.99), nn.Adam(q_net.trainable_params(), 1e-3), 100)


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
    rounds, per_round = 4, max(1, repeats // 4)
    times: dict[str, list[float]] = {"in_graph": [], "numpy_fed": []}
    for _ in range(rounds):
        times["in_graph"].append(median_seconds(in_graph, per_round, sync=sync))
        times["numpy_fed"].append(median_seconds(numpy_fed, per_round, sync=sync))
    result = {key: float(np.median(value)) * 1e6 for key, value in times.items()}
    result["speedup"] = result["numpy_fed"] / result["in_graph"]
    return result
