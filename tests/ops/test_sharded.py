"""ops.sharded, the parts that run in one process: locating global indexes, drawing them,
gathering the rows a shard owns, and the 32-bit words rows travel in; both paths.

The references follow the module docstring (shards in rank order, each oldest first) and
the docstring of ``encode_words``; rows encode their item number (tests.helpers.encoded_batch).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, jit
from mindspore_rl_buffer.ops import combine_rows, draw_global, gather_owned, locate, random_state
from mindspore_rl_buffer.ops import sharded as sharded_ops
from scipy.stats import chisquare

from mindspore_rl_buffer.specs import numpy_dtype
from tests.helpers import DTYPES, PATHS, SHAPES, RingModel, decode, encoded_batch, on_path

I32 = ms.int32


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


# ------------------------------------------------------------------ locate, draw_global
def owner_by_definition(counts, index: int):
    """``(r, index - starts[r])`` for the shard with ``starts[r] <= index < starts[r] + counts[r]``,
    found by walking the shards in rank order (the module docstring's definition)."""
    start = 0
    for rank, count in enumerate(counts):
        if start <= index < start + count:
            return rank, index - start
        start += count
    raise AssertionError(f"{index} is not a global index of {counts}")


@pytest.mark.parametrize("path", PATHS)
def test_locate_names_the_owner_and_its_logical_index_of_every_global_index(path):
    run = on_path(path, locate)
    for counts in ([5], [3, 0, 2], [0, 0, 4], [2, 0, 0], [1, 1, 1, 1], [0, 3, 0, 4, 0]):
        counts = np.asarray(counts, np.int32)
        total = int(counts.sum())
        index = np.arange(total + 2, dtype=np.int32)  # every global index, then two past the total
        owner, local = run(Tensor(counts), Tensor(index))
        assert owner.dtype == local.dtype == I32
        got = list(zip(owner.asnumpy().tolist(), local.asnumpy().tolist()))
        assert got[:total] == [owner_by_definition(counts, g) for g in range(total)], counts
        # Past the total (no draw is; a caller may gather all the same): the last shard.
        assert [rank for rank, _ in got[total:]] == [len(counts) - 1] * 2


def draw_global_of(path, sample_size, ordered, seed=0):
    def run(key, counter, counts):
        return draw_global(counts, sample_size, ordered, (key, counter))
    return on_path(path, run, random_state(seed))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_draw_global_draws_uniformly_over_the_union_of_the_shards(ordered, path):
    counts = np.array([3, 0, 4, 1], np.int32)
    drawn, total = draw_global_of(path, 2400, ordered, seed=6)(Tensor(counts))
    assert total.dtype == I32 and total.shape == () and int(total) == 8
    drawn = drawn.asnumpy()
    assert drawn.dtype == np.int32 and drawn.shape == (2400,)
    assert ((drawn >= 0) & (drawn < 8)).all()
    if ordered:
        assert (np.diff(drawn) >= 0).all(), "ordered: shard 0's items first, oldest first"
    # 300 independent draws expected per global index (so each shard gets draws in
    # proportion to its count): the multinomial chi-square holds. Deterministic with fixed
    # seeds; p < 1e-4 would mean a clearly non-uniform draw.
    assert chisquare(np.bincount(drawn, minlength=8)).pvalue > 1e-4


@pytest.mark.parametrize("path", PATHS)
def test_draw_global_over_empty_shards_gives_a_zero_total(path):
    drawn, total = draw_global_of(path, 5, False)(Tensor(np.zeros(3, np.int32)))
    assert int(total) == 0 and drawn.asnumpy().tolist() == [0] * 5  # meaningless, as documented


# ------------------------------------------------------------------ gather_owned
RANK = 1


def _gather_owned(state, action, reward, head, owner, local):
    return gather_owned([state, action, reward], head, owner, local, RANK)


@pytest.mark.parametrize("path", PATHS)
def test_gather_owned_reads_the_draws_this_shard_owns_and_row_0_for_the_others(path):
    rng = np.random.default_rng(7)
    run = on_path(path, _gather_owned)
    for stored in (4, 12):  # a shard of 7 rows, unfilled, then wrapped (head 5)
        shard = RingModel(7, SHAPES, DTYPES)
        shard.insert(encoded_batch(0, stored))
        owner = rng.integers(0, 3, 40).astype(np.int32)
        # Other ranks' local indexes point into their own shards: any value.
        local = np.where(owner == RANK, rng.integers(0, shard.count, 40), rng.integers(0, 50, 40)).astype(np.int32)
        rows = run(*(Tensor(c) for c in shard.columns), Tensor(shard.head, I32), Tensor(owner), Tensor(local))
        assert [r.shape for r in rows] == [(40, 2), (40,), (40, 1)]
        want = [shard.item(int(i))[1] if o == RANK else shard.columns[1][0] for o, i in zip(owner, local)]
        np.testing.assert_array_equal(decode(*rows), want)


# ------------------------------------------------------------------ 32-bit words
# Every dtype that travels, with its extremes: (dtype, block, words per value, values).
MOVABLE = [
    (ms.bool_, 1, 1, [True, False]),
    (ms.int8, 1, 1, [-128, 127, 0, -1]),
    (ms.uint8, 1, 1, [0, 255, 128, 1]),
    (ms.int16, 1, 1, [-2**15, 2**15 - 1, 0, -1]),
    (ms.uint16, 1, 1, [0, 2**16 - 1, 2**15, 1]),
    (ms.int32, 1, 1, [-2**31, 2**31 - 1, 0, -1]),
    (ms.int64, 1, 2, [-2**63, 2**63 - 1, 0, -1, 2**32, -2**32, 2**32 - 1, -2**31 - 1]),
    (ms.uint32, 1, 2, [0, 2**32 - 1, 2**31, 2**31 - 1]),
    (ms.float16, 0, 1, [float("nan"), -0.0, 6e-8, 65504.0, -float("inf"), float("inf")]),
    (ms.float32, 0, 1, [float("nan"), -0.0, 1e-45, 3.4028235e38, -float("inf"), -1.5]),
]


def round_trip_of(block, words):
    def run(value):
        encoded = sharded_ops.encode_words(value, block, words)
        return encoded, sharded_ops.decode_words(encoded, words, value.dtype)
    return run


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("dtype", "block", "words", "values"), MOVABLE, ids=[str(m[0]) for m in MOVABLE])
def test_every_movable_dtype_round_trips_through_its_32_bit_words(dtype, block, words, values, path):
    value = np.array([values, values[::-1]], numpy_dtype(dtype))  # (k, width) = (2, len(values))
    encoded, decoded = on_path(path, round_trip_of(block, words))(Tensor(value))
    width = value.shape[1]
    assert encoded.dtype == (ms.float32 if block == 0 else ms.int32)
    assert encoded.shape == (2, words * width)
    encoded = encoded.asnumpy()
    if words == 2:
        # The docstring's words: the high half value // 2**32, the low half value % 2**32 - 2**31.
        wide = [[int(v) for v in row] for row in value]
        np.testing.assert_array_equal(encoded[:, :width], [[v // 2**32 for v in row] for row in wide])
        np.testing.assert_array_equal(encoded[:, width:], [[v % 2**32 - 2**31 for v in row] for row in wide])
    else:
        np.testing.assert_array_equal(encoded, value.astype(encoded.dtype))
    assert decoded.dtype == dtype
    decoded = decoded.asnumpy()
    np.testing.assert_array_equal(decoded, value)  # NaN equals NaN here
    np.testing.assert_array_equal(np.signbit(decoded), np.signbit(value))


@pytest.mark.parametrize("path", PATHS)
def test_bfloat16_round_trips_through_a_float32_word(path):
    # numpy has no bfloat16: the values are made and compared as float32 (exact for bfloat16).
    values = np.array([[float("nan"), -0.0, 3.3895314e38, 9.1835e-41, -float("inf"), 1.0]], np.float32)
    value = Tensor(values).astype(ms.bfloat16)
    exact = value.astype(ms.float32).asnumpy()
    encoded, decoded = on_path(path, round_trip_of(0, 1))(value)
    assert encoded.dtype == ms.float32 and decoded.dtype == ms.bfloat16
    np.testing.assert_array_equal(encoded.asnumpy(), exact)
    decoded = decoded.astype(ms.float32).asnumpy()
    np.testing.assert_array_equal(decoded, exact)
    np.testing.assert_array_equal(np.signbit(decoded), np.signbit(exact))


@pytest.mark.parametrize("dtype", [ms.float64, ms.uint64])
def test_combine_rows_refuses_columns_without_an_exact_32_bit_form_when_compiled(dtype):
    def combine(state, column, owner):
        return combine_rows((state, column), owner, "hccl_world_group")

    # The plan is made when the graph is compiled, before any collective runs.
    with pytest.raises(TypeError, match=f"a column of dtype {dtype} cannot travel exactly"):
        jit(combine)(Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros(2, numpy_dtype(dtype))),
                     Tensor(np.zeros(2, np.int32)))
