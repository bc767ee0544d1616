"""The fused training graph: many collect and learn steps per launch, in one compiled ``while`` loop.

:class:`TrainLoop` runs ``iterations`` times (a graph input, so one compiled graph serves
every launch length): a collect step (:class:`~.collect.CollectStep`: the epsilon-greedy
policy, one step of the MindSpore CartPoles, ``_ = self.buffer.insert(...)``), then
``learn_steps_per_collect`` learn steps (:class:`~.learner.LearnStep`: ``self.buffer.sample()``,
the loss, Adam, the periodic target sync). The epsilon schedule and the target sync count
their steps in Parameters, so nothing comes from the host; the host reads the loss sum and
the episode counters once per launch. A Python ``while`` over a tensor condition compiles to
a real loop whose body may write Parameters (MindSpore's ``ops.WhileLoop``, ``ForiLoop``
and ``Scan`` document such side effects as unsupported), and the buffer's insert and sample
behave inside it; ``tests/apps/dqn/test_fused.py`` checks the loop against the host loop's
bookkeeping and the transitions it stores against gymnasium.

The learn steps of one iteration run in an inner ``while`` loop: measured on this project's
CPU, Python ``for`` unrolling of the steps (one copy of the learn graph per step) made each
step slower, not faster.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.collect import CollectStep
from mindspore_rl_buffer.apps.dqn.learner import LearnStep


class TrainLoop(nn.Cell):
    """``iterations`` collect steps, each followed by ``learn_steps`` learn steps: one graph.

    Both counts are graph inputs, so one compiled graph serves every launch, the warm-up
    before ``learning_starts`` (``learn_steps = 0``) included: a second graph for the warm-up
    cost about 1 s of compilation per run on this project's CPU.

    Args:
        collect (CollectStep): One step of every environment, inserted into the buffer.
        learn (LearnStep): One learn step from a batch sampled inside the graph.
        learn_steps_per_collect (int): The learn steps of a learning launch, for
            :class:`~.loops.FusedLoop` to pass as ``learn_steps``.

    Inputs:
        - **iterations** (Tensor) - int32 scalar: collect steps to run.
        - **learn_steps** (Tensor) - int32 scalar: learn steps after each collect step; 0 only collects.

    Outputs:
        Tensor, float32 scalar: the sum of the losses of the learn steps run.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, collect: CollectStep, learn: LearnStep, learn_steps_per_collect: int) -> None:
        super().__init__()
        self.collect = collect
        self.learn = learn
        self.learn_steps_per_collect = int(learn_steps_per_collect)

    def construct(self, iterations, learn_steps):
        done = Tensor(0, ms.int32)
        loss_sum = Tensor(0.0, ms.float32)
        while done < iterations:
            # The transitions are used (depended on), so no output of the collect step is dropped.
            loss_sum = ops.depend(loss_sum, self.collect())
            learned = Tensor(0, ms.int32)
            while learned < learn_steps:
                loss_sum = loss_sum + self.learn()
                learned = learned + 1
            done = done + 1
        return loss_sum
