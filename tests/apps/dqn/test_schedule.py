"""The schedule's chunks against the training loop written out iteration by iteration, from its definition."""
from __future__ import annotations

import itertools

import pytest

from mindspore_rl_buffer.apps.dqn.schedule import chunks, rounded_budget


def reference(num_envs, max_steps, learning_starts, eval_starts, eval_interval, log_interval):
    """Per iteration (from 1): (learns, logs, evaluates), from the loop's definition (see schedule.py)."""
    steps, iteration, last_eval, events = 0, 0, 0, []
    while steps < max_steps:
        steps += num_envs
        iteration += 1
        learns = steps >= max(learning_starts, 1)
        logs = iteration % log_interval == 0
        evaluates = (steps >= eval_starts and steps - last_eval >= eval_interval) or steps >= max_steps
        if evaluates:
            last_eval = steps
        events.append((learns, logs, evaluates))
    return events


def flatten(found):
    """The chunks as per-iteration events: the flags hold after a chunk's last iteration only."""
    events = []
    for chunk in found:
        assert chunk.iterations >= 1
        events += [(chunk.learn, False, False)] * (chunk.iterations - 1)
        events.append((chunk.learn, chunk.log, chunk.evaluate))
    return events


SETTINGS = list(itertools.product([1, 8], [1, 7, 333], [0, 1, 50], [0, 30], [1, 45], [1, 4, 50]))


@pytest.mark.parametrize(("num_envs", "max_steps", "learning_starts", "eval_starts", "eval_interval", "log_interval"),
                         SETTINGS)
def test_chunks_log_learn_and_evaluate_where_the_loop_does(num_envs, max_steps, learning_starts, eval_starts,
                                                           eval_interval, log_interval):
    found = list(chunks(num_envs, max_steps, learning_starts, eval_starts, eval_interval, log_interval))
    expected = reference(num_envs, max_steps, learning_starts, eval_starts, eval_interval, log_interval)
    got = flatten(found)
    # A chunk may end early (before learning starts, or at an evaluation): only where the
    # reference logs or evaluates must a chunk end, with the same flags; elsewhere none may claim either.
    assert [event[0] for event in got] == [event[0] for event in expected]
    assert [event[2] for event in got] == [event[2] for event in expected]
    assert [event[1] for event in got] == [event[1] for event in expected]
    assert [chunk.env_steps for chunk in found] == [sum(c.iterations for c in found[:i + 1]) * num_envs
                                                     for i in range(len(found))]
    assert all(chunk.iterations <= log_interval for chunk in found)
    assert found[-1].env_steps == rounded_budget(max_steps, num_envs) >= max_steps


def test_the_shipped_schedule_launches_at_most_log_interval_iterations():
    found = list(chunks(8, 150_000, 1000, 10_000, 2500, 50))
    assert found[0].learn is False and found[0].env_steps == 400  # 50 collect-only iterations
    assert [c.env_steps for c in found if c.evaluate][:3] == [10_000, 12_504, 15_008]
    assert found[-1].env_steps == 150_000 and found[-1].evaluate
