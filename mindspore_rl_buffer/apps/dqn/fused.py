"""The fused training graph: many collect and learn steps per launch, in one compiled ``while`` loop.

:class:`TrainLoop` runs ``iterations`` times (a graph input, so one compiled graph serves
every launch length): a collect step (:class:`~.collect.CollectStep`: the epsilon-greedy
policy, one step of the MindSpore CartPoles, ``_ = self.buffer.insert(...)``), then
``learn_steps_per_collect`` learn steps (:class:`~.learner.LearnStep`: ``self.buffer.sample()``,
the loss, Adam, the periodic target sync; a ``TransitionReplayBuffer`` is sampled once for
all of them). The epsilon schedule and the target sync count
their steps in Parameters, so nothing comes from the host; the host reads the loss sum and
the episode counters once per launch. A Python ``while`` over a tensor condition compiles to
a real loop whose body may write Parameters (MindSpore's ``ops.WhileLoop``, ``ForiLoop``
and ``Scan`` document such side effects as unsupported), and the buffer's insert and sample
behave inside it; ``tests/apps/dqn/test_fused.py`` checks the loop against the host loop's
bookkeeping and the transitions it stores against gymnasium.

The learn steps of one iteration are one :class:`~.learner.LearnStep` call, in a branch
taken when the launch learns. (Until 2026-11-26 they ran in an inner ``while`` loop over a
graph input; one sample of a ``TransitionReplayBuffer`` for all the steps of an iteration
needs them in one Cell, and measured 10% more environment steps/s with ``configs/dqn_nstep.py``.)
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.collect import CollectStep
from mindspore_rl_buffer.apps.dqn.learner import LearnStep


class TrainLoop(nn.Cell):
    """``iterations`` collect steps, each followed by its learn steps if ``learn``: one graph.

    ``learn`` is a graph input, so one compiled graph serves every launch, the warm-up before
    ``learning_starts`` (``learn = 0``) included: a second graph for the warm-up cost about
    1 s of compilation per run on this project's CPU.

    Args:
        collect (CollectStep): One step of every environment, inserted into the buffer.
        learn (LearnStep): The learn steps that follow a collect step, from batches sampled
            inside the graph.

    Inputs:
        - **iterations** (Tensor) - int32 scalar: collect steps to run.
        - **learn** (Tensor) - int32 scalar: 1 runs ``learn`` after each collect step; 0 only collects.

    Outputs:
        Tensor, float32 scalar: the sum of the losses of the learn steps run.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, collect: CollectStep, learn: LearnStep) -> None:
        super().__init__()
        self.collect = collect
        self.learn = learn

    def construct(self, iterations, learn):
        done = Tensor(0, ms.int32)
        loss_sum = Tensor(0.0, ms.float32)
        while done < iterations:
            # The transitions are used (depended on), so no output of the collect step is dropped.
            loss_sum = ops.depend(loss_sum, self.collect())
            if learn > 0:
                loss_sum = loss_sum + self.learn()
            done = done + 1
        return loss_sum
