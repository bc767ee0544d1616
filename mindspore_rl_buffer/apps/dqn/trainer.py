"""The training loop: run the chunks of :mod:`.schedule` on a loop of :mod:`.loops`, evaluate, write the results.

Training stops at a *held* solve: the mean greedy return over ``eval_episodes`` episodes at
least ``solve_threshold`` at ``solve_evaluations`` consecutive evaluations (3 by default,
``eval_interval`` environment steps apart), not at one lucky evaluation. The fused loop
(:class:`~.loops.FusedLoop`) is the default; ``loop='host'`` runs the loop as it was before,
one launch per collect step, learn step and evaluation step, for comparison.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from mindspore_rl_buffer.apps.dqn.agent import DQNAgent, build_agent, check_kinds, ranks
from mindspore_rl_buffer.apps.dqn.config import check_config, setting
from mindspore_rl_buffer.apps.dqn.extras import check_extras
from mindspore_rl_buffer.apps.dqn.loops import LOOPS, FusedLoop, HostLoop, Loop
from mindspore_rl_buffer.apps.dqn.networks import save_q_network
from mindspore_rl_buffer.apps.dqn.plotting import plot_learning_curve
from mindspore_rl_buffer.apps.dqn.progress import progress_bar
from mindspore_rl_buffer.apps.dqn.results import TrainResult
from mindspore_rl_buffer.apps.dqn.schedule import MAX_STEPS, chunks, rounded_budget

__all__ = ["DQNAgent", "TrainResult", "build_agent", "train"]

CHECKPOINT = "dqn_cartpole.ckpt"
CURVE = "learning_curve.png"


def choose_loop(loop: str | None, buffer_kind: str, env_kind: str) -> str:
    """``loop``, or the default: ``'fused'`` where it can run (device buffer, MindSpore CartPoles), else ``'host'``.

    Raises:
        ValueError: If ``loop`` is unknown, or ``'fused'`` with a host buffer or host environments.
    """
    fusable = buffer_kind == "device" and env_kind == "mindspore"
    if loop is None:
        return "fused" if fusable else "host"
    if loop not in LOOPS:
        raise ValueError(f"For 'train', the 'loop' must be one of {list(LOOPS)}, but got {loop!r}.")
    if loop == "fused" and not fusable:
        raise ValueError(f"For 'train', the 'fused' loop needs the device buffer and the MindSpore CartPoles, "
                         f"which live in graphs, but got buffer {buffer_kind!r} and env {env_kind!r}: "
                         f"use loop 'host'.")
    return loop


def check_budget(max_steps: Any) -> int:
    """``max_steps`` if it is an int in [1, :data:`~.schedule.MAX_STEPS`] (not a bool); a TypeError or
    ValueError naming it otherwise."""
    expected = f"an int in [1, {MAX_STEPS}]"
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)):
        raise TypeError(f"For 'train', the 'max_steps' must be {expected}, but got {type(max_steps).__name__}.")
    if not 1 <= max_steps <= MAX_STEPS:
        raise ValueError(f"For 'train', the 'max_steps' must be {expected} (an environment-step budget), "
                         f"but got {max_steps}.")
    return int(max_steps)


def output_folder(out_dir: str | Path, agent: DQNAgent, overwrite: bool) -> Path:
    """The folder a run writes to (``rank<r>`` inside ``out_dir`` for a data-parallel rank).

    Raises:
        IsADirectoryError: If it holds a folder by the name of the checkpoint or the learning curve,
            which the run could not write (``overwrite`` or not).
        FileExistsError: If it holds an earlier run's checkpoint or learning curve and not ``overwrite``.
    """
    world_size, rank = ranks(agent.buffer)
    out = Path(out_dir) / f"rank{rank}" if world_size > 1 else Path(out_dir)
    for name in (CHECKPOINT, CURVE):
        if (out / name).is_dir():
            raise IsADirectoryError(f"For 'train', the output folder '{out}' must leave the name '{name}' to the "
                                    f"run's file, but '{out / name}' is a folder; remove it or pass another folder "
                                    f"(--out DIR).")
    earlier = [name for name in (CHECKPOINT, CURVE) if os.path.lexists(out / name)]  # a dangling link too
    if earlier and not overwrite:
        raise FileExistsError(f"For 'train', the output folder '{out}' already holds a run ({', '.join(earlier)}); "
                              f"pass another folder (--out DIR) or overwrite it (--overwrite).")
    return out


def _postfix(result: TrainResult, elapsed: float) -> dict[str, str]:
    """The progress bar's fields: last training return, loss, steps/s, last evaluation."""
    postfix = {"return": f"{result.episode_history[-1][1]:.1f}" if result.episode_history else "-",
               "loss": f"{result.loss_history[-1][1]:.4f}" if result.loss_history else "-",
               "steps/s": f"{result.env_steps / max(elapsed, 1e-9):.0f}"}
    if result.eval_history:
        postfix["eval"] = f"{result.eval_history[-1][1]:.1f}"
    return postfix


def _held(result: TrainResult, threshold: float, evaluations: int) -> bool:
    last = [value for _, value in result.eval_history[-evaluations:]]
    return len(last) == evaluations and min(last) >= threshold


def train(config: dict[str, Any], out_dir: str | Path | None = None, buffer_kind: str = "device",
          env_kind: str = "mindspore", max_steps: int | None = None, seed: int | None = None,
          progress: bool = True, stop_when_solved: bool = True, loop: str | None = None,
          overwrite: bool = False) -> TrainResult:
    """Train DQN on CartPole until a held solve or the end of the budget; optionally write a curve and checkpoint.

    Each iteration collects one transition per environment and then runs
    ``learn_steps_per_collect`` learn steps (once ``learning_starts`` transitions are stored).
    Every ``eval_interval`` environment steps from ``eval_starts`` on (and at the end of the
    budget) the greedy policy plays ``eval_episodes`` episodes; CartPole is solved once their
    mean return reaches ``solve_threshold`` at ``solve_evaluations`` consecutive evaluations.

    Args:
        config (dict): The ``algorithm_config``.
        out_dir (Union[str, Path]): Where to write ``learning_curve.png`` (needs matplotlib) and
            ``dqn_cartpole.ckpt``; ``None`` writes nothing. Default: ``None``.
        buffer_kind (str): ``'device'`` or ``'numpy'``, see :func:`build_agent`. Default: ``'device'``.
        env_kind (str): ``'mindspore'`` or ``'gymnasium'``, see :func:`build_agent`.
            Default: ``'mindspore'``.
        max_steps (int): Environment-step budget, in [1, 10**9], rounded up to a multiple of
            ``environment.num_envs`` (every collect steps all environments); ``None`` takes
            ``trainer.max_steps``. Default: ``None``.
        seed (int): ``None`` takes ``trainer.seed``. Default: ``None``.
        progress (bool): Show a tqdm progress bar (needs tqdm). Default: ``True``.
        stop_when_solved (bool): Stop at the held solve. Default: ``True``.
        loop (str): ``'fused'`` (one launch per ``log_interval`` collect steps with their learn
            steps, one per evaluation) or ``'host'`` (one launch per collect, learn and
            evaluation step); ``None`` takes ``'fused'`` where it can run. Default: ``None``.
        overwrite (bool): Replace an earlier run in ``out_dir``. Default: ``False``.

    Returns:
        TrainResult.

    Raises:
        TypeError, ValueError: As :func:`build_agent` (a TransitionReplayBuffer entry needs
            ``buffer_kind='device'`` and ``env_kind='mindspore'``), or if ``max_steps`` is not an int in
            [1, 10**9], or the loop is unknown or cannot run this variant; raised before any training.
        ImportError: As :func:`build_agent`.
        MissingExtraError: If the progress bar or the learning curve is asked for and tqdm or
            matplotlib is not installed (``pip install 'mindspore_rl_buffer[dqn]'``); raised
            before any training.
        FileExistsError: If ``out_dir`` holds an earlier run and not ``overwrite``; raised
            before any training.
        IsADirectoryError: If ``out_dir`` holds a folder named ``dqn_cartpole.ckpt`` or
            ``learning_curve.png``; raised before any training.
    """
    entry = check_config(config)

    def get(key: str) -> Any:
        return setting(config, "trainer", key)

    max_steps = check_budget(get("max_steps") if max_steps is None else max_steps)
    seed = int(get("seed") if seed is None else seed)
    check_kinds(buffer_kind, env_kind, entry.transitions)
    loop = choose_loop(loop, buffer_kind, env_kind)
    check_extras(progress=progress, plot=out_dir is not None)
    agent = build_agent(config, buffer_kind, env_kind, seed)
    out = None if out_dir is None else output_folder(out_dir, agent, overwrite)
    # With overwrite: the earlier run's files, as they are now; a file another run writes meanwhile is kept.
    replaceable = {name: _identity(out / name) if out is not None and overwrite else None
                   for name in (CHECKPOINT, CURVE)}
    learn_steps = get("learn_steps_per_collect")
    runner: Loop = FusedLoop(agent) if loop == "fused" else HostLoop(agent)
    threshold, evaluations = float(get("solve_threshold")), get("solve_evaluations")

    result = TrainResult(False, math.nan, 0, 0, 0.0, 0.0, loop=loop)
    num_envs = setting(config, "environment", "num_envs")
    bar = progress_bar(rounded_budget(max_steps, num_envs), shown=progress)
    seen_return, seen_episodes = 0.0, 0
    start = time.perf_counter()
    for chunk in chunks(num_envs, max_steps, get("learning_starts"),
                        get("eval_starts"), get("eval_interval"), get("log_interval")):
        loss_sum = runner.run(chunk.iterations, chunk.learn)
        result.env_steps = chunk.env_steps
        if chunk.learn:
            result.learn_steps += chunk.iterations * learn_steps
            result.loss_history.append((chunk.env_steps, loss_sum / (chunk.iterations * learn_steps)))
        total_return, episodes = runner.episodes()
        if episodes > seen_episodes:
            result.episode_history.append((chunk.env_steps, (total_return - seen_return) / (episodes - seen_episodes)))
            seen_return, seen_episodes = total_return, episodes
        if chunk.evaluate:
            result.final_eval_return = float(np.mean(runner.evaluate()))
            result.eval_history.append((chunk.env_steps, result.final_eval_return))
            if not result.solved and _held(result, threshold, evaluations):
                result.solved, result.solved_at = True, chunk.env_steps
                result.solve_time = time.perf_counter() - start
        bar.set_postfix(_postfix(result, time.perf_counter() - start), refresh=False)
        bar.update(result.env_steps - bar.n)
        if result.solved and stop_when_solved:
            break
    bar.close()
    result.wall_time = time.perf_counter() - start
    result.steps_per_second = result.env_steps / max(result.wall_time, 1e-9)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        # Written under this run's own names first, then published under the final ones.
        checkpoint, curve = (out / f"{Path(name).stem}.{os.getpid()}{Path(name).suffix}"
                             for name in (CHECKPOINT, CURVE))
        save_q_network(agent.q_net, checkpoint)
        result.checkpoint_path = publish(checkpoint, out / CHECKPOINT, replaceable[CHECKPOINT])
        plot_learning_curve(result, curve, threshold, evaluations)
        result.curve_path = publish(curve, out / CURVE, replaceable[CURVE])
    return result


def _identity(path: Path) -> tuple[int, ...] | None:
    """What tells one file at ``path`` from another written there later; ``None`` if there is none."""
    try:
        status = path.lstat()  # a symbolic link itself: os.replace replaces the link, not its target
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size


def publish(written: Path, final: Path, replaceable: tuple[int, ...] | None = None) -> Path:
    """Give the file ``written`` the name ``final``; return the name it has.

    ``final`` is replaced only if it is still the file ``replaceable`` identifies (the earlier run's,
    with ``--overwrite``, as :func:`_identity` found it before training). A file written at ``final``
    since then (another run writing there at the same time) is never replaced: ``final`` is created
    exclusively, and if it exists the file keeps its own name ``written``.
    """
    if replaceable is not None and _identity(final) == replaceable:
        os.replace(written, final)
        return final
    try:
        with open(final, "xb") as target:
            target.write(written.read_bytes())
    except FileExistsError:
        return written
    written.unlink()
    return final
