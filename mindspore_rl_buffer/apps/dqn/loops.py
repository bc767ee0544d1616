"""The two ways to run the training loop's chunks (see :mod:`.schedule`): fused and host.

===================  =================================================================================
loop                 what one chunk of ``n`` iterations costs
===================  =================================================================================
:class:`FusedLoop`   one launch of :class:`~.fused.TrainLoop` (``n`` collect steps, each followed by its
                     learn steps, in one graph); an evaluation is one launch of
                     :class:`~.evaluation.EvalLoop`. The default.
:class:`HostLoop`    ``n`` launches of the collect graph and ``n * learn_steps_per_collect`` of the learn
                     graph (``n`` for a TransitionReplayBuffer, sampled once per collect step) from a
                     Python loop; an evaluation launches one graph per environment step.
                     The loop before the fused one, kept for comparison; the only one for the numpy
                     buffer and the gymnasium environments, which live on the host.
===================  =================================================================================

Both return the sum of the chunk's losses and read the episode counters once per chunk.
"""
from __future__ import annotations

from typing import Any, Protocol

import mindspore as ms
import numpy as np
from mindspore import Tensor

LOOPS = ("fused", "host")


class Loop(Protocol):
    """What the training loop asks of a loop."""

    def run(self, iterations: int, learn: bool) -> float:
        """Run ``iterations`` collect steps, each followed by its learn steps if ``learn``; the loss sum."""

    def evaluate(self) -> np.ndarray:
        """The returns of the greedy evaluation episodes."""

    def episodes(self) -> tuple[float, int]:
        """Total return of the finished training episodes, and how many finished."""


class HostLoop:
    """One launch per collect step, per sample and its learn steps, and per evaluation step.

    Args:
        agent (DQNAgent): The agent's collector, learn callable (``agent.learn_calls`` calls
            after each collect step: one per learn step, or one in all for a
            TransitionReplayBuffer) and evaluator are used.
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def run(self, iterations: int, learn: bool) -> float:
        losses = []
        calls = self.agent.learn_calls if learn else 0
        for _ in range(iterations):
            self.agent.collector.collect()
            losses += [self.agent.learn() for _ in range(calls)]
        return float(sum(loss.asnumpy() for loss in losses))

    def evaluate(self) -> np.ndarray:
        return self.agent.evaluate()

    def episodes(self) -> tuple[float, int]:
        return self.agent.collector.episodes()


class FusedLoop:
    """One launch per chunk, and one per evaluation.

    Args:
        agent (DQNAgent): Must have its fused graphs (a device buffer and MindSpore CartPoles).
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def run(self, iterations: int, learn: bool) -> float:
        calls = self.agent.learn_calls if learn else 0
        return float(self.agent.train_loop(Tensor(iterations, ms.int32), Tensor(calls, ms.int32)).asnumpy())

    def evaluate(self) -> np.ndarray:
        return self.agent.eval_loop().asnumpy()

    def episodes(self) -> tuple[float, int]:
        return self.agent.collector.episodes()
