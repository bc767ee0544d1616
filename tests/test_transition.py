"""TransitionReplayBuffer against the reference model: named boundary cases, wraparound, several
environments, both paths (direct and inside a user's Cell), bad input, writer, checkpoints, config."""
from __future__ import annotations

import json

import mindspore as ms
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mindspore import Tensor, nn
from scipy.stats import chisquare

from mindspore_rl_buffer import TransitionReplayBuffer, create_buffer, load_checkpoint
from mindspore_rl_buffer.checkpoint import RECORD, checksum
from mindspore_rl_buffer.contracts import start_slots
from tests.helpers import (
    TRANSITION_NAMES,
    TRANSITION_SHAPES,
    TRANSITION_TYPES,
    EpisodeStream,
    TransitionModel,
    assert_transitions_match,
)

GAMMA = 0.9
U8 = np.uint8


def make(num_envs=1, stack_size=1, n_step=1, max_length=12, sample_size=16, **kwargs):
    return TransitionReplayBuffer(sample_size, max_length * num_envs, TRANSITION_SHAPES, TRANSITION_TYPES,
                                  num_envs=num_envs, stack_size=stack_size, n_step=n_step, gamma=GAMMA,
                                  names=TRANSITION_NAMES, **kwargs)


def model_of(rb):
    return TransitionModel(rb.max_length, rb.num_envs, rb.stack_size, rb.n_step, rb.gamma)


def parameters(rb):
    """The whole state of a buffer: every Parameter, as numpy copies, by its name in the buffer."""
    return {name: param.asnumpy().copy() for name, param in rb.parameters_and_names()}


def assert_same(before, after):
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def read_slots(rb):
    """The state of a buffer, its start table cut to the slots a sample may read: buffers filled
    by other batchings differ elsewhere in it (slots of overwritten rows, and the spare slot)."""
    state, storage = parameters(rb), rb.storage
    ended = (storage.columns[2].asnumpy() != 0) | (storage.columns[3].asnumpy() != 0)
    slots, _ = start_slots(int(storage.head), int(storage.count), rb.ranks.asnumpy(), ended)
    state["start_table"] = state["start_table"][slots]
    return state


def steps(observations, rewards, ends, env_count=1):
    """Hand-written steps of one environment: observation i is ``[value, 0]``; ``ends`` maps a step
    to 'terminated' or 'truncated'."""
    n = len(observations)
    terminated = np.array([[ends.get(i) == "terminated"] * env_count for i in range(n)], U8)
    truncated = np.array([[ends.get(i) == "truncated"] * env_count for i in range(n)], U8)
    obs = np.array([[[v, 0]] * env_count for v in observations], np.float32)
    extra = np.array([[[v, 0, 7]] * env_count for v in observations], np.float32)
    action = np.array([[int(v)] * env_count for v in observations], np.int32)
    reward = np.array([[r] * env_count for r in rewards], np.float32)
    return [obs, action, reward, terminated, truncated, extra]


def every_valid_sample(rb, draws=400):
    """Each distinct sampled start once: ``{observation value of the start: items}``."""
    items = [x.asnumpy() for x in rb.sample(draws)]
    found = {}
    for i in range(draws):
        start = items[0][i] if rb.stack_size == 1 else items[0][i][-1]
        found[float(start[0])] = [x[i] for x in items]
    return found


# ------------------------------------------------------------------ named boundary cases
def test_a_truncated_episode_bootstraps_from_its_final_observation_not_the_next_reset():
    # Episode A: observations 10, 11, 12, truncated after 12's step; 13 is its final observation.
    # Episode B: 20, 21, 22, terminated after 21's step (22 final), then 30, 31.
    rb = make(max_length=12)
    rb.insert(steps([10, 11, 12, 13, 20, 21, 22, 30, 31], [1, 2, 3, 99, 4, 5, 99, 6, 7],
                    {2: "truncated", 5: "terminated"}))
    found = every_valid_sample(rb)
    assert sorted(found) == [11, 12, 20, 21, 30]  # not 10 (first row), 13 and 22 (final rows), 31 (newest)
    _, _, reward, next_observation, discount, _ = found[12]
    assert next_observation[0] == 13 and reward == 3 and discount == pytest.approx(GAMMA)  # truncation bootstraps
    _, _, reward, next_observation, discount, _ = found[21]
    assert next_observation[0] == 22 and reward == 5 and discount == 0  # termination does not
    assert found[20][3][0] == 21 and found[30][3][0] == 31


def test_frame_stacks_repeat_the_first_frame_of_their_own_episode():
    rb = make(stack_size=4, max_length=12)
    # Episode A: 1, 2, 3 (terminated), final 4; episode B: 10, 11, 12, 13, 14.
    rb.insert(steps([1, 2, 3, 4, 10, 11, 12, 13, 14], [0] * 9, {2: "terminated"}))
    found = every_valid_sample(rb)
    assert sorted(found) == [10, 11, 12, 13]  # 1-3: stacks reach the unknown row before the oldest
    assert found[10][0][:, 0].tolist() == [10, 10, 10, 10]
    assert found[11][0][:, 0].tolist() == [10, 10, 10, 11]
    assert found[13][0][:, 0].tolist() == [10, 11, 12, 13]
    assert found[13][3][:, 0].tolist() == [11, 12, 13, 14]
    assert found[10][3][:, 0].tolist() == [10, 10, 10, 11]


def test_n_step_returns_stop_at_the_episode_end():
    rb = make(n_step=3, max_length=12)
    # 0, 1, 2, 3 then terminated at 3's step (final 4); rewards 1, 2, 4, 8.
    rb.insert(steps([0, 1, 2, 3, 4, 50, 51, 52, 53], [1, 2, 4, 8, 99, 1, 1, 1, 1], {3: "terminated"}))
    found = every_valid_sample(rb)
    assert sorted(found) == [1, 2, 3, 50]
    assert found[1][2] == pytest.approx(2 + GAMMA * 4 + GAMMA**2 * 8) and found[1][4] == 0  # ends in the window
    assert found[1][3][0] == 4
    assert found[3][2] == 8 and found[3][3][0] == 4 and found[3][4] == 0
    assert found[50][2] == pytest.approx(1 + GAMMA + GAMMA**2) and found[50][3][0] == 53
    assert found[50][4] == pytest.approx(GAMMA**3)


def test_environments_never_mix_and_each_keeps_its_own_episodes():
    rb, model = make(num_envs=3, stack_size=3, n_step=2, max_length=10, sample_size=300), None
    model = model_of(rb)
    stream = EpisodeStream(3, seed=5, end_probability=0.3)
    for size in (4, 9, 6):
        batch = stream.take(size)
        rb.insert(batch)
        model.insert(batch)
    items, info = rb.sample_with_info()
    observation, next_observation = items[0].asnumpy(), items[3].asnumpy()
    env = info.ids.asnumpy() % 3
    assert (observation[:, :, 1] == env[:, None]).all() and (next_observation[:, :, 1] == env[:, None]).all()
    assert_transitions_match(model, items, info.ids, info.probabilities)


@pytest.mark.parametrize("num_envs, stack_size, n_step",
                         [(1, 1, 1), pytest.param(2, 3, 2, marks=pytest.mark.slow), (3, 5, 4)])
def test_direct_calls_match_the_model_through_wraparound_overflow_and_reset(num_envs, stack_size, n_step):
    ms.set_seed(3)
    rb = make(num_envs, stack_size, n_step, max_length=stack_size + n_step + 4, sample_size=48)
    model, stream = model_of(rb), EpisodeStream(num_envs, seed=11, end_probability=0.25)
    plan = [1, 3, "single", 0, 20, "single", 3, "reset", 1, 3, 20, 3, 1]
    for step in plan:
        if step == "reset":
            rb.reset()
            model.reset()
            fresh = parameters(make(num_envs, stack_size, n_step, rb.max_length, 48))
            bookkeeping = ("storage.head", "storage.count", "ranks", "start_table", "last_ended", "finals")
            assert_same({k: fresh[k] for k in bookkeeping}, {k: parameters(rb)[k] for k in bookkeeping})
            continue
        batch = stream.take(1 if step == "single" else step)
        rb.insert([column[0] for column in batch] if step == "single" else batch)
        model.insert(batch)
        assert int(rb.size()) == len(model.stored) * num_envs
        assert bool(rb.full()) == (len(model.stored) == rb.max_length)
        assert int(rb.valid_starts()) == len(model.valid_starts())
        if model.valid_starts():
            items, info = rb.sample_with_info()
            assert_transitions_match(model, items, info.ids, info.probabilities)


# ------------------------------------------------------------------------ properties
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
# A pool of buffers, built once each (their graphs compile once per batch size): stack_size and
# n_step each take every value in 1..5, with 1 to 3 environments.
POOL = [(1, 1, 1), (2, 2, 3), (3, 3, 5), (1, 4, 2), (2, 5, 4), (3, 1, 5), (1, 5, 1)]
_pool: dict[tuple[int, int, int], TransitionReplayBuffer] = {}


def pooled(config):
    if config not in _pool:
        num_envs, stack_size, n_step = config
        _pool[config] = make(num_envs, stack_size, n_step, max_length=stack_size + n_step + 3, sample_size=32)
    return _pool[config]


@SETTINGS
@given(config=st.sampled_from(POOL), seed=st.integers(0, 2**16), end=st.sampled_from([0.0, 0.1, 0.3, 0.6]),
       batches=st.lists(st.sampled_from([1, 2, 3, 13]), min_size=1, max_size=8))
@pytest.mark.slow
def test_every_sampled_field_matches_the_model(config, seed, end, batches):
    """Random episode lengths, terminations and truncations, 1-3 environments, stack_size and
    n_step 1..5, batches up to longer than the ring: every sampled field equals the model's."""
    ms.set_context(mode=ms.GRAPH_MODE)
    rb = pooled(config)
    rb.reset()
    model, stream = model_of(rb), EpisodeStream(config[0], seed=seed, end_probability=end)
    for size in batches:
        batch = stream.take(size)
        rb.insert(batch)
        model.insert(batch)
        valid = model.valid_starts()
        assert int(rb.valid_starts()) == len(valid)
        if valid:
            items, info = rb.sample_with_info()
            assert_transitions_match(model, items, info.ids, info.probabilities)


# ------------------------------------------------------------------- inside a user's Cell
class CollectAndSample(nn.Cell):
    """A user's step: insert one step of every environment, then sample, in one compiled graph."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, observation, action, reward, terminated, truncated, extra):
        _ = self.buffer.insert([observation, action, reward, terminated, truncated, extra])
        items, info = self.buffer.sample_with_info()  # in a graph, the pair (ids, probabilities)
        return items, info, self.buffer.valid_starts(), self.buffer.size()


def test_inside_a_users_cell_insert_and_sample_are_one_graph_that_matches_the_model():
    rb = make(num_envs=2, stack_size=3, n_step=2, max_length=9, sample_size=24)
    model, stream = model_of(rb), EpisodeStream(2, seed=9, end_probability=0.3)
    first = stream.take(7)
    rb.insert(first)
    model.insert(first)
    graph = CollectAndSample(rb)
    for _ in range(14):  # wraps the 9-step ring more than once
        step = stream.take(1)
        items, (ids, probabilities), valid, size = graph(*(Tensor(column[0]) for column in step))
        model.insert(step)
        assert int(valid) == len(model.valid_starts()) and int(size) == 2 * len(model.stored)
        assert_transitions_match(model, items, ids, probabilities)
    items, info = rb.sample_with_info()  # the direct path sees what the graph wrote
    assert_transitions_match(model, items, info.ids)


def test_sample_returns_the_columns_in_order_with_their_shapes():
    rb = make(num_envs=2, stack_size=4, n_step=3, max_length=12, sample_size=5)
    rb.insert(EpisodeStream(2, seed=1, end_probability=0.0).take(10))
    observation, action, reward, next_observation, discount, extra = rb.sample()
    assert observation.shape == next_observation.shape == (5, 4, 2) and observation.dtype == ms.float32
    assert action.shape == (5,) and action.dtype == ms.int32
    assert reward.shape == discount.shape == (5,) and reward.dtype == discount.dtype == ms.float32
    assert extra.shape == (5, 3)
    single = make(stack_size=1)
    single.insert(EpisodeStream(1, seed=1).take(4))
    assert single.sample(3)[0].shape == (3, 2)  # stack_size=1: no stack axis


# ---------------------------------------------------------------------------- uniformity
def test_sampling_is_uniform_over_the_valid_starts():
    ms.set_seed(123)
    rb = make(num_envs=2, stack_size=3, n_step=2, max_length=20, sample_size=1000)
    model, stream = model_of(rb), EpisodeStream(2, seed=4, end_probability=0.2)
    batch = stream.take(27)  # wrapped, with episode ends near both edges
    rb.insert(batch)
    model.insert(batch)
    slots = [model.slot(t, env) for t, env in model.valid_starts()]
    counts = dict.fromkeys(slots, 0)
    for _ in range(30):
        _, info = rb.sample_with_info()
        for slot in info.ids.asnumpy().tolist():
            counts[slot] += 1  # a KeyError here is an invalid start drawn
    # 30,000 draws over the V valid starts: under uniformity the statistic is chi-square with
    # V - 1 degrees of freedom; p < 0.001 would reject it (fixed seed: the test is deterministic).
    assert len(slots) > 20 and min(counts.values()) > 0
    assert chisquare(list(counts.values())).pvalue > 1e-3


# ------------------------------------------------------------------------------ bad input
_prepared: list[TransitionReplayBuffer] = []


def prepared():
    """One buffer for every bad call (its graphs compile once), emptied and refilled each time."""
    if not _prepared:
        _prepared.append(make(num_envs=2, stack_size=2, n_step=2, max_length=8))
    rb = _prepared[0]
    rb.reset()
    rb.insert(steps([1, 2, 3], [0, 0, 0], {2: "terminated"}, env_count=2))  # row 3 must be a final row
    return rb


GOOD = steps([4], [0], {}, env_count=2)
F64 = np.float64
BAD_CALLS = [
    ("five columns", lambda rb: rb.insert(GOOD[:5]), ValueError, r"must have 6 columns"),
    ("a step without the environment axis", lambda rb: rb.insert([GOOD[0][0, 0], *GOOD[1:]]), ValueError,
     r"shape of column 'observation' must be \(2, 2\) \(one item\) or \(n, 2, 2\) \(a batch\), but got \(2,\)"),
    ("a float64 observation", lambda rb: rb.insert([GOOD[0].astype(F64), *GOOD[1:]]), ValueError,
     "dtype of column 'observation' must be Float32, but got Float64"),
    ("flags on the final row", lambda rb: rb.insert([*GOOD[:3], np.ones((1, 2), U8), *GOOD[4:]]), ValueError,
     r"the row after an episode's end carries that episode's final observation, so its 'terminated' and "
     r"'truncated' must be 0 .* environment 0 has terminated=1, truncated=0 at step 0 of the batch"),
    ("flags on a final row inside a batch",
     lambda rb: rb.insert(steps([4, 5, 6], [0] * 3, {1: "truncated", 2: "terminated"}, env_count=2)), ValueError,
     "environment 0 has terminated=1, truncated=0 at step 2 of the batch"),
    ("a list column", lambda rb: rb.insert([GOOD[0].tolist(), *GOOD[1:]]), TypeError,
     "column 'observation' must be a mindspore.Tensor or a numpy array"),
    ("sample before any start is valid", lambda rb: rb.sample(), ValueError,
     r"holds no valid start yet \(3 time steps of 2 environments stored\)"),
    ("a zero batch size", lambda rb: rb.sample(0), ValueError, "'batch_size' must be an int >= 1"),
    ("a float batch size", lambda rb: rb.sample(2.0), TypeError, "'batch_size' must be an int"),
]


@pytest.mark.parametrize("what, call, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_clear_errors_and_change_nothing(what, call, error, message):
    rb = prepared()
    before = parameters(rb)
    with pytest.raises(error, match=message):
        call(rb)
    assert_same(before, parameters(rb))
    rb.insert(GOOD)  # still works: the final row, then a valid start appears
    rb.insert(steps([5, 6], [0, 0], {}, env_count=2))
    assert int(rb.valid_starts()) == 2


def test_sampling_an_empty_buffer_is_refused():
    with pytest.raises(ValueError, match="the buffer is empty"):
        make().sample()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"capacity": 10, "num_envs": 3}, ValueError, r"'capacity' \(10\) must be a multiple of 'num_envs' \(3\)"),
    ({"capacity": 6, "stack_size": 4, "n_step": 2}, ValueError,
     r"holds 6 time steps of 1 environments, but a transition with stack_size=4 and n_step=2 needs at least 7"),
    ({"gamma": 1.5}, ValueError, r"'gamma' must be a float in \[0, 1\], but got 1.5"),
    ({"gamma": float("nan")}, ValueError, r"'gamma' must be a float in \[0, 1\], but got nan"),
    ({"gamma": -0.5}, ValueError, r"'gamma' must be a float in \[0, 1\], but got -0.5"),
    ({"gamma": True}, TypeError, "'gamma' must be a float"),
    ({"stack_size": 0}, ValueError, "'stack_size' must be an int >= 1"),
    ({"n_step": 2.0}, TypeError, "'n_step' must be an int"),
    ({"num_envs": 0}, ValueError, "'num_envs' must be an int >= 1"),
    ({"shapes": [(2,), (), (1,), (), ()]}, ValueError,
     r"the shape of column 'reward' must be \(\) \(one value per environment and step\), but got \(1,\)"),
    ({"shapes": [(2,), (), ()], "types": ["float32"] * 3}, ValueError, "must list at least 5 columns"),
    ({"types": ["float32", "int32", "float32", "uint16", "uint8"]}, ValueError,
     r"the dtype of column 'terminated' must be bool, uint8, a signed int or a float .* but got UInt16"),
    ({"types": ["float32", "int32", "float32", "uint8", "uint64"]}, ValueError,
     r"the dtype of column 'truncated' must be bool, uint8, a signed int or a float .* but got UInt64"),
    ({"names": ["storage.head", "action", "reward", "terminated", "truncated"]}, ValueError,
     r"the column name 'storage.head' is taken by the buffer: its ring registers its Parameters as 'storage.<name>'"),
])
def test_bad_constructor_arguments_name_the_argument(kwargs, error, message):
    arguments = {"sample_size": 4, "capacity": 12, "shapes": TRANSITION_SHAPES[:5], "types": TRANSITION_TYPES[:5]}
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        TransitionReplayBuffer(arguments.pop("sample_size"), arguments.pop("capacity"), arguments.pop("shapes"),
                               arguments.pop("types"), **arguments)


class Collect(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, observation, action, reward, terminated, truncated, extra):
        _ = self.buffer.insert([observation, action, reward, terminated, truncated, extra])
        return self.buffer.size()


def test_inside_a_graph_a_flagged_final_row_fails_the_run_and_writes_nothing():
    rb = prepared()
    graph = Collect(rb)
    graph(*(Tensor(column[0]) for column in GOOD))  # the final row, flag-free: accepted
    graph(*(Tensor(column[0]) for column in steps([5], [0], {0: "truncated"}, env_count=2)))
    before = parameters(rb)
    with pytest.raises(RuntimeError, match="assert failed"):
        graph(*(Tensor(column[0]) for column in steps([6], [0], {0: "terminated"}, env_count=2)))
    assert_same(before, parameters(rb))
    rb.insert(steps([6], [0], {}, env_count=2))  # direct calls keep working
    assert int(rb.size()) == 12


def test_inside_a_graph_sampling_without_a_valid_start_fails_loudly():
    rb = make(num_envs=2, stack_size=2, n_step=2, max_length=8)
    graph = CollectAndSample(rb)
    with pytest.raises(RuntimeError, match="assert failed"):
        graph(*(Tensor(column[0]) for column in steps([1], [0], {}, env_count=2)))


# ---------------------------------------------------------------------------------- writer
def test_the_writer_stores_what_direct_inserts_store_and_checks_final_rows_before_staging():
    direct, staged = (make(num_envs=2, stack_size=2, n_step=2, seed=4) for _ in range(2))
    stream = EpisodeStream(2, seed=2, end_probability=0.3)
    batch = stream.take(30)
    direct.insert(batch)
    with staged.writer(4) as writer:
        for t in range(30):
            writer.insert([column[t] for column in batch])
            if t == 16:
                writer.flush()
        assert writer.pending == 1  # 13 steps since the flush: 3 stages of 4 inserted, 1 staged
    assert_same(read_slots(direct), read_slots(staged))
    ended = (batch[3][-1] | batch[4][-1]).astype(bool)
    flagged = steps([99], [0], {0: "terminated"}, env_count=2)
    if ended.any():  # the next row of an ended environment must be flag-free, even across a flush
        with staged.writer(4) as writer, pytest.raises(ValueError, match="the row after an episode's end"):
            writer.insert([column[0] for column in flagged])
        assert_same(read_slots(direct), read_slots(staged))
    writer = staged.writer(3)
    writer.insert([column[0] for column in steps([100], [0], {}, env_count=2)])  # final rows where due
    writer.insert([column[0] for column in steps([101], [0], {0: "terminated"}, env_count=2)])
    with pytest.raises(ValueError, match="step 0 of the batch"):  # follows a staged end
        writer.insert([column[0] for column in flagged])
    assert writer.pending == 2
    writer.flush()
    assert int(staged.size()) == 2 * 12 and bool(staged.full())


@pytest.mark.slow
def test_batches_of_many_sizes_store_what_one_step_at_a_time_stores():
    """Past 8 sizes a batch goes in as power-of-two pieces (at most log2(n) + 1 more graphs)."""
    pieces, steps_alone = (make(num_envs=2, stack_size=2, n_step=2, seed=6) for _ in range(2))
    stream = EpisodeStream(2, seed=5, end_probability=0.2)
    for n in [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 3, 21, 7]:
        batch = stream.take(n)
        pieces.insert(batch)
        for t in range(n):
            steps_alone.insert([column[t:t + 1] for column in batch])
        assert_same(parameters(steps_alone), parameters(pieces))


# ------------------------------------------------------------------------------ checkpoints
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A wrapped buffer of 2 environments (stack_size 3, n_step 2) saved once, with its stream."""
    ms.set_context(mode=ms.GRAPH_MODE)  # as tests/conftest.py, which sets it per test: after this fixture
    ms.set_device("CPU")
    source, stream = make(num_envs=2, stack_size=3, n_step=2, max_length=9), EpisodeStream(2, seed=8)
    batch = stream.take(14)
    source.insert(batch)
    return source.save(tmp_path_factory.mktemp("checkpoints") / "transitions.safetensors"), source, batch, stream


def test_a_checkpoint_round_trips_into_a_buffer_whose_graphs_already_ran(saved):
    path, source, batch, stream = saved
    model = model_of(source)
    model.insert(batch)
    target = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    target.insert(EpisodeStream(2, seed=1).take(8))
    target.sample(), target.valid_starts()
    graph = Collect(target)
    graph(*(Tensor(column[0]) for column in EpisodeStream(2, seed=3, end_probability=0.0).take(1)))
    target.load(path)
    assert_same(parameters(source), parameters(target))
    items, info = target.sample_with_info()
    assert_transitions_match(model, items, info.ids, info.probabilities)
    step = stream.take(1)
    graph(*(Tensor(column[0]) for column in step))  # the compiled graph writes into the restored state
    model.insert(step)
    items, info = target.sample_with_info()
    assert_transitions_match(model, items, info.ids, info.probabilities)


@pytest.mark.parametrize("other, setting", [
    (lambda: make(num_envs=2, stack_size=2, n_step=2, max_length=9), "stack_size"),
    (lambda: make(num_envs=2, stack_size=3, n_step=1, max_length=9), "n_step"),
    (lambda: TransitionReplayBuffer(16, 18, TRANSITION_SHAPES, TRANSITION_TYPES, num_envs=2, stack_size=3,
                                    n_step=2, gamma=0.5, names=TRANSITION_NAMES), "gamma"),
    (lambda: make(num_envs=3, stack_size=3, n_step=2, max_length=6), "num_envs"),
])
def test_a_checkpoint_of_other_settings_is_refused_and_changes_nothing(saved, other, setting):
    target = other()
    before = parameters(target)
    with pytest.raises(ValueError, match=f"the {setting} in"):
        target.load(saved[0])
    assert_same(before, parameters(target))


def rewritten(path, tmp_path, change):
    """A copy of the checkpoint at ``path`` with ``change(tensors)`` applied, its checksums
    matching (as a buggy writer would leave it), or without a tensor ``change`` deleted."""
    loaded = ms.load_checkpoint(str(path), format="safetensors")
    change(loaded)
    record = json.loads(loaded[RECORD].asnumpy().tobytes())
    record["checksums"] = {name: checksum(value) for name, value in loaded.items()
                           if name in record["checksums"]}
    loaded[RECORD] = Tensor(np.frombuffer(json.dumps(record).encode(), np.uint8).copy())
    out = tmp_path / "rewritten.safetensors"
    ms.save_checkpoint([{"name": name, "data": value} for name, value in loaded.items()], str(out),
                       format="safetensors")
    return out


def test_a_checkpoint_whose_episode_bookkeeping_is_broken_is_refused(saved, tmp_path):
    newest = saved[2][3][-1] | saved[2][4][-1]
    # A file written that way by a buggy writer: its record's checksum matches the broken data.
    broken = rewritten(saved[0], tmp_path, lambda tensors: tensors.update(
        last_ended=Tensor((1 - newest).astype(np.int32))))
    target = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    before = parameters(target)
    with pytest.raises(ValueError, match=r"break the contract: last_ended=\[.*\] must be the newest row's"):
        load_checkpoint(broken, target)
    assert_same(before, parameters(target))


def test_a_checkpoint_without_the_start_table_gets_it_built_from_the_ranks(saved, tmp_path):
    """Files written before the start table existed load, and sample as the saved buffer does."""
    path, source, batch, _ = saved
    older = rewritten(path, tmp_path, lambda tensors: tensors.pop("start_table"))
    target = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    load_checkpoint(older, target)
    model = model_of(source)
    model.insert(batch)
    items, info = target.sample_with_info()
    assert_transitions_match(model, items, info.ids, info.probabilities)
    storage = source.storage
    ended = (storage.columns[2].asnumpy() != 0) | (storage.columns[3].asnumpy() != 0)
    slots, rows = start_slots(int(storage.head), int(storage.count), source.ranks.asnumpy(), ended)
    assert len(slots) > 10 and len(set(slots)) == len(slots)
    np.testing.assert_array_equal(source.start_table.asnumpy()[slots], rows)  # what the graph wrote
    np.testing.assert_array_equal(target.start_table.asnumpy()[slots], rows)  # what the load built


def test_a_checkpoint_whose_start_table_is_wrong_is_refused(saved, tmp_path):
    def misplace(tensors):
        table = tensors["start_table"].asnumpy().copy()
        table[:-1] = np.roll(table[:-1], 1)
        tensors["start_table"] = Tensor(table)

    target = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    before = parameters(target)
    with pytest.raises(ValueError, match=r"break the contract: the start table disagrees with the ranks at \d+ slot"):
        load_checkpoint(rewritten(saved[0], tmp_path, misplace), target)
    assert_same(before, parameters(target))


# ------------------------------------------------------------------------------ config files
def test_a_config_entry_builds_it_flat_or_nested_with_its_settings():
    entry = {"type": "TransitionReplayBuffer", "capacity": 24, "sample_size": 8,
             "data_shape": [(84, 84), (), (), (), ()], "data_type": ["uint8", "int32", "float32", "uint8", "uint8"],
             "num_envs": 2, "stack_size": 4, "n_step": 3, "gamma": 0.99, "seed": 1}
    for spec in (entry, {"number": 1, "type": TransitionReplayBuffer,
                         "params": {k: v for k, v in entry.items() if k != "type"}}):
        rb = create_buffer(spec)
        assert isinstance(rb, TransitionReplayBuffer)
        assert (rb.capacity, rb.max_length, rb.num_envs, rb.stack_size, rb.n_step, rb.gamma) == (24, 12, 2, 4, 3, 0.99)
        assert rb.specs[0].shape == (2, 84, 84) and rb.names[:3] == ("observation", "action", "reward")
    with pytest.raises(ValueError, match=r"unknown key 'stack_sise'; did you mean stack_size\?"):
        create_buffer({**entry, "stack_sise": 4})
    with pytest.raises(ValueError, match="'n_step' must be an int >= 1"):
        create_buffer({**entry, "n_step": 0})
    with pytest.raises(ValueError, match="does not apply to TransitionReplayBuffer"):
        create_buffer({**entry, "alpha": 0.6})


def test_gamma_zero_returns_the_first_reward_and_no_bootstrap_without_a_warning():
    # numpy warned of a division by zero (0.0 ** -k in columns the window then discards); warnings are errors here.
    rb = TransitionReplayBuffer(4, 16, [(2,), (), (), (), ()], ["float32", "int32", "float32", "uint8", "uint8"],
                                stack_size=2, n_step=3, gamma=0.0)
    flags = np.zeros((8, 1), np.uint8)
    rb.insert([np.zeros((8, 1, 2), np.float32), np.zeros((8, 1), np.int32),
               np.arange(1, 9, dtype=np.float32).reshape(8, 1), flags, flags])
    _, _, reward, _, discount = rb.sample()
    starts = reward.asnumpy()
    assert set(starts.tolist()) <= {3.0, 4.0, 5.0} and (discount.asnumpy() == 0).all()



def test_a_nan_or_infinite_reward_reaches_only_the_returns_that_sum_it():
    rb = TransitionReplayBuffer(64, 16, [(2,), (), (), (), ()], TRANSITION_TYPES[:5], stack_size=2, n_step=2,
                                gamma=0.5, seed=0)
    # rows 0-5 one episode (terminated at 5), row 6 its final row, rows 7-9 the next episode
    rewards = [1, np.inf, 1, 1, 1, 1, 1, np.nan, 1, 1]
    rb.insert(steps(range(10), rewards, {5: "terminated"})[:5])
    found = every_valid_sample(rb)
    returns = {start: float(items[2]) for start, items in found.items()}
    # start 2 sums rows 2-3 (row 1's inf is a stack row), 5 sums row 5 alone (row 7's NaN is the next
    # episode's), 7 sums rows 7-8
    assert returns == pytest.approx({2.0: 1.5, 3.0: 1.5, 4.0: 1.5, 5.0: 1.0, 7.0: np.nan}, nan_ok=True)


def test_bool_observations_actions_and_extras_are_stored_and_sampled_back_as_bool():
    types = ["bool", "bool", "float32", "uint8", "uint8", "bool"]
    rb = TransitionReplayBuffer(32, 12, [(3,), (), (), (), (), (2,)], types, n_step=2, seed=0)
    observation = np.array([[[i % 2, i % 3 == 0, True]] for i in range(8)], bool)
    action, extra = observation[:, :, 0], observation[:, :, 1:]
    flags = np.zeros((8, 1), U8)
    rb.insert([observation, action, np.ones((8, 1), np.float32), flags, flags, extra])
    items, info = rb.sample_with_info()
    assert [x.dtype for x in items] == [ms.bool_, ms.bool_, ms.float32, ms.bool_, ms.float32, ms.bool_]
    rows = info.ids.asnumpy() if info.ids.ndim == 1 else info.ids.asnumpy()[:, 0]
    np.testing.assert_array_equal(items[0].asnumpy(), observation[rows, 0])
    np.testing.assert_array_equal(items[1].asnumpy(), action[rows, 0])
    np.testing.assert_array_equal(items[3].asnumpy(), observation[rows + 2, 0])
    np.testing.assert_array_equal(items[5].asnumpy(), extra[rows, 0])


def test_final_rows_counted_past_the_rank_period_sample_as_a_buffer_counted_from_zero():
    from mindspore_rl_buffer.ops.transition import rank_period

    period = rank_period(30)
    counted_from_zero, near_the_period = (make(num_envs=2, stack_size=2, n_step=2, max_length=15, seed=3)
                                          for _ in range(2))
    # a state a buffer reaches after that many final rows and its ring's wrap: no row stored yet
    near_the_period.finals.set_data(Tensor(period - 7, ms.int32))
    stream = EpisodeStream(2, seed=5, end_probability=0.5)
    for _ in range(12):
        batch = stream.take(5)
        for rb in (counted_from_zero, near_the_period):
            rb.insert(batch)
        valid = int(counted_from_zero.valid_starts())
        assert int(near_the_period.valid_starts()) == valid
        for a, b in zip(near_the_period.sample(), counted_from_zero.sample()) if valid else ():
            np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())  # the same draws reach the same starts
    finals = int(near_the_period.finals.asnumpy())
    assert finals == (int(counted_from_zero.finals.asnumpy()) + period - 7) % period < period - 7


def test_an_empty_buffer_whose_final_row_count_is_not_zero_is_refused(tmp_path):
    empty = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    path = empty.save(tmp_path / "empty.safetensors")
    broken = rewritten(path, tmp_path, lambda tensors: tensors.update(finals=Tensor(5, ms.int32)))
    target = make(num_envs=2, stack_size=3, n_step=2, max_length=9)
    before = parameters(target)
    with pytest.raises(ValueError, match=r"finals=5 must count the final rows since the last reset, modulo "
                                         r"1073741814 \(0 in an empty buffer\)"):
        load_checkpoint(broken, target)
    assert_same(before, parameters(target))
