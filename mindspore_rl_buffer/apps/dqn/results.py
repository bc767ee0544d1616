"""TrainResult: what a training run did, shared by the trainer and the plots."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TrainResult:
    """What :func:`~.trainer.train` did: histories, the solve, the final evaluation and the files written.

    ``solved`` means a held solve: the mean greedy return reached the threshold at the
    configured number of consecutive evaluations, the last of them at ``solved_at``
    environment steps, ``solve_time`` seconds into the run (compilation and evaluations
    included). ``wall_time`` is the whole loop's, compilation and evaluations included, and
    ``steps_per_second`` is ``env_steps / wall_time``: less than the training throughput alone.
    """

    solved: bool
    final_eval_return: float
    env_steps: int
    learn_steps: int
    wall_time: float
    steps_per_second: float
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    episode_history: list[tuple[int, float]] = field(default_factory=list)
    loss_history: list[tuple[int, float]] = field(default_factory=list)
    curve_path: Path | None = None
    checkpoint_path: Path | None = None
    loop: str = "fused"
    solved_at: int | None = None
    solve_time: float | None = None
