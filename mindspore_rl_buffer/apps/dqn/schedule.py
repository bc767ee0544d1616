"""When the training loop learns, logs and evaluates: the run cut into launches.

The loop is a sequence of iterations; iteration ``k`` (from 1) collects one transition per
environment, so ``k * num_envs`` environment steps are done after it, and then learns if that
is at least ``learning_starts``. After iteration ``k`` the progress bar is updated if ``k`` is
a multiple of ``log_interval``, and the greedy policy is evaluated once ``eval_starts`` steps
are done and ``eval_interval`` steps have passed since the last evaluation, and at the end of
the budget. :func:`chunks` cuts that sequence into :class:`Chunk` s of iterations that all
learn or all do not, ending where a log or an evaluation is due: the fused loop runs each
chunk as one launch, the host loop iteration by iteration, so both log and evaluate at the
same environment steps.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

# At most 10**9 environment steps, from --max-steps or a config's trainer.max_steps: far beyond any
# CartPole run (the measured solves take tens of thousands), and small enough that the schedule's
# arithmetic stays exact; a longer budget is a typo.
MAX_STEPS = 10**9


@dataclass(frozen=True)
class Chunk:
    """Iterations run in one go, and what is due after them.

    Args:
        iterations (int): Iterations (collect steps) in the chunk, at least 1.
        learn (bool): Whether every iteration of the chunk learns.
        log (bool): Whether the progress bar is due after the chunk.
        evaluate (bool): Whether an evaluation is due after the chunk.
        env_steps (int): Environment steps done after the chunk.
    """

    iterations: int
    learn: bool
    log: bool
    evaluate: bool
    env_steps: int


def rounded_budget(max_steps: int, num_envs: int) -> int:
    """The environment steps a run of ``max_steps`` does: every iteration steps all ``num_envs``
    environments, so the budget is rounded up to a multiple of ``num_envs``.

    Examples:
        >>> from mindspore_rl_buffer.apps.dqn.schedule import rounded_budget
        >>> rounded_budget(13, 8), rounded_budget(16, 8), rounded_budget(1, 8)
        (16, 16, 8)
    """
    return math.ceil(max_steps / num_envs) * num_envs


def first_learning(learning_starts: int, num_envs: int) -> int:
    """The iteration (1-based) whose collect is followed by the first learn steps: the first to have
    stored ``learning_starts`` transitions (at least one), ``num_envs`` a collect.

    Examples:
        >>> from mindspore_rl_buffer.apps.dqn.schedule import first_learning
        >>> first_learning(1000, 8), first_learning(0, 8), first_learning(9, 8)
        (125, 1, 2)
    """
    return math.ceil(max(learning_starts, 1) / num_envs)


def chunks(num_envs: int, max_steps: int, learning_starts: int, eval_starts: int, eval_interval: int,
           log_interval: int) -> Iterator[Chunk]:
    """Cut a run of ``max_steps`` environment steps, rounded up to a multiple of ``num_envs`` (see
    :func:`rounded_budget`), into chunks (see the module docstring).

    All arguments are positive ints but ``learning_starts`` and ``eval_starts`` (>= 0).

    Examples:
        >>> from mindspore_rl_buffer.apps.dqn.schedule import chunks
        >>> [(c.iterations, c.learn, c.evaluate, c.env_steps) for c in chunks(8, 100, 20, 40, 40, 5)]
        [(2, False, False, 16), (3, True, True, 40), (5, True, True, 80), (3, True, True, 104)]
    """
    last = math.ceil(max_steps / num_envs)  # the iteration that reaches the budget
    first = first_learning(learning_starts, num_envs)
    done, last_eval = 0, 0
    while done < last:
        due = max(eval_starts, last_eval + eval_interval)
        next_eval = min(last, max(done + 1, math.ceil(due / num_envs)))
        end = min((done // log_interval + 1) * log_interval, next_eval)
        learn = done + 1 >= first
        if not learn:
            end = min(end, first - 1)
        evaluate = end == next_eval
        if evaluate:
            last_eval = end * num_envs
        yield Chunk(end - done, learn, end % log_interval == 0, evaluate, end * num_envs)
        done = end
