"""ops.dedupe: the last occurrence of every index wins."""
from __future__ import annotations

import numpy as np
from mindspore import Tensor
from mindspore_rl_buffer.ops import last_occurrence


def test_last_occurrence_matches_numpy_on_repeated_indexes():
    rng = np.random.default_rng(0)
    for n, high in [(1, 1), (7, 2), (50, 5), (300, 1000), (64, 10**6)]:
        index = rng.integers(0, high, n).astype(np.int32)
        want = [max(j2 for j2 in range(n) if index[j2] == index[j]) for j in range(n)]
        np.testing.assert_array_equal(last_occurrence(Tensor(index)).asnumpy(), want)
