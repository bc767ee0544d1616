"""The training loop: build the agent from the config, collect, learn, evaluate, write the results.

Each iteration collects one transition per environment and then runs
``learn_steps_per_collect`` learn steps; the host reads losses and returns once per
progress-bar update and per evaluation. Two variants feed the same
:class:`~mindspore_rl_buffer.apps.dqn.learner.Update` graph differently: ``buffer='numpy'``
samples a :class:`~mindspore_rl_buffer.apps.dqn.numpy_buffer.NumpyReplayBuffer` on the host
and converts the batch (the baseline for the benchmark), and ``env='gymnasium'`` steps
gymnasium's CartPole-v1 on the host and inserts each step through the buffer's direct call.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer, create_buffer
from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS, OBSERVATION_SIZE, CartPole
from mindspore_rl_buffer.apps.dqn.collect import ActStep
from mindspore_rl_buffer.apps.dqn.collectors import (
    Collector,
    DeviceCollector,
    DeviceEnvHostBufferCollector,
    GymCollector,
    make_gym_envs,
)
from mindspore_rl_buffer.apps.dqn.config import COLUMN_SHAPES, COLUMN_TYPES, check_config
from mindspore_rl_buffer.apps.dqn.evaluation import EvalStep, evaluate_gymnasium, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.extras import check_extras
from mindspore_rl_buffer.apps.dqn.learner import DQNLoss, LearnStep, Update
from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
from mindspore_rl_buffer.apps.dqn.plotting import plot_learning_curve
from mindspore_rl_buffer.apps.dqn.policy import EpsilonGreedy, GreedyAction
from mindspore_rl_buffer.apps.dqn.progress import progress_bar
from mindspore_rl_buffer.apps.dqn.results import TrainResult


@dataclass
class DQNAgent:
    """The Cells and buffer of one DQN run, built by :func:`build_agent`."""

    q_net: QNetwork
    target_net: QNetwork
    policy: EpsilonGreedy
    update: Update
    buffer: ReplayBuffer | ShardedReplayBuffer | NumpyReplayBuffer
    learn: Callable[[], Tensor]
    collector: Collector
    evaluate: Callable[[], np.ndarray]


def _ranks(buffer: Any) -> tuple[int, int]:
    """``(world_size, rank)`` of a data-parallel job over a ShardedReplayBuffer, else ``(1, 0)``."""
    if isinstance(buffer, ShardedReplayBuffer):
        return buffer.world_size, buffer.rank
    return 1, 0


def build_agent(config: dict[str, Any], buffer_kind: str = "device", env_kind: str = "mindspore",
                seed: int = 0) -> DQNAgent:
    """Build networks, buffer, collect and learn steps and the evaluator from ``config``.

    Args:
        config (dict): The ``algorithm_config`` (see ``configs/dqn.py``).
        buffer_kind (str): ``'device'`` (the ReplayBuffer, sampled inside the learn graph) or
            ``'numpy'`` (a host buffer sampled in Python). Default: ``'device'``.
        env_kind (str): ``'mindspore'`` (batched CartPole in the collect graph) or
            ``'gymnasium'`` (gymnasium CartPole-v1 on the host). Default: ``'mindspore'``.
        seed (int): Seeds MindSpore, the numpy buffer and the gymnasium environments. Default: ``0``.

    Returns:
        DQNAgent.

    Raises:
        TypeError, ValueError: If a kind is unknown or the config is not one the trainer can
            run (see :func:`~mindspore_rl_buffer.apps.dqn.config.check_config`).
        ImportError: If ``env_kind='gymnasium'`` and gymnasium is not installed.
    """
    if buffer_kind not in ("device", "numpy"):
        raise ValueError(f"For 'train', the 'buffer' must be 'device' or 'numpy', but got {buffer_kind!r}.")
    if env_kind not in ("mindspore", "gymnasium"):
        raise ValueError(f"For 'train', the 'env' must be 'mindspore' or 'gymnasium', but got {env_kind!r}.")
    entry = check_config(config)
    learner, policy_cfg = config["learner"], config["policy"]
    env_cfg, trainer = config["environment"], config["trainer"]
    num_envs = int(env_cfg["num_envs"])
    max_episode_steps = int(env_cfg.get("max_episode_steps", 500))
    gym_envs = make_gym_envs(num_envs + int(trainer["eval_episodes"]), seed) if env_kind == "gymnasium" else None

    ms.set_seed(seed)
    hidden = tuple(policy_cfg.get("hidden_sizes", (128, 128)))
    q_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    target_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    copy_weights(q_net, target_net)
    for parameter in target_net.get_parameters():
        parameter.requires_grad = False
    optimizer = nn.Adam(q_net.trainable_params(), learning_rate=float(learner["learning_rate"]))
    loss_net = DQNLoss(q_net, target_net, learner["gamma"], learner.get("double_dqn", True),
                       learner.get("huber_delta", 1.0))
    # A ShardedReplayBuffer entry makes this a data-parallel learner on every msrun rank: the
    # same initial weights (same seed), averaged gradients, and each rank's own environments.
    buffer = create_buffer(config["replay_buffer"]) if buffer_kind == "device" else None
    world_size, rank = _ranks(buffer)
    update = Update(loss_net, optimizer, learner["target_sync_period"], world_size)
    policy = EpsilonGreedy(q_net, policy_cfg["epsilon_start"], policy_cfg["epsilon_end"],
                           policy_cfg["epsilon_decay_steps"])

    if buffer is not None:
        learn = LearnStep(buffer, update)
    else:
        buffer = NumpyReplayBuffer(entry.sample_size, entry.capacity, COLUMN_SHAPES, COLUMN_TYPES, seed=seed)

        def learn() -> Tensor:
            return update(*(Tensor(column) for column in buffer.sample()))

    if env_kind == "mindspore":
        act = ActStep(policy, CartPole(num_envs, max_episode_steps, seed=None if world_size == 1 else 1000 + rank))
        if buffer_kind == "device":
            collector: Collector = DeviceCollector(act, buffer)
        else:
            collector = DeviceEnvHostBufferCollector(act, buffer)
        eval_step = EvalStep(q_net, CartPole(int(trainer["eval_episodes"]), max_episode_steps))

        def evaluate() -> np.ndarray:
            return evaluate_mindspore(eval_step, max_episode_steps)
    else:
        collector = GymCollector(policy, gym_envs[:num_envs], buffer)
        greedy = GreedyAction(q_net)
        eval_envs = gym_envs[num_envs:]

        def evaluate() -> np.ndarray:
            return evaluate_gymnasium(greedy, eval_envs)

    return DQNAgent(q_net, target_net, policy, update, buffer, learn, collector, evaluate)


def _postfix(result: TrainResult, elapsed: float) -> dict[str, str]:
    """The progress bar's fields: last training return, loss, steps/s, last evaluation."""
    postfix = {"return": f"{result.episode_history[-1][1]:.1f}" if result.episode_history else "-",
               "loss": f"{result.loss_history[-1][1]:.4f}" if result.loss_history else "-",
               "steps/s": f"{result.env_steps / max(elapsed, 1e-9):.0f}"}
    if result.eval_history:
        postfix["eval"] = f"{result.eval_history[-1][1]:.1f}"
    return postfix


def _window_mean(values: list[Tensor]) -> float:
    return float(np.mean([v.asnumpy() for v in values])) if values else math.nan


def train(config: dict[str, Any], out_dir: str | Path | None = None, buffer_kind: str = "device",
          env_kind: str = "mindspore", max_steps: int | None = None, seed: int | None = None,
          progress: bool = True, stop_when_solved: bool = True) -> TrainResult:
    """Train DQN on CartPole until solved or out of steps; optionally write a curve and checkpoint.

    Each iteration collects one transition per environment and then runs
    ``learn_steps_per_collect`` learn steps (once ``learning_starts`` transitions are stored).
    Every ``eval_interval`` environment steps from ``eval_starts`` on (and at the end of the
    budget) the greedy policy plays ``eval_episodes`` episodes; training stops when their
    mean return reaches ``solve_threshold``.

    Args:
        config (dict): The ``algorithm_config``.
        out_dir (Union[str, Path]): Where to write ``learning_curve.png`` (needs matplotlib) and
            ``dqn_cartpole.ckpt``; ``None`` writes nothing. Default: ``None``.
        buffer_kind (str): ``'device'`` or ``'numpy'``, see :func:`build_agent`. Default: ``'device'``.
        env_kind (str): ``'mindspore'`` or ``'gymnasium'``, see :func:`build_agent`.
            Default: ``'mindspore'``.
        max_steps (int): Environment-step budget; ``None`` takes ``trainer.max_steps``. Default: ``None``.
        seed (int): ``None`` takes ``trainer.seed``. Default: ``None``.
        progress (bool): Show a tqdm progress bar (needs tqdm). Default: ``True``.
        stop_when_solved (bool): Stop at the first evaluation that solves. Default: ``True``.

    Returns:
        TrainResult.

    Raises:
        TypeError, ValueError: As :func:`build_agent`.
        ImportError: As :func:`build_agent`.
        MissingExtraError: If the progress bar or the learning curve is asked for and tqdm or
            matplotlib is not installed (``pip install 'mindspore_rl_buffer[dqn]'``); raised
            before any training.
    """
    check_config(config)
    check_extras(progress=progress, plot=out_dir is not None)
    trainer = config["trainer"]
    seed = int(trainer.get("seed", 0) if seed is None else seed)
    max_steps = int(trainer["max_steps"] if max_steps is None else max_steps)
    agent = build_agent(config, buffer_kind, env_kind, seed)
    num_envs = int(config["environment"]["num_envs"])
    learning_starts = int(trainer["learning_starts"])
    learn_per_collect = int(trainer["learn_steps_per_collect"])
    eval_interval = int(trainer["eval_interval"])
    eval_starts = int(trainer.get("eval_starts", 0))
    log_interval = int(trainer.get("log_interval", 50))
    threshold = float(trainer.get("solve_threshold", 475.0))
    learning_starts = max(learning_starts, 1)

    result = TrainResult(False, math.nan, 0, 0, 0.0, 0.0)
    bar = progress_bar(max_steps, shown=progress)
    losses: list[Tensor] = []
    seen_return, seen_episodes = 0.0, 0
    last_eval = 0
    start = time.perf_counter()
    iteration = 0
    while result.env_steps < max_steps:
        agent.collector.collect()
        result.env_steps += num_envs
        iteration += 1
        if result.env_steps >= learning_starts:
            for _ in range(learn_per_collect):
                losses.append(agent.learn())
            result.learn_steps += learn_per_collect
        if iteration % log_interval == 0:
            total_return, episodes = agent.collector.episodes()
            if episodes > seen_episodes:
                mean_return = (total_return - seen_return) / (episodes - seen_episodes)
                result.episode_history.append((result.env_steps, mean_return))
                seen_return, seen_episodes = total_return, episodes
            if losses:
                result.loss_history.append((result.env_steps, _window_mean(losses)))
                losses = []
            bar.set_postfix(_postfix(result, time.perf_counter() - start), refresh=False)
            bar.update(result.env_steps - bar.n)
        due = result.env_steps >= eval_starts and result.env_steps - last_eval >= eval_interval
        if due or result.env_steps >= max_steps:
            last_eval = result.env_steps
            mean_eval = float(np.mean(agent.evaluate()))
            result.eval_history.append((result.env_steps, mean_eval))
            result.final_eval_return = mean_eval
            result.solved = mean_eval >= threshold
            bar.set_postfix(_postfix(result, time.perf_counter() - start), refresh=False)
            if result.solved and stop_when_solved:
                break
    if losses:
        result.loss_history.append((result.env_steps, _window_mean(losses)))
    bar.update(result.env_steps - bar.n)
    bar.close()
    result.wall_time = time.perf_counter() - start
    result.steps_per_second = result.env_steps / max(result.wall_time, 1e-9)
    if out_dir is not None:
        out = Path(out_dir)
        world_size, rank = _ranks(agent.buffer)
        if world_size > 1:  # data-parallel: one output folder per rank
            out = out / f"rank{rank}"
        out.mkdir(parents=True, exist_ok=True)
        result.checkpoint_path = out / "dqn_cartpole.ckpt"
        ms.save_checkpoint(agent.q_net, str(result.checkpoint_path))
        result.curve_path = out / "learning_curve.png"
        plot_learning_curve(result, result.curve_path, threshold)
    return result
