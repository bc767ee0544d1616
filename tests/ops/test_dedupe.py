"""ops.dedupe: of repeated indexes the last occurrence wins, as in numpy's assignment; both paths."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from mindspore_rl_buffer.ops import last_occurrence

from tests.helpers import PATHS, on_path


def test_last_occurrence_matches_numpy_on_repeated_indexes():
    rng = np.random.default_rng(0)
    for n, high in [(1, 1), (7, 2), (50, 5), (300, 1000), (64, 10**6)]:
        index = rng.integers(0, high, n).astype(np.int32)
        want = [max(j2 for j2 in range(n) if index[j2] == index[j]) for j in range(n)]
        np.testing.assert_array_equal(last_occurrence(Tensor(index)).asnumpy(), want)


def last_positions(index) -> list[int]:
    """For every position, the last position holding the same index: a dict, overwritten in order."""
    last = {}
    for position, value in enumerate(index.tolist()):
        last[value] = position
    return [last[value] for value in index.tolist()]


@pytest.mark.parametrize("path", PATHS)
def test_last_occurrence_wins_for_any_index_values(path):
    rng = np.random.default_rng(1)
    run = on_path(path, last_occurrence)
    cases = {
        "one": np.array([5]),
        "all_equal": np.full(9, 3),
        "all_distinct": rng.permutation(9),
        "runs_and_gaps": np.array([4, 1, 4, 4, 1, 0, 9, 9]),
        # index * n passes int32 (up to 2**31 times 4096): the sort keys must be int64. In
        # int32, indexes 2**20 apart would share a key (2**20 * 4096 = 2**32) and their runs merge.
        "large_indexes": np.concatenate([np.tile([3, 3 + 2**20, 2**31 - 1, 3 + 2**21, 2**31 - 1 - 2**20], 400),
                                         rng.integers(2**31 - 8, 2**31, 1048), rng.integers(0, 2**31, 1048)]),
    }
    for name, index in cases.items():
        index = index.astype(np.int32)
        got = run(Tensor(index))
        assert got.dtype == ms.int32 and got.shape == index.shape, name
        got = got.asnumpy()
        np.testing.assert_array_equal(got, last_positions(index), err_msg=name)
        # The winner of a position wins its own position: result[j] == j exactly where j wins.
        np.testing.assert_array_equal(got[got], got, err_msg=name)


def last_occurrence_below_3000(index):
    return last_occurrence(index, 3000)


@pytest.mark.parametrize("path", PATHS)
def test_past_4096_indexes_with_a_bound_the_scatter_path_matches_numpy(path):
    # MindSpore's GPU Sort refuses int64 keys in rows over 4,096: with a bound the operator
    # scatters positions instead of sorting. Both must give numpy's answer.
    index = np.random.default_rng(7).integers(0, 3000, 5000).astype(np.int32)
    want = last_positions(index)
    with_bound = on_path(path, last_occurrence_below_3000)(Tensor(index))
    np.testing.assert_array_equal(with_bound.asnumpy(), want)
    np.testing.assert_array_equal(on_path(path, last_occurrence)(Tensor(index)).asnumpy(), want)
