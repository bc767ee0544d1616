"""ReplayBuffer against the numpy reference model, called directly and inside a user's Cell."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn, ops
from mindspore.graph import api as ms_api
from scipy.stats import chisquare

from mindspore_rl_buffer import ReplayBuffer
from tests.helpers import (
    DTYPES,
    MS_DTYPES,
    NAMES,
    SEQUENCE,
    SHAPES,
    Learner,
    RingModel,
    assert_matches,
    decode,
    encoded_batch,
    make,
)


def test_insert_from_empty_wraps_and_overflows_like_the_model():
    rb, model, start = make(), RingModel(7, SHAPES, DTYPES), 0
    assert_matches(rb, model)
    for kind, n in SEQUENCE:
        batch = encoded_batch(start, n, single=kind == "single")
        rb.insert(batch)
        model.insert(encoded_batch(start, n))
        start += n
        assert_matches(rb, model)
        for logical in range(-model.count, model.count):
            got = [x.asnumpy() for x in rb.get_item(logical)]
            for g, w in zip(got, model.item(logical)):
                np.testing.assert_array_equal(g, w)



ALIASES = {
    "its own column": lambda rb, other: rb.columns[0],
    "another buffer's column of the same name": lambda rb, other: other.columns[0],
}


@pytest.mark.parametrize("stored", [3, 7])  # before full; full with the head moved
@pytest.mark.parametrize("alias", list(ALIASES))
def test_a_direct_insert_of_a_buffer_s_parameter_stores_the_values_it_had(alias, stored):
    def filled():
        rb = ReplayBuffer(2, 5, [()], [ms.int32], seed=0)
        rb.insert([np.arange(stored, dtype=np.int32)])
        return rb

    rb, other = filled(), filled()
    model = RingModel(5, [()], [np.int32])
    model.insert([np.arange(stored, dtype=np.int32)])
    given = ALIASES[alias](rb, other)
    values = given.asnumpy().copy()  # what the transition holds when the call is made
    rb.insert([given])
    model.insert([values])
    assert_matches(rb, model)



def test_inside_a_cell_a_copy_of_the_buffer_s_own_column_goes_in_as_the_guide_says():
    class ReinsertOwnColumn(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            _ = self.buffer.insert([ops.deepcopy(self.buffer.columns[0])])
            return self.buffer.count

    rb, model = ReplayBuffer(2, 5, [()], [ms.int32], seed=0), RingModel(5, [()], [np.int32])
    rb.insert([np.arange(7, dtype=np.int32)])
    model.insert([np.arange(7, dtype=np.int32)])
    values = rb.columns[0].asnumpy().copy()
    ReinsertOwnColumn(rb)()
    model.insert([values])
    assert_matches(rb, model)


@pytest.mark.parametrize("kind", ["ReplayBuffer", "PriorityReplayBuffer", "ShardedReplayBuffer"])
@pytest.mark.slow
def test_batches_of_many_sizes_compile_a_bounded_number_of_inserts_and_go_in_as_one_batch(monkeypatch, kind):
    """Episodes of many lengths inserted one batch each (MindSpore Reinforcement's GAIL expert buffer):
    past EXACT_INSERT_SIZES sizes, a new size goes in as power-of-two pieces, in order."""
    from mindspore_rl_buffer import PriorityReplayBuffer, ShardedReplayBuffer, _graph

    launched = []

    def recording(buffer, body, args):
        if body.__name__ == "insert":
            launched.append(int(args[0][0].shape[0]))
        return launch(buffer, body, args)

    launch = _graph.launch
    monkeypatch.setattr(_graph, "launch", recording)
    capacity = 97
    rb = {"ReplayBuffer": lambda: make(capacity=capacity),
          "PriorityReplayBuffer": lambda: PriorityReplayBuffer(0.6, capacity, 5, SHAPES, MS_DTYPES, names=NAMES),
          "ShardedReplayBuffer": lambda: ShardedReplayBuffer(5, capacity, SHAPES, MS_DTYPES, names=NAMES)}[kind]()
    model, start = RingModel(capacity, SHAPES, DTYPES), 0
    lengths = [3, 3, 5, 6, 7, 9, 10, 11, 12, 13, 3, 21, 37, 50, 101, 130, 99, 13, 41]
    for n in lengths:
        rb.insert(encoded_batch(start, n))
        model.insert(encoded_batch(start, n))
        start += n
        columns = [column.asnumpy() for column in (rb.storage if kind == "ShardedReplayBuffer" else rb).columns]
        for got, want in zip(columns, model.columns):
            np.testing.assert_array_equal(got, want)
    first_sizes = list(dict.fromkeys(n for n in lengths if n & (n - 1)))[:_graph.EXACT_INSERT_SIZES]
    assert set(launched) <= {*first_sizes, *(2**k for k in range(8))}
    assert len(launched) > len(lengths), "no batch went in as pieces"


def test_pieces_of_a_batch_do_not_go_through_a_subclass_s_insert_again():
    class Scaled(ReplayBuffer):  # a user's subclass that preprocesses what it is given, once
        def insert(self, exp):
            self.calls = getattr(self, "calls", 0) + 1
            return super().insert([exp[0] * 2, exp[1], exp[2]])

    rb, model, start = Scaled(5, 50, SHAPES, MS_DTYPES, names=NAMES), RingModel(50, SHAPES, DTYPES), 0
    lengths = [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 19, 37]  # 13, 19 and 37 go in as pieces
    for n in lengths:
        batch = encoded_batch(start, n)
        rb.insert(batch)
        model.insert([batch[0] * 2, batch[1], batch[2]])
        start += n
        assert_matches(rb, model)
    assert rb.calls == len(lengths)


def test_batch_equals_capacity_and_batch_crosses_end_before_full():
    rb, model = make(capacity=5), RingModel(5, SHAPES, DTYPES)
    for start, n in [(0, 5), (5, 5), (10, 3), (13, 4)]:
        rb.insert(encoded_batch(start, n))
        model.insert(encoded_batch(start, n))
        assert_matches(rb, model)


def test_inside_a_cell_insert_then_sample_sees_the_inserted_rows():
    rb, model, start = make(), RingModel(7, SHAPES, DTYPES), 0
    learner = Learner(rb)
    for n in [1, 3, 3, 3, 9, 1, 3]:
        batch = encoded_batch(start, n)
        size, full, newest, logical, sampled, ordered = learner(*(Tensor(x) for x in batch))
        model.insert(batch)
        start += n
        assert_matches(rb, model)
        assert (int(size), bool(full)) == (model.count, model.count == 7)
        assert decode(*newest) == start - 1
        ids = decode(*sampled)
        logical = logical.asnumpy()
        assert ((logical >= 0) & (logical < model.count)).all()
        np.testing.assert_array_equal(ids, [model.item(i)[1] for i in logical])
        ordered_ids = decode(*ordered)
        assert (np.diff(ordered_ids) >= 0).all(), "ordered samples must come oldest first"
        assert set(ordered_ids) <= set(range(start - model.count, start))


def test_repeated_calls_with_new_data_do_not_recompile():
    rb = make()
    before = len(ms_api.ms_compile_cache)
    rb.insert(encoded_batch(0, 3))
    rb.sample()
    rb.get_item(0)
    compiled = len(ms_api.ms_compile_cache)
    assert compiled > before, "the probe must see the first compilations"
    for start in range(3, 30, 3):
        rb.insert(encoded_batch(start, 3))
        rb.sample()
        rb.get_item(start % 7)
        rb.get_item(-1)
    assert len(ms_api.ms_compile_cache) == compiled


@pytest.mark.parametrize("ordered", [False, True])
def test_samples_are_intact_valid_and_uniform_when_wrapped(ordered):
    ms.set_seed(11)
    rb = make(capacity=16, sample_size=4096)
    rb.insert(encoded_batch(0, 40))  # wrapped: holds items 24..39, head at 8
    ids = decode(*rb.sample(ordered=ordered))
    assert ids.min() >= 24 and ids.max() <= 39
    if ordered:
        assert (np.diff(ids) >= 0).all()
    # 16 equally likely items, 4096 draws (expected 256 each): with a fixed seed the test is
    # deterministic; a p-value below 1e-4 would mean a clearly non-uniform draw.
    counts = np.bincount(ids - 24, minlength=16)
    assert chisquare(counts).pvalue > 1e-4


def test_samples_stay_within_the_stored_items_before_full():
    ms.set_seed(3)
    rb = make(capacity=16, sample_size=2000)
    rb.insert(encoded_batch(100, 10))
    logical, sampled = rb.sample_with_indices()
    ids = decode(*sampled)
    np.testing.assert_array_equal(ids, 100 + logical.asnumpy())
    assert chisquare(np.bincount(ids - 100, minlength=10)).pvalue > 1e-4


def test_sample_without_replacement_draws_distinct_items_uniformly():
    ms.set_seed(5)
    rb = make(capacity=16, sample_size=10, replace=False)
    rb.insert(encoded_batch(0, 28))  # holds 12..27
    counts = np.zeros(16)
    for _ in range(150):
        ids = decode(*rb.sample())
        assert len(set(ids)) == 10 and ids.min() >= 12
        counts += np.bincount(ids - 12, minlength=16)
    assert chisquare(counts).pvalue > 1e-4
    rb10 = make(capacity=16, sample_size=10, replace=False, ordered=True)
    rb10.insert(encoded_batch(0, 10))
    np.testing.assert_array_equal(decode(*rb10.sample()), np.arange(10))


def test_sample_with_replacement_may_exceed_size():
    rb = make(capacity=8, sample_size=50)
    rb.insert(encoded_batch(0, 2))
    assert set(decode(*rb.sample())) <= {0, 1}


def test_get_item_takes_an_index_tensor_and_negative_indexes():
    rb = make()
    rb.insert(encoded_batch(0, 10))  # holds 3..9
    ids = decode(*rb.get_item(Tensor(np.array([0, -1, 3, -7], np.int32))))
    np.testing.assert_array_equal(ids, [3, 9, 6, 3])
    assert decode(*rb.get_item(np.int64(2))) == 5


@pytest.mark.parametrize("call, message", [
    (lambda rb: rb.get_item(10**400), r"'index' must be in \[-3, 3\) .* but got 10{17}\.\.\.0{19}\.$"),
    (lambda rb: rb.get_item(-(10**400)), r"but got -10{16}\.\.\.0{19}\.$"),
    (lambda rb: make(capacity=10**400), r"'capacity' must be .* but got 10{17}\.\.\.0{19}\.$"),
])
def test_a_huge_int_is_quoted_by_its_first_and_last_digits(call, message):
    rb = make()
    rb.insert(encoded_batch(0, 3))
    with pytest.raises((IndexError, ValueError), match=message) as caught:
        call(rb)
    assert len(str(caught.value)) < 200
    assert (int(rb.head), int(rb.count)) == (0, 3)


def test_reset_returns_to_the_constructed_state():
    rb, model = make(), RingModel(7, SHAPES, DTYPES)
    rb.insert(encoded_batch(0, 10))  # wrapped: head != 0
    assert int(rb.head) != 0
    rb.reset()
    assert (int(rb.head), int(rb.count)) == (0, 0)
    rb.insert(encoded_batch(50, 4))
    model.insert(encoded_batch(50, 4))
    assert (int(rb.head), int(rb.count)) == (model.head, model.count)
    np.testing.assert_array_equal(decode(*rb.get_item(Tensor(np.arange(4, dtype=np.int32)))), [50, 51, 52, 53])


def test_reset_size_full_inside_a_cell():
    class Resetter(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, state, action, reward):
            _ = self.buffer.insert([state, action, reward])
            before = self.buffer.full()
            self.buffer.reset()
            return before, self.buffer.size(), self.buffer.full()

    rb = make(capacity=3)
    before, size, full = Resetter(rb)(*(Tensor(x) for x in encoded_batch(0, 3)))
    assert (bool(before), int(size), bool(full)) == (True, 0, False)
    assert (int(rb.head), int(rb.count)) == (0, 0)


def test_a_bare_insert_statement_in_a_construct_names_the_fix():
    class Bare(nn.Cell):
        def __init__(self):
            super().__init__()
            self.replay = make()

        def construct(self, state, action, reward):
            self.replay.insert([state, action, reward])
            return self.replay.sample()

    with pytest.raises(TypeError, match=r"Write `_ = self\.replay\.insert\(\.\.\.\)` instead"):
        Bare()(*(Tensor(x) for x in encoded_batch(0, 2)))


def test_a_bare_insert_on_a_local_alias_names_the_fix():
    class Alias(nn.Cell):
        def __init__(self):
            super().__init__()
            self.replay = make()

        def construct(self, state, action, reward):
            buffer = self.replay
            buffer.insert([state, action, reward])  # rewritten by MindSpore into `buffer = buffer.insert(...)`
            return buffer.size()

    with pytest.raises(TypeError, match=r"called through MindSpore's Python fallback .* Write `_ = b\.insert"):
        Alias()(*(Tensor(x) for x in encoded_batch(0, 2)))


def test_shape_errors_inside_a_cell_are_raised_at_compile_time():
    with pytest.raises(ValueError, match=r"shape of column 'state' must be \(2,\) .* got \(4, 3\)"):
        Learner(make())(Tensor(np.zeros((4, 3), np.float32)), Tensor(np.zeros(4, np.int32)),
                        Tensor(np.zeros((4, 1), np.float32)))


def test_sampling_an_empty_buffer_inside_a_cell_fails_loudly():
    class Sampler(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self):
            return self.buffer.sample()

    rb = make()
    with pytest.raises(RuntimeError, match="assert failed"):  # one Assert kernel: see ops/ring.py
        Sampler(rb)()
    rb.insert(encoded_batch(0, 2))  # the buffer itself keeps working
    assert set(decode(*rb.sample())) <= {0, 1}


def test_get_item_out_of_range_inside_a_cell_fails_loudly():
    class Reader(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

        def construct(self, index):
            return self.buffer.get_item(index)

    rb = make()
    rb.insert(encoded_batch(0, 2))
    with pytest.raises(RuntimeError, match="assert failed"):
        Reader(rb)(Tensor(2, ms.int32))
    with pytest.raises(RuntimeError, match="assert failed"):
        Reader(make())(Tensor(-1, ms.int32))


SEED_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import mindspore as ms
    from mindspore_rl_buffer import ReplayBuffer
    ms.set_context(mode=ms.GRAPH_MODE)
    if sys.argv[1] == "global":
        ms.set_seed(1234)
        rb = ReplayBuffer(6, 50, [()], [ms.int32])
    else:
        rb = ReplayBuffer(6, 50, [()], [ms.int32], seed=99)
    rb.insert([np.arange(50, dtype=np.int32)])
    print([rb.sample()[0].asnumpy().tolist() for _ in range(3)])
""")


@pytest.mark.parametrize("how", ["global", "argument"])
@pytest.mark.slow
def test_seeded_runs_sample_identical_indexes(tmp_path, how):
    script = tmp_path / "seeded.py"
    script.write_text(SEED_SCRIPT)
    runs = [subprocess.run([sys.executable, str(script), how], capture_output=True, text=True,
                           check=True, cwd=tmp_path).stdout.strip().splitlines()[-1] for _ in range(2)]
    assert runs[0] == runs[1]
    draws = eval(runs[0])  # three consecutive draws of one run
    assert draws[0] != draws[1] != draws[2]


# ------------------------------------------------------------ index widths and capacities
class Reader(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, index):
        return self.buffer.get_item(index)


@pytest.mark.parametrize("index, dtype", [(4294967297, np.int64), (-4294967294, np.int64), (2**40, np.int64),
                                          (2**64 - 1, np.uint64), (2**64 - 5, np.uint64)])
@pytest.mark.slow
def test_an_index_past_int32_is_refused_in_a_graph_not_cut_to_another_item(index, dtype):
    # A uint64 near 2**64 is -1 or -5 once held in int64: never an index from the end.
    rb = make()
    rb.insert(encoded_batch(0, 5))
    with pytest.raises(RuntimeError, match="assert failed"):
        Reader(rb)(Tensor(np.array([index], dtype)))
    with pytest.raises(IndexError, match=f"but got {index}"):  # and directly, on the host
        rb.get_item(np.array([index], dtype))


class ConstantReader(nn.Cell):
    def __init__(self, buffer, index):
        super().__init__()
        self.buffer = buffer
        self.index = index

    def construct(self):
        return self.buffer.get_item(self.index)


@pytest.mark.parametrize("index", [2**32 + 1, -(2**32) + 2, 8, -9])
def test_a_constant_index_past_the_capacity_is_refused_when_the_graph_compiles(index):
    rb = make(capacity=8)
    rb.insert(encoded_batch(0, 5))
    with pytest.raises(IndexError, match=rf"'index' must be in \[-count, count\) .* \[-8, 8\), but got {index}\."):
        ConstantReader(rb, index)()
    np.testing.assert_array_equal(decode(*ConstantReader(rb, -1)()), 4)  # in range: read as ever


@pytest.mark.parametrize("index", [1.0, "1", None])
def test_a_constant_index_not_an_int_is_refused_when_the_graph_compiles_as_a_direct_call_refuses_it(index):
    # A float constant failed inside the check (AttributeError: 'Float' object has no attribute 'dtype').
    rb = make()
    rb.insert(encoded_batch(0, 5))
    with pytest.raises(TypeError) as direct:
        rb.get_item(index)
    with pytest.raises(TypeError) as compiled:
        ConstantReader(rb, index)()
    assert str(compiled.value).splitlines()[0] == str(direct.value)
    assert str(direct.value) == (f"For 'get_item', 'index' must be an int or an int tensor, but got "
                                 f"{type(index).__name__}.")


def test_a_mutable_int_index_is_read_as_an_index_tensor_in_a_graph():
    # A mutable int crashed the compile inside the check ('<=' between int and NoneType); it is a 0-d
    # int64 index now, checked when the graph runs, while a mutable bool or float is refused when it compiles.
    rb = make()
    rb.insert(encoded_batch(0, 5))
    reader = Reader(rb)
    assert [decode(*reader(ms.mutable(i))) for i in (1, -1, 3)] == [1, 4, 3]  # one graph, three indexes
    assert [decode(*rb.get_item(ms.mutable(i))) for i in (1, -1)] == [1, 4]  # as directly
    for value in (True, 1.5):
        with pytest.raises(TypeError) as compiled:
            Reader(rb)(ms.mutable(value))
        assert str(compiled.value).splitlines()[0] == (
            f"For 'get_item', 'index' must be an int or an int tensor, but got {type(value).__name__}.")
    with pytest.raises(RuntimeError, match="assert failed"):
        Reader(rb)(ms.mutable(5))


def test_int64_and_unsigned_index_tensors_in_range_read_the_right_items_in_a_graph():
    rb = make()
    rb.insert(encoded_batch(0, 5))
    for dtype in (np.int64, np.uint32, np.int16):
        reader = Reader(rb)
        np.testing.assert_array_equal(decode(*reader(Tensor(np.array([0, 4, 2], dtype)))), [0, 4, 2])


@pytest.mark.parametrize("capacity", [2**30 + 1, 2**31 - 1, 2**33])
def test_capacities_past_two_to_the_30_are_refused_with_the_bound(capacity):
    with pytest.raises(ValueError, match=r"'capacity' must be an int <= 1073741824 \(2\*\*30, .*\), but got "
                                         f"{capacity}"):
        make(capacity=capacity)


def test_two_buffers_with_the_same_seed_draw_the_same_indexes_whatever_was_built_before():
    first = make(capacity=50, sample_size=8, seed=5)
    ReplayBuffer(3, 10, [()], [ms.int32], seed=5).insert([np.arange(4, dtype=np.int32)])  # in between
    second = make(capacity=50, sample_size=8, seed=5)
    for rb in (first, second):
        rb.insert(encoded_batch(0, 50))
    draws = [[decode(*rb.sample()).tolist() for _ in range(3)] for rb in (first, second)]
    assert draws[0] == draws[1]
    assert draws[0][0] != draws[0][1], "successive draws of one buffer still differ"
    third = make(capacity=50, sample_size=8, seed=6)
    third.insert(encoded_batch(0, 50))
    assert decode(*third.sample()).tolist() != draws[0][0]
