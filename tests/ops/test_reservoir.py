"""ops.reservoir: algorithm R's draws and their writes."""
from __future__ import annotations

import numpy as np
from mindspore import Tensor
from mindspore_rl_buffer.ops import plan_writes

from tests.helpers import apply_in_order


def test_plan_writes_follows_algorithm_r_item_by_item_in_any_scatter_order():
    """On CPU the scatter applies repeats in order; the plan must not depend on that."""
    rng = np.random.default_rng(3)
    cases = [(rng.integers(0, 4, 16), rng.random(16) < 0.5) for _ in range(6)]
    cases += [(rng.integers(0, 4, 16), np.zeros(16, bool)), (rng.integers(0, 4, 16), np.ones(16, bool)),
              (np.array([2, 0, 2, 1]), np.array([True, True, True, False]))]
    for slots, accepted in cases:
        slots = slots.astype(np.int32)
        old, batch = np.arange(100, 104), np.arange(len(slots))
        want = old.copy()
        for j in range(len(slots)):  # algorithm R with these draws
            if accepted[j]:
                want[slots[j]] = batch[j]
        rows, source, keep_old = (x.asnumpy() for x in plan_writes(Tensor(slots), Tensor(accepted)))
        values = np.where(keep_old, old[rows], batch[source])
        for order in (range(len(slots)), range(len(slots) - 1, -1, -1), rng.permutation(len(slots))):
            np.testing.assert_array_equal(apply_in_order(old, rows, values, order), want)
