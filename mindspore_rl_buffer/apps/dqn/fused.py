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

The learn steps of one iteration are one :class:`~.learner.LearnStep` call per sample: one
call of all the steps for a ``TransitionReplayBuffer`` (one sample, 1.16x the environment
steps/s of one call per step with ``configs/dqn_nstep.py``), one call per step for the other
buffers. One call runs under a graph ``if``; several in an inner ``while`` loop over a graph
input. On a CPU an inner ``while`` costs a few times what an ``if`` costs per iteration of the
outer loop (``python -m benchmarks.dqn_iteration`` measures both), and Python ``for``
unrolling of the steps (one copy of the learn graph per step) made each step slower (0.95x
with ``configs/dqn.py``).
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.collect import CollectStep
from mindspore_rl_buffer.apps.dqn.learner import LearnStep


class TrainLoop(nn.Cell):
    """``iterations`` collect steps, each followed by ``learn_calls`` calls of the learn step: one graph.

    Both counts are graph inputs, so one compiled graph serves every launch, the warm-up
    before ``learning_starts`` (``learn_calls = 0``) included: a second graph for the warm-up
    cost about 1 s of compilation per run on this project's CPU.

    Args:
        collect (CollectStep): One step of every environment, inserted into the buffer.
        learn (LearnStep): One sample and its updates, inside the graph.
        single_call (bool): ``learn_calls`` is only ever 0 or 1 (the agent's ``learn_calls``
            with a ``TransitionReplayBuffer``): a graph ``if`` runs the call instead of the
            costlier ``while`` loop; any ``learn_calls`` above 0 then runs one call.
            Default: ``False``.

    Inputs:
        - **iterations** (Tensor) - int32 scalar: collect steps to run.
        - **learn_calls** (Tensor) - int32 scalar: learn-step calls after each collect step
          (:class:`~.loops.FusedLoop` passes the agent's ``learn_calls``); 0 only collects.

    Outputs:
        Tensor, float32 scalar: the sum of the losses of the updates run.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, collect: CollectStep, learn: LearnStep, single_call: bool = False) -> None:
        super().__init__()
        self.collect = collect
        self.learn = learn
        self.single_call = bool(single_call)

    def construct(self, iterations, learn_calls):
        done = Tensor(0, ms.int32)
        loss_sum = Tensor(0.0, ms.float32)
        while done < iterations:
            # The transitions are used (depended on), so no output of the collect step is dropped.
            loss_sum = ops.depend(loss_sum, self.collect())
            if self.single_call:
                if learn_calls > 0:
                    loss_sum = loss_sum + self.learn()
            else:
                called = Tensor(0, ms.int32)
                while called < learn_calls:
                    loss_sum = loss_sum + self.learn()
                    called = called + 1
            done = done + 1
        return loss_sum
