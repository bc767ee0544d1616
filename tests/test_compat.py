"""MindSpore Reinforcement's buffer code, with only the import changed.

The first three tests make the calls of mindspore_rl's own system tests for its three buffers
(tests/st/test_uniform_replay_buffer.py, test_priority_replay_buffer.py and
test_reservoir_replay_buffer.py in mindspore-lab/mindrl), in the same order, and check the same
properties; the priority and reservoir tests are skipped upstream, here they run. Then the
patterns its trainers use: an episode in one jit `while` loop, PyNative mode and the switch to
GRAPH_MODE, `@mindspore.jit` functions, and the config entries of its algorithms.
"""
from __future__ import annotations

import gymnasium
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, context, nn, ops
from mindspore import dtype as mstype

from mindspore_rl_buffer import PriorityReplayBuffer, ReservoirReplayBuffer, UniformReplayBuffer, create_buffer
from tests.helpers import RingModel

SHAPES = ((17,), (6,))


class TestURB(nn.Cell):
    """mindspore_rl's sampler Cell: inserts in a plain method, samples in its construct."""

    __test__ = False

    def __init__(self, capacity, batch_size):
        super().__init__()
        self.urb = UniformReplayBuffer(batch_size, capacity, SHAPES, (mstype.float32, mstype.float32))
        self.capacity = capacity
        self.init_s = Tensor(np.ones((17,)), mstype.float32)
        self.init_a = Tensor(np.ones((6,)), mstype.float32)

    def init(self):
        for i in range(self.capacity):
            self.urb.insert([self.init_s + i, self.init_a + i])
        return self.urb

    def construct(self):
        return self.urb.sample()[0]


def test_uniform_replay_buffer_as_mindspore_rl_tests_it():
    context.set_context(mode=context.PYNATIVE_MODE)  # MindSpore's default, where its test starts
    capacity, batch_size = 200, 16
    ms.set_seed(10)
    urb = UniformReplayBuffer(batch_size, capacity, SHAPES, (mstype.float32, mstype.int32))
    for i in range(100):
        state = Tensor(np.ones((17,)) * i, mstype.float32)
        action = Tensor(np.ones((6,)) * i, mstype.int32)
        urb.insert([state, action])
    states, actions = (x.asnumpy() for x in urb.sample())  # the same buffer, still in PyNative
    assert states.shape == (16, 17) and actions.shape == (16, 6)
    assert (states == states[:, :1]).all() and (states[:, 0] == actions[:, 0]).all() and states.max() < 100

    context.set_context(mode=context.GRAPH_MODE)
    test_urb = TestURB(200, 32)
    test_urb.init()
    s0 = test_urb()
    s1 = test_urb()
    assert not np.allclose(s0.asnumpy(), s1.asnumpy())
    for sample in (s0.asnumpy(), s1.asnumpy()):
        assert sample.shape == (32, 17)
        assert (sample == sample[:, :1]).all() and sample.min() >= 1 and sample.max() <= 200


class _InsertsByKeyword(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action):
        _ = self.buffer.insert(exp=[state, action])
        return self.buffer.get_item(-1)


@pytest.mark.slow
def test_insert_takes_the_transition_as_mindspore_rl_named_it_exp():
    context.set_context(mode=context.GRAPH_MODE)
    urb = UniformReplayBuffer(2, 5, [(2,), (1,)], [mstype.float32, mstype.int32])
    model = RingModel(5, [(2,), (1,)], [np.float32, np.int32])
    for i in range(7):
        state, action = np.full((1, 2), i, np.float32), np.full((1, 1), i, np.int32)
        if i % 2:
            urb.insert(exp=[state, action])
        else:
            got = _InsertsByKeyword(urb)(Tensor(state[0]), Tensor(action[0]))
            assert [x.asnumpy().tolist() for x in got] == [[float(i)] * 2, [i]]
        model.insert([state, action])
        assert [c.asnumpy().tolist() for c in urb.columns] == [c.tolist() for c in model.columns]
    with pytest.raises(TypeError, match=r"For 'insert', give the transition once, as columns or as 'exp', but got 1 "):
        urb.insert(state, exp=[state, action])
    assert [c.asnumpy().tolist() for c in urb.columns] == [c.tolist() for c in model.columns]


class _InsertsBothWays(nn.Cell):
    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer

    def construct(self, state, action):
        _ = self.buffer.insert(state, exp=[state, action])
        return self.buffer.size()


@pytest.mark.parametrize("kind", ["UniformReplayBuffer", "ShardedReplayBuffer"])
def test_exp_by_keyword_on_insert_and_push_and_refused_beside_columns_in_a_graph_too(kind):
    from mindspore_rl_buffer import ShardedReplayBuffer

    context.set_context(mode=context.GRAPH_MODE)
    cls = {"UniformReplayBuffer": UniformReplayBuffer, "ShardedReplayBuffer": ShardedReplayBuffer}[kind]
    buffer = cls(2, 5, [(2,), (1,)], [mstype.float32, mstype.int32])
    state, action = np.ones((1, 2), np.float32), np.ones((1, 1), np.int32)
    buffer.insert(exp=[state, action])
    buffer.push(exp=[state * 2, action * 2])
    assert buffer.get_item(-1)[0].asnumpy().tolist() == [2.0, 2.0] and int(buffer.size()) == 2
    with pytest.raises(TypeError, match=r"give the transition once, as columns or as 'exp', but got 1 column"):
        _InsertsBothWays(buffer)(Tensor(state[0]), Tensor(action[0]))
    assert int(buffer.size()) == 2


def test_priority_replay_buffer_as_mindspore_rl_tests_it():
    capacity, batch_size = 200, 32
    shapes, dtypes = ((17,), (6,)), (mstype.float32, mstype.int32)
    prb = PriorityReplayBuffer(1., capacity, batch_size, shapes, dtypes, seed0=0, seed1=42)
    for i in range(100):
        state = Tensor(np.ones((17,)) * i, mstype.float32)
        action = Tensor(np.ones((6,)) * i, mstype.int32)
        prb.push(state, action)

    indices, weights, states, actions = prb.sample(1.)
    assert np.all(indices.asnumpy() < 100)
    states_expect = np.broadcast_to(indices.asnumpy().reshape(-1, 1), states.shape)
    actions_expect = np.broadcast_to(indices.asnumpy().reshape(-1, 1), actions.shape)
    assert np.allclose(states.asnumpy(), states_expect)
    assert np.allclose(actions.asnumpy(), actions_expect)

    priorities = Tensor(np.ones(weights.shape) * 1e-7, mstype.float32)
    prb.update_priorities(indices, priorities)

    indices_new, _, states_new, actions_new = prb.sample(1.)
    assert np.all(indices_new.asnumpy() < 100)
    assert np.all(indices.asnumpy() != indices_new.asnumpy())
    states_expect = np.broadcast_to(indices_new.asnumpy().reshape(-1, 1), states.shape)
    actions_expect = np.broadcast_to(indices_new.asnumpy().reshape(-1, 1), actions.shape)
    assert np.allclose(states_new.asnumpy(), states_expect)
    assert np.allclose(actions_new.asnumpy(), actions_expect)
    prb.destroy()
    with pytest.raises(RuntimeError, match="the buffer was destroyed"):
        prb.sample(1.)


def test_reservoir_replay_buffer_as_mindspore_rl_tests_it():
    capacity, batch_size = 100, 256
    shapes, dtypes = ((17,), (6,)), (mstype.float32, mstype.int32)
    prb = ReservoirReplayBuffer(capacity, batch_size, shapes, dtypes, seed0=0, seed1=42)
    for i in range(100):
        state = Tensor(np.ones((17,)) * i, mstype.float32)
        action = Tensor(np.ones((6,)) * i, mstype.int32)
        prb.push(state, action)
    states, actions = prb.sample()
    assert states.shape == (256, 17) and actions.shape == (256, 6)
    assert np.allclose(states.asnumpy(), states.asnumpy()[:, 0:1])
    assert np.allclose(actions.asnumpy(), actions.asnumpy()[:, 0:1])
    assert np.allclose(states.asnumpy()[:, 0], actions.asnumpy()[:, 0])
    prb.destroy()


def test_seed1_alone_fixes_the_draws_as_in_mindspore_rl():
    draws = []
    for _ in range(2):
        prb = PriorityReplayBuffer(0.5, 50, 8, [()], [mstype.int32], 0, 42)
        prb.insert([np.arange(50, dtype=np.int32)])
        draws.append(prb.sample(0.4)[0].asnumpy().tolist())
    assert draws[0] == draws[1]
    with pytest.raises(ValueError, match="give either 'seed' or MindSpore Reinforcement's 'seed0'/'seed1'"):
        PriorityReplayBuffer(0.5, 50, 8, [()], [mstype.int32], seed1=3, seed=4)


# ------------------------------------------------------ mindspore_rl's DQN trainer pattern
class Trainer(nn.Cell):
    """``train_one_episode`` of mindspore_rl's DQN trainer: a jit method whose body is a
    ``while`` over a tensor condition that acts, inserts, samples and learns."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer = buffer
        self.step_count = Parameter(Tensor(0, ms.int32), name="step_count", requires_grad=False)
        self.learned = Parameter(Tensor(0.0, ms.float32), name="learned", requires_grad=False)

    @ms.jit
    def train_one_episode(self, episode_length):
        done = Tensor(False, ms.bool_)
        steps = Tensor(0, ms.int32)
        while not done:
            t = self.step_count + 0
            state = ops.fill(ms.float32, (4,), 1.0) * t.astype(ms.float32)
            action = t.reshape(1)
            reward = ops.ones((1,), ms.float32)
            _ = self.buffer.insert([state, action, reward, state + 1.0])
            s0, _, _, s1 = self.buffer.sample()
            ops.assign(self.learned, self.learned + (s1 - s0).mean())  # every sampled row is intact
            ops.assign(self.step_count, t + 1)
            steps = steps + 1
            done = steps >= episode_length
        return steps, self.buffer.size()


def test_an_episode_in_one_jit_while_loop_inserts_and_samples_like_the_model():
    buffer = UniformReplayBuffer(4, 5, [(4,), (1,), (1,), (4,)], [ms.float32, ms.int32, ms.float32, ms.float32])
    trainer, model, start = Trainer(buffer), RingModel(5, [(4,), (1,), (1,), (4,)],
                                                          [np.float32, np.int32, np.float32, np.float32]), 0
    for episode_length in (7, 5):
        steps, size = trainer.train_one_episode(Tensor(episode_length, ms.int32))
        ids = np.arange(start, start + episode_length)
        model.insert([np.repeat(ids[:, None], 4, 1).astype(np.float32), ids[:, None].astype(np.int32),
                      np.ones((episode_length, 1), np.float32), np.repeat(ids[:, None] + 1, 4, 1).astype(np.float32)])
        start += episode_length
        assert (int(steps), int(size)) == (episode_length, 5)
        assert (int(buffer.head), int(buffer.count)) == (model.head, model.count)
        for got, want in zip(buffer.columns, model.columns):
            np.testing.assert_array_equal(got.asnumpy(), want)
    assert float(trainer.learned) == pytest.approx(12.0)  # s1 - s0 == 1 in every row of every sample


def test_pynative_mode_a_mode_switch_and_jit_functions():
    context.set_context(mode=context.PYNATIVE_MODE)
    buffer = UniformReplayBuffer(3, 6, [(2,)], [ms.float32])
    buffer.insert(Tensor(np.zeros((2, 2), np.float32)))  # one column: one tensor

    class Eager(nn.Cell):  # not compiled in PyNative: its calls run the buffer's direct path
        def __init__(self):
            super().__init__()
            self.buffer = buffer

        def construct(self, x):
            _ = self.buffer.insert([x])
            return self.buffer.sample()[0]

    assert Eager()(Tensor(np.ones((1, 2), np.float32))).shape == (3, 2)

    @ms.jit
    def insert_and_count(x):
        _ = buffer.insert([x])
        return buffer.size()

    assert int(insert_and_count(Tensor(np.full((2, 2), 2.0, np.float32)))) == 5
    context.set_context(mode=context.GRAPH_MODE)
    assert int(insert_and_count(Tensor(np.full((2, 2), 3.0, np.float32)))) == 6
    assert sorted(buffer.get_item(Tensor(np.arange(6, dtype=np.int32)))[0].asnumpy()[:, 0].tolist()) == \
        [0.0, 1.0, 2.0, 2.0, 3.0, 3.0] and int(buffer.size()) == 6


def test_uniform_replay_buffer_takes_the_spellings_of_mindspore_rl_0_6():
    urb = UniformReplayBuffer(batch_size=4, capacity=8, shapes=[(1,)], dtypes=[ms.float32])
    assert urb.sample_size == 4
    with pytest.raises(TypeError, match="give the sample size once"):
        UniformReplayBuffer(4, 8, [(1,)], [ms.float32], batch_size=4)
    with pytest.raises(TypeError, match="the argument 'capacity' is required"):
        UniformReplayBuffer(4)


# --------------------------------------------------------------- mindspore_rl's configs
def test_every_replay_buffer_entry_form_of_mindspore_rl_configs():
    env = gymnasium.make("CartPole-v1")
    dqn = {"number": 1, "type": UniformReplayBuffer, "params": {"capacity": 100000, "sample_size": 64}}
    buffer = create_buffer(dqn, env=env)  # dqn_session fills [obs, (1,), (1,), obs] from the spaces
    assert [s.shape for s in buffer.specs] == [(4,), (1,), (1,), (4,)]
    assert [s.dtype for s in buffer.specs] == [ms.float32, ms.int32, ms.float32, ms.float32]
    assert (buffer.capacity, buffer.sample_size) == (100000, 64)
    # The loader reads data_shape/data_type beside params, where the sessions put them.
    mixed = {**dqn, "data_shape": [(4,), (1,), (1,), (4,)],
             "data_type": [ms.float32, ms.int32, ms.float32, ms.float32]}
    assert [s.shape for s in create_buffer(mixed).specs] == [(4,), (1,), (1,), (4,)]
    for flat in ({"number": 1, "type": UniformReplayBuffer, "capacity": 100000, "sample_size": 64},  # ddpg, td3
                 {"number": 1, "type": UniformReplayBuffer, "capacity": 1000000, "sample_size": 256}):  # sac
        buffer = create_buffer(flat, env=env, done=True)
        assert buffer.specs[-1].dtype == ms.bool_ and [s.name for s in buffer.specs][-1] == "done"
    mappo = {"multi_type_replaybuffer": True,
             "local_replaybuffer": {"number": 3, "type": UniformReplayBuffer, "capacity": 26},
             "global_replaybuffer": {"number": 1, "type": UniformReplayBuffer, "capacity": 26}}
    buffers = create_buffer(mappo, env=env)
    assert set(buffers) == {"local_replaybuffer", "global_replaybuffer"}
    assert isinstance(buffers["local_replaybuffer"], nn.CellList) and len(buffers["local_replaybuffer"]) == 3
    assert buffers["global_replaybuffer"].sample_size == 1  # mindspore_rl's default
    with pytest.raises(ValueError, match=r"the key 'data_shape' is missing\. Give 'data_shape' and 'data_type', "
                                         r"or pass env="):
        create_buffer(dqn)
    with pytest.raises(ValueError, match="must be given once, in 'params' or beside it"):
        create_buffer({**mixed, "params": {**dqn["params"], "data_shape": mixed["data_shape"]}})


def test_a_bool_done_column_round_trips_as_bool():
    buffer = create_buffer({"number": 1, "type": UniformReplayBuffer, "capacity": 10, "sample_size": 6},
                           env=gymnasium.make("CartPole-v1"), done=True)
    done = np.array([[True], [False], [True]])
    buffer.insert([np.zeros((3, 4), np.float32), np.zeros((3, 1), np.int32), np.ones((3, 1), np.float32),
                   np.zeros((3, 4), np.float32), done])
    assert buffer.get_item(0)[4].dtype == ms.bool_ and bool(buffer.get_item(0)[4][0])
    sampled = buffer.sample()[4]
    assert sampled.dtype == ms.bool_ and sampled.shape == (6, 1)


class _ReadsColumns(nn.Cell):
    """COMA's and PPO's reads of ``buffer.buffer`` in a graph (``MSRL.get_replay_buffer_elements``)."""

    def __init__(self, buffer):
        super().__init__()
        self.urb = buffer

    def construct(self):
        return self.urb.buffer


def test_a_bool_column_read_through_buffer_is_bool_and_goes_back_in():
    # c51's NStepBuffer returns `td_data.buffer` and inserts its done column into the replay buffer.
    types = (mstype.float32, mstype.bool_)
    td_data, replay = UniformReplayBuffer(1, 3, ((2,), (1,)), types), UniformReplayBuffer(4, 8, ((2,), (1,)), types)
    done = np.array([[True], [False], [True]])
    td_data.insert([np.arange(6, dtype=np.float32).reshape(3, 2), done])
    for columns in (td_data.buffer, _ReadsColumns(td_data)()):
        assert [c.dtype for c in columns] == [mstype.float32, mstype.bool_]
        assert columns[1].asnumpy().tolist() == done.tolist()
        assert columns[0].asnumpy().tolist() == [[0, 1], [2, 3], [4, 5]]
    replay.insert(list(td_data.buffer))
    assert [replay.get_item(i)[1].asnumpy().tolist() for i in range(3)] == done.tolist()
    assert td_data.buffer[0] is td_data.columns[0]  # the other columns are the Parameters themselves


class _Mappo(UniformReplayBuffer):
    """mindspore_rl's MAPPOReplayBuffer signature: a user's subclass named by class in its config."""

    def __init__(self, sample_size, capacity, shapes, types):
        super().__init__(sample_size, capacity, shapes, types)


class _Dreamer(nn.Cell):
    """A user's own buffer Cell (mindspore_rl's DreamerReplayBuffer takes these four arguments)."""

    def __init__(self, sample_size, capacity, shapes, types):
        super().__init__()
        self.arguments = (sample_size, capacity, shapes, types)


def test_a_user_buffer_class_in_a_config_entry_is_built_as_mindspore_rl_built_it():
    entry = {"number": 1, "capacity": 26, "data_shape": [(3,), (1,)], "data_type": [mstype.float32, "int32"]}
    mappo = create_buffer({"multi_type_replaybuffer": True,
                           "local_replaybuffer": {**entry, "number": 2, "type": _Mappo},
                           "global_replaybuffer": {**entry, "type": _Mappo}})
    assert [type(b).__name__ for b in mappo["local_replaybuffer"]] == ["_Mappo", "_Mappo"]
    assert (mappo["global_replaybuffer"].capacity, mappo["global_replaybuffer"].sample_size) == (26, 1)
    dreamer = create_buffer({**entry, "type": _Dreamer, "sample_size": 5})
    assert dreamer.arguments == (5, 26, [(3,), (1,)], [mstype.float32, mstype.int32])
    with pytest.raises(ValueError, match=r"'type' must be a buffer class \(an nn.Cell\) or one of .*, but got int$"):
        create_buffer({**entry, "type": int})
    with pytest.raises(ValueError, match=r"but got UniformReplayBufer; did you mean UniformReplayBuffer\?"):
        create_buffer({**entry, "type": "UniformReplayBufer"})


class _Forwarding(UniformReplayBuffer):
    """A user's subclass that passes its arguments on: its constructor names no key."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def test_a_user_class_taking_kwargs_gets_every_key_of_its_entry():
    entry = {"capacity": 10, "data_shape": [(3,)], "data_type": [mstype.float32], "sample_size": 2, "seed": 4}
    built = create_buffer({**entry, "type": _Forwarding})
    assert type(built) is _Forwarding and (built.capacity, built.sample_size) == (10, 2)
    plain = create_buffer({**entry, "type": "UniformReplayBuffer"})
    for rb in (built, plain):
        rb.insert([np.arange(12, dtype=np.float32).reshape(4, 3)])
    np.testing.assert_array_equal(built.sample()[0].asnumpy(), plain.sample()[0].asnumpy())  # the seed was passed
    with pytest.raises(TypeError, match="unexpected keyword argument 'sampel_size'"):  # the class's own refusal
        create_buffer({**entry, "type": _Forwarding, "sampel_size": 2})


class _MappoBuffer(UniformReplayBuffer):
    """mindspore_rl's MAPPOReplayBuffer, verbatim but for the import: appends through its BufferAppend."""

    def __init__(self, sample_size, capacity, shapes, types):
        super().__init__(sample_size, capacity, shapes, types)

    def construct(self, exp, command):
        if command:
            self.buffer_append(self.buffer, exp, self.count, self.head)
        return self.buffer


class _MappoTrainer(nn.Cell):
    """Its trainer's calls: append to the local and global buffers, then read both whole and join them."""

    def __init__(self, local, glob):
        super().__init__()
        self.local, self.glob = local, glob
        self.true, self.false = Tensor(True, mstype.bool_), Tensor(False, mstype.bool_)

    def construct(self, obs, reward):
        self.local([obs, reward], self.true)
        self.glob([obs], self.true)
        global_obs_exp = self.glob((obs,), self.false)
        buffer = self.local((obs, reward), self.false)
        new_buffer = buffer + global_obs_exp
        return new_buffer[0], new_buffer[2], buffer[-1]


def test_mappo_s_buffer_subclass_and_gail_s_sample_size_read_run_unchanged():
    context.set_context(mode=context.GRAPH_MODE)
    local = _MappoBuffer(1, 4, [(3,), (1,)], [mstype.float32, mstype.float32])
    glob = _MappoBuffer(1, 4, [(3,)], [mstype.float32])
    trainer = _MappoTrainer(local, glob)
    for step in range(5):  # a wrap: capacity 4
        local_obs, global_obs, rewards = (x.asnumpy() for x in trainer(Tensor(np.full(3, step, np.float32)),
                                                                        Tensor(np.full(1, step, np.float32))))
    want = np.array([4, 1, 2, 3], np.float32)  # physical rows after the wrap
    np.testing.assert_array_equal(local_obs[:, 0], want)
    np.testing.assert_array_equal(global_obs[:, 0], want)
    np.testing.assert_array_equal(rewards[:, 0], want)
    assert (int(local.size()), int(glob.size())) == (4, 4)
    # GAIL sizes its discriminator's targets by the BufferSample primitive's batch_size.
    assert local.buffer_sample.batch_size == 1
    assert UniformReplayBuffer(32, 64, [(2,)], [mstype.float32]).buffer_sample.batch_size == 32
