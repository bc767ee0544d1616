"""Every malformed call gets a clear error and leaves the buffer exactly as it was."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from tests.helpers import BAD_CALLS, F32, GOOD, I32, assert_state_unchanged, decode, encoded_batch, make, state_of


@pytest.fixture(scope="module")
def catalogue_buffer():
    """One buffer for the whole catalogue of bad calls: its graphs compile once."""
    return make()


@pytest.mark.parametrize("name, call, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_and_leaves_the_buffer_unchanged(catalogue_buffer, name, call, error, message):
    rb = catalogue_buffer
    rb.reset()  # every case starts from the same state: one item, at row 0
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
    with pytest.raises(IndexError, match=r"^For 'get_item', the buffer is empty \(holding 0 items\): no 'index' fits, "
                                         r"but got 0\.$"):
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
    ([(1,)], [ms.bfloat16], r"data_type\[0\] bfloat16 is not supported: .* store float32"),
])
def test_bad_column_specs(shapes, types, message):
    from mindspore_rl_buffer import ReplayBuffer

    with pytest.raises(ValueError, match=f"^For 'ReplayBuffer', .*{message}"):
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


# ------------------------------------------- the catalogue: every buffer type and face
def snapshot(buffer):
    """Every byte of a buffer's state: its Parameters (Cells) or its arrays (the numpy buffer)."""
    tensors = buffer.checkpoint_tensors()
    return {name: np.array(value.asnumpy() if hasattr(value, "asnumpy") else value, copy=True).tobytes()
            for name, value in tensors.items()}


def _buffers():
    from mindspore_rl_buffer import (
        PriorityReplayBuffer,
        PyUniformReplayBuffer,
        ReservoirReplayBuffer,
        ShardedReplayBuffer,
        TrajectoryReplayBuffer,
    )
    from tests.helpers import MS_DTYPES, NAMES, SHAPES, SPEC1, step_values

    def filled(buffer):
        buffer.insert(encoded_batch(0, 3))
        return buffer

    def trajectory():
        rb = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
        for t in range(3):
            rb.add_batch({"value": step_values(t, 2).astype(np.float32)})
        return rb

    def numpy_buffer():
        rb = PyUniformReplayBuffer(SPEC1, capacity=4)
        rb.add_batch({"value": np.arange(3, dtype=np.float32)})
        return rb

    return {
        "replay": lambda: filled(make()),
        "priority": lambda: filled(PriorityReplayBuffer(0.6, 7, 4, SHAPES, MS_DTYPES, names=NAMES)),
        "reservoir": lambda: filled(ReservoirReplayBuffer(7, 4, SHAPES, MS_DTYPES, names=NAMES)),
        "sharded": lambda: filled(ShardedReplayBuffer(4, 7, SHAPES, MS_DTYPES, names=NAMES)),
        "trajectory": trajectory,
        "numpy": numpy_buffer,
    }


BIG = np.float32(3e38)


def _filled_tf_agents(kind):
    """A TF-Agents buffer holding one (1024, 1024) float32 item (4 MiB)."""
    from mindspore_rl_buffer import PyUniformReplayBuffer, TensorSpec, TrajectoryReplayBuffer

    spec = {"frame": TensorSpec([1024, 1024], ms.float32)}
    if kind == "device":
        buffer = TrajectoryReplayBuffer(spec, batch_size=1, max_length=2)
    else:
        buffer = PyUniformReplayBuffer(spec, 2)
    buffer.add_batch({"frame": np.zeros((1, 1024, 1024), F32)})
    return buffer


def named(names):
    from mindspore_rl_buffer import ReplayBuffer
    from tests.helpers import MS_DTYPES, SHAPES

    return ReplayBuffer(4, 7, SHAPES, MS_DTYPES, names=names)
CATALOGUE = [
    # (buffer, call, error, message naming the argument or column)
    ("replay", lambda b: b.get_item(np.uint64(2**63)), IndexError, r"'index' .* but got 9223372036854775808"),
    ("replay", lambda b: b.get_item(2**70), IndexError, r"'index' .* but got 1180591620717411303424"),
    ("replay", lambda b: b.get_item(np.array([1, 2**40], np.int64)), IndexError, r"'index' .* but got 1099511627776"),
    ("replay", lambda b: b.insert([GOOD[0].astype(">f8"), GOOD[1], GOOD[2]]), ValueError,
     "dtype of column 'state' must be Float32, but got Float64"),
    ("replay", lambda b: b.sample(ordered=1), TypeError, "'ordered' must be a bool or None, but got int"),
    ("priority", lambda b: b.update_priorities(np.array([0], I32), np.array([BIG])), ValueError,
     r"'priorities' must be at most"),
    ("priority", lambda b: b.update_priorities(np.array([0], np.uint64), np.array([np.inf], F32)), ValueError,
     "'priorities' must be finite"),
    ("priority", lambda b: b.update_priorities(np.array([2**63], np.uint64), np.ones(1, F32)), IndexError,
     r"'indices' .* but got 9223372036854775808"),
    ("priority", lambda b: b.sample(float("inf")), ValueError, "'beta' must be a finite float"),
    ("priority", lambda b: b.get_item(-4), IndexError, r"'index' must be in \[-3, 3\)"),
    ("reservoir", lambda b: b.insert([GOOD[0][:1], GOOD[1], GOOD[2]]), ValueError, "every column must hold"),
    ("reservoir", lambda b: b.get_item(3), IndexError, "but got 3"),
    ("sharded", lambda b: b.insert([GOOD[0], GOOD[1]]), ValueError, r"must have 3 columns"),
    ("sharded", lambda b: b.sample(ordered="no"), TypeError, "'ordered' must be a bool or None"),
    ("trajectory", lambda b: b.add_batch({"value": np.zeros(3, F32)}), ValueError,
     r"the shape of items\['value'\] 'value' must be \(2,\), but got \(3,\)"),
    ("trajectory", lambda b: b.add_batch({"other": np.zeros(2, F32)}), ValueError, "structure of the data spec"),
    ("trajectory", lambda b: b.get_next(num_steps=4), ValueError, r"'num_steps' \(4\) must not exceed the 3"),
    ("trajectory", lambda b: b.get_next(time_stacked="yes"), TypeError, "'time_stacked' must be a bool"),
    ("numpy", lambda b: b.add_batch({"value": np.zeros(2, np.int32)}), ValueError,
     r"the dtype of items\['value'\] 'value' must be Float32, but got Int32"),
    ("numpy", lambda b: b.get_next(sample_batch_size=0), ValueError, "'sample_batch_size' must be an int >= 1"),
    ("replay", lambda b: b.insert([np.array([[1.0, None]], object), GOOD[1][:1], GOOD[2][:1]]), ValueError,
     "the dtype of column 'state' must be a bool, int or float array of at most 64 bits, but got numpy object"),
    ("replay", lambda b: b.insert([GOOD[0].astype(np.longdouble), GOOD[1], GOOD[2]]), ValueError,
     f"the dtype of column 'state' must be a bool, int or float array of at most 64 bits, but got numpy "
     f"{np.dtype(np.longdouble)}"),
    ("replay", lambda b: b.insert([GOOD[0], GOOD[1], np.ma.masked_array(GOOD[2], mask=GOOD[2] > 0)]), ValueError,
     "the type of column 'reward' must be an array without a mask, but got a numpy masked array"),
    ("trajectory", lambda b: b.get_next(sample_batch_size=2**32 + 2), ValueError,
     "'sample_batch_size' must be an int <= 1073741824, but got 4294967298"),
    ("numpy", lambda b: b.get_next(sample_batch_size=2**40), ValueError,
     "'sample_batch_size' must be an int <= 1073741824, but got 1099511627776"),
    ("replay", lambda b: b.writer(4).insert([GOOD[0], GOOD[1], np.ma.masked_array(GOOD[2], mask=GOOD[2] > 0)]),
     ValueError, "For 'insert', the type of column 'reward' must be an array without a mask"),
    ("trajectory", lambda b: b.add_batch({"value": np.ma.masked_array(np.zeros(2, F32), mask=[True, False])}),
     ValueError, r"For 'add_batch', the type of items\['value'\] 'value' must be an array without a mask"),
    ("numpy", lambda b: b.add_batch({"value": np.ma.masked_array(np.zeros(1, F32), mask=[True])}),
     ValueError, r"For 'add_batch', the type of items\['value'\] 'value' must be an array without a mask"),
    ("priority", lambda b: b.update_priorities(Tensor([0], ms.int32), Tensor([3e38], ms.bfloat16)), ValueError,
     r"For 'update_priorities', 'priorities' must be at most .*, but got 3\.00\d*e\+38\.$"),  # 3e38 in bfloat16
    ("priority", lambda b: b.update_priorities(Tensor([0], ms.int32), Tensor([-1.5], ms.bfloat16)), ValueError,
     r"'priorities' must be finite and >= 0, but got -1\.5\.$"),
    ("trajectory", lambda b: next(iter(b.as_dataset(num_steps=4))), ValueError,
     r"For 'as_dataset', 'num_steps' \(4\) must not exceed the 3"),
    ("numpy", lambda b: next(iter(b.as_dataset(num_steps=4))), ValueError,
     r"For 'as_dataset', 'num_steps' \(4\) must not exceed"),
    ("replay", lambda b: b.writer(0), ValueError, "'batch_size' must be an int >= 1"),
    ("replay", lambda b: b.writer(4).insert([GOOD[0], GOOD[1].astype(np.int64), GOOD[2]]), ValueError,
     "dtype of column 'action' must be Int32, but got Int64"),
]


@pytest.mark.parametrize("kind, call, error, message", CATALOGUE,
                         ids=[f"{c[0]}: {c[3][:40]}" for c in CATALOGUE])
def test_the_catalogue_of_bad_calls_names_the_argument_and_changes_no_byte(kind, call, error, message):
    buffer = _buffers()[kind]()
    before = snapshot(buffer)
    with pytest.raises(error, match=message):
        call(buffer)
    assert snapshot(buffer) == before


def test_a_big_endian_array_is_taken_as_its_values_directly_and_through_the_writer():
    rb, staged = make(), make()
    big = [GOOD[0].astype(">f4"), GOOD[1].astype(">i4"), GOOD[2].astype(">f4")]
    rb.insert(big)
    with staged.writer(2) as writer:
        writer.insert(big)
    for buffer in (rb, staged):
        np.testing.assert_array_equal(decode(*buffer.get_item(np.array([0, 1], ">i8"))), [0, 1])


def test_the_tf_agents_buffers_take_a_big_endian_leaf_as_its_values():
    from mindspore_rl_buffer import PyUniformReplayBuffer, TrajectoryReplayBuffer
    from tests.helpers import SPEC1

    trajectory = TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4)
    numpy_buffer = PyUniformReplayBuffer(SPEC1, 4)
    trajectory.add_batch({"value": np.array([3.5, -2.0], ">f4")})
    numpy_buffer.add_batch({"value": np.array([3.5, -2.0], ">f4")})
    np.testing.assert_array_equal(trajectory.gather_all()["value"].asnumpy()[:, 0], [3.5, -2.0])
    np.testing.assert_array_equal(numpy_buffer.gather_all()["value"][0], [3.5, -2.0])


def test_a_tiny_priority_exponent_caps_priorities_at_the_float_ceiling_instead_of_overflowing():
    from mindspore_rl_buffer import PriorityReplayBuffer

    prb = PriorityReplayBuffer(1e-300, 4, 2, [()], ["float32"])
    prb.insert([np.array([1.0, 2.0], F32)])
    prb.update_priorities(np.array([0, 1]), np.array([1.0, 1e30], F32))  # was OverflowError
    _, weights, _ = prb.sample(0.4)
    np.testing.assert_allclose(weights.asnumpy(), 1.0)  # p ** 1e-300 == 1 for every p > 0: uniform
    with pytest.raises(ValueError, match="'priorities' must be finite"):
        prb.update_priorities(np.array([0]), np.array([np.inf], F32))


@pytest.mark.parametrize("build, message", [
    (lambda: named(["state", "count", "reward"]), r"the column name 'count' is reserved: .*\['count', 'head'"),
    (lambda: named(["head", "action", "reward"]), "the column name 'head' is reserved"),
    (lambda: named(["state", "", "reward"]), "'names' must be non-empty strings"),
    (lambda: __import__("mindspore_rl_buffer").PriorityReplayBuffer(
        0.6, 4, 2, [(), ()], ["float32", "int32"], names=["max_priority", "x"]), "'max_priority' is reserved"),
    (lambda: __import__("mindspore_rl_buffer").ReservoirReplayBuffer(
        4, 2, [()], ["float32"], names=["seen"]), "'seen' is reserved"),
    (lambda: named(["state", "mindspore_rl_buffer.record", "reward"]), "is reserved"),
    # MindSpore registers each column on the Cell under its name: an attribute's name, a name it
    # strips or one past its length limit failed deep inside MindSpore (or was renamed).
    *((lambda name=name: named(["state", name, "reward"]), f"the column name '{name}' is taken by the buffer")
      for name in ("training", "phase", "size", "capacity", "names", "insert", "save", "__class__", "_x")),
    (lambda: named(["state", " ", "reward"]), r"the column name ' ' must not start or end with whitespace"),
    (lambda: named(["state", "a ", "a"]), r"the column name 'a ' must not start or end with whitespace"),
    (lambda: named(["state", "a" * 1025, "reward"]), r"the column name 'a{40}\.\.\.' must have at most 1024 "
                                                      r"characters .*, not 1025"),
    # The composite buffers register their ring's columns as 'storage.<name>': 8 characters fewer fit.
    *((lambda cls=cls: __import__("mindspore_rl_buffer").__dict__[cls](
        4, 16, [(2,), (), (), (), ()], ["float32", "int32", "float32", "uint8", "uint8"],
        names=["observation", "a" * 1017, "reward", "terminated", "truncated"]),
       rf"For '{cls}', the column name 'a{{40}}\.\.\.' must have at most 1016 characters \(the buffer registers its "
       r"Parameter as 'storage\.<name>', and MindSpore's longest Parameter name has 1024\), not 1017")
      for cls in ("TransitionReplayBuffer", "PrioritizedTransitionReplayBuffer")),
    (lambda: __import__("mindspore_rl_buffer").ShardedReplayBuffer(2, 8, [(), ()], ["float32", "int32"],
                                                                   names=["x", "a" * 1017]),
     r"For 'ShardedReplayBuffer', the column name 'a{40}\.\.\.' must have at most 1016 characters .*'storage\.<name>'"),
    (lambda: __import__("mindspore_rl_buffer").UniformReplayBuffer(2, 4, [(), ()], ["float32", "int32"],
                                                                   names=["buffer", "x"]), "'buffer' is taken"),
    (lambda: __import__("mindspore_rl_buffer").TransitionReplayBuffer(
        4, 16, [(2,), (), (), (), ()], ["float32", "int32", "float32", "uint8", "uint8"],
        names=["observation", "sample", "reward", "terminated", "truncated"]), "the column name 'sample' is taken"),
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(2, 4, [()], [ms.bfloat16]),
     r"data_type\[0\] bfloat16 is not supported: .* store float32"),
    (lambda: make(seed=2**31), r"'seed' must be an int in \[0, 2\*\*31\), but got 2147483648"),
    (lambda: make(capacity=2**30 + 1), r"'capacity' must be an int <= 1073741824"),
    # Sizes past 2**30 cannot be allocated: refused, not attempted.
    (lambda: make(sample_size=2**32 + 2), r"'sample_size' must be an int <= 1073741824, but got 4294967298"),
    (lambda: __import__("mindspore_rl_buffer").PriorityReplayBuffer(0.6, 4, 2**32 + 2, [()], ["float32"]),
     r"'sample_size' must be an int <= 1073741824"),
    (lambda: __import__("mindspore_rl_buffer").PyUniformReplayBuffer(
        __import__("tests.helpers").helpers.SPEC1, capacity=10**12), r"'capacity' must be an int <= 1073741824"),
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(1, 2**30, [(1024,)], ["float32"]),
     r"the size of column 'column_0' must be at most 1099511627776 bytes \(1 TiB\), but got 1073741824 rows"),
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(1, 4, [(2**32, 2**32)], ["float32"]),
     r"the size of column 'column_0' must be at most .* 295147905179352825856 bytes"),
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(1, 4, [(3, 0)], ["float32"]),
     r"the shape of column 'column_0' must be a tuple of ints >= 1 .* but got \(3, 0\)"),
    # What one sample or one writer stage would allocate: MindSpore logged its failure without raising.
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(2**30, 8, [(84, 84)], ["uint8"]),
     r"For 'ReplayBuffer', 'sample_size' must be small enough that its items of column 'column_0' take at most "
     r"\d+ bytes \((1 TiB|this machine's physical memory, the CPU device's)\), "
     r"but got 1073741824: 7576322310144 bytes"),
    (lambda: __import__("mindspore_rl_buffer").PriorityReplayBuffer(0.6, 8, 2**30, [(84, 84)], ["uint8"]),
     r"'sample_size' must be small enough"),
    (lambda: __import__("mindspore_rl_buffer").ReplayBuffer(2, 8, [(84, 84)], ["uint8"]).writer(2**30),
     r"For 'writer', 'batch_size' must be small enough .* but got 1073741824"),
    (lambda: __import__("mindspore_rl_buffer").TransitionReplayBuffer(
        2**27, 64, [(84, 84), (), (), (), ()], ["uint8", "int32", "float32", "uint8", "uint8"], stack_size=4),
     r"'sample_size' must be small enough that its items of column 'observation' .* 7576322310144 bytes"),
    (lambda: __import__("mindspore_rl_buffer").TransitionReplayBuffer(
        2, 64, [(84, 84), (), (), (), ()], ["uint8", "int32", "float32", "uint8", "uint8"], stack_size=4).sample(2**27),
     r"For 'sample', 'batch_size' must be small enough"),
    *((lambda kind=kind: _filled_tf_agents(kind).get_next(sample_batch_size=2**30),
       r"'sample_batch_size \* num_steps' must be small enough that its items of column '.*' take at most "
       r"\d+ bytes \(.*\), but got 1073741824: 4503599627370496 bytes") for kind in ("device", "numpy")),
    # A str or a dict of names would be taken apart silently.
    (lambda: named("sar"), r"'names' must be a list of str, but got str"),
    (lambda: named({"state": 0, "action": 1, "reward": 2}), r"'names' must be a list of str, but got dict"),
    # The transition buffer's own Parameters: a column of one of their names broke every call.
    *((lambda name=name: __import__("mindspore_rl_buffer").TransitionReplayBuffer(
        4, 16, [(2,), (), (), (), ()], ["float32", "int32", "float32", "uint8", "uint8"],
        names=[name, "action", "reward", "terminated", "truncated"]),
       f"the column name '{name}' is reserved")
      for name in ("ranks", "start_table", "finals", "last_ended", "head", "count")),
    (lambda: __import__("mindspore_rl_buffer").TransitionReplayBuffer(
        4, 2**20, [(84, 84, 84), (), (), (), ()], ["float32", "int32", "float32", "uint8", "uint8"]),
     r"the size of column 'observation' must be at most 1099511627776 bytes"),
])
def test_constructors_refuse_reserved_names_unsupported_dtypes_and_out_of_range_sizes(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


def test_a_sharded_buffer_names_an_unreadable_file_or_one_of_another_type(tmp_path):
    from mindspore_rl_buffer import ShardedReplayBuffer
    from tests.helpers import MS_DTYPES, NAMES, SHAPES

    sharded = ShardedReplayBuffer(4, 7, SHAPES, MS_DTYPES, names=NAMES)
    (tmp_path / "empty.rank0-of-1.ckpt").write_bytes(b"")
    with pytest.raises(ValueError, match="is not a readable checkpoint"):
        sharded.load(tmp_path / "empty.ckpt")
    plain = make()
    plain.insert(GOOD)
    plain.save(tmp_path / "plain.rank0-of-1.ckpt")
    with pytest.raises(ValueError, match="records no ShardedReplayBuffer"):
        sharded.load(tmp_path / "plain.ckpt")
    assert int(sharded.size()) == 0


def test_a_name_of_1024_characters_and_inner_spaces_are_column_names():
    rb = named(["state", "a" * 1024, "next state"])
    assert [p.name for p in rb.columns] == ["state", "a" * 1024, "next state"]


def test_names_of_attributes_the_buffer_sets_after_its_columns_are_column_names(tmp_path):
    # `columns` is set by registering the columns themselves, and `storage` and `frames` are attributes of
    # other buffer types only: none clashes with a Parameter, so they are not refused (errors.md lists
    # what is).
    from mindspore_rl_buffer import load_checkpoint, save_checkpoint

    rb = named(["columns", "storage", "frames"])
    rb.insert(encoded_batch(0, 9))  # holds 2..8
    assert [p.name for p in rb.columns] == ["columns", "storage", "frames"]
    np.testing.assert_array_equal(decode(*rb.get_item(np.arange(7))), np.arange(2, 9))
    assert set(decode(*rb.sample())) <= set(range(2, 9))
    save_checkpoint(rb, tmp_path / "named.ckpt")
    again = named(["columns", "storage", "frames"])
    load_checkpoint(tmp_path / "named.ckpt", again)
    assert_state_unchanged(state_of(rb), state_of(again))


def test_a_composite_buffer_counts_its_prefix_against_the_name_limit():
    from mindspore_rl_buffer import ShardedReplayBuffer, TransitionReplayBuffer

    with pytest.raises(ValueError, match=r"For 'ShardedReplayBuffer', the column name 'a{40}\.\.\.' must have at most "
                                         r"1016 characters"):
        ShardedReplayBuffer(2, 8, [(), ()], ["float32", "int32"], names=["x", "a" * 1017])
    sharded = ShardedReplayBuffer(2, 8, [(), ()], ["float32", "int32"], names=["x", "a" * 1016])
    assert [p.name for p in sharded.storage.columns] == ["storage.x", "storage." + "a" * 1016]
    # The observation is no Parameter of the ring (its frames are 'frames'): it keeps the full limit.
    transitions = TransitionReplayBuffer(2, 8, [(2,), (), (), (), ()],
                                         ["float32", "int32", "float32", "uint8", "uint8"],
                                         names=["o" * 1024, "a" * 1016, "reward", "terminated", "truncated"])
    assert transitions.names[:2] == ("o" * 1024, "a" * 1016)
    assert transitions.storage.columns[0].name == "storage." + "a" * 1016


def test_a_cell_whose_attribute_makes_a_parameter_name_too_long_is_refused_naming_it():
    from mindspore import nn

    from mindspore_rl_buffer import ReplayBuffer

    rb = ReplayBuffer(2, 4, [()], ["int32"], names=["a" * 1020])

    class Net(nn.Cell):
        def __init__(self, buffer):
            super().__init__()
            self.buffer = buffer

    with pytest.raises(ValueError, match=r"^For 'ReplayBuffer', its Parameter 'a{40}\.\.\.', named "
                                         r"'buffer\.a{33}\.\.\.' under the prefix 'buffer\.' of the Cell that "
                                         r"holds the buffer, must have a name of at most 1024 characters .*, but got "
                                         r"1027; choose a shorter column name or attribute name\.$"):
        Net(rb)
    assert [p.name for p in rb.get_parameters()][:1] == ["a" * 1020]  # no Parameter renamed
    fits = ReplayBuffer(2, 4, [()], ["int32"], names=["a" * 1017])
    assert Net(fits).buffer.columns[0].name == "buffer." + "a" * 1017


def test_a_numpy_integer_seed_is_kept_as_an_int_and_the_buffer_saves(tmp_path):
    from mindspore_rl_buffer import PyUniformReplayBuffer, ReplayBuffer, TrajectoryReplayBuffer
    from tests.helpers import SPEC1

    buffers = (ReplayBuffer(2, 4, [()], ["float32"], seed=np.int64(3)),
               TrajectoryReplayBuffer(SPEC1, batch_size=2, max_length=4, seed=np.int32(3)),
               PyUniformReplayBuffer(SPEC1, 4, seed=np.int64(3)))
    for i, buffer in enumerate(buffers):
        buffer.save(tmp_path / f"{i}.ckpt")  # json.dumps refused the numpy seed
        buffer.load(tmp_path / f"{i}.ckpt")


@pytest.mark.parametrize("build", [
    lambda seed: __import__("mindspore_rl_buffer").PyUniformReplayBuffer(__import__("tests.helpers").helpers.SPEC1,
                                                                          4, seed=seed),
    lambda seed: __import__("mindspore_rl_buffer").TrajectoryReplayBuffer(__import__("tests.helpers").helpers.SPEC1,
                                                                           batch_size=2, max_length=4, seed=seed),
])
def test_the_tf_agents_buffers_check_their_seed_under_their_own_name(build):
    name = "PyUniformReplayBuffer|TrajectoryReplayBuffer"
    with pytest.raises(ValueError, match=rf"For '({name})', 'seed' must be an int >= 0, but got -1"):
        build(-1)
    with pytest.raises(ValueError, match=r"'seed' must be an int in \[0, 2\*\*31\), but got 2147483648"):
        build(2**31)
    with pytest.raises(TypeError, match=rf"For '({name})', 'seed' must be an int, but got str"):
        build("x")


@pytest.mark.parametrize("call, message", [
    (lambda b: b["priority"].sample(),
     r"^For 'sample', missing a required argument: 'beta' \(the call is sample\(beta\)\)"),
    (lambda b: b["priority"].sample(0.4, 0.5),
     r"^For 'sample', too many positional arguments \(the call is sample\(beta\)"),
    (lambda b: b["priority"].update_priorities(np.array([0])),
     r"^For 'update_priorities', missing a required argument: 'priorities' \(the call is update_priorities\("),
    (lambda b: b["replay"].get_item(), r"^For 'get_item', missing a required argument: 'index'"),
    # Methods without a host check: their arguments went to the compiled graph, or were dropped.
    (lambda b: b["replay"].size(3), r"^For 'size', too many positional arguments \(the call is size\(\)\)"),
    (lambda b: b["replay"].reset(check=False), r"^For 'reset', got an unexpected keyword argument 'check'"),
])
def test_a_call_with_missing_or_extra_arguments_names_the_method_and_changes_nothing(call, message):
    from mindspore_rl_buffer import PriorityReplayBuffer

    buffers = {"replay": make(), "priority": PriorityReplayBuffer(0.6, 8, 2, [()], ["float32"])}
    buffers["replay"].insert(encoded_batch(0, 3))
    buffers["priority"].insert([np.arange(3, dtype=F32)])
    before = {name: state_of(buffer) if name == "replay" else [p.asnumpy().copy() for p in buffer.get_parameters()]
              for name, buffer in buffers.items()}
    with pytest.raises(TypeError, match=message):
        call(buffers)
    assert state_of(buffers["replay"])[1:] == before["replay"][1:]
    for got, want in zip(buffers["priority"].get_parameters(), before["priority"]):
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_items_of_more_dims_than_mindspores_kernels_take_are_refused_when_the_buffer_is_made():
    from mindspore_rl_buffer import ReplayBuffer, TrajectoryReplayBuffer
    from mindspore_rl_buffer.specs import TensorSpec

    with pytest.raises(ValueError, match=r"^For 'ReplayBuffer', the shape of column 'obs' must be at most 7 dims "
                                         r"\(MindSpore's kernels take tensors of up to 8 dims, one of them the rows\), "
                                         r"but got \(1, 1, 1, 1, 1, 1, 1, 2\)\.$"):
        ReplayBuffer(1, 4, [(1,) * 7 + (2,)], [ms.float32], names=["obs"])
    with pytest.raises(ValueError, match=r"^For 'TrajectoryReplayBuffer', the shape of items\['obs'\] must have at "
                                         r"most 6 dims .* but got \(1, 1, 1, 1, 1, 1, 2\)\.$"):
        TrajectoryReplayBuffer({"obs": TensorSpec((1,) * 6 + (2,), ms.float32)}, batch_size=1, max_length=4)
    # The largest items each takes sample back what was stored.
    item = np.arange(2, dtype=np.float32).reshape((1,) * 6 + (2,))
    rb = ReplayBuffer(1, 4, [item.shape], [ms.float32])
    rb.insert([item[None]])
    np.testing.assert_array_equal(rb.sample()[0].asnumpy(), item[None])
    trajectory = TrajectoryReplayBuffer({"obs": TensorSpec(item.shape[1:], ms.float32)}, batch_size=1, max_length=4)
    trajectory.add_batch({"obs": item})
    trajectory.add_batch({"obs": item + 2})
    steps, _ = trajectory.get_next(sample_batch_size=3, num_steps=2)
    expected = np.broadcast_to(np.stack([item, item + 2], 1), (3, 2, *item.shape[1:]))
    np.testing.assert_array_equal(steps["obs"].asnumpy(), expected)


def test_on_a_cpu_a_sample_larger_than_the_machines_memory_is_refused_before_it_is_allocated():
    from mindspore_rl_buffer import TransitionReplayBuffer
    from mindspore_rl_buffer.specs import output_bound

    bound, what = output_bound()
    memory = __import__("os").sysconf("SC_PAGE_SIZE") * __import__("os").sysconf("SC_PHYS_PAGES")
    assert ms.get_context("device_target") == "CPU" and (bound, what) == (
        min(memory, 2**40), "1 TiB" if memory >= 2**40 else "this machine's physical memory, the CPU device's")
    rb = TransitionReplayBuffer(2, 64, [(84, 84), (), (), (), ()], ["uint8", "int32", "float32", "uint8", "uint8"],
                                stack_size=4)
    too_many = bound // (2 * 4 * 84 * 84) + 1  # the observation's and the bootstrap's stacks of 4 frames
    with pytest.raises(ValueError, match=rf"For 'sample', 'batch_size' must be small enough that its items of column "
                                         rf"'observation' take at most {bound} bytes \({what}\), but got {too_many}"):
        rb.sample(too_many)



def test_a_batch_past_two_to_the_30_items_is_refused_by_the_check_direct_calls_and_graphs_share():
    from mindspore_rl_buffer._validation import check_batch, check_batch_graph

    assert check_batch_graph.fn is check_batch  # what a graph runs when it compiles
    assert check_batch("insert", ["x"], [(2,)], [ms.uint8], 1, [(2**30, 2)], [ms.uint8]) == (2**30, False)
    with pytest.raises(ValueError, match=r"For 'insert', a batch must hold at most 1073741824 items \(2\*\*30\), "
                                         r"but column 'x' has shape \(1073741825, 2\)"):
        check_batch("insert", ["x"], [(2,)], [ms.uint8], 1, [(2**30 + 1, 2)], [ms.uint8])


def test_a_buffer_whose_sample_without_replacement_would_outgrow_the_memory_is_refused_when_built(monkeypatch):
    from mindspore_rl_buffer import ReplayBuffer, create_buffer, specs

    # A device of room for 1,000 rows' random keys: the sample's working memory, not its outputs, is the bound.
    monkeypatch.setattr(specs, "output_bound", lambda: (1000 * specs.DRAW_BYTES_PER_ROW, "a small device"))
    ReplayBuffer(1, 1000, [()], ["uint8"], replace=False)
    ReplayBuffer(1, 1001, [()], ["uint8"])  # with replacement: a key per drawn item only
    message = (r"without replacement, 'capacity' must be small enough that a sample's random key for every row "
               r"\(232 bytes a row as it is computed\) takes at most 232000 bytes \(a small device\), but got 1001")
    with pytest.raises(ValueError, match="For 'ReplayBuffer' " + message):
        ReplayBuffer(1, 1001, [()], ["uint8"], replace=False)
    with pytest.raises(ValueError, match="For 'create_buffer' " + message):
        create_buffer({"type": "ReplayBuffer", "capacity": 1001, "sample_size": 1, "data_shape": [()],
                       "data_type": ["uint8"], "replace": False})
