"""The Atari training graph's parts against numpy: the frame stack and action, the targets, the weighted loss;
and the whole step on a small prioritized buffer."""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from mindspore_rl_buffer.apps.atari.graph import Act, DoubleTarget, Learn, TrainStep, WeightedLoss, is_prioritized

FRAME = (3, 2)


class PixelQ(nn.Cell):
    """A Q-network without weights: the action's value is one pixel of the newest frame."""

    def construct(self, stack):
        newest = stack[:, -1].astype(ms.float32).reshape((stack.shape[0], -1))
        return newest[:, :4]


class LinearQ(nn.Cell):
    """A linear Q-network on flattened stacks."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.dense = nn.Dense(2 * 3 * 2, 4, weight_init=Tensor(np.random.default_rng(seed).normal(
            size=(4, 12)).astype(np.float32)))

    def construct(self, stack):
        return self.dense(stack.astype(ms.float32).reshape((stack.shape[0], -1)))


def frame(value: int) -> np.ndarray:
    return np.full((1, *FRAME), value, np.uint8)


def test_act_fills_its_stack_at_an_episode_start_and_shifts_it_otherwise():
    act = Act(PixelQ(), 4, stack_size=3, frame_shape=FRAME)
    yes, no, greedy = Tensor(True), Tensor(False), Tensor(0.0, ms.float32)
    act(Tensor(frame(1)), yes, Tensor(frame(2)), no, greedy)
    np.testing.assert_array_equal(act.stack.asnumpy()[0, :, 0, 0], [1, 1, 2])
    act(Tensor(frame(2)), no, Tensor(frame(3)), no, greedy)
    np.testing.assert_array_equal(act.stack.asnumpy()[0, :, 0, 0], [1, 2, 3])
    act(Tensor(frame(3)), no, Tensor(frame(9)), yes, greedy)  # the next observation starts an episode
    np.testing.assert_array_equal(act.stack.asnumpy()[0, :, 0, 0], [9, 9, 9])
    pixels = np.array([[[5, 1], [7, 0], [0, 0]]], np.uint8)  # the newest frame's first 4 pixels: 5, 1, 7, 0
    action = act(Tensor(frame(9)), no, Tensor(pixels), no, greedy)
    assert action.shape == (1,) and action.dtype == ms.int32 and int(action[0]) == 2  # greedy: argmax
    drawn = {int(act(Tensor(pixels), no, Tensor(pixels), no, Tensor(1.0, ms.float32))[0]) for _ in range(60)}
    assert drawn == {0, 1, 2, 3}  # epsilon 1: uniform; each action missed in 60 draws with p < 4 * 0.75**60


def test_the_targets_are_double_dqn_n_step_targets():
    q_net, target_net = LinearQ(0), LinearQ(1)
    rng = np.random.default_rng(2)
    next_obs = rng.integers(0, 256, (5, 2, *FRAME), dtype=np.uint8)
    reward, discount = rng.normal(size=5).astype(np.float32), np.array([0.9, 0.0, 0.81, 0.9, 1.0], np.float32)
    target = DoubleTarget(q_net, target_net)(Tensor(reward), Tensor(next_obs), Tensor(discount)).asnumpy()
    online, slow = q_net(Tensor(next_obs)).asnumpy(), target_net(Tensor(next_obs)).asnumpy()
    expected = reward + discount * slow[np.arange(5), online.argmax(axis=1)]
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-4)


def test_the_loss_is_the_importance_weighted_mean_huber_loss():
    q_net = LinearQ(3)
    loss_net = WeightedLoss(q_net, huber_delta=1.0)
    rng = np.random.default_rng(4)
    obs = rng.integers(0, 256, (6, 2, *FRAME), dtype=np.uint8)
    action = rng.integers(0, 4, 6).astype(np.int32)
    q = q_net(Tensor(obs)).asnumpy()[np.arange(6), action]
    target = (q + np.array([0.5, -0.5, 2.0, -3.0, 0.0, 1.0])).astype(np.float32)
    weights = rng.uniform(0.1, 1.0, 6).astype(np.float32)
    loss, error = loss_net(Tensor(obs), Tensor(action), Tensor(target), Tensor(weights))
    err = np.abs(q - target)
    huber = np.where(err <= 1.0, 0.5 * err ** 2, err - 0.5)
    np.testing.assert_allclose(error.asnumpy(), err, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(loss), (weights * huber).mean(), rtol=1e-5)


def test_a_train_step_inserts_learns_writes_priorities_and_acts():
    from mindspore_rl_buffer import PrioritizedTransitionReplayBuffer

    buffer = PrioritizedTransitionReplayBuffer(4, 64, [FRAME, (), (), (), ()],
                                               [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8],
                                               alpha=0.5, stack_size=2, n_step=3, gamma=0.9)
    assert is_prioritized(buffer)
    q_net, target_net = LinearQ(5), LinearQ(6)
    optimizer = nn.Adam(q_net.trainable_params(), learning_rate=1e-2)
    learn = Learn(buffer, WeightedLoss(q_net), DoubleTarget(q_net, target_net), optimizer, target_sync_period=3)
    step = TrainStep(buffer, learn, Act(q_net, 4, stack_size=2, frame_shape=FRAME))
    no, one, zero = Tensor(False), Tensor(1, ms.int32), Tensor(0, ms.int32)
    losses = []
    for t in range(30):
        learns = t >= 10
        action, loss = step(Tensor(frame(t)), Tensor(np.array([t % 4], np.int32)), Tensor(np.ones(1, np.float32)),
                            Tensor(np.zeros(1, np.uint8)), Tensor(np.zeros(1, np.uint8)), Tensor(t == 0),
                            Tensor(frame(t + 1)), no, Tensor(0.0, ms.float32), Tensor(0.5, ms.float32),
                            one if learns else zero)
        assert 0 <= int(action[0]) < 4
        losses.append(float(loss))
    assert int(buffer.size()) == 30
    assert losses[:10] == [0.0] * 10 and all(value > 0 for value in losses[10:])
    assert int(learn.learn_steps) == 20
    assert float(buffer.max_priority) != 1.0  # |TD error|s were written back
    for online, target in zip(q_net.get_parameters(), target_net.get_parameters()):  # synced at learn step 18
        assert not np.array_equal(online.asnumpy(), target.asnumpy())  # two more updates since
    np.testing.assert_array_equal(step.act.stack.asnumpy()[0, :, 0, 0], [29, 30])


class NewestFrameQ(nn.Cell):
    """A linear Q-network on the newest frame of ``(B, stack, *FRAME)`` stacks: it needs the stack axis."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Dense(3 * 2, 4, weight_init=Tensor(np.random.default_rng(0).normal(size=(4, 6))
                                                           .astype(np.float32)))

    def construct(self, stack):
        return self.dense(stack[:, -1].astype(ms.float32).reshape((stack.shape[0], -1)))


def test_learn_gives_single_frames_the_stack_axis_the_networks_take():
    # A buffer of stack_size 1 samples (B, *frame) without a stack axis: the networks' convolutions failed.
    from mindspore_rl_buffer import TransitionReplayBuffer

    buffer = TransitionReplayBuffer(4, 16, [FRAME, (), (), (), ()],
                                    [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8], stack_size=1, gamma=0.9)
    for t in range(6):
        buffer.insert([frame(t), np.array([t % 4], np.int32), np.ones(1, np.float32), np.zeros(1, np.uint8),
                       np.zeros(1, np.uint8)])
    q_net, target_net = NewestFrameQ(), NewestFrameQ()
    optimizer = nn.Adam(q_net.trainable_params(), learning_rate=1e-2)
    learn = Learn(buffer, WeightedLoss(q_net), DoubleTarget(q_net, target_net), optimizer, target_sync_period=3)
    before = q_net.dense.weight.asnumpy().copy()
    assert float(learn(Tensor(0.5, ms.float32))) > 0
    assert not np.array_equal(q_net.dense.weight.asnumpy(), before)
