"""The app's uniform draws (from ops.standard_laplace): distribution, seeding, fresh draws, inside graphs."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import jit
from scipy import stats

from mindspore_rl_buffer.apps.dqn.draws import integers, uniform


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


@jit
def _uniform():
    return uniform((20_000,))


@jit
def _actions():
    return integers((20_000,), 3)


def test_uniform_draws_are_uniform_on_the_unit_interval():
    ms.set_seed(0)
    draws = _uniform().asnumpy()
    assert draws.dtype == np.float32 and draws.min() >= 0.0 and draws.max() <= 1.0
    # Kolmogorov-Smirnov against U(0, 1): a correct sampler fails at this level once in 1,000 seeds.
    assert stats.kstest(draws, "uniform").pvalue > 1e-3


def test_integers_are_uniform_over_their_range():
    ms.set_seed(1)
    counts = np.bincount(_actions().asnumpy(), minlength=3)
    assert counts.sum() == 20_000 and len(counts) == 3
    # Chi-square with 2 degrees of freedom: a correct sampler fails at this level once in 1,000 seeds.
    assert stats.chisquare(counts).pvalue > 1e-3


def _fresh_graph():
    """A newly compiled graph: ``set_seed`` seeds the graphs compiled after it, as for ``ops.uniform``."""

    @jit
    def draw():
        return uniform((1000,))

    return draw


def test_set_seed_repeats_the_draws_of_a_new_graph_and_each_call_draws_afresh():
    ms.set_seed(5)
    graph = _fresh_graph()
    first, second = graph().asnumpy(), graph().asnumpy()
    ms.set_seed(5)
    again = _fresh_graph()().asnumpy()
    ms.set_seed(6)
    other = _fresh_graph()().asnumpy()
    assert not np.array_equal(first, second) and not np.array_equal(first, other)
    np.testing.assert_array_equal(first, again)
