"""DQN on CartPole: the config, the collect graph's inserts, short training runs, the CLI."""
from __future__ import annotations

import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer import ReplayBuffer, create_buffer, load_config
from mindspore_rl_buffer.apps import dqn
from mindspore_rl_buffer.apps.dqn import cartpole, cli
from mindspore_rl_buffer.apps.dqn.learner import DQNLoss, LearnStep
from mindspore_rl_buffer.apps.dqn.networks import QNetwork
from tests.apps.dqn.helpers import CONFIG, ROOT, gym_reference, q_values, same_networks, small_config, stored

ATOL = 1e-5  # float32 dynamics against gymnasium's float64 (see test_cartpole.py)


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


def _learn_steps(max_steps: int, learning_starts: int = 100, num_envs: int = 4, per_collect: int = 4) -> int:
    """Learn steps of a run: ``per_collect`` after each collect once ``learning_starts`` are stored."""
    collects = range(num_envs, max_steps + 1, num_envs)
    return per_collect * sum(1 for steps in collects if steps >= learning_starts)


def test_config_loads_and_builds_the_buffer():
    config = load_config(CONFIG)
    assert set(config) >= {"replay_buffer", "learner", "policy", "environment", "trainer"}
    entry = config["replay_buffer"]
    assert entry["type"] is ReplayBuffer and entry["number"] == 1
    buffer = create_buffer(entry)
    assert isinstance(buffer, ReplayBuffer)
    assert (buffer.capacity, buffer.sample_size) == (100000, 128)
    assert [spec.shape for spec in buffer.specs] == [(4,), (1,), (1,), (4,), (1,)]
    assert [spec.dtype for spec in buffer.specs] == [ms.float32, ms.int32, ms.float32, ms.float32, ms.float32]
    assert int(buffer.size().asnumpy()) == 0
    dqn.check_config(config)


def test_config_missing_section_is_named():
    config = load_config(CONFIG)
    del config["learner"]
    with pytest.raises(ValueError, match="'learner'"):
        dqn.check_config(config)


def test_config_other_environment_or_columns_are_refused():
    config = load_config(CONFIG)
    config["environment"]["name"] = "Pendulum-v1"
    with pytest.raises(ValueError, match=r"'environment\.name' must be 'CartPole-v1'"):
        dqn.check_config(config)
    config = load_config(CONFIG)
    # The core issue's 4-column entry. (4 shapes with 5 types is refused earlier, by the
    # library's loader: see test_config.py.)
    for key in ("data_shape", "data_type"):
        config["replay_buffer"][key] = config["replay_buffer"][key][:4]
    with pytest.raises(ValueError, match="'data_shape' must be"):
        dqn.check_config(config)


@pytest.mark.slow
def test_collect_graph_stores_the_transitions_the_environment_produced():
    """75 collect steps of 4 envs (300 transitions) into a 256-slot buffer.

    The transitions the graph returns are recorded on the host; the buffer must hold the
    newest 256 of them in order, and each must be gymnasium's step from its state.
    """
    config = small_config()
    agent = dqn.build_agent(config, seed=3)
    step = agent.collector.step
    recorded = [[] for _ in range(5)]
    for _ in range(75):
        for column, values in zip(recorded, step()):
            column.append(values.asnumpy())
    state, action, reward, next_state, terminated = (np.concatenate(c) for c in recorded)
    assert len(state) == 300 and int(agent.buffer.size().asnumpy()) == 256
    for got, expected in zip(stored(agent.buffer), (state, action, reward, next_state, terminated)):
        np.testing.assert_array_equal(got, expected[-256:])
    reference_state, reference_terminated = gym_reference(state, action[:, 0])
    np.testing.assert_allclose(next_state, reference_state, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(terminated[:, 0], reference_terminated)
    np.testing.assert_array_equal(reward, 1.0)
    assert set(np.unique(action)) == {0, 1}
    # Each env continues from where it was, or from a fresh state after terminating.
    s, s2 = state.reshape(75, 4, 4), next_state.reshape(75, 4, 4)
    done = terminated.reshape(75, 4)
    continued = done[:-1] == 0
    np.testing.assert_array_equal(s[1:][continued], s2[:-1][continued])
    assert done.sum() >= 4  # epsilon starts at 1: random play ends an episode in ~20 steps
    assert np.abs(s[1:][~continued]).max() <= cartpole.RESET_BOUND
    # The tracker's total return of finished episodes: every env step up to each env's last end.
    last_end = [np.flatnonzero(done[:, env])[-1] + 1 if done[:, env].any() else 0 for env in range(4)]
    total, episodes = agent.collector.episodes()
    assert episodes == done.sum() and total == sum(last_end)


@pytest.mark.parametrize("delta", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("double_dqn", [True, False])
def test_the_loss_and_its_gradient_are_the_huber_loss_of_the_td_error(delta, double_dqn):
    """DQNLoss against numpy: the Huber loss of ``Q(s, a) - (r + gamma (1 - terminated) Q_target(s', a'))``
    and its gradient with respect to the last layer's bias (``mean(huber'(error))`` per taken action),
    with errors on both sides of ``delta``."""
    rng = np.random.default_rng(int(delta * 10) + double_dqn)
    q_net, target_net = QNetwork(4, 2, (16,)), QNetwork(4, 2, (16,))  # apart: no copy
    loss_net = DQNLoss(q_net, target_net, 0.9, double_dqn=double_dqn, huber_delta=delta)
    state, next_state = (rng.normal(size=(64, 4)).astype(np.float32) * 3 for _ in range(2))
    action = rng.integers(0, 2, (64, 1)).astype(np.int32)
    reward = rng.normal(size=(64, 1)).astype(np.float32) * 2 * delta
    terminated = (rng.random((64, 1)) < 0.3).astype(np.float32)
    inputs = [ms.Tensor(x) for x in (state, action, reward, next_state, terminated)]

    q_next, target_next = q_values(q_net, next_state), q_values(target_net, next_state)
    picked = (q_next if double_dqn else target_next).argmax(1)
    target = reward[:, 0] + 0.9 * (1 - terminated[:, 0]) * target_next[np.arange(64), picked]
    error = q_values(q_net, state)[np.arange(64), action[:, 0]] - target
    assert (np.abs(error) < delta).any() and (np.abs(error) > delta).any()
    huber = np.where(np.abs(error) <= delta, 0.5 * error ** 2, delta * (np.abs(error) - 0.5 * delta))
    np.testing.assert_allclose(float(loss_net(*inputs).asnumpy()), huber.mean(), rtol=1e-5)
    bias = q_net.trainable_params()[-1]
    slope = np.clip(error, -delta, delta) / 64  # d mean(huber) / d error
    expected = np.array([slope[action[:, 0] == a].sum() for a in (0, 1)])
    got = ms.grad(loss_net, None, [bias])(*inputs)[0].asnumpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("buffer_kind", ["device", "numpy"])
@pytest.mark.slow
def test_learn_graph_syncs_the_target_network_every_period(buffer_kind):
    config = small_config()
    config["learner"]["target_sync_period"] = 5
    agent = dqn.build_agent(config, buffer_kind=buffer_kind, seed=0)
    for _ in range(30):
        agent.collector.collect()

    assert same_networks(agent)  # built as a copy
    for step in range(1, 11):
        agent.learn()
        assert same_networks(agent) == (step % 5 == 0), step


@pytest.mark.parametrize("buffer_kind", ["device", "numpy"])
@pytest.mark.slow
def test_short_training_run_decreases_the_loss(buffer_kind):
    """600 environment steps, 500 learn steps against a fixed target network.

    The first learn steps see Q ~ 0 against targets ~ 1 (Huber loss ~ 0.5); regression on a
    fixed target must bring the loss well down. Seeded, so the run is the same every time.
    """
    ms.set_seed(0)
    result = dqn.train(small_config(), buffer_kind=buffer_kind, seed=0, progress=False)
    assert result.env_steps == 600 and result.learn_steps == _learn_steps(600)
    losses = np.array([loss for _, loss in result.loss_history])
    assert np.isfinite(losses).all() and len(losses) >= 5
    assert losses[-2:].mean() < 0.05 * losses[:2].mean(), losses  # measured: 0.002-0.007 on seeds 0-2
    assert len(result.eval_history) == 1 and result.eval_history[0][0] == 600


@pytest.mark.slow
def test_gymnasium_env_inserts_through_direct_calls():
    """The host-env variant: gymnasium steps go into the device buffer by direct insert calls."""
    config = small_config(max_steps=200)
    result = dqn.train(config, env_kind="gymnasium", seed=1, progress=False)
    assert result.env_steps == 200 and result.learn_steps == _learn_steps(200)
    assert np.isfinite([loss for _, loss in result.loss_history]).all()
    agent = dqn.build_agent(config, env_kind="gymnasium", seed=1)
    for _ in range(30):
        agent.collector.collect()
    state, action, reward, next_state, terminated = stored(agent.buffer)
    assert len(state) == 120
    np.testing.assert_array_equal(reward, 1.0)
    reference_state, reference_terminated = gym_reference(state, action[:, 0])
    np.testing.assert_allclose(next_state, reference_state, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(terminated[:, 0], reference_terminated)


@pytest.mark.slow
def test_cli_train_writes_curve_and_checkpoint(tmp_path, capsys):
    status = cli.main(["train", "--config", str(CONFIG), "--out", str(tmp_path / "run"), "--max-steps", "64",
                       "--no-progress"])
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("final evaluation return: ")
    assert lines[-1].endswith("CartPole-v1 not solved (a solve must hold at 3 consecutive evaluations)")
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 1000
    checkpoint = ms.load_checkpoint(str(tmp_path / "run" / "dqn_cartpole.ckpt"))
    assert any(name.endswith("weight") for name in checkpoint)


@pytest.mark.slow
def test_the_default_command_holds_a_solve(tmp_path, capsys):
    """``mindspore-rl-buffer train`` as shipped (configs/dqn_nstep.py, fused loop) holds a solve within 60,000 steps."""
    status = cli.main(["train", "--seed", "1", "--max-steps", "60000", "--out", str(tmp_path / "run"), "--no-progress"])
    assert status == 0
    assert "CartPole-v1 solved, held at 3 consecutive evaluations by " in capsys.readouterr().out


def test_cli_gymnasium_flag_without_gymnasium_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # makes `import gymnasium` raise ImportError
    assert cli.main(["train", "--env", "gymnasium", "--config", str(CONFIG)]) == 2
    assert "pip install gymnasium" in capsys.readouterr().err


def test_cli_missing_config_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["train", "--config", str(tmp_path / "nope.py")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "config"), [([], "dqn_nstep.py"), (["--buffer", "numpy"], "dqn.py"),
                                               (["--env", "gymnasium"], "dqn.py")], ids=["device", "numpy", "gym"])
@pytest.mark.slow
def test_cli_default_config_falls_back_to_the_installed_copy(tmp_path, monkeypatch, capsys, flags, config):
    # Without --config: the n-step config (the fastest held solve), or the one-step one for the
    # host variants, which cannot run it; from a folder without configs/, the installed copies.
    monkeypatch.chdir(tmp_path)
    assert cli.default_config(*(["numpy", "mindspore"] if "numpy" in flags else
                                ["device", "gymnasium"] if "gymnasium" in flags else ["device", "mindspore"])) \
        == f"configs/{config}"
    built = []
    monkeypatch.setattr(dqn.trainer, "build_agent", lambda config, *a, **k: built.append(config) or
                        dqn.agent.build_agent(config, *a, **k))
    assert cli.main(["train", "--max-steps", "8", "--no-progress", "--out", str(tmp_path / "run"), *flags]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("final evaluation return: ")
    assert (tmp_path / "run" / "dqn_cartpole.ckpt").is_file()
    assert built[0] == load_config(ROOT / "configs" / config)


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "mindspore_rl_buffer", "train", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "--buffer {device,numpy}" in done.stdout


def test_a_learn_step_takes_several_updates_only_from_a_buffer_that_takes_a_batch_size():
    agent = dqn.build_agent(small_config(), seed=0)
    assert (agent.learn.steps, agent.learn_calls) == (1, 4)  # one sample per update: four calls
    with pytest.raises(ValueError, match=r"'steps' must be 1 for a ReplayBuffer, which samples its own "
                                         r"sample_size: call the learn step once per update, but got 2\."):
        LearnStep(agent.buffer, agent.update, steps=2)
