"""The Atari environment wrapper: the settings, the frames, and rows in TransitionReplayBuffer's layout.

ale-py is imported at the top: without it these tests fail (the ``atari`` extra is missing), they
are not skipped.
"""
from __future__ import annotations

import ale_py  # noqa: F401 - fails the module when the atari extra is missing
import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer import TransitionReplayBuffer
from mindspore_rl_buffer.apps.atari.env import AtariSteps, games, make_atari


def play(steps: AtariSteps, count: int, seed: int = 0) -> list[tuple]:
    """``count`` rows ``(observation, action, reward, terminated, truncated, starts, next_observation, lives)``
    of a random agent, as the trainer builds them."""
    rng = np.random.default_rng(seed)
    rows, observation, starts = [], steps.observation, True
    for _ in range(count):
        action = int(rng.integers(steps.num_actions))
        step = steps.step(action)
        rows.append((observation, action, step.reward, step.terminated, step.truncated, starts, step.observation,
                     steps.lives))
        observation, starts = step.observation, step.starts
    return rows


@pytest.mark.parametrize("game, actions", [("Breakout", 4), ("Boxing", 18)])
def test_the_game_runs_with_dopamines_atari_100k_settings(game, actions):
    env, observation = make_atari(game, 0)
    ale = env.unwrapped.ale
    assert observation.shape == (84, 84) and observation.dtype == np.uint8
    assert env.action_space.n == actions  # the minimal action set
    assert ale.getFloat("repeat_action_probability") == 0.0
    assert ale.getInt("max_num_frames_per_episode") == 108_000
    assert ale.getInt("frame_skip") == 1  # AtariPreprocessing skips the frames, with a max over the last two
    env.close()


def test_the_config_sets_sticky_actions_and_names_only_games_ale_knows():
    # environment.repeat_action_probability was accepted and never passed to the emulator.
    import copy

    from mindspore_rl_buffer.configs.dqn_atari import algorithm_config

    from mindspore_rl_buffer.apps.atari import trainer

    config = copy.deepcopy(algorithm_config)
    config["environment"].update(repeat_action_probability=0.25, max_frames_per_episode=4000)
    steps = trainer.atari_steps(config, 0)
    ale = steps.env.unwrapped.ale
    assert (ale.getFloat("repeat_action_probability"), ale.getInt("max_num_frames_per_episode")) == (0.25, 4000)
    steps.close()
    assert {"Breakout", "Boxing", "Pong"} <= set(games())
    assert all("/" not in game and "-v" not in game for game in games())


def test_rows_follow_next_step_autoreset_with_a_life_lost_as_a_terminal():
    steps = AtariSteps("Breakout", 0)
    rows = play(steps, 700)
    ended = [i for i, row in enumerate(rows) if row[3] or row[4]]
    assert len(ended) >= 6, "a random agent loses at least a game's five lives in 700 steps"
    for row in rows:
        assert row[0].shape == (84, 84) and row[0].dtype == np.uint8 and row[2] in (-1.0, 0.0, 1.0)
    for i in ended:
        final, first = rows[i + 1], rows[i + 2]
        np.testing.assert_array_equal(final[0], rows[i][6])  # the final row holds the episode's final observation
        assert (final[2], final[3], final[4]) == (0.0, False, False)  # and no reward, no flags
        assert first[5] and not final[5]  # the row after it starts the next episode
        if rows[i][7] > 0:  # a life lost, the game goes on from the same frame
            np.testing.assert_array_equal(first[0], final[0])
    games = [score for _, score in steps.returns]
    assert len(games) >= 1 and games == [float(g) for g in games]
    steps.close()


def test_a_transition_buffer_takes_the_rows_and_samples_stacks_of_them():
    rows = play(AtariSteps("Breakout", 1), 400, seed=1)
    buffer = TransitionReplayBuffer(8, 512, [(84, 84), (), (), (), ()],
                                    [ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8], stack_size=4, n_step=3)
    columns = [np.stack([row[0] for row in rows])[:, None], np.array([[row[1]] for row in rows], np.int32),
               np.array([[row[2]] for row in rows], np.float32), np.array([[row[3]] for row in rows], np.uint8),
               np.array([[row[4]] for row in rows], np.uint8)]
    buffer.insert(columns)  # a direct insert refuses a final row that carries a flag
    observation, _, _, next_observation, discount = buffer.sample()
    assert observation.shape == next_observation.shape == (8, 4, 84, 84) and observation.dtype == ms.uint8
    allowed = np.array([0.0, 0.99, 0.99 ** 2, 0.99 ** 3])  # gamma^m, or 0 after a termination in the window
    assert np.isclose(discount.asnumpy()[:, None], allowed[None]).any(axis=1).all()
