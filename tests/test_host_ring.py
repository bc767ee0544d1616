"""NumpyRing, the one numpy ring of the host-side users, against a list of the newest items."""
from __future__ import annotations

import numpy as np
import pytest

from mindspore_rl_buffer.host_ring import NumpyRing, logical_rows


@pytest.mark.parametrize("batches", [[1, 1, 1, 1, 1, 1, 1], [3, 0, 2, 4], [5], [12], [2, 9, 1, 5]])
def test_inserts_keep_the_newest_items_in_order_under_the_cursor_contract(batches):
    ring, kept, start = NumpyRing(5, [(2,), ()], [np.float32, np.int64]), [], 0
    for n in batches:
        ids = np.arange(start, start + n)
        rows = ring.insert([np.stack([ids, -ids], 1).astype(np.float32), ids])
        start += n
        kept = (kept + list(ids))[-5:]
        assert rows.tolist() == [ring.rows(i).item() for i in range(ring.count - len(rows), ring.count)]
        assert ring.count == len(kept) and 0 <= ring.head < 5 and (ring.head == 0 or ring.count == 5)
        states, actions = ring.ordered()
        assert actions.tolist() == kept and (states[:, 1] == -states[:, 0]).all()


def test_draws_come_from_the_stored_items_only():
    ring, rng = NumpyRing(8, [()], [np.int32]), np.random.default_rng(0)
    ring.insert([np.arange(3, dtype=np.int32)])
    assert set(ring.columns[0][ring.sample_rows(rng, 500)]) == {0, 1, 2}
    ring.insert([np.arange(3, 20, dtype=np.int32)])  # wrapped: holds 12..19
    windows = ring.columns[0][ring.window_rows(rng, 500, 3)]
    assert (np.diff(windows, axis=1) == 1).all() and windows.min() >= 12 and windows.max() <= 19
    assert logical_rows(ring.head, np.arange(8), 8).tolist() == ring.ordered_rows().tolist()
    ring.clear()
    assert (ring.head, ring.count) == (0, 0)
