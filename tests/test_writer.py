"""BufferWriter against the numpy reference model: what reaches the buffer, and when."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import types

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from mindspore.graph import api as ms_api

from mindspore_rl_buffer import (
    BufferWriter,
    DroppedTransitionsWarning,
    PriorityReplayBuffer,
    ReplayBuffer,
    ReservoirReplayBuffer,
    ShardedReplayBuffer,
)
from tests.helpers import (
    BAD_CALLS,
    DTYPES,
    MS_DTYPES,
    NAMES,
    SHAPES,
    RingModel,
    assert_matches,
    decode,
    encoded_batch,
    make,
    state_of,
)


class WriterModel:
    """The writer's contract: stage in order; a full stage, or a flush, inserts what is staged."""

    def __init__(self, model: RingModel, batch_size: int) -> None:
        self.model, self.batch_size, self.staged = model, batch_size, []

    def insert(self, batch) -> None:
        for j in range(len(batch[0])):
            self.staged.append([column[j] for column in batch])
            if len(self.staged) == self.batch_size:
                self.flush()

    def flush(self) -> None:
        if self.staged:
            self.model.insert([np.stack(column) for column in zip(*self.staged)])
        self.staged = []


# Singles, batches smaller and larger than the stage (3) and the capacity (7), empty
# batches, and explicit flushes at every fill level.
SEQUENCE = [("single", 1), ("single", 1), ("flush", 0), ("batch", 2), ("batch", 0), ("single", 1),
            ("single", 1), ("batch", 5), ("flush", 0), ("batch", 9), ("single", 1), ("flush", 0),
            ("flush", 0), ("batch", 16), ("batch", 1), ("single", 1), ("flush", 0)]


def test_writer_matches_the_model_through_partial_flushes_wraparound_and_overflow():
    rb = make(capacity=7)
    model = WriterModel(RingModel(7, SHAPES, DTYPES), 3)
    writer, start = rb.writer(3), 0
    for kind, n in SEQUENCE:
        if kind == "flush":
            writer.flush()
            model.flush()
        else:
            writer.insert(encoded_batch(start, n, single=kind == "single"))
            model.insert(encoded_batch(start, n))
            start += n
        assert writer.pending == len(model.staged), (kind, n)
        assert_matches(rb, model.model)
    assert start > 7 * 3


def test_staged_transitions_are_invisible_until_flushed_and_a_with_block_flushes():
    rb = make(capacity=50, sample_size=64)
    with rb.writer(4) as writer:
        writer.insert(encoded_batch(0, 3))
        assert int(rb.size()) == 0 and writer.pending == 3
        writer.insert(encoded_batch(3, 1, single=True))  # the fourth fills the stage
        assert int(rb.size()) == 4 and writer.pending == 0
        writer.insert(encoded_batch(4, 2))
        assert int(rb.size()) == 4
        assert set(decode(*rb.sample())) <= set(range(4))
    assert int(rb.size()) == 6 and writer.pending == 0
    assert [int(decode(*rb.get_item(i))) for i in range(6)] == list(range(6))


def test_the_writer_takes_the_transition_as_exp_as_insert_does():
    rb = make(capacity=10, sample_size=4)
    writer = rb.writer(4)
    writer.insert(exp=encoded_batch(0, 2))  # MindSpore Reinforcement's name
    writer.insert(exp=tuple(encoded_batch(2, 1, single=True)))
    writer.insert(*encoded_batch(3, 1, single=True))
    assert writer.pending == 0 and [int(decode(*rb.get_item(i))) for i in range(4)] == [0, 1, 2, 3]
    with pytest.raises(TypeError, match=r"give the transition once, as columns or as 'exp', but got 3 column"):
        writer.insert(*encoded_batch(4, 1, single=True), exp=encoded_batch(4, 1, single=True))
    assert writer.pending == 0 and int(rb.size()) == 4


def test_tensors_are_taken_and_the_stage_is_copied_not_shared():
    rb = make(capacity=10)
    writer = rb.writer(2)
    item = encoded_batch(0, 1, single=True)
    writer.insert([Tensor(x) for x in item])
    item[0][:] = 99.0  # changing the caller's array after the call changes nothing
    writer.insert(encoded_batch(1, 1, single=True))  # fills the stage: inserted
    writer.insert(encoded_batch(2, 1, single=True))  # overwrites the stage's first row
    writer.flush()
    assert [int(decode(*rb.get_item(i))) for i in range(3)] == [0, 1, 2]


def test_flushing_at_every_fill_level_compiles_a_bounded_number_of_graphs():
    rb = make(capacity=100)
    writer = rb.writer(8)
    writer.insert(encoded_batch(0, 8))  # the full-stage graph
    before = len(ms_api.ms_compile_cache)
    start = 8
    for pending in range(1, 8):
        writer.insert(encoded_batch(start, pending))
        writer.flush()
        start += pending
    # Partial stages go in as powers of two: sizes 1, 2 and 4, whatever the fill level.
    assert len(ms_api.ms_compile_cache) - before <= 3
    assert [int(decode(*rb.get_item(i))) for i in range(start)] == list(range(start))


INSERT_CALLS = [call for call in BAD_CALLS if call[0].startswith("insert")]


@pytest.mark.parametrize("name, call, error, message", INSERT_CALLS, ids=[c[0] for c in INSERT_CALLS])
def test_bad_input_gets_the_insert_error_and_changes_nothing(name, call, error, message):
    rb = make()
    writer = rb.writer(4)
    writer.insert(encoded_batch(0, 2))
    before, stage_before = state_of(rb), [stage.copy() for stage in writer._staging]
    with pytest.raises(error, match=message):
        call(types.SimpleNamespace(insert=writer.insert))
    assert writer.pending == 2
    for got, want in zip(writer._staging, stage_before):
        np.testing.assert_array_equal(got, want)
    after = state_of(rb)
    assert after[1:] == before[1:]
    writer.insert(encoded_batch(2, 1, single=True))  # and it keeps working
    writer.flush()
    assert [int(decode(*rb.get_item(i))) for i in range(3)] == [0, 1, 2]


@pytest.mark.parametrize("batch_size, error, message", [
    (0, ValueError, r"For 'writer', 'batch_size' must be an int >= 1, but got 0"),
    (2.0, TypeError, r"For 'writer', 'batch_size' must be an int"),
    (True, TypeError, r"For 'writer', 'batch_size' must be an int"),
])
def test_bad_batch_size_is_refused(batch_size, error, message):
    with pytest.raises(error, match=message):
        make().writer(batch_size)


def test_a_writer_dropped_with_staged_transitions_warns():
    writer = make().writer(4)
    writer.insert(encoded_batch(0, 1, single=True))
    with pytest.warns(DroppedTransitionsWarning, match="dropped 1 staged transitions that were never flushed"):
        del writer
        gc.collect()


def test_a_plain_run_shows_the_lost_transitions_without_any_warning_flag(tmp_path):
    script = tmp_path / "drop.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import mindspore as ms
        from mindspore_rl_buffer import ReplayBuffer
        ms.set_context(mode=ms.GRAPH_MODE)
        rb = ReplayBuffer(2, 8, [()], [ms.int32])
        writer = rb.writer(4)
        for i in range(3):
            writer.insert([np.int32(i)])
        del writer
        print("size", int(rb.size()))
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "size 0" in result.stdout
    assert "DroppedTransitionsWarning: BufferWriter dropped 3 staged transitions" in result.stderr


@pytest.mark.parametrize("make_buffer", [
    lambda: PriorityReplayBuffer(0.6, 10, 4, SHAPES, MS_DTYPES, names=NAMES),
    lambda: ReservoirReplayBuffer(10, 4, SHAPES, MS_DTYPES, names=NAMES, seed=1),
    lambda: ShardedReplayBuffer(4, 10, SHAPES, MS_DTYPES, names=NAMES),
], ids=["priority", "reservoir", "sharded"])
def test_the_other_buffers_take_a_writer(make_buffer):
    buffer = make_buffer()
    with buffer.writer(3) as writer:
        assert isinstance(writer, BufferWriter)
        for i in range(7):
            writer.insert(encoded_batch(i, 1, single=True))
    assert int(buffer.size()) == 7
    sampled = buffer.sample(1.0) if isinstance(buffer, PriorityReplayBuffer) else buffer.sample()
    assert set(decode(*sampled[2:] if isinstance(buffer, PriorityReplayBuffer) else sampled)) <= set(range(7))


def test_a_bfloat16_column_is_refused_before_any_writer_exists():
    # A bfloat16 column used to be accepted and then fail at the first insert (no kernel) or
    # when a writer was made (no numpy dtype): the buffer now refuses it at construction.
    with pytest.raises(ValueError, match="bfloat16 is not supported"):
        ReplayBuffer(2, 4, [(2,)], [ms.bfloat16])


def test_the_writer_takes_every_form_insert_takes():
    from mindspore_rl_buffer import UniformReplayBuffer

    two = UniformReplayBuffer(2, 8, [(2,), ()], [ms.float32, ms.int32])
    one = ReplayBuffer(2, 8, [(2,)], [ms.float32])
    with two.writer(4) as writer:
        writer.insert(np.full(2, 1.0, np.float32), np.int32(1))  # one array per column, as insert(state, action)
        writer.insert([np.full((2, 2), 2.0, np.float32), np.array([2, 3], np.int32)])
    with one.writer(4) as writer:
        writer.insert(np.full(2, 1.0, np.float32))  # a one-column buffer: the column alone
        writer.insert([np.full((2, 2), 2.0, np.float32)])
    assert [int(two.get_item(i)[1]) for i in range(3)] == [1, 2, 3]
    assert [float(one.get_item(i)[0][0]) for i in range(3)] == [1.0, 2.0, 2.0]
    with pytest.raises(TypeError, match=r"'transition' must be a list or tuple of arrays, one per column, but got "
                                        r"ndarray"):
        two.writer(4).insert(np.ones(2, np.float32))


@pytest.mark.parametrize("how", ["array", "Tensor(array)", "writer"])
def test_writing_into_an_array_right_after_insert_returns_does_not_change_what_is_stored(how):
    # MindSpore launches asynchronously; a tensor sharing the array's memory (Tensor.from_numpy)
    # was read after insert returned in every try of a scratch test. The buffer copies arrays, and
    # the writer stages copies, so the caller may reuse its array at once.
    rows, width = 4096, 64
    rb = ReplayBuffer(2, 2 * rows, [(width,)], [ms.float32])
    for trial in range(10):
        rb.reset()
        writer = rb.writer(rows)
        array = np.full((rows, width), trial, np.float32)
        if how == "writer":
            writer.insert([array])  # a full stage: inserted now
            writer.insert([np.full((rows // 2, width), -1.0, np.float32)])  # the stage refilled at once
        else:
            rb.insert([array if how == "array" else Tensor(array)])
        array[:] = -1.0
        stored = rb.get_item(np.arange(rows))[0].asnumpy()
        np.testing.assert_array_equal(stored, np.full((rows, width), trial, np.float32))
        writer.flush()


class _FailingOnce:
    """A buffer whose ``fail``-th insert raises: what an interrupted or refused flush meets."""

    def __init__(self, buffer, fail):
        self.buffer, self.fail, self.calls = buffer, fail, 0
        self.specs = buffer.specs

    def insert(self, columns):
        self.calls += 1
        if self.calls == self.fail:
            raise KeyboardInterrupt
        self.buffer.insert(columns)


def test_a_flush_that_fails_partway_never_inserts_a_transition_twice_and_the_writer_goes_on():
    # A partial stage goes in pieces (4, 2, 1 for 7): the pending count was cleared only at the
    # end, so an interrupted flush inserted its first pieces again at the next; and an insert
    # into a stage left full by a failed flush raised IndexError ever after.
    rb = ReplayBuffer(2, 64, [()], [ms.int32])
    flaky = _FailingOnce(rb, fail=2)
    writer = BufferWriter(flaky, 8)
    writer.insert([np.arange(7, dtype=np.int32)])
    with pytest.raises(KeyboardInterrupt):
        writer.flush()  # the piece of 4 went in, the piece of 2 did not
    assert (int(rb.size()), writer.pending) == (4, 3)
    writer.flush()
    writer.insert([np.arange(7, 20, dtype=np.int32)])
    writer.flush()
    np.testing.assert_array_equal(rb.get_item(np.arange(20))[0].asnumpy(), np.arange(20))
    full = BufferWriter(_FailingOnce(rb, fail=1), 4)
    full.insert([np.arange(100, 103, dtype=np.int32)])
    with pytest.raises(KeyboardInterrupt):
        full.insert([np.array([103], np.int32)])  # fills the stage, whose insert fails: the call is undone
    assert full.pending == 3
    full.insert([np.array([103], np.int32)])  # retried: nothing twice
    full.insert([np.array([104], np.int32)])
    assert full.pending == 1 and full.discard() == 1 and full.pending == 0
    np.testing.assert_array_equal(rb.get_item(np.arange(20, 24))[0].asnumpy(), np.arange(100, 104))
    assert int(rb.size()) == 24
    # A batch larger than the stage: what went in before the failure is named on the error.
    batch = BufferWriter(_FailingOnce(rb, fail=2), 4)
    with pytest.raises(KeyboardInterrupt) as failed:
        batch.insert([np.arange(200, 210, dtype=np.int32)])
    assert failed.value.__notes__ == ["BufferWriter.insert: 4 of its 10 transitions went into the buffer before it "
                                      "failed; the other 6 are not staged."]
    assert batch.pending == 0 and int(rb.size()) == 28
    np.testing.assert_array_equal(rb.get_item(np.arange(24, 28))[0].asnumpy(), np.arange(200, 204))
