"""The learning curve: training and evaluation returns and the loss against environment steps."""
from __future__ import annotations

from pathlib import Path

from mindspore_rl_buffer.apps.dqn.extras import require_matplotlib
from mindspore_rl_buffer.apps.dqn.results import TrainResult


def plot_learning_curve(result: TrainResult, path: str | Path, threshold: float = 475.0,
                        evaluations: int = 3) -> None:
    """Write a PNG with training and evaluation returns and the loss against environment steps.

    A held solve is marked: its ``evaluations`` consecutive evaluations at or above the
    threshold are filled in and a vertical line stands at the last of them.

    Args:
        result (TrainResult): The histories of a run.
        path (Union[str, Path]): The PNG to write.
        threshold (float): The solving return, drawn as a dashed line. Default: ``475.0``.
        evaluations (int): Consecutive evaluations of a held solve. Default: ``3``.

    Raises:
        MissingExtraError: If matplotlib is not installed (``pip install 'mindspore_rl_buffer[dqn]'``).
    """
    matplotlib = require_matplotlib()
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (returns_axis, loss_axis) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    if result.episode_history:
        steps, values = zip(*result.episode_history)
        returns_axis.plot(steps, values, label="training episodes (epsilon-greedy)", alpha=0.7)
    if result.eval_history:
        steps, values = zip(*result.eval_history)
        returns_axis.plot(steps, values, "o-", mfc="none", label="evaluation (greedy, mean of the episodes)")
    if result.solved_at is not None:
        held = [(s, v) for s, v in result.eval_history if s <= result.solved_at][-evaluations:]
        returns_axis.plot(*zip(*held), "o", color="C1",
                          label=f"held solve ({evaluations} evaluations >= {threshold:g})")
        returns_axis.axvline(result.solved_at, color="C1", linestyle=":")
    returns_axis.axhline(threshold, color="grey", linestyle="--", label=f"solved ({threshold:g})")
    returns_axis.set_ylabel("episode return")
    returns_axis.set_title(f"DQN on CartPole-v1 ({result.loop} loop)")
    returns_axis.legend(loc="upper left")
    if result.loss_history:
        steps, values = zip(*result.loss_history)
        loss_axis.plot(steps, values)
        loss_axis.set_yscale("log")
    loss_axis.set_ylabel("TD loss (Huber)")
    loss_axis.set_xlabel("environment steps")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
