"""The Atari environment: ALE through gymnasium's ``AtariPreprocessing``, as rows of a TransitionReplayBuffer.

:func:`make_atari` builds one game: the ALE environment at ``frameskip=1`` underneath
``AtariPreprocessing`` (frame skip 4 with a max over the last two frames, 84x84 grayscale
``uint8`` frames, up to 30 no-op actions after each reset), with the settings of Dopamine's
Atari 100k configs: no sticky actions (``repeat_action_probability=0``), the minimal action
set, and an episode cap of 108,000 frames (27,000 agent steps), which ends a game as a
truncation.

:class:`AtariSteps` steps it as gymnasium's vector environments do with next-step
autoreset, one row per agent step, in the layout
:class:`~mindspore_rl_buffer.TransitionReplayBuffer` stores: after a step that ends an
episode, the next step ignores its action and returns the episode's final observation's
successor, the first observation of the next episode, with reward 0 and flags 0. A life
lost ends the learning episode (``terminated``, Dopamine's ``terminal_on_life_loss``), but
not the game: the emulator is not reset, and the next episode starts from the frame after
the loss. Game scores (the unclipped rewards of a whole game, every life) are what
:attr:`AtariSteps.returns` records; the rows carry the rewards clipped to ``[-1, 1]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Dopamine's Atari 100k settings (dopamine/labs/atari_100k/configs, atari_lib.create_atari_environment).
FRAME_SKIP = 4
SCREEN_SIZE = 84
NOOP_MAX = 30
MAX_FRAMES_PER_EPISODE = 108_000
REPEAT_ACTION_PROBABILITY = 0.0


class MissingAtariError(ImportError):
    """``ale-py`` or ``gymnasium`` is not installed: ``pip install 'mindspore_rl_buffer[atari]'``."""


def _gymnasium():
    """gymnasium, with ALE's games registered; :class:`MissingAtariError` without the ``atari`` extra."""
    try:
        import ale_py
        import gymnasium as gym
    except ImportError as error:
        raise MissingAtariError(f"The Atari job needs ale-py and gymnasium ({error}): "
                                f"pip install 'mindspore_rl_buffer[atari]'") from None
    gym.register_envs(ale_py)
    return gym


def games() -> list[str]:
    """The names of the games ALE registers with gymnasium (``Breakout``, ``Boxing``, ...).

    Raises:
        MissingAtariError: If ``ale-py`` or ``gymnasium`` is not installed.
    """
    names = (name.removeprefix("ALE/").rpartition("-v")[0] for name in _gymnasium().registry
             if name.startswith("ALE/"))
    return sorted({name for name in names if name})


def make_atari(game: str, seed: int, *, repeat_action_probability: float = REPEAT_ACTION_PROBABILITY,
               max_frames: int = MAX_FRAMES_PER_EPISODE, noop_max: int = NOOP_MAX):
    """One preprocessed Atari game, ``gymnasium.Env`` of 84x84 ``uint8`` frames, reset with ``seed``.

    Args:
        game (str): ALE game name, such as ``"Breakout"``.
        seed (int): Seed of the first reset (no-op starts, the emulator's randomness).
        repeat_action_probability (float): Sticky actions. Default: ``0.0``.
        max_frames (int): Emulator frames per episode before truncation. Default: ``108000``.
        noop_max (int): Most no-op actions after a reset. Default: ``30``.

    Returns:
        ``(env, first_observation)``.

    Raises:
        MissingAtariError: If ``ale-py`` or ``gymnasium`` is not installed.
    """
    gym = _gymnasium()
    env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=repeat_action_probability,
                   full_action_space=False, max_num_frames_per_episode=max_frames, max_episode_steps=None)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=noop_max, frame_skip=FRAME_SKIP, screen_size=SCREEN_SIZE,
                                          terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    observation, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    return env, observation


@dataclass
class Step:
    """One agent step: the row's reward and flags, and the observation the next row starts from.

    ``observation`` is the next row's observation; ``starts`` says it is the first frame of a
    learning episode (the frame stack is filled with it); ``reward`` is clipped to ``[-1, 1]``.
    """

    observation: np.ndarray
    reward: float
    terminated: bool
    truncated: bool
    starts: bool


class AtariSteps:
    """One Atari game as next-step-autoreset rows, with life loss as a terminal.

    Args:
        game (str): ALE game name.
        seed (int): Seed of the first reset; each later game reset draws from the environment's own
            generator, as gymnasium's do.
        terminal_on_life_loss (bool): End the learning episode when a life is lost. Default: ``True``.
        max_frames (int): Emulator frames per game before truncation. Default: ``108000``.
        repeat_action_probability (float): Sticky actions: the emulator repeats the previous action
            instead of the agent's with this probability. Default: ``0.0``.

    Attributes:
        observation (numpy.ndarray): The current row's observation, ``uint8 (84, 84)``.
        num_actions (int): The game's minimal action set.
        returns (list[tuple[int, float]]): ``(agent step, game score)`` of each finished game.
    """

    def __init__(self, game: str, seed: int, terminal_on_life_loss: bool = True,
                 max_frames: int = MAX_FRAMES_PER_EPISODE,
                 repeat_action_probability: float = REPEAT_ACTION_PROBABILITY) -> None:
        self.env, self.observation = make_atari(game, seed, max_frames=max_frames,
                                                repeat_action_probability=repeat_action_probability)
        self.num_actions = int(self.env.action_space.n)
        self.terminal_on_life_loss = bool(terminal_on_life_loss)
        self.lives = self._lives()
        self.steps = 0
        self.score = 0.0
        self.returns: list[tuple[int, float]] = []
        self._ended = False  # the last step ended a learning episode: the next one is the reset row
        self._game_over = False

    def _lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())

    def step(self, action: int) -> Step:
        """Step the row whose observation is :attr:`observation` with ``action``; the next row's start.

        After an ended step, ``action`` is ignored: the game is reset (game over or truncation) or goes
        on (a life lost), and the step returns the next episode's first observation, reward 0, flags 0.
        """
        self.steps += 1
        if self._ended:
            if self._game_over:
                self.observation, _ = self.env.reset()
                self.lives, self.score = self._lives(), 0.0
            self._ended = self._game_over = False
            return Step(self.observation, 0.0, False, False, True)
        observation, reward, terminated, truncated, _ = self.env.step(int(action))
        self.score += float(reward)
        lives = self._lives()
        life_lost = lives < self.lives
        self.lives = lives
        self._game_over = bool(terminated or truncated)
        if self._game_over:
            self.returns.append((self.steps, self.score))
        ended_by_life = self.terminal_on_life_loss and life_lost
        terminated = bool(terminated) or ended_by_life
        truncated = bool(truncated) and not terminated
        self._ended = terminated or truncated
        self.observation = observation
        return Step(observation, float(np.sign(reward)), terminated, truncated, False)

    def close(self) -> None:
        """Close the emulator."""
        self.env.close()
