"""A data-parallel learner over a ShardedReplayBuffer, on every rank of an msrun job.

    PATH=/path/to/venv/bin:$PATH msrun --worker_num=2 --local_worker_num=2 \\
        examples/data_parallel_learner.py [--sampling local|global] [--steps 300]

Each rank plays the actors of its own environment: a noisy linear target
``y = w . x + b`` whose inputs ``x`` are centred differently on every rank, so no single
shard covers the whole input space. Every training step, compiled into one graph, inserts
the rank's 16 new transitions into its shard (no communication), samples 64 transitions
(``--sampling local``: from the rank's own shard; ``global``: the same batch on every rank,
drawn over all shards), computes the gradients and averages them over the ranks with
``nn.DistributedGradReducer`` (an AllReduce), then takes an SGD step. The network starts
from the same seed on every rank and gets the same averaged gradients, so its weights stay
identical across ranks, as in any data-parallel job. Both ranks print the loss on the
batch they sampled, and the network's error on a held-out test set that spans every
rank's inputs.

Without ``msrun`` the same script runs on one process: a world of one rank, no reducer.
"""
from __future__ import annotations

import argparse

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from mindspore_rl_buffer import ShardedReplayBuffer

FEATURES = 4
TRUE_W = np.array([[1.5], [-2.0], [0.5], [1.0]], np.float32)
TRUE_B = 0.3


class TrainStep(nn.Cell):
    """Insert this rank's transitions, sample, and take one data-parallel SGD step: one graph."""

    def __init__(self, buffer: ShardedReplayBuffer, net: nn.Cell, learning_rate: float) -> None:
        super().__init__()
        self.buffer = buffer
        self.loss_net = nn.WithLossCell(net, nn.MSELoss())
        self.optimizer = nn.SGD(net.trainable_params(), learning_rate=learning_rate)
        self.weights = self.optimizer.parameters
        self.grad = ops.GradOperation(get_by_list=True)
        self.reduce = buffer.world_size > 1
        if self.reduce:
            self.reducer = nn.DistributedGradReducer(self.weights, mean=True, degree=buffer.world_size)

    def construct(self, x, y):
        _ = self.buffer.insert([x, y])
        x_batch, y_batch = self.buffer.sample()
        loss = self.loss_net(x_batch, y_batch)
        grads = self.grad(self.loss_net, self.weights)(x_batch, y_batch)
        if self.reduce:
            grads = self.reducer(grads)
        self.optimizer(grads)
        return loss


def actors(rank: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` transitions of rank ``rank``'s environment: inputs centred at ``2 * rank - 1``."""
    x = (rng.standard_normal((n, FEATURES)) + (2 * rank - 1)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + 0.1 * rng.standard_normal((n, 1))).astype(np.float32)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sampling", choices=["local", "global"], default="local")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE)
    buffer = ShardedReplayBuffer(64, 4096, [(FEATURES,), (1,)], [ms.float32, ms.float32],
                                 sampling=args.sampling, names=["x", "y"])
    rank, world_size = buffer.rank, buffer.world_size
    ms.set_seed(0)  # the same initial weights on every rank
    net = nn.Dense(FEATURES, 1)
    step = TrainStep(buffer, net, learning_rate=0.02)
    rng = np.random.default_rng(rank)
    test_x = np.concatenate([actors(r, 256, np.random.default_rng(1000 + r))[0] for r in range(max(world_size, 2))])
    test_y = test_x @ TRUE_W + TRUE_B
    for t in range(1, args.steps + 1):
        x, y = actors(rank, 16, rng)
        loss = step(Tensor(x), Tensor(y))
        if t == 1 or t % 50 == 0:
            test_error = float(np.mean((net(Tensor(test_x)).asnumpy() - test_y) ** 2))
            print(f"rank {rank}/{world_size} sampling={args.sampling} step {t:4d} batch loss {float(loss):.4f} "
                  f"test error {test_error:.4f} shard {int(buffer.local_size())} items", flush=True)
    checksum = float(sum(float(p.asnumpy().sum()) for p in net.trainable_params()))
    print(f"rank {rank} weights checksum {checksum:.6f}", flush=True)


if __name__ == "__main__":
    main()
