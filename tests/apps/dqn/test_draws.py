"""The app's uniform draws: distribution, seeding, fresh draws, and one compiled graph for every seed."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from scipy import stats

from mindspore_rl_buffer.apps.dqn.draws import integers, state, uniform


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


class Draw(nn.Cell):
    """A Cell that draws from its own generator state, as the app's Cells do."""

    def __init__(self, shape, high=None, seed=None):
        super().__init__()
        self.shape, self.high = shape, high
        self.rng_key, self.rng_counter = state("test_rng", seed)

    def construct(self):
        if self.high is None:
            return uniform(self.shape, (self.rng_key, self.rng_counter))
        return integers(self.shape, self.high, (self.rng_key, self.rng_counter))


def test_uniform_draws_are_uniform_on_the_unit_interval():
    draws = Draw((20_000,), seed=0)().asnumpy()
    assert draws.dtype == np.float32 and draws.min() >= 0.0 and draws.max() < 1.0
    # Kolmogorov-Smirnov against U(0, 1): a correct sampler fails at this level once in 1,000 seeds.
    assert stats.kstest(draws, "uniform").pvalue > 1e-3


def test_integers_are_uniform_over_their_range():
    counts = np.bincount(Draw((20_000,), high=3, seed=1)().asnumpy(), minlength=3)
    assert counts.sum() == 20_000 and len(counts) == 3
    # Chi-square with 2 degrees of freedom: a correct sampler fails at this level once in 1,000 seeds.
    assert stats.chisquare(counts).pvalue > 1e-3


def test_set_seed_repeats_the_states_and_each_call_draws_afresh():
    ms.set_seed(5)
    cell = Draw((1000,))
    first, second = cell().asnumpy(), cell().asnumpy()
    ms.set_seed(5)
    again = Draw((1000,))().asnumpy()
    ms.set_seed(6)
    other = Draw((1000,))().asnumpy()
    assert not np.array_equal(first, second) and not np.array_equal(first, other)
    np.testing.assert_array_equal(first, again)


def test_the_seed_is_a_value_of_the_state_not_a_constant_of_the_graph():
    cell = Draw((1000,), seed=3)
    expected = Draw((1000,), seed=4)().asnumpy()
    first = cell().asnumpy()
    cell.rng_key.set_data(state("other", 4)[0].value())  # another seed's key, restored in place
    cell.rng_counter.set_data(ms.Tensor(0, ms.int64))
    assert len(cell.compile_cache) == 1
    np.testing.assert_array_equal(cell().asnumpy(), expected)  # the same compiled graph draws seed 4's numbers
    assert len(cell.compile_cache) == 1 and not np.array_equal(first, expected)
