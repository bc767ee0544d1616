"""The main job with n-step returns (``configs/dqn_nstep.py``): the config checks, the rows the collect
graph inserts, the samples and the learner's targets against numpy models written from the definitions,
both loops, and the command line."""
from __future__ import annotations

import copy

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from mindspore_rl_buffer import TransitionReplayBuffer, load_config
from mindspore_rl_buffer.apps.dqn import build_agent, check_config, cli, train
from mindspore_rl_buffer.apps.dqn.cartpole import RESET_BOUND
from mindspore_rl_buffer.apps.dqn.learner import LearnStep
from mindspore_rl_buffer.apps.dqn.loops import FusedLoop
from tests.apps.dqn.helpers import ROOT, RecordingUpdate, gym_reference, q_values, same_networks

NSTEP_CONFIG = ROOT / "configs" / "dqn_nstep.py"
NUM_ENVS = 4
GAMMA = 0.99
ATOL = 1e-5


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


def nstep_config(n_step: int = 3, **trainer) -> dict:
    """``configs/dqn_nstep.py``, shrunk for a test run of a few hundred steps (no wrap: 1,024 rows)."""
    config = copy.deepcopy(load_config(NSTEP_CONFIG))
    config["replay_buffer"].update(capacity=1024, num_envs=NUM_ENVS, n_step=n_step)
    config["environment"]["num_envs"] = NUM_ENVS
    config["learner"]["target_sync_period"] = 10_000  # a fixed target: the loss is a regression
    config["trainer"].update(learning_starts=100, learn_steps_per_collect=4, eval_interval=10_000,
                             eval_episodes=2, log_interval=5, max_steps=600)
    config["trainer"].update(trainer)
    return config


# ------------------------------------------------------------------------------ the config checks
def test_the_shipped_nstep_config_is_dqn_py_with_a_transition_buffer():
    config, one_step = load_config(NSTEP_CONFIG), load_config(ROOT / "configs" / "dqn.py")
    entry = check_config(config)
    assert (entry.buffer_type, entry.n_step, entry.transitions) == (TransitionReplayBuffer, 3, True)
    assert not check_config(one_step).transitions
    assert {key: value for key, value in config.items() if key != "replay_buffer"} == \
        {key: value for key, value in one_step.items() if key != "replay_buffer"}
    buffer = config["replay_buffer"]
    assert (buffer["num_envs"], buffer["gamma"]) == (config["environment"]["num_envs"], config["learner"]["gamma"])


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c["replay_buffer"].update(num_envs=8),
     "the replay buffer's 'num_envs' must equal 'environment.num_envs' (4): each row holds one step of every "
     "environment, but got 8."),
    (lambda c: c["replay_buffer"].pop("num_envs"),
     "the replay buffer's 'num_envs' must equal 'environment.num_envs' (4): each row holds one step of every "
     "environment, but got 1."),
    (lambda c: c["replay_buffer"].update(gamma=0.9),
     "the replay buffer's 'gamma' must equal 'learner.gamma' (0.99): the buffer discounts the n-step returns and "
     "the learner bootstraps with the discount it samples, but got 0.9."),
    (lambda c: c["learner"].update(gamma=0.95), "must equal 'learner.gamma' (0.95)"),
    (lambda c: c["replay_buffer"].update(stack_size=4), "the replay buffer's 'stack_size' must be 1"),
    (lambda c: c["trainer"].update(learning_starts=20),
     "the 'trainer.learning_starts' must be at least 21 with a TransitionReplayBuffer of n_step 3 and 4 "
     "environments, so that the first sample finds a valid start (n_step + 3 steps stored), but got 20."),
    (lambda c: c["replay_buffer"].update(capacity=20, sample_size=8),  # a sample_size above capacity: refused apart
     "the replay buffer's 'capacity' must hold n_step + 3 = 6 steps of 4 environments (24 rows), but got 20."),
    (lambda c: c["replay_buffer"].update(data_shape=[(4,), (1,), (), (), ()]),
     "'data_shape' must be [(4,), (), (), (), ()] (observation, action, reward, terminated, truncated)"),
    (lambda c: c["replay_buffer"].update(data_type=["float32", "int32", "float32", "float32", "float32"]),
     "'data_type' must be ['float32', 'int32', 'float32', 'uint8', 'uint8']"),
    (lambda c: c["trainer"].update(learn_steps_per_collect=2**24),  # one sample of 2**31 transitions
     "'trainer.learn_steps_per_collect * replay_buffer.sample_size' must be an int <= 1073741824, but got "
     "2147483648."),
], ids=["num_envs", "num_envs_default", "gamma", "learner_gamma", "stack_size", "learning_starts", "capacity",
        "shape", "type", "batch"])
def test_an_nstep_entry_the_trainer_cannot_run_is_refused_before_anything_is_built(change, message):
    config = nstep_config()
    change(config)
    before = copy.deepcopy(config)
    with pytest.raises(ValueError, match="For 'train', ") as error:
        train(config, progress=False)
    assert message in str(error.value)
    assert config == before, "the config was changed"


def test_a_collect_s_sample_larger_than_memory_is_refused_before_anything_is_built(monkeypatch):
    from mindspore_rl_buffer import specs

    monkeypatch.setattr(specs, "output_bound", lambda: (2**20, "a machine of 1 MiB"))
    config = nstep_config(learn_steps_per_collect=2**10)  # 2**10 * 128 transitions, two stacks of 16 bytes each
    with pytest.raises(ValueError, match=r"^For 'train', 'trainer.learn_steps_per_collect \* replay_buffer."
                                         r"sample_size' must be small enough that its items of column 'observation' "
                                         r"take at most 1048576 bytes \(a machine of 1 MiB\), but got 131072: "
                                         r"4194304 bytes\.$"):
        check_config(config)
    config["trainer"]["learn_steps_per_collect"] = 2**8
    check_config(config)


@pytest.mark.slow
def test_the_smallest_warm_up_the_check_allows_finds_a_valid_start():
    """learning_starts 21 (6 steps of 4 environments: 2 interior rows) learns from its first iteration on."""
    result = train(nstep_config(learning_starts=21, max_steps=48), seed=0, progress=False)
    assert result.learn_steps == 4 * (12 - 5) and np.isfinite(result.loss_history[-1][1])


@pytest.mark.parametrize(("flag", "message"), [
    (["--buffer", "numpy"], "a TransitionReplayBuffer entry (n-step returns) needs the 'buffer' 'device' "
                            "(--buffer device), but got 'numpy'."),
    (["--env", "gymnasium"], "a TransitionReplayBuffer entry (n-step returns) needs the 'env' 'mindspore' "
                             "(--env mindspore: CartPoles with next-step autoreset), but got 'gymnasium'."),
], ids=["numpy_buffer", "gymnasium"])
def test_the_host_variants_are_refused_naming_the_option(tmp_path, capsys, flag, message):
    assert cli.main(["train", "--config", str(NSTEP_CONFIG), "--out", str(tmp_path / "run"), *flag]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    kinds = {"buffer_kind": "numpy"} if flag[0] == "--buffer" else {"env_kind": "gymnasium"}
    with pytest.raises(ValueError, match="needs the"):
        train(nstep_config(), progress=False, **kinds)


# ------------------------------------------------------------------- rows, samples and targets
def _record(agent, iterations: int) -> list[np.ndarray]:
    """Run the collect graph ``iterations`` times; the rows it inserted, ``(iterations, num_envs, ...)`` each."""
    rows = [[] for _ in range(5)]
    for _ in range(iterations):
        for column, values in zip(rows, agent.collector.step()):
            column.append(values.asnumpy())
    return [np.stack(column) for column in rows]


def _expected_sample(rows: list[np.ndarray], start: int, env: int, n_step: int) -> tuple:
    """The n-step transition of row ``start`` of environment ``env``, from the definitions (the transition guide)."""
    observation, action, reward, terminated, truncated = rows
    total, step = 0.0, 0
    while step < n_step:
        total += GAMMA ** step * reward[start + step, env]
        step += 1
        if terminated[start + step - 1, env]:
            return observation[start, env], action[start, env], total, observation[start + step, env], 0.0
        if truncated[start + step - 1, env]:
            break
    return observation[start, env], action[start, env], total, observation[start + step, env], GAMMA ** step


@pytest.mark.slow
def test_the_collect_graph_inserts_next_step_autoreset_rows():
    """75 collect steps of 4 environments: the rows follow gymnasium's next-step autoreset protocol,
    each observation is gymnasium's step from the row before, and the buffer holds exactly these rows."""
    agent = build_agent(nstep_config(), seed=3)
    observation, action, reward, terminated, truncated = rows = _record(agent, 75)
    ended = (terminated | truncated).astype(bool)
    final = np.zeros_like(ended)
    final[1:] = ended[:-1]
    assert ended.sum() >= 4 and not (final & ended).any()
    np.testing.assert_array_equal(reward, np.where(final, 0.0, 1.0))  # the final row's reward is 0
    assert np.abs(observation[1:][final[:-1]]).max() <= RESET_BOUND  # the row after a final row starts afresh
    stepped = ~final[:-1]  # row t + 1 is the dynamics of row t unless row t is a final row
    reference, reference_terminated = gym_reference(observation[:-1][stepped], action[:-1][stepped])
    np.testing.assert_allclose(observation[1:][stepped], reference, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(terminated[:-1][stepped], reference_terminated)
    assert int(agent.buffer.size()) == 300
    assert int(agent.buffer.valid_starts()) == 4 * (75 - 1 - 3) - final[1:72].sum()
    items, info = agent.buffer.sample_with_info(512)
    slots = info.ids.asnumpy()
    got = [x.asnumpy() for x in items]
    for b, (start, env) in enumerate(zip(slots // NUM_ENVS, slots % NUM_ENVS)):
        assert 1 <= start <= 75 - 1 - 3 and not final[start, env]
        expected = _expected_sample(rows, start, env, 3)
        for column, value in zip(got, expected):
            np.testing.assert_allclose(column[b], value, rtol=1e-6, atol=1e-6, err_msg=f"start {start} env {env}")
    assert (got[4] == 0).any() and np.isclose(got[4], GAMMA ** 3).any()  # terminations within a window, and none


@pytest.mark.slow
def test_the_learn_steps_of_a_collect_step_split_one_sample_into_whole_transitions():
    """``LearnStep(steps=3)`` on the transition buffer: 3 batches of ``sample_size``, each of valid n-step
    transitions as the definitions give them, in the layout ``Update`` takes; the loss is their sum."""
    agent = build_agent(nstep_config(), seed=2)
    assert (agent.learn.steps, agent.learn_calls) == (4, 1)  # a collect step's 4 updates from one sample
    rows = _record(agent, 40)
    final = np.zeros(rows[3].shape, bool)
    final[1:] = (rows[3] | rows[4])[:-1].astype(bool)
    batch = agent.buffer.sample_size
    recorder = RecordingUpdate(3, batch)
    loss = float(LearnStep(agent.buffer, recorder, steps=3)().asnumpy())
    assert int(recorder.calls.asnumpy()) == 3
    observation, action, reward, next_observation, discount = (x.asnumpy() for x in recorder.batches)
    np.testing.assert_allclose(loss, reward.sum(), rtol=1e-5)
    assert len({observation[step].tobytes() for step in range(3)}) == 3  # three batches, not one thrice
    for step, b in np.ndindex(3, batch):
        start, env = (int(x[0]) for x in np.nonzero((rows[0] == observation[step, b]).all(-1)))
        assert 1 <= start <= 40 - 1 - 3 and not final[start, env]
        expected = _expected_sample(rows, start, env, 3)
        got = (observation[step, b], action[step, b, 0], reward[step, b, 0], next_observation[step, b],
               discount[step, b, 0])
        for column, value in zip(got, expected):
            np.testing.assert_allclose(column, value, rtol=1e-6, atol=1e-6, err_msg=f"start {start} env {env}")
    with pytest.raises(ValueError, match=r"For 'LearnStep', 'steps' must be an int >= 1, but got 0\."):
        LearnStep(agent.buffer, recorder, steps=0)


def test_the_fused_loop_runs_one_learn_call_per_collect_step_and_syncs_on_the_period():
    """One sample serves a collect step's updates, so the loop runs one call under a graph ``if``
    (``learn_calls`` 0 or 1): 0 learns nothing, 1 runs ``steps`` updates per iteration."""
    config = nstep_config(learn_steps_per_collect=2)
    config["learner"]["target_sync_period"] = 4
    agent = build_agent(config, seed=0)
    assert agent.learn_calls == 1 and agent.train_loop.single_call
    loop = FusedLoop(agent)
    loop.run(30, learn=False)
    assert int(agent.update.learn_steps.asnumpy()) == 0 and int(agent.policy.steps.asnumpy()) == 30 * NUM_ENVS
    for iterations, learned, synced in [(1, 2, False), (1, 4, True), (2, 8, True), (1, 10, False)]:
        assert np.isfinite(loop.run(iterations, learn=True))
        assert int(agent.update.learn_steps.asnumpy()) == learned
        assert same_networks(agent) == synced, learned
    assert len(agent.train_loop.compile_cache) == 1


@pytest.mark.slow
def test_both_loops_train_the_same_agent_on_three_step_returns():
    config = nstep_config(learn_steps_per_collect=2, max_steps=400, eval_starts=160, eval_interval=100,
                          log_interval=7)
    results = {loop: train(config, seed=1, progress=False, loop=loop) for loop in ("fused", "host")}
    fused, host = results["fused"], results["host"]
    assert [step for step, _ in fused.eval_history] == [160, 260, 360, 400]
    assert fused.episode_history == host.episode_history and fused.eval_history == host.eval_history
    np.testing.assert_allclose([loss for _, loss in fused.loss_history], [loss for _, loss in host.loss_history],
                               rtol=1e-5)


@pytest.mark.parametrize("loop", ["fused", "host"])
@pytest.mark.slow
def test_a_short_run_learns_with_the_sampled_discount_as_the_target_says(loop):
    """600 steps on each loop; then the loss of a sampled batch is the Huber loss of
    ``reward + discount * Q_target(next, argmax Q(next))``, computed here in numpy (no extra gamma,
    no ``1 - terminated``), against online and target networks that differ."""
    config = nstep_config()
    ms.set_seed(0)
    result = train(config, seed=0, progress=False, loop=loop)
    assert result.env_steps == 600 and result.learn_steps == 4 * (150 - 24)
    losses = np.array([loss for _, loss in result.loss_history])
    assert np.isfinite(losses).all() and len(losses) >= 5

    agent = build_agent(nstep_config(learn_steps_per_collect=1), seed=0)
    _record(agent, 60)
    for _ in range(50):
        agent.learn()  # the online network moves away from the target network (one learn step a call)
    observation, action, reward, next_observation, discount = (x.asnumpy() for x in agent.buffer.sample(256))
    assert (discount == 0).any() and (discount > 0.9).any()
    q_next, target_next = q_values(agent.q_net, next_observation), q_values(agent.target_net, next_observation)
    assert not np.allclose(q_next, target_next)
    bootstrap = target_next[np.arange(256), q_next.argmax(1)]  # Double DQN: the online network picks
    q_taken = q_values(agent.q_net, observation)[np.arange(256), action]

    def huber(target: np.ndarray) -> float:
        error = np.abs(q_taken - target)
        return float(np.mean(np.where(error < 1.0, 0.5 * error ** 2, error - 0.5)))

    got = float(agent.update.loss_net(*(Tensor(x) for x in (observation, action[:, None], reward[:, None],
                                                            next_observation, discount[:, None]))).asnumpy())
    np.testing.assert_allclose(got, huber(reward + discount * bootstrap), rtol=1e-5)
    # The targets of a learner that read the discount as something else are told apart at that tolerance.
    for wrong in (reward + GAMMA * discount * bootstrap, reward + GAMMA * (1 - discount) * bootstrap,
                  reward + discount * target_next.max(1)):
        assert abs(got - huber(wrong)) > 1e-4 * got


@pytest.mark.slow
def test_the_loss_falls_on_a_fixed_target_with_three_step_returns():
    """Regression on a fixed target network: the loss must come well down within 600 steps (seeded)."""
    ms.set_seed(0)
    result = train(nstep_config(), seed=0, progress=False)
    losses = np.array([loss for _, loss in result.loss_history])
    assert losses[-2:].mean() < 0.2 * losses[:2].mean(), losses


@pytest.mark.slow
def test_train_checkpoint_and_evaluate_from_the_command_line(tmp_path, capsys):
    config = tmp_path / "nstep_small.py"
    config.write_text("import copy\n"
                      "from mindspore_rl_buffer.configs.dqn_nstep import algorithm_config as shipped\n"
                      "algorithm_config = copy.deepcopy(shipped)\n"
                      "algorithm_config['trainer'].update(learning_starts=64, eval_starts=0, eval_interval=96, "
                      "eval_episodes=4)\n")
    assert cli.main(["train", "--config", str(config), "--out", str(tmp_path / "run"), "--no-progress",
                     "--max-steps", "192"]) == 0
    out = capsys.readouterr().out
    assert "192 environment steps, " in out and "fused loop" in out
    checkpoint = tmp_path / "run" / "dqn_cartpole.ckpt"
    assert checkpoint.is_file() and (tmp_path / "run" / "learning_curve.png").is_file()
    assert cli.main(["evaluate", "--checkpoint", str(checkpoint), "--episodes", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("5 greedy episodes: returns from ") and 1 <= float(lines[-1].split()[-1]) <= 500
    assert cli.main(["train", "--config", str(config), "--out", str(tmp_path / "host"), "--no-progress",
                     "--max-steps", "96", "--loop", "host"]) == 0
    assert "host loop" in capsys.readouterr().out
