"""The counter-based generator of ``mindspore_rl_buffer.ops.rng``: bit for bit against a numpy
model, uniform by chi-square (values and low bits), ordered in a graph, seeded as documented."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops
from mindspore_rl_buffer.ops import random_bits, random_state, uniform_int, uniform_real
from mindspore_rl_buffer.ops.rng import initial_key, state_problems
from scipy import stats

M32 = np.uint64(0xFFFFFFFF)


def model_bits(key, counter: int, n: int) -> np.ndarray:
    """The generator in numpy uint64 arithmetic (wrapping products, then reduced mod 2**32)."""
    def finalise(x):
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x7FEB352D)) & M32
        x ^= x >> np.uint64(15)
        x = (x * np.uint64(0x846CA68B)) & M32
        return x ^ (x >> np.uint64(16))

    at = np.arange(counter, counter + n, dtype=np.uint64)
    k0, k1 = np.uint64(int(key) % 2**32), np.uint64(int(key) // 2**32)
    x = finalise((at & M32) ^ k0)
    return finalise(x ^ (at >> np.uint64(32)) ^ k1).astype(np.int64)


KEY = 678 * 2**32 + 12345


def state(key=KEY, counter=0):
    return (Parameter(Tensor(np.array(key, np.int64)), name="k", requires_grad=False),
            Parameter(Tensor(counter, ms.int64), name="c", requires_grad=False))


@pytest.mark.parametrize("counter", [0, 2**32 - 3, 2**61])
def test_bits_match_the_numpy_model_and_advance_the_counter(counter):
    rng = state(counter=counter)
    first, second = random_bits(rng, 5).asnumpy(), random_bits(rng, 4).asnumpy()
    np.testing.assert_array_equal(np.concatenate([first, second]), model_bits(KEY, counter, 9))
    assert int(rng[1]) == counter + 9


def test_integers_and_floats_are_the_documented_functions_of_the_bits():
    rng = state()
    ints = uniform_int((3, 4), Tensor(1000, ms.int32), rng).asnumpy()
    floats = uniform_real((6,), rng).asnumpy()
    bits = model_bits(KEY, 0, 18)
    np.testing.assert_array_equal(ints, ((bits[:12] * 1000) >> 32).reshape(3, 4))
    np.testing.assert_array_equal(floats, (bits[12:] >> 8).astype(np.float32) / np.float32(2**24))
    assert ints.dtype == np.int32 and floats.dtype == np.float32 and floats.min() >= 0 and floats.max() < 1


class _TwoDraws(nn.Cell):
    def __init__(self):
        super().__init__()
        self.key, self.counter = state()

    def construct(self, bound):
        return uniform_int((8,), bound, (self.key, self.counter)), uniform_int((8,), bound, (self.key, self.counter))


def test_two_draws_in_one_graph_read_the_counter_in_turn_and_match_direct_calls():
    ms.set_context(mode=ms.GRAPH_MODE)
    cell = _TwoDraws()
    x, y = cell(Tensor(50, ms.int32))
    bits = model_bits(KEY, 0, 16)
    np.testing.assert_array_equal(np.concatenate([x.asnumpy(), y.asnumpy()]), (bits * 50) >> 32)
    assert int(cell.counter) == 16


def test_draws_are_uniform_by_chi_square_over_values_and_low_bits():
    rng = state(key=initial_key(2024))
    bound = 997
    values = uniform_int((200_000,), Tensor(bound, ms.int32), rng).asnumpy()
    counts = np.bincount(values, minlength=bound)
    assert stats.chisquare(counts).pvalue > 1e-4
    wide = uniform_int((200_000,), Tensor(2**20, ms.int32), rng).asnumpy()
    for bits in (1, 3, 8):  # the low bits of large indexes
        low = np.bincount(wide % 2**bits, minlength=2**bits)
        assert stats.chisquare(low).pvalue > 1e-4, bits
    floats = uniform_real((100_000,), rng).asnumpy()
    assert stats.chisquare(np.histogram(floats, bins=50, range=(0, 1))[0]).pvalue > 1e-4
    # consecutive pairs are independent: a 16 x 16 grid of (u_i, u_{i+1})
    pairs = np.histogram2d(floats[:-1:2], floats[1::2], bins=16, range=[[0, 1], [0, 1]])[0]
    assert stats.chisquare(pairs.ravel()).pvalue > 1e-4


def test_a_seed_alone_fixes_the_key_and_the_global_seed_fixes_unseeded_keys():
    np.testing.assert_array_equal(initial_key(5), initial_key(5))
    assert not np.array_equal(initial_key(5), initial_key(6))
    assert all(0 <= int(initial_key(seed)) < 2**62 for seed in (0, 1, 2**31 - 1))
    assert initial_key(0).shape == () and initial_key(None).dtype == np.int64
    ms.set_seed(9)
    first = [initial_key(None), initial_key(None)]
    ms.set_seed(9)
    again = [initial_key(None), initial_key(None)]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[0], first[1])


def test_a_missing_state_and_a_state_out_of_range_are_named():
    with pytest.raises(TypeError, match="'rng' must be a generator state"):
        uniform_int((2,), Tensor(3, ms.int32), None)
    assert state_problems(np.array(2**62 - 1), np.array(0)) == []
    assert "random key" in state_problems(np.array(2**62), np.array(0))[0]
    assert "random key" in state_problems(np.array(-1), np.array(0))[0]
    assert "random key" in state_problems(np.array([1, 2]), np.array(0))[0]
    assert "random counter" in state_problems(np.array(1), np.array(-1))[0]
    assert "random counter" in state_problems(np.array(1), np.array(2**62))[0]


def test_random_state_makes_named_parameters_at_counter_zero():
    key, counter = random_state(3, name="mine")
    assert (key.name, counter.name) == ("mine_key", "mine_counter")
    np.testing.assert_array_equal(key.asnumpy(), initial_key(3))
    assert int(counter) == 0 and key.dtype == counter.dtype == ms.int64


class _NestedLoops(nn.Cell):
    """Two draws per inner iteration, inside nested ``while`` loops, as a fused training graph has them."""

    def __init__(self):
        super().__init__()
        self.key, self.counter = state()
        self.drawn = Parameter(Tensor(np.zeros((12, 6), np.int64)), name="drawn", requires_grad=False)

    def construct(self, outer, inner):
        i, row = Tensor(0, ms.int32), Tensor(0, ms.int32)
        while i < outer:
            j = Tensor(0, ms.int32)
            while j < inner:
                both = ops.concat((random_bits((self.key, self.counter), 3), random_bits((self.key, self.counter), 3)))
                ops.scatter_update(self.drawn, row.reshape((1,)), both.reshape((1, 6)))
                row, j = row + 1, j + 1
            i = i + 1
        return self.drawn + 0


def test_draws_inside_nested_graph_loops_read_the_counter_in_turn():
    ms.set_context(mode=ms.GRAPH_MODE)
    cell = _NestedLoops()
    drawn = cell(Tensor(4, ms.int32), Tensor(3, ms.int32)).asnumpy()
    np.testing.assert_array_equal(drawn.ravel(), model_bits(KEY, 0, 72))
    assert int(cell.counter) == 72
