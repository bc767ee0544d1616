"""The transition operators against the reference model: ranks, the start bijection, stacks, returns."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor
from mindspore_rl_buffer.ops import (
    _common,
    count_starts,
    final_rows,
    insert_steps,
    random_state,
    sample_starts,
    select_starts,
    transition_windows,
)

from tests.helpers import EpisodeStream, TransitionModel, on_path

GAMMA = 0.75
# (num_envs, stack_size, n_step, max_length, end probability, batch sizes): filling from empty,
# crossing the end before full, wrapping several times, batches longer than the ring.
CASES = [
    (1, 1, 1, 3, 0.3, [1, 1, 2, 5, 1]),
    (2, 3, 2, 7, 0.3, [2, 3, 1, 9, 4, 2]),
    (3, 4, 3, 9, 0.2, [4, 1, 1, 12, 3, 5]),
    (1, 5, 5, 11, 0.5, [5, 7, 2, 13, 6]),
    (2, 2, 4, 8, 0.0, [3, 6, 9]),
    (2, 4, 1, 6, 0.6, [1, 2, 3, 4, 5, 6, 7]),
]


class OperatorState:
    """The state the operators read, written the way a transition buffer writes it: frames and
    ranks by :func:`insert_steps` (eagerly, no buffer graph), the flag and reward columns and the
    cursors from the ring's definition, row by row."""

    def __init__(self, num_envs: int, max_length: int, obs_shape=(2,)) -> None:
        self.num_envs, self.max_length, self.inserted = num_envs, max_length, 0
        rows = num_envs * max_length
        self.frames = Parameter(Tensor(np.zeros((rows, *obs_shape), np.float32)), name="frames", requires_grad=False)
        self.ranks = Parameter(Tensor(np.zeros(rows, np.int32)), name="ranks", requires_grad=False)
        self.starts = Parameter(Tensor(np.zeros(rows + 1, np.int32)), name="starts", requires_grad=False)
        self.last_ended, self.finals = Tensor(np.zeros(num_envs, np.int32)), Tensor(0, ms.int32)
        self.columns = [np.zeros((max_length, num_envs), dtype) for dtype in (np.float32, np.uint8, np.uint8)]

    @property
    def count(self) -> int:
        return min(self.inserted, self.max_length)

    @property
    def head(self) -> int:
        return (self.inserted - self.count) % self.max_length

    def insert(self, batch) -> None:
        cursors = Tensor(self.head, ms.int32), Tensor(self.count, ms.int32)
        self.last_ended, self.finals = insert_steps(self.frames, self.ranks, *cursors, self.last_ended, self.finals,
                                                    Tensor(batch[0]), Tensor(batch[3]), Tensor(batch[4]), self.starts)
        for step in range(len(batch[0])):
            for column, values in zip(self.columns, (batch[2], batch[3], batch[4])):
                column[self.inserted % self.max_length] = values[step]
            self.inserted += 1

    def flags(self):
        return Tensor(self.columns[1]), Tensor(self.columns[2])

    def cursors(self):
        return Tensor(self.head, ms.int32), Tensor(self.count, ms.int32)


def snapshots(case):
    """The operator state and the model after each batch of ``case``."""
    num_envs, stack_size, n_step, max_length, end, batches = case
    state = OperatorState(num_envs, max_length)
    model = TransitionModel(max_length, num_envs, stack_size, n_step, GAMMA)
    stream = EpisodeStream(num_envs, seed=sum(batches), end_probability=end)
    for size in batches:
        batch = stream.take(size)
        state.insert(batch)
        model.insert(batch)
        yield state, model


def expected_ranks(model: TransitionModel) -> np.ndarray:
    """Ranks from their definition: ``q - M - F``, ``F`` the final rows written so far, time-major."""
    num_envs, max_length = model.num_envs, model.max_length
    size = num_envs * max_length
    ranks, finals = np.zeros(size, np.int64), 0
    for t in range(len(model.steps)):
        for env in range(num_envs):
            if t:
                finals += int(model.steps[t - 1][3][env] != 0 or model.steps[t - 1][4][env] != 0)
            q = (t % max_length) * num_envs + env
            ranks[q] = q - size - finals
    return ranks


@pytest.mark.parametrize("case", CASES)
def test_every_operator_agrees_with_the_model_after_every_batch(case):
    num_envs, stack_size, n_step, max_length = case[:4]
    for state, model in snapshots(case):
        np.testing.assert_array_equal(state.ranks.asnumpy(), expected_ranks(model))
        head, count = state.cursors()
        valid = model.valid_starts()
        total = int(count_starts(state.ranks, head, count, max_length, stack_size, n_step))
        assert total == len(valid)
        if not valid:
            continue
        # A bijection from [0, V) onto the valid starts: uniform draws give a uniform sample.
        everyone = Tensor(np.arange(total, dtype=np.int32))
        logical, env, _ = select_starts(state.ranks, head, count, everyone, max_length, stack_size, n_step)
        starts = list(zip(logical.asnumpy().tolist(), env.asnumpy().tolist()))
        assert sorted(starts) == sorted(valid), "every valid start exactly once"
        # The start table maps every draw to the start the search of the ranks finds.
        in_table = select_starts(state.ranks, head, count, everyone, max_length, stack_size, n_step, state.starts)
        assert list(zip(*(x.asnumpy().tolist() for x in in_table[:2]))) == starts
        rows, next_rows, returns, discount = transition_windows(Tensor(state.columns[0]), *state.flags(), head,
                                                                logical, env, stack_size, n_step, GAMMA)
        np.testing.assert_allclose(returns.asnumpy(), [valid[s][2] for s in starts], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(discount.asnumpy(), [valid[s][4] for s in starts], rtol=1e-6)
        frames = state.frames.asnumpy()
        for field, stacked in ((0, rows), (3, next_rows)):
            physical = ((state.head + stacked.asnumpy()) % max_length) * num_envs + env.asnumpy()[:, None]
            for i, start in enumerate(starts):
                want = valid[start][field]
                np.testing.assert_array_equal(frames[physical[i]].reshape(want.shape), want)


def test_final_rows_follow_the_previous_row_and_refuse_flags():
    ended = np.array([[1, 0], [0, 0], [0, 1]], np.uint8)
    final, ok = final_rows(Tensor(np.array([0, 1], np.int32)), Tensor(ended), Tensor(ended * 0))
    assert final.asnumpy().tolist() == [[False, True], [True, False], [False, False]] and bool(ok)
    _, ok = final_rows(Tensor(np.array([0, 1], np.int32)), Tensor(np.array([[0, 1]], np.uint8)),
                       Tensor(np.zeros((1, 2), np.uint8)))
    assert not bool(ok)


def test_sample_starts_is_guarded_inside_a_graph():
    state = OperatorState(1, 8)
    state.insert(EpisodeStream(1, seed=0, end_probability=0.0).take(3))  # no start has its bootstrap yet

    def draw(key, counter, head, count):
        return sample_starts(state.ranks, head, count, 4, 8, 2, 2, (key, counter))

    with pytest.raises(RuntimeError, match="assert failed"):
        on_path("compiled", draw, random_state(0))(*state.cursors())[0].asnumpy()


def test_sample_starts_draws_only_valid_starts_and_all_of_them():
    case = CASES[2]
    *_, (state, model) = snapshots(case)
    valid = model.valid_starts()
    rows, envs, total = sample_starts(state.ranks, *state.cursors(), 4000, case[3], case[1], case[2], random_state(7))
    picked = set(zip(rows.asnumpy().tolist(), envs.asnumpy().tolist()))
    assert int(total) == len(valid) and picked == set(valid)


def test_a_batch_longer_than_the_ring_writes_each_row_once(monkeypatch):
    """On GPU a scatter's order among repeated rows is undefined: only the newest steps are written."""
    written = []
    scatter_update = ms.ops.scatter_update

    def recording(parameter, rows, values):
        written.append(rows.asnumpy())
        return scatter_update(parameter, rows, values)

    monkeypatch.setattr(ms.ops, "scatter_update", recording)  # the ranks and the start table
    monkeypatch.setattr(_common, "SCATTER_UPDATE", recording)  # the frames (ops._common.write_rows)
    state = OperatorState(2, 3)
    batch = EpisodeStream(2, seed=1).take(7)
    state.insert(batch)
    assert len(written) == 3  # frames, ranks and the start table
    for rows in written[:2]:
        assert sorted(rows.tolist()) == list(range(6))
    # The table's slots: one per non-final row; the final rows all write the spare slot, never read.
    slots = written[2].tolist()
    kept = [slot for slot in slots if slot != 6]
    assert len(kept) == len(set(kept)) and len(kept) < 6 and all(0 <= slot < 6 for slot in kept)
    np.testing.assert_array_equal(state.frames.asnumpy()[:, 0], np.repeat([6, 4, 5], 2))  # steps 4..6, wrapped
