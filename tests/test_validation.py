"""Every malformed call gets a clear error and leaves the buffer exactly as it was."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest

from tests.helpers import BAD_CALLS, F32, GOOD, I32, decode, encoded_batch, make, state_of


@pytest.mark.parametrize("name, call, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_and_leaves_the_buffer_unchanged(name, call, error, message):
    rb = make()
    rb.insert(GOOD)
    before = state_of(rb)
    with pytest.raises(error, match=message):
        call(rb)
    after = state_of(rb)
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]
    rb.insert(encoded_batch(2, 1))  # and it keeps working
    assert decode(*rb.get_item(-1)) == 2
    assert set(decode(*rb.sample())) <= {0, 1, 2}


def test_sampling_an_empty_buffer_is_refused():
    rb = make()
    with pytest.raises(ValueError, match="the buffer is empty"):
        rb.sample()
    with pytest.raises(IndexError, match=r"\[-0, 0\)"):
        rb.get_item(0)
    assert state_of(rb)[1:] == (0, 0)


def test_sample_size_larger_than_size_without_replacement_is_refused():
    rb = make(sample_size=5, replace=False)
    rb.insert(encoded_batch(0, 4))
    with pytest.raises(ValueError, match=r"'sample_size' \(5\) must not exceed .* holds 4"):
        rb.sample()
    rb.insert(encoded_batch(4, 1))
    assert sorted(decode(*rb.sample())) == [0, 1, 2, 3, 4]


def test_nan_and_inf_are_stored_as_they_are():
    rb = make()
    rb.insert([np.array([np.nan, np.inf], F32), I32(1), np.array([-np.inf], F32)])
    state, _, reward = (x.asnumpy() for x in rb.get_item(0))
    assert np.isnan(state[0]) and state[1] == np.inf and reward[0] == -np.inf


@pytest.mark.parametrize("kwargs, error, message", [
    ({"sample_size": 0}, ValueError, r"'sample_size' must be an int >= 1, but got 0"),
    ({"capacity": -1}, ValueError, r"'capacity' must be an int >= 1, but got -1"),
    ({"capacity": 1.5}, TypeError, r"'capacity' must be an int, but got float"),
    ({"capacity": True}, TypeError, r"'capacity' must be an int, but got bool"),
    ({"sample_size": 9, "replace": False}, ValueError, r"'sample_size' \(9\) must not exceed 'capacity' \(7\)"),
    ({"ordered": 1}, TypeError, "'ordered' must be a bool"),
    ({"seed": -2}, ValueError, "'seed' must be an int >= 0"),
])
def test_bad_constructor_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        make(**kwargs)


@pytest.mark.parametrize("shapes, types, message", [
    ([(2,), ()], [ms.float32], r"one entry per column, but got 2 shapes and 1 types"),
    ([(2,)], ["foat32"], r"unknown data_type\[0\] foat32; did you mean float32\?"),
    ([(2, -1)], [ms.float32], r"shapes\[0\] must be a tuple of non-negative ints"),
    ([], [], "at least one column"),
    ([(1,)], [ms.bool_], r"data_type\[0\] bool is not supported: .* store flags as uint8"),
])
def test_bad_column_specs(shapes, types, message):
    from mindspore_rl_buffer import ReplayBuffer

    with pytest.raises(ValueError, match=message):
        ReplayBuffer(4, 8, shapes, types)


def test_an_empty_batch_is_a_no_op():
    rb = make()
    rb.insert(encoded_batch(0, 9))
    before = state_of(rb)
    rb.insert(encoded_batch(9, 0))
    after = state_of(rb)
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]
