"""PrioritizedTransitionReplayBuffer against the numpy model of tests/prioritized_model.py: trees
and priorities after random inserts and updates, stale ids, samples and their frequencies,
adversarial priorities, a user's Cell, bad input, checkpoints, the writer and config entries."""
from __future__ import annotations

import json

import mindspore as ms
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mindspore import Parameter, ParameterTuple, Tensor, nn
from mindspore_rl_buffer.ops import LEAF_CEILING, empty_levels, find_leaves, tree_shape, write_leaves
from mindspore_rl_buffer.ops.prioritized import FLAT_SEARCH_NODES
from scipy.stats import chisquare

from mindspore_rl_buffer import PrioritizedTransitionReplayBuffer, create_buffer
from mindspore_rl_buffer.checkpoint import RECORD, checksum
from tests.helpers import TRANSITION_NAMES, TRANSITION_SHAPES, TRANSITION_TYPES, ConstantBetaSample, EpisodeStream
from tests.prioritized_model import (
    PrioritizedTransitionModel,
    adversarial_priorities,
    assert_same,
    assert_sample_matches,
    assert_trees_match,
    levels,
    parameters,
    tree_names,
    update_batch,
)

GAMMA, ALPHA, BETA = 0.9, 0.6, 0.4
BATCH = 8  # every sample and update of the small buffers: one graph each


def make(num_envs=1, stack_size=1, n_step=1, max_length=12, sample_size=BATCH, alpha=ALPHA, **kwargs):
    return PrioritizedTransitionReplayBuffer(sample_size, max_length * num_envs, TRANSITION_SHAPES,
                                             TRANSITION_TYPES, alpha=alpha, num_envs=num_envs,
                                             stack_size=stack_size, n_step=n_step, gamma=GAMMA,
                                             names=TRANSITION_NAMES, **kwargs)


def model_of(rb):
    return PrioritizedTransitionModel(rb.max_length, rb.num_envs, rb.stack_size, rb.n_step, rb.gamma, rb.alpha,
                                      rb.id_bound)


def both(rb, model, batch):
    rb.insert(batch)
    model.insert(batch)


# ------------------------------------------------------------------------ properties
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Buffers built once each (their graphs compile once per batch size): (num_envs, stack_size, n_step).
FAST_POOL = [(2, 3, 2), (3, 5, 4)]
SLOW_POOL = [(1, 1, 1), (2, 2, 3), (1, 4, 2), (2, 5, 4), (3, 1, 5), (1, 1, 5), (3, 5, 1)]
_pool: dict[tuple[int, int, int], PrioritizedTransitionReplayBuffer] = {}


def operations(insert_sizes):
    """Inserts of a few sizes (up to longer than every pooled ring), samples, updates (by a seed)."""
    return st.lists(st.one_of(st.tuples(st.just("insert"), st.sampled_from(insert_sizes)),
                              st.tuples(st.just("sample"), st.just(0)),
                              st.tuples(st.just("update"), st.integers(0, 2**16))), min_size=4, max_size=16)


def pooled(config):
    if config not in _pool:
        num_envs, stack_size, n_step = config
        _pool[config] = make(num_envs, stack_size, n_step, max_length=stack_size + n_step + 3, seed=1)
    return _pool[config]


def run_operations(config, seed, end, operations):
    rb = pooled(config)
    rb.reset()
    model, stream, drawn = model_of(rb), EpisodeStream(config[0], seed=seed, end_probability=end), []
    assert_trees_match(rb, model)
    for operation, argument in operations:
        if operation == "insert":
            both(rb, model, stream.take(argument))
        elif operation == "sample" and model.valid():
            drawn += assert_sample_matches(model, rb.sample(BETA), BETA).tolist()
        elif operation == "sample":
            with pytest.raises(ValueError):
                rb.sample(BETA)
        elif operation == "update" and (drawn or model.steps.stored):
            ids, priorities = update_batch(model, drawn, argument, BATCH)
            assert rb.update_priorities(ids, priorities) is None
            model.update(ids, priorities)
        assert_trees_match(rb, model)


@SETTINGS
@given(config=st.sampled_from(FAST_POOL), seed=st.integers(0, 2**16), end=st.sampled_from([0.0, 0.2, 0.5]),
       operations=operations([1, 3, 13]))
def test_trees_and_samples_follow_the_model_through_inserts_updates_and_wraparound(config, seed, end, operations):
    """Random episode lengths (terminations and truncations), 1-3 environments, batches up to longer
    than the ring, updates with stale, invalid and repeated ids, (n,) and (n, 1) priorities."""
    run_operations(config, seed, end, operations)


def test_a_tree_of_two_levels_follows_the_model():
    """3 environments x 70 steps: 210 slots under 15 nodes of 15 leaves, wrapped around twice."""
    rb = make(3, 2, 3, max_length=70, seed=2)
    assert tree_shape(rb.capacity) == (15, 2) and len(rb.sum_tree) == 3
    model, stream, drawn = model_of(rb), EpisodeStream(3, seed=5, end_probability=0.1), []
    rng = np.random.default_rng(0)
    for _ in range(12):
        both(rb, model, stream.take(int(rng.choice([1, 13, 40]))))
        if model.valid():
            drawn += assert_sample_matches(model, rb.sample(BETA), BETA).tolist()
            ids, priorities = update_batch(model, drawn, int(rng.integers(2**16)), BATCH)
            rb.update_priorities(ids, priorities)
            model.update(ids, priorities)
        assert_trees_match(rb, model)


@pytest.mark.parametrize(("capacity", "shape"), [(20_000, (28, 3)), (2_100_000, (39, 4))])
def test_deep_trees_sum_their_children_and_a_draw_never_ends_on_a_zero_leaf(capacity, shape):
    """The operators alone: 3 levels (a search of level 1, then the leaves) and 4 levels (level 1 is
    too large to search whole: a descent from the root); leaves from 1e-8 to 1e8 among zeros, and
    targets across the whole mass, at it and past it (where only rounding can lead)."""
    fanout, depth = tree_shape(capacity)
    assert (fanout, depth) == shape
    assert (fanout ** (depth - 1) <= FLAT_SEARCH_NODES) == (depth == 3)
    sums, mins = (ParameterTuple([Parameter(Tensor(x), name=f"{kind}_{i}", requires_grad=False)
                                  for i, x in enumerate(tree)]) for kind, tree in zip("sm", empty_levels(capacity)))
    rng = np.random.default_rng(1)
    slots = rng.choice(capacity, 3000, replace=False).astype(np.int32)
    values = np.where(rng.random(3000) < 0.3, 0.0, 10.0 ** rng.uniform(-8, 8, 3000)).astype(np.float32)
    write_leaves(sums, mins, Tensor(slots), Tensor(values))
    leaves = np.zeros(fanout**depth, np.float32)
    leaves[slots] = values
    below_sums, below_mins = leaves.astype(np.float64), np.where(leaves > 0, leaves, np.inf)
    for level in range(1, depth + 1):
        below_sums, below_mins = (below_sums.reshape(-1, fanout).sum(1), below_mins.reshape(-1, fanout).min(1))
        np.testing.assert_allclose(sums[level].asnumpy(), below_sums, rtol=1e-5)
        assert np.array_equal(mins[level].asnumpy(), below_mins.astype(np.float32))
    total = float(sums[-1].asnumpy()[0])
    targets = np.concatenate([np.linspace(0, total, 20_000), [total, total * 1.001, np.nextafter(total, 0)]])
    found = find_leaves(sums, Tensor(targets.astype(np.float32))).asnumpy()
    assert (leaves[found] > 0).all()
    # Inside the mass the descent finds the leaf whose cumulative interval holds the target.
    expected = np.searchsorted(np.cumsum(leaves.astype(np.float64)), targets[:20_000], side="right")
    assert np.mean(found[:20_000] == expected) > 0.99


@settings(SETTINGS, max_examples=60)
@given(config=st.sampled_from(SLOW_POOL), seed=st.integers(0, 2**16), end=st.sampled_from([0.0, 0.1, 0.3, 0.6]),
       operations=operations([1, 2, 3, 5, 13]))
@pytest.mark.slow
def test_trees_and_samples_follow_the_model_for_every_stack_and_n_step(config, seed, end, operations):
    run_operations(config, seed, end, operations)


# ------------------------------------------------------------------------- priority rules
def test_new_starts_enter_at_the_all_time_max_priority_with_alpha_applied_once():
    rb = make(stack_size=2, n_step=1, max_length=8, alpha=0.5)
    model = model_of(rb)
    stream = EpisodeStream(1, seed=0, end_probability=0.0)
    both(rb, model, stream.take(4))  # rows 2 (T 2) valid
    assert model.valid_slots() == {2}
    rb.update_priorities(np.array([2], np.int32), np.array([16.0], np.float32))
    model.update([2], [16.0])
    assert float(rb.max_priority.asnumpy()) == 16.0
    rb.update_priorities(np.array([2], np.int32), np.array([0.25], np.float32))  # max stays 16: all-time
    model.update([2], [0.25])
    both(rb, model, stream.take(1))  # T 3 becomes valid: 16 ** 0.5
    leaves = levels(rb.sum_tree)[0]
    assert leaves[3] == 4.0 and leaves[2] == 0.5
    assert_trees_match(rb, model)


def test_stale_ids_are_ignored_never_revive_and_duplicates_take_the_last_fresh_value():
    rb = make(stack_size=2, n_step=1, max_length=6, alpha=1.0)  # valid: 2 <= t <= count - 2
    model, stream = model_of(rb), EpisodeStream(1, seed=0, end_probability=0.0)
    both(rb, model, stream.take(6))  # T 2, 3, 4 valid; T 5 not yet
    assert sorted(model.by_id()) == [2, 3, 4]

    def update(ids, priorities):
        rb.update_priorities(np.array(ids, np.int32), np.array(priorities, np.float32))
        model.update(ids, priorities)
        assert_trees_match(rb, model)

    update([3, 4, 3, 3], [5.0, 2.0, 0.5, 3.0])  # duplicates: the last fresh occurrence wins
    assert model.priorities[(3, 0)] == 3.0 and float(rb.max_priority.asnumpy()) == 3.0
    before = parameters(rb)
    update([5, 1, 0, 5], [100.0, 100.0, 100.0, 100.0])  # not yet valid, too old, never valid: nothing
    assert_same(before, parameters(rb), tree_names(rb))
    both(rb, model, stream.take(1))  # T 2 goes too old (t = 1), T 5 enters at 3.0, not 100
    assert_trees_match(rb, model)
    assert levels(rb.sum_tree)[0][5] == 3.0 and levels(rb.sum_tree)[0][2] == 0
    before = parameters(rb)
    update([2, 2, 2, 2], [50.0, 50.0, 50.0, 50.0])  # gone invalid since drawn: ignored, not revived
    assert_same(before, parameters(rb), tree_names(rb))
    both(rb, model, stream.take(6))  # the ring wraps: every slot holds a newer row
    before = parameters(rb)
    update([3, 4, 5, 6], [70.0, 70.0, 70.0, 70.0])  # their slots were overwritten: ignored
    assert_same(before, parameters(rb), tree_names(rb))
    fresh = sorted(model.by_id())
    update([fresh[0], 3, fresh[0], 5], [7.0, 1e3, 2.0, 1e3])  # stale and fresh mixed: 2.0 wins
    assert model.priorities[model.by_id()[fresh[0]]] == 2.0


# ---------------------------------------------------------------------------- frequencies
def test_draw_frequencies_follow_the_models_probabilities():
    ms.set_seed(123)
    rb = make(num_envs=2, stack_size=3, n_step=2, max_length=20, sample_size=1000, seed=7)
    model = model_of(rb)
    both(rb, model, EpisodeStream(2, seed=4, end_probability=0.2).take(27))  # wrapped, ends near both edges
    ids = np.array(sorted(model.by_id()), np.int32)
    priorities = (10.0 ** np.random.default_rng(0).uniform(-1.5, 1.5, len(ids))).astype(np.float32)
    rb.update_priorities(ids, priorities)
    model.update(ids, priorities)
    assert_trees_match(rb, model)
    counts = dict.fromkeys(ids.tolist(), 0)
    for _ in range(30):
        for index in assert_sample_matches(model, rb.sample(BETA), BETA).tolist():
            counts[index] += 1
    # 30,000 stratified draws over V valid starts: under the model's probabilities the statistic is at
    # most chi-square with V - 1 degrees of freedom (stratification only lowers it); p < 0.001 rejects.
    probabilities, starts = model.probabilities(), model.by_id()
    expected = np.array([probabilities[model.slot(*starts[index])] for index in counts])
    assert len(counts) > 20
    assert chisquare(list(counts.values()), 30_000 * expected / expected.sum()).pvalue > 1e-3


# ---------------------------------------------------------------------- adversarial priorities
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_invalid_starts_are_never_drawn_whatever_the_priorities(alpha):
    rb = make(num_envs=2, stack_size=2, n_step=2, max_length=16, alpha=alpha, seed=3)
    model, stream = model_of(rb), EpisodeStream(2, seed=6, end_probability=0.3)
    both(rb, model, stream.take(21))  # wrapped; final rows and edges make invalid starts between valid ones
    width = rb.capacity  # updates padded to one length: one graph
    for name, values in adversarial_priorities(width, alpha).items():
        both(rb, model, stream.take(1))  # a new start enters at the all-time max priority
        ids = np.array(sorted(model.by_id()), np.int32)
        values = values[:len(ids)].astype(np.float32)
        rb.update_priorities(np.resize(ids, width), np.resize(values, width))
        model.update(ids, values)
        assert_trees_match(rb, model, rtol=1e-5)
        if alpha == 1.0 and name == "leaf ceiling":
            assert levels(rb.sum_tree)[0].max() == LEAF_CEILING
        for _ in range(5):  # 2,560 draws a pattern
            assert_sample_matches(model, rb.sample(1.0, batch_size=512), 1.0, rtol=1e-4)


# ------------------------------------------------------------------------ inside a user's Cell
class LearnStep(nn.Cell):
    """A user's step: insert a step of every environment, sample with a Tensor beta, update the
    drawn starts' priorities, all in one compiled graph."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, observation, action, reward, terminated, truncated, extra, beta, priorities):
        _ = self.buffer.insert([observation, action, reward, terminated, truncated, extra])
        drawn = self.buffer.sample(beta)
        return drawn, self.buffer.update_priorities(drawn[0], priorities)


def test_inside_a_users_cell_insert_sample_and_update_match_the_model():
    rb = make(num_envs=2, stack_size=3, n_step=2, max_length=9, seed=2)
    model, stream = model_of(rb), EpisodeStream(2, seed=9, end_probability=0.3)
    both(rb, model, stream.take(7))
    graph, rng, beta = LearnStep(rb), np.random.default_rng(1), Tensor(0.5, ms.float32)
    out_of_range = np.array([np.inf, np.nan, -1.0, 0.0, 3e38, 2.0**126, 1e-9, 5.0], np.float32)  # clamped
    for i in range(14):  # wraps the 9-step ring more than once
        step = stream.take(1)
        priorities = out_of_range[rng.permutation(BATCH)] if i in (6, 11) else \
            (10.0 ** rng.uniform(-2, 2, BATCH)).astype(np.float32)
        drawn, max_priority = graph(*(Tensor(column[0]) for column in step), beta, Tensor(priorities))
        model.insert(step)
        ids = assert_sample_matches(model, drawn, 0.5)
        model.update(ids, priorities)
        assert max_priority.shape == () and max_priority.dtype == ms.float32
        np.testing.assert_allclose(float(max_priority.asnumpy()), model.max_priority, rtol=1e-6)
        assert_trees_match(rb, model)
    assert_sample_matches(model, rb.sample(Tensor(0.5, ms.float32)), 0.5)  # the direct path sees it all


# ------------------------------------------------------------------------------ bad input
_prepared: list[PrioritizedTransitionReplayBuffer] = []
IDS = np.array([3, 4, 3, 5], np.int32)


def prepared():
    """One buffer for every bad call (its graphs compile once), refilled each time."""
    if not _prepared:
        _prepared.append(make(num_envs=1, stack_size=2, n_step=1, max_length=8, seed=0))
    rb = _prepared[0]
    rb.reset()
    rb.insert(EpisodeStream(1, seed=0, end_probability=0.0).take(7))  # T 2..5 valid
    return rb


F32 = np.float32


def update(ids=IDS, priorities=(1, 1, 1, 1)):
    return lambda rb: rb.update_priorities(ids, np.asarray(priorities, F32))


BAD_CALLS = [
    ("a negative beta", lambda rb: rb.sample(-0.1), ValueError, "beta"),
    ("a NaN beta", lambda rb: rb.sample(float("nan")), ValueError, "beta"),
    ("an infinite beta", lambda rb: rb.sample(float("inf")), ValueError, "beta"),
    ("a negative Tensor beta", lambda rb: rb.sample(Tensor(-1.0, ms.float32)), ValueError, "beta"),
    ("a string beta", lambda rb: rb.sample("0.4"), TypeError, "beta"),
    ("an id below 0", update(ids=np.array([3, -1, 4, 5], np.int32)), IndexError, "ids"),
    ("an id at id_bound", lambda rb: update(ids=np.array([3, rb.id_bound, 4, 5], np.int32))(rb), IndexError, "ids"),
    ("a negative priority", update(priorities=[1, -1, 1, 1]), ValueError, "priorities"),
    ("a NaN priority", update(priorities=[1, np.nan, 1, 1]), ValueError, "priorities"),
    ("an infinite priority", update(priorities=[1, np.inf, 1, 1]), ValueError, "priorities"),
    ("a priority above the largest", update(priorities=[1, 2.0**127, 1, 1]), ValueError, "priorities"),
    ("fewer priorities than ids", update(priorities=[1, 1, 1]), ValueError, "priorities' must have the shape of 'ids"),
    ("priorities of shape (n, 2)", update(priorities=np.ones((4, 2))), ValueError,
     "priorities' must have the shape of 'ids"),
    ("ids of shape (n, 1)", update(ids=IDS.reshape(4, 1)), ValueError, "ids"),
    ("float ids", update(ids=IDS.astype(F32)), (TypeError, ValueError), "ids"),
    ("a Python float as the priorities", lambda rb: rb.update_priorities(IDS, 1.0), TypeError, "priorities"),
    ("a list of priorities", lambda rb: rb.update_priorities(IDS, [1.0, 1.0, 1.0, 1.0]), TypeError, "priorities"),
]


@pytest.mark.parametrize("what, call, error, argument", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_name_the_argument_and_change_nothing(what, call, error, argument):
    rb = prepared()
    before = parameters(rb)
    with pytest.raises(error, match=f"'{argument}'"):
        call(rb)
    assert_same(before, parameters(rb))
    rb.update_priorities(IDS, np.full(4, 2.0, F32))  # still works
    assert float(rb.max_priority.asnumpy()) == 2.0 and rb.sample(BETA)[0].shape == (BATCH,)


@pytest.mark.parametrize("beta", ["0.4", True, -0.1])
def test_a_constant_beta_is_checked_when_the_graph_compiles_as_a_direct_call_checks_it(beta):
    rb = prepared()
    with pytest.raises((TypeError, ValueError)) as direct:
        rb.sample(beta)
    with pytest.raises(direct.type) as compiled:
        ConstantBetaSample(rb, beta)()
    assert str(compiled.value).splitlines()[0] == str(direct.value)
    assert ConstantBetaSample(rb, BETA)().shape == (BATCH,)


@pytest.mark.parametrize("num_envs", [1, 8])
def test_a_capacity_whose_ids_could_not_tell_a_stale_start_is_refused_before_anything_is_allocated(num_envs):
    # Past 2**29 slots an id was its slot: an id from before an overwrite updated the newer start.
    from mindspore_rl_buffer.ops.prioritized import id_period

    largest = 2**29
    assert id_period(largest // num_envs, num_envs) >= 2 * (largest // num_envs)  # the limit keeps ids apart
    assert id_period(largest // num_envs + 1, num_envs) == largest // num_envs + 1  # one row past it does not
    with pytest.raises(ValueError, match=r"^For 'PrioritizedTransitionReplayBuffer', 'capacity' must be an int <= "
                                         rf"536870912 \(2\*\*29: .*\), but got {largest + num_envs}\.$"):
        make(num_envs=num_envs, max_length=largest // num_envs + 1)


def test_sampling_without_a_valid_start_is_refused_and_changes_nothing():
    rb = prepared()
    rb.reset()
    rb.insert(EpisodeStream(1, seed=0, end_probability=0.0).take(2))
    before = parameters(rb)
    with pytest.raises(ValueError, match="no valid start"):
        rb.sample(BETA)
    assert_same(before, parameters(rb))


# ------------------------------------------------------------------------------ checkpoints
def test_a_checkpoint_round_trips_into_a_buffer_whose_graphs_already_ran_and_draws_the_same(tmp_path):
    source, target = (make(num_envs=2, stack_size=3, n_step=2, max_length=9, seed=5) for _ in range(2))
    stream = EpisodeStream(2, seed=8)
    for _ in range(2):  # wraps the ring; batches of 8 steps, as the target's (one graph size)
        source.insert(stream.take(8))
    for _ in range(3):  # priorities other than the max, and a max above 1
        ids = source.sample(BETA)[0].asnumpy()
        source.update_priorities(ids, np.linspace(0.5, 9, BATCH).astype(np.float32))
    target.insert(EpisodeStream(2, seed=1).take(8))
    target.sample(BETA)
    target.update_priorities(target.sample(BETA)[0], np.ones(BATCH, np.float32))
    source.save(tmp_path / "prioritized.safetensors")
    target.load(tmp_path / "prioritized.safetensors")
    assert_same(parameters(source), parameters(target))
    step = stream.take(8)  # the target's compiled insert writes into the loaded state
    for rb in (source, target):
        rb.insert(step)
    for _ in range(3):
        drawn = [[x.asnumpy() for x in rb.sample(BETA)] for rb in (source, target)]
        for a, b in zip(*drawn):
            np.testing.assert_array_equal(a, b)
        for rb in (source, target):
            rb.update_priorities(drawn[0][0], np.arange(1, BATCH + 1, dtype=np.float32))
    assert_same(parameters(source), parameters(target))


def test_a_checkpoint_whose_tree_gives_an_invalid_start_a_leaf_is_refused_and_changes_nothing(tmp_path):
    source, target = (make(num_envs=2, stack_size=3, n_step=2, max_length=9, seed=5) for _ in range(2))
    source.insert(EpisodeStream(2, seed=8).take(14))
    loaded = ms.load_checkpoint(str(source.save(tmp_path / "source.safetensors")), format="safetensors")
    names = sorted((name for name in loaded if name.startswith("sum_tree")), key=len)  # levels, leaves first
    if names == ["sum_tree"]:  # one Parameter of 2P nodes: its levels are views of it
        nodes = loaded["sum_tree"].asnumpy().copy()
        tree = [nodes[n:2 * n] for n in (len(nodes) // 2 >> i for i in range(len(nodes).bit_length() - 1))]
    else:
        names.sort(key=lambda name: int(name.rsplit("_", 1)[1]))
        tree = [loaded[name].asnumpy().copy() for name in names]
    invalid = np.flatnonzero(tree[0][:source.capacity] == 0)[0]
    for level in tree:  # a leaf for it, and its ancestors' sums to match: only the validity rule is broken
        level[invalid // (len(tree[0]) // len(level))] += 1.0
    loaded.update({"sum_tree": Tensor(nodes)} if names == ["sum_tree"] else
                  {name: Tensor(level) for name, level in zip(names, tree)})
    record = json.loads(loaded[RECORD].asnumpy().tobytes())  # checksums that match, as a buggy writer's
    record["checksums"] = {name: checksum(value) for name, value in loaded.items() if name in record["checksums"]}
    loaded[RECORD] = Tensor(np.frombuffer(json.dumps(record).encode(), np.uint8).copy())
    broken = tmp_path / "broken.safetensors"
    ms.save_checkpoint([{"name": name, "data": value} for name, value in loaded.items()], str(broken),
                       format="safetensors")
    before = parameters(target)
    with pytest.raises(ValueError, match=r"sum_tree"):
        target.load(broken)
    assert_same(before, parameters(target))


def test_a_checkpoint_with_a_count_past_capacity_is_refused_by_its_cursors_before_its_trees_are_read(tmp_path):
    source, target = make(max_length=9, seed=5), make(max_length=9, seed=5)
    source.insert(EpisodeStream(1, seed=8).take(5))
    count = 2**20  # the trees' check would index every start of a ring this long
    source.storage.count.set_data(Tensor(count, ms.int32))
    source.save(tmp_path / "count.safetensors")
    before = parameters(target)
    with pytest.raises(ValueError, match=rf"count={count} must be in \[0, 9\]") as refused:
        target.load(tmp_path / "count.safetensors")
    assert "is not one the buffer can reach" not in str(refused.value)
    assert_same(before, parameters(target))


def test_ids_past_the_id_period_wrap_and_draw_what_a_buffer_counted_from_zero_draws():
    """A buffer whose time rows are counted from near the id period (as after that many steps) keeps
    the trees and draws the items of one counted from zero; its ids are those shifted modulo id_bound."""
    zero, near = (make(num_envs=2, stack_size=2, n_step=2, max_length=8, seed=3) for _ in range(2))
    shift = near.id_bound - 2 * 2 * 8  # two laps of the ring before the period: the cursors agree
    near.steps.set_data(Tensor(shift // 2, ms.int32))  # before any graph ran: graphs keep the storage they saw
    stream, rng, drawn = EpisodeStream(2, seed=5, end_probability=0.3), np.random.default_rng(3), []
    for _ in range(12):  # 36 steps: the time rows cross the period
        batch = stream.take(3)
        zero.insert(batch)
        near.insert(batch)
        if not int(zero.valid_starts()):
            continue
        (ids, *items), (shifted, *near_items) = ([x.asnumpy() for x in rb.sample(BETA)] for rb in (zero, near))
        np.testing.assert_array_equal(shifted, (ids.astype(np.int64) + shift) % near.id_bound)
        for a, b in zip(items, near_items):
            np.testing.assert_array_equal(a, b)
        drawn.append(ids)
        old, priorities = drawn[max(0, len(drawn) - 3)], (10.0 ** rng.uniform(-2, 2, BATCH)).astype(np.float32)
        zero.update_priorities(old, priorities)  # fresh or stale by now, in both alike
        near.update_priorities(((old.astype(np.int64) + shift) % near.id_bound).astype(np.int32), priorities)
        assert_same(*(parameters(rb) for rb in (zero, near)), tree_names(zero))


# ----------------------------------------------------------------------- writer and config
def test_the_writer_stores_what_direct_inserts_store():
    rb = make(num_envs=2, stack_size=2, n_step=2, seed=4)
    model, batch = model_of(rb), EpisodeStream(2, seed=2, end_probability=0.3).take(30)
    with rb.writer(4) as writer:
        for t in range(30):
            writer.insert([column[t] for column in batch])
            if t == 16:
                writer.flush()
                model.insert([column[:17] for column in batch])
                assert_trees_match(rb, model)
                ids = np.array(sorted(model.by_id())[:BATCH], np.int32)
                rb.update_priorities(ids, np.full(len(ids), 5.0, np.float32))
                model.update(ids, np.full(len(ids), 5.0))
    model.insert([column[17:] for column in batch])
    assert_trees_match(rb, model)
    assert_sample_matches(model, rb.sample(BETA), BETA)


def test_a_config_entry_builds_it_with_its_settings():
    entry = {"type": "PrioritizedTransitionReplayBuffer", "alpha": 0.5, "capacity": 24, "sample_size": 8,
             "data_shape": [(4, 4), (), (), (), ()], "data_type": ["uint8", "int32", "float32", "uint8", "uint8"],
             "num_envs": 2, "stack_size": 4, "n_step": 3, "gamma": 0.99, "seed": 1}
    rb = create_buffer(entry)
    assert isinstance(rb, PrioritizedTransitionReplayBuffer)
    assert (rb.alpha, rb.capacity, rb.num_envs, rb.stack_size, rb.n_step, rb.gamma) == (0.5, 24, 2, 4, 3, 0.99)
    assert float(rb.max_priority.asnumpy()) == 1.0 and levels(rb.sum_tree)[0].shape[0] >= 24
