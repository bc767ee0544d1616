"""ops.sharded, the parts that need no collective: locating global indexes, drawing them,
gathering owned rows, and the 32-bit words rows travel in."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, jit
from mindspore_rl_buffer.ops import locate
from mindspore_rl_buffer.ops import sharded as sharded_ops

from mindspore_rl_buffer.specs import numpy_dtype


def test_locate_maps_global_indexes_to_shards_like_searchsorted():
    rng = np.random.default_rng(0)
    run = jit(locate)
    for counts in ([5], [3, 0, 2], [0, 0, 4], [7, 7], [0, 1, 0, 1, 6]):
        counts = np.asarray(counts, np.int32)
        index = rng.integers(0, counts.sum(), 50).astype(np.int32)
        owner, local = run(Tensor(counts), Tensor(index))
        ends = np.cumsum(counts)
        want_owner = np.searchsorted(ends, index, side="right")
        np.testing.assert_array_equal(owner.asnumpy(), want_owner)
        np.testing.assert_array_equal(local.asnumpy(), index - (ends - counts)[want_owner])
        assert (counts[want_owner] > 0).all(), "an empty shard never owns a draw"


@pytest.mark.parametrize(("dtype", "values"), [
    (ms.int64, [-2**63, 2**63 - 1, 0, -1, 2**40 + 3, -2**31, 2**31, 2**32 - 1]),
    (ms.uint32, [0, 2**32 - 1, 2**31, 2**31 - 1]),
    (ms.int32, [-2**31, 2**31 - 1, 0, -1]),
    (ms.uint8, [0, 255, 128, 1]),
    (ms.int8, [-128, 127, 0, -1]),
    (ms.float16, [float("nan"), -0.0, 6e-8, 65504.0]),
    (ms.float32, [float("nan"), -0.0, 1e-45, -float("inf")]),
])
def test_rows_travel_in_32_bit_words_exactly(dtype, values):
    @jit
    def run(x, block, words):
        return sharded_ops.decode_words(sharded_ops.encode_words(x, block, words), words, x.dtype)

    value = np.asarray([values], numpy_dtype(dtype))
    block = 0 if dtype in (ms.float16, ms.float32) else 1
    words = 2 if dtype in (ms.int64, ms.uint32) else 1
    got = run(Tensor(value), block, words).asnumpy()
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)  # NaN equals NaN here
    np.testing.assert_array_equal(np.signbit(got), np.signbit(value))
