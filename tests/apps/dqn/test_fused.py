"""The fused training graph: what one launch stores, counts and learns, against gymnasium and the host loop."""
from __future__ import annotations

import json
import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer.apps import dqn
from mindspore_rl_buffer.apps.dqn import cartpole
from mindspore_rl_buffer.apps.dqn.loops import FusedLoop, HostLoop
from tests.apps.dqn.helpers import ROOT, gym_reference, same_networks, small_config, stored

ATOL = 1e-5  # float32 dynamics against gymnasium's float64 (see test_cartpole.py)


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)


@pytest.mark.slow
def test_one_launch_stores_what_gymnasium_would_and_draws_afresh_every_iteration():
    """75 iterations of 4 environments (300 transitions) in one launch, into a 256-slot buffer.

    Every stored transition must be gymnasium's step from its state; each environment must
    continue from where it was or from a fresh start state; the policy's random actions and
    the start states must differ from iteration to iteration (random draws inside a graph
    loop are fresh on every pass).
    """
    agent = dqn.build_agent(small_config(), seed=3)
    FusedLoop(agent).run(75, learn=False)
    assert int(agent.buffer.size().asnumpy()) == 256 and int(agent.policy.steps.asnumpy()) == 300
    state, action, reward, next_state, terminated = stored(agent.buffer)
    reference_state, reference_terminated = gym_reference(state, action[:, 0])
    np.testing.assert_allclose(next_state, reference_state, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(terminated[:, 0], reference_terminated)
    np.testing.assert_array_equal(reward, 1.0)
    s, s2, done = state.reshape(64, 4, 4), next_state.reshape(64, 4, 4), terminated.reshape(64, 4)
    continued = done[:-1] == 0
    np.testing.assert_array_equal(s[1:][continued], s2[:-1][continued])
    starts = s[1:][~continued]
    assert len(starts) >= 4 and np.abs(starts).max() <= cartpole.RESET_BOUND
    assert len(np.unique(starts, axis=0)) == len(starts)
    # Epsilon is ~1 over these steps: 64 iterations of 4 coin flips. The same 4 actions in every
    # iteration would have probability 16 * 16**-63 if the draws were fresh; fresh draws
    # give every one of the 16 patterns with probability 1 - 16 * (15/16)**64 > 0.98, so ask for 8.
    patterns = {tuple(row) for row in action.reshape(64, 4)}
    assert len(patterns) >= 8


def test_the_loop_counts_learn_steps_and_syncs_the_target_on_the_period():
    config = small_config(learn_steps_per_collect=2)
    config["learner"]["target_sync_period"] = 4
    agent = dqn.build_agent(config, seed=0)
    loop = FusedLoop(agent)
    loop.run(30, learn=False)
    assert same_networks(agent) and int(agent.update.learn_steps.asnumpy()) == 0  # built as a copy; no learning
    assert len(agent.train_loop.compile_cache) == 1  # the warm-up compiled the graph the learning launches run
    for iterations, learned, synced in [(2, 4, True), (1, 6, False), (1, 8, True), (3, 14, False)]:
        loss_sum = loop.run(iterations, learn=True)
        assert np.isfinite(loss_sum) and loss_sum > 0
        assert int(agent.update.learn_steps.asnumpy()) == learned
        assert same_networks(agent) == synced, learned
    assert int(agent.policy.steps.asnumpy()) == 4 * (30 + 7)
    assert len(agent.train_loop.compile_cache) == 1  # and nothing recompiled it


@pytest.mark.parametrize("loop", ["fused", "host"])
@pytest.mark.slow
def test_short_training_run_decreases_the_loss(loop):
    """600 environment steps, 500 learn steps against a fixed target network (see test_dqn.py)."""
    result = dqn.train(small_config(), seed=0, progress=False, loop=loop)
    assert result.loop == loop and result.env_steps == 600 and result.learn_steps == 4 * 126
    losses = np.array([loss for _, loss in result.loss_history])
    assert np.isfinite(losses).all() and len(losses) >= 5
    assert losses[-2:].mean() < 0.05 * losses[:2].mean(), losses


@pytest.mark.slow
def test_both_loops_train_the_same_agent_and_log_and_evaluate_at_the_same_steps():
    config = small_config(max_steps=400, eval_starts=160, eval_interval=100, log_interval=7)
    results = {loop: dqn.train(config, seed=1, progress=False, loop=loop) for loop in ("fused", "host")}
    fused, host = results["fused"], results["host"]
    assert [step for step, _ in fused.eval_history] == [step for step, _ in host.eval_history] == [160, 260, 360, 400]
    assert [step for step, _ in fused.loss_history] == [step for step, _ in host.loss_history]
    assert (fused.env_steps, fused.learn_steps) == (host.env_steps, host.learn_steps) == (400, 4 * 76)
    # One graph draws the random numbers the host loop's graphs draw: both train the same agent.
    assert fused.episode_history == host.episode_history and fused.eval_history == host.eval_history
    np.testing.assert_allclose([loss for _, loss in fused.loss_history], [loss for _, loss in host.loss_history],
                               rtol=1e-5)


def test_the_host_loop_is_the_only_one_for_host_buffers_and_environments():
    assert dqn.trainer.choose_loop(None, "numpy", "mindspore") == "host"
    assert dqn.trainer.choose_loop(None, "device", "mindspore") == "fused"
    with pytest.raises(ValueError, match="the 'fused' loop needs the device buffer and the MindSpore CartPoles"):
        dqn.trainer.choose_loop("fused", "device", "gymnasium")
    with pytest.raises(ValueError, match=r"the 'loop' must be one of \['fused', 'host'\], but got 'graph'"):
        dqn.trainer.choose_loop("graph", "device", "mindspore")
    agent = dqn.build_agent(small_config(), buffer_kind="numpy", seed=0)
    assert agent.train_loop is None and agent.eval_loop is None
    HostLoop(agent).run(3, learn=False)
    assert agent.buffer.size() == 12


@pytest.mark.slow
def test_a_fused_run_logs_no_side_effect_or_deprecation_warnings(tmp_path):
    """MindSpore logs to stderr from C++; a whole fused run (collect, learn, evaluate graphs) in a subprocess."""
    config = small_config(max_steps=160, learning_starts=80, eval_starts=0, eval_interval=80, eval_episodes=4)
    config["replay_buffer"]["type"] = "ReplayBuffer"
    config["replay_buffer"]["data_type"] = [str(dtype).lower() for dtype in config["replay_buffer"]["data_type"]]
    path = tmp_path / "small.json"
    path.write_text(json.dumps(config))
    done = subprocess.run([sys.executable, "-m", "mindspore_rl_buffer", "train", "--config", str(path), "--no-progress",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fused loop" in done.stdout
    for message in ("eliminated by mistake", "FusedSparseAdam", "deprecated"):  # no deprecated primitive at all
        assert message not in done.stderr, message
