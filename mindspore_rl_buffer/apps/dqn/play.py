"""Using a trained agent: ``mindspore-rl-buffer evaluate --checkpoint PATH`` plays its greedy episodes.

:func:`evaluate_checkpoint` loads the Q-network a training run wrote, plays ``episodes``
greedy episodes on MindSpore CartPoles in one launch of :class:`~.evaluation.EvalLoop`, and
returns their returns; with ``frames`` it replays the first episode step by step from the
same start state and draws a strip of its frames.
"""
from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, jit

from mindspore_rl_buffer.apps.dqn.cartpole import LENGTH, X_THRESHOLD, CartPole, cartpole_step
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop
from mindspore_rl_buffer.apps.dqn.extras import require_matplotlib
from mindspore_rl_buffer.apps.dqn.networks import QNetwork, load_q_network
from mindspore_rl_buffer.apps.dqn.policy import FoldedGreedy

FRAMES = 8
# What needs matplotlib when evaluate draws frames, as its error names them.
FRAMES_FEATURE = ("the strip of frames (--frames)", "evaluate")


def evaluate_checkpoint(path: str | Path, episodes: int = 100, seed: int = 0, frames: str | Path | None = None,
                        max_episode_steps: int = 500) -> np.ndarray:
    """Play ``episodes`` greedy episodes of the Q-network in checkpoint ``path``; return their returns.

    Args:
        path (Union[str, Path]): A checkpoint written by ``train`` (``dqn_cartpole.ckpt``), or a
            ``.safetensors`` file of the same weights.
        episodes (int): Episodes, played in parallel. Default: ``100``.
        seed (int): Seeds the start states (``mindspore.set_seed``). Default: ``0``.
        frames (Union[str, Path]): If given, a PNG strip of frames of the first episode is
            written there (needs matplotlib). Default: ``None``.
        max_episode_steps (int): Truncation. Default: ``500``.

    Returns:
        numpy.ndarray, float32, ``(episodes,)``.

    Raises:
        ValueError: If the file is not a ``.ckpt`` or ``.safetensors`` checkpoint, or holds no
            CartPole Q-network (see :func:`~.networks.load_q_network`).
        MissingExtraError: If ``frames`` is given and matplotlib is not installed.
    """
    if frames is not None:
        require_matplotlib(*FRAMES_FEATURE)
    q_net = load_q_network(path)
    ms.set_seed(seed)
    loop = EvalLoop(q_net, CartPole(episodes, max_episode_steps))
    returns = loop().asnumpy()
    if frames is not None:
        start = loop.env.state.asnumpy()[0]  # the reset leaves the start states in the Parameter
        draw_frames(replay(q_net, start, max_episode_steps), frames)
    return returns


def replay(q_net: QNetwork, start: np.ndarray, max_episode_steps: int = 500) -> np.ndarray:
    """The states of one greedy episode from ``start``, stepped one launch at a time; ``(steps + 1, 4)``.

    The actions are :class:`~mindspore_rl_buffer.apps.dqn.policy.FoldedGreedy`'s, as the
    evaluation's: the episode is the one the evaluation played from ``start``.
    """
    greedy = FoldedGreedy(q_net)
    weights = greedy.fold()

    @jit
    def step(state):
        return cartpole_step(state, greedy(state, weights))

    states = [np.asarray(start, np.float32)]
    for _ in range(max_episode_steps):
        state, terminated = step(Tensor(states[-1][None]))
        states.append(state.asnumpy()[0])
        if bool(terminated.asnumpy()[0]):
            break
    return np.stack(states)


def draw_frames(states: np.ndarray, path: str | Path) -> None:
    """A PNG strip of :data:`FRAMES` frames spread over an episode's ``states``: the cart and its pole."""
    matplotlib = require_matplotlib(*FRAMES_FEATURE)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    picks = np.linspace(0, len(states) - 1, FRAMES).round().astype(int)
    figure, axes = plt.subplots(1, FRAMES, figsize=(2 * FRAMES, 2.2))
    pole = 2 * LENGTH
    for axis, t in zip(axes, picks):
        x, _, theta, _ = states[t]
        axis.plot([-X_THRESHOLD, X_THRESHOLD], [0, 0], color="grey", linewidth=1)
        axis.add_patch(plt.Rectangle((x - 0.25, -0.15), 0.5, 0.3, color="C0"))
        axis.plot([x, x + pole * np.sin(theta)], [0, pole * np.cos(theta)], color="C1", linewidth=4)
        axis.set(xlim=(-X_THRESHOLD, X_THRESHOLD), ylim=(-0.3, 1.3), aspect="equal", xticks=[], yticks=[],
                 title=f"step {t}")
    figure.suptitle(f"greedy episode, {len(states) - 1} steps")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
