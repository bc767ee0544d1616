"""The MindSpore CartPole against gymnasium's CartPole-v1, step by step from the same states."""
from __future__ import annotations

import doctest

import gymnasium
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, jit, nn, ops

from mindspore_rl_buffer.apps.dqn import cartpole
from mindspore_rl_buffer.apps.dqn.cartpole import CartPole, cartpole_step

# float32 on the device against float64 in gymnasium: one step differs by a few ulps of
# float32 (values stay below ~5 in magnitude here, so 1e-5 is ~100 ulps of slack).
ATOL = 1e-5


@pytest.fixture(autouse=True)
def graph_context():
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)


@jit
def _step_graph(state, action):
    return cartpole_step(state, action)


def _gym_step(env, state: np.ndarray, action: int) -> tuple[np.ndarray, bool]:
    """Step gymnasium's unwrapped CartPole-v1 from ``state``."""
    env.unwrapped.state = state.astype(np.float64)
    env.unwrapped.steps_beyond_terminated = None
    observation, reward, terminated, truncated, _ = env.unwrapped.step(action)
    assert reward == 1.0 and not truncated
    return observation, terminated


def _balancing_action(state: np.ndarray) -> np.ndarray:
    """A linear controller that keeps the pole up for 500 steps (checked in gymnasium)."""
    return (state[:, 2] + state[:, 3] + 0.1 * state[:, 1] + 0.05 * state[:, 0] > 0).astype(np.int32)


def test_constants_match_gymnasium():
    env = gymnasium.make("CartPole-v1")
    raw = env.unwrapped
    assert (raw.gravity, raw.masscart, raw.masspole, raw.length, raw.force_mag, raw.tau) == (
        cartpole.GRAVITY, cartpole.MASS_CART, cartpole.MASS_POLE, cartpole.LENGTH, cartpole.FORCE_MAG,
        cartpole.TAU)
    assert raw.kinematics_integrator == "euler"
    assert (raw.theta_threshold_radians, raw.x_threshold) == (cartpole.THETA_THRESHOLD, cartpole.X_THRESHOLD)
    assert env.spec.max_episode_steps == cartpole.MAX_EPISODE_STEPS


def test_step_matches_gymnasium_along_random_episodes():
    """Play gymnasium episodes with random actions; step ours from each state gymnasium visits."""
    env = gymnasium.make("CartPole-v1")
    rng = np.random.default_rng(0)
    states, actions, next_states, terminals = [], [], [], []
    for episode in range(20):
        env.reset(seed=episode)
        done = False
        while not done:
            state = np.array(env.unwrapped.state, np.float32)
            action = int(rng.integers(2))
            next_state, terminated = _gym_step(env, state, action)
            states.append(state)
            actions.append(action)
            next_states.append(next_state)
            terminals.append(terminated)
            done = terminated
    assert sum(terminals) == 20 and len(states) > 200
    got_state, got_terminated = _step_graph(Tensor(np.stack(states)), Tensor(np.array(actions, np.int32)))
    np.testing.assert_allclose(got_state.asnumpy(), np.stack(next_states), rtol=0, atol=ATOL)
    np.testing.assert_array_equal(got_terminated.asnumpy(), np.array(terminals))


@pytest.mark.parametrize(
    ("state", "action", "terminated"),
    [
        ([2.39, 1.0, 0.0, 0.0], 1, True),  # cart leaves on the right
        ([-2.39, -1.0, 0.0, 0.0], 0, True),  # and on the left
        ([0.0, 0.0, 0.205, 0.5], 1, True),  # pole falls right
        ([0.0, 0.0, -0.205, -0.5], 0, True),  # and left
        ([2.3, 1.0, 0.15, 0.5], 1, False),  # close to both limits, not over
        ([0.0, 0.0, 0.0, 0.0], 0, False),
    ],
    ids=["x_right", "x_left", "theta_right", "theta_left", "near_limits", "upright"],
)
def test_termination_matches_gymnasium(state, action, terminated):
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    state = np.array(state, np.float32)
    expected_state, expected_terminated = _gym_step(env, state, action)
    assert expected_terminated == terminated
    got_state, got_terminated = _step_graph(Tensor(state[None]), Tensor(np.array([action], np.int32)))
    np.testing.assert_allclose(got_state.asnumpy()[0], expected_state, rtol=0, atol=ATOL)
    assert bool(got_terminated.asnumpy()[0]) == terminated


class _SetState(nn.Cell):
    """Write the environments' state through a graph (a host ``set_data`` would not be seen)."""

    def __init__(self, env: CartPole):
        super().__init__()
        self.env = env

    def construct(self, state):
        ops.assign(self.env.state, state)
        return self.env.state + 0.0


class _Reset(nn.Cell):
    def __init__(self, env: CartPole):
        super().__init__()
        self.env = env

    def construct(self):
        return self.env.reset()


def test_cell_matches_gymnasium_with_truncation_and_auto_reset():
    """Lockstep the batched Cell with 4 gymnasium envs (with TimeLimit) for 620 steps.

    Env 0 balances and is truncated at step 500; the others take noisier actions and
    terminate many times. Each step our state is set to gymnasium's, so the step
    counters, flags and auto-resets are checked, not chaotic divergence.
    """
    num_envs = 4
    env = CartPole(num_envs)
    set_state, reset = _SetState(env), _Reset(env)
    initial = reset().asnumpy()
    assert initial.shape == (num_envs, 4) and np.abs(initial).max() <= cartpole.RESET_BOUND
    gyms = [gymnasium.make("CartPole-v1") for _ in range(num_envs)]
    for i, gym_env in enumerate(gyms):
        gym_env.reset(seed=i)
    rng = np.random.default_rng(1)
    noise = np.array([0.0, 0.3, 0.5, 1.0])
    terminations, truncations = [], []
    for t in range(620):
        state = np.stack([np.array(g.unwrapped.state, np.float32) for g in gyms])
        for g, row in zip(gyms, state):
            g.unwrapped.state = row.astype(np.float64)
        explore = rng.random(num_envs) < noise
        action = np.where(explore, rng.integers(0, 2, num_envs), _balancing_action(state)).astype(np.int32)
        set_state(Tensor(state))
        next_state, reward, terminated, truncated = (x.asnumpy() for x in env(Tensor(action)))
        after = env.state.asnumpy()
        for i, g in enumerate(gyms):
            expected, expected_reward, expected_term, expected_trunc, _ = g.step(int(action[i]))
            np.testing.assert_allclose(next_state[i], expected, rtol=0, atol=ATOL, err_msg=f"t={t} env={i}")
            expected_flags = (expected_reward, expected_term, expected_trunc)
            assert (reward[i], terminated[i], truncated[i]) == expected_flags
            if expected_term or expected_trunc:
                (terminations if expected_term else truncations).append((t, i))
                assert np.abs(after[i]).max() <= cartpole.RESET_BOUND
                assert not np.allclose(after[i], next_state[i])
                g.reset(seed=1000 * t + i)
            else:
                np.testing.assert_array_equal(after[i], next_state[i])
    assert (499, 0) in truncations and len(terminations) >= 10
    assert env.elapsed.asnumpy()[0] == 620 - 500


def test_reset_draws_fresh_states():
    env = CartPole(64)
    reset = _Reset(env)
    first, second = reset().asnumpy(), reset().asnumpy()
    for states in (first, second):
        assert np.abs(states).max() <= cartpole.RESET_BOUND
        # 256 uniform draws on [-0.05, 0.05]: the extremes come within 0.01 of both ends
        # unless something is badly wrong (chance (0.9)^256 < 1e-11 per end).
        assert states.min() < -0.04 and states.max() > 0.04
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(env.elapsed.asnumpy(), 0)


def test_num_envs_must_be_a_positive_int():
    with pytest.raises(ValueError, match="num_envs"):
        CartPole(0)
    with pytest.raises(ValueError, match="num_envs"):
        CartPole(True)


def test_docstring_examples_run():
    result = doctest.testmod(cartpole, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_next_step_autoreset_matches_gymnasium_vector_envs():
    """Lockstep with gymnasium's SyncVectorEnv in NEXT_STEP autoreset mode for 620 steps.

    The step that ends an episode returns and keeps the final state; the next step of that
    environment ignores its action and returns a reset state with reward 0 and no flags (the
    reset states differ: the random generators do). Each step our state is set to gymnasium's
    observation, so the step counters, flags and resets are checked, not chaotic divergence.
    """
    num_envs = 4
    env = CartPole(num_envs, autoreset_mode="next_step")
    set_state, reset = _SetState(env), _Reset(env)
    reset()
    gyms = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * num_envs,
                                          autoreset_mode=gymnasium.vector.AutoresetMode.NEXT_STEP)
    observation, _ = gyms.reset(seed=0)
    rng = np.random.default_rng(1)
    noise = np.array([0.0, 0.3, 0.5, 1.0])
    ended = np.zeros(num_envs, bool)
    terminations, truncations, resets = [], [], []
    for t in range(620):
        observation = observation.astype(np.float32)
        for gym_env, row in zip(gyms.envs, observation):
            gym_env.unwrapped.state = row.astype(np.float64)
        explore = rng.random(num_envs) < noise
        action = np.where(explore, rng.integers(0, 2, num_envs), _balancing_action(observation)).astype(np.int32)
        set_state(Tensor(observation))
        next_state, reward, terminated, truncated = (x.asnumpy() for x in env(Tensor(action)))
        expected, expected_reward, expected_term, expected_trunc, _ = gyms.step(action)
        np.testing.assert_array_equal(reward, expected_reward.astype(np.float32), err_msg=f"t={t}")
        np.testing.assert_array_equal(terminated, expected_term, err_msg=f"t={t}")
        np.testing.assert_array_equal(truncated, expected_trunc, err_msg=f"t={t}")
        np.testing.assert_array_equal(env.state.asnumpy(), next_state)  # never reset within the step
        np.testing.assert_array_equal(reward, np.where(ended, 0.0, 1.0))
        for i in range(num_envs):
            if ended[i]:  # the reset step: a fresh state, whatever the action
                resets.append((t, i))
                assert np.abs(next_state[i]).max() <= cartpole.RESET_BOUND
                assert np.abs(expected[i]).max() <= cartpole.RESET_BOUND
            else:
                np.testing.assert_allclose(next_state[i], expected[i], rtol=0, atol=ATOL, err_msg=f"t={t} env={i}")
            if expected_term[i] or expected_trunc[i]:
                (terminations if expected_term[i] else truncations).append((t, i))
        ended = expected_term | expected_trunc
        observation = expected
    assert (499, 0) in truncations and (500, 0) in resets and len(terminations) >= 10
    assert len(resets) == len(terminations) + len(truncations) - int(ended.sum())
    assert env.elapsed.asnumpy()[0] == 620 - 501  # reset at step 500 (elapsed 0), then 119 steps


def test_an_unknown_autoreset_mode_is_named():
    with pytest.raises(ValueError, match="'autoreset_mode' must be one of \\['same_step', 'next_step'\\], "
                                         "but got 'next'"):
        CartPole(2, autoreset_mode="next")
