"""The agent: networks, buffer, the collect and learn graphs, the fused loop and the evaluators, built from a config.

Three variants share the same networks and :class:`~.learner.Update` graph: the device
buffer with the MindSpore CartPoles (the default, and the only one the fused loop can run,
since everything lives in graphs), ``buffer='numpy'`` (a
:class:`~.numpy_buffer.NumpyReplayBuffer` sampled on the host, the batch converted: the
baseline) and ``env='gymnasium'`` (gymnasium's CartPole-v1 stepped on the host, each step
inserted by the buffer's direct call). A
:class:`~mindspore_rl_buffer.TransitionReplayBuffer` entry (``configs/dqn_nstep.py``) runs
on the device buffer with the MindSpore CartPoles only, in next-step autoreset mode, and
learns from its n-step returns.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import ReplayBuffer, ShardedReplayBuffer, TransitionReplayBuffer, create_buffer
from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS, OBSERVATION_SIZE, CartPole
from mindspore_rl_buffer.apps.dqn.collect import ActStep
from mindspore_rl_buffer.apps.dqn.collectors import (
    Collector,
    DeviceCollector,
    DeviceEnvHostBufferCollector,
    GymCollector,
    make_gym_envs,
)
from mindspore_rl_buffer.apps.dqn.config import COLUMN_SHAPES, COLUMN_TYPES, check_config, setting
from mindspore_rl_buffer.apps.dqn.evaluation import EvalLoop, EvalStep, evaluate_gymnasium, evaluate_mindspore
from mindspore_rl_buffer.apps.dqn.fused import TrainLoop
from mindspore_rl_buffer.apps.dqn.learner import DQNLoss, LearnStep, Update, learn_calls
from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
from mindspore_rl_buffer.apps.dqn.optimizer import Adam
from mindspore_rl_buffer.apps.dqn.policy import EpsilonGreedy, GreedyAction

BUFFERS = ("device", "numpy")
ENVS = ("mindspore", "gymnasium")


@dataclass
class DQNAgent:
    """The Cells and buffer of one DQN run, built by :func:`build_agent`.

    ``train_loop`` (which also runs the steps before ``learning_starts``, with no learn steps)
    and ``eval_loop`` are the fused graphs; they exist for the device buffer with the
    MindSpore CartPoles only.
    """

    q_net: QNetwork
    target_net: QNetwork
    policy: EpsilonGreedy
    update: Update
    buffer: ReplayBuffer | ShardedReplayBuffer | TransitionReplayBuffer | NumpyReplayBuffer
    learn: Callable[[], Tensor]  # one sample and its learn steps; returns their loss sum
    collector: Collector
    evaluate: Callable[[], np.ndarray]
    train_loop: TrainLoop | None = None
    eval_loop: EvalLoop | None = None
    learn_calls: int = 1  # calls of ``learn`` after each collect step


def ranks(buffer: Any) -> tuple[int, int]:
    """``(world_size, rank)`` of a data-parallel job over a ShardedReplayBuffer, else ``(1, 0)``."""
    if isinstance(buffer, ShardedReplayBuffer):
        return buffer.world_size, buffer.rank
    return 1, 0


def check_kinds(buffer_kind: str, env_kind: str, transitions: bool = False) -> None:
    """Raise a ValueError naming ``buffer_kind`` or ``env_kind`` if it is not one of :data:`BUFFERS`, :data:`ENVS`,
    or, with ``transitions`` (a TransitionReplayBuffer entry), not ``'device'`` and ``'mindspore'``."""
    if buffer_kind not in BUFFERS:
        raise ValueError(f"For 'train', the 'buffer' must be 'device' or 'numpy', but got {buffer_kind!r}.")
    if env_kind not in ENVS:
        raise ValueError(f"For 'train', the 'env' must be 'mindspore' or 'gymnasium', but got {env_kind!r}.")
    if transitions and buffer_kind != "device":
        raise ValueError(f"For 'train', a TransitionReplayBuffer entry (n-step returns) needs the 'buffer' "
                         f"'device' (--buffer device), but got {buffer_kind!r}.")
    if transitions and env_kind != "mindspore":
        raise ValueError(f"For 'train', a TransitionReplayBuffer entry (n-step returns) needs the 'env' "
                         f"'mindspore' (--env mindspore: CartPoles with next-step autoreset), but got {env_kind!r}.")


def build_agent(config: dict[str, Any], buffer_kind: str = "device", env_kind: str = "mindspore",
                seed: int = 0) -> DQNAgent:
    """Build networks, buffer, collect and learn graphs, the fused loop and the evaluators from ``config``.

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
            run (see :func:`~mindspore_rl_buffer.apps.dqn.config.check_config`), or a
            TransitionReplayBuffer entry, or one with ``replace: False``, comes with the numpy buffer
            (or, the former, with gymnasium).
        ImportError: If ``env_kind='gymnasium'`` and gymnasium is not installed.
    """
    entry = check_config(config)
    check_kinds(buffer_kind, env_kind, entry.transitions)
    if buffer_kind == "numpy" and not entry.replace:
        raise ValueError("For 'train', the replay buffer's 'replace' must be True (or left out) with the numpy buffer "
                         "(--buffer numpy), which samples with replacement only, but got False.")

    def get(section: str, key: str) -> Any:
        return setting(config, section, key)

    num_envs, max_episode_steps = get("environment", "num_envs"), get("environment", "max_episode_steps")
    eval_episodes = get("trainer", "eval_episodes")
    gym_envs = make_gym_envs(num_envs + eval_episodes, seed) if env_kind == "gymnasium" else None

    ms.set_seed(seed)
    hidden = tuple(get("policy", "hidden_sizes"))
    q_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    target_net = QNetwork(OBSERVATION_SIZE, NUM_ACTIONS, hidden)
    copy_weights(q_net, target_net)
    for parameter in target_net.get_parameters():
        parameter.requires_grad = False
    optimizer = Adam(q_net.trainable_params(), learning_rate=float(get("learner", "learning_rate")))
    loss_net = DQNLoss(q_net, target_net, get("learner", "gamma"), get("learner", "double_dqn"),
                       get("learner", "huber_delta"), discounted=entry.transitions)
    # A ShardedReplayBuffer entry makes this a data-parallel learner on every msrun rank: the
    # same initial weights (same seed), averaged gradients, and each rank's own environments.
    buffer = create_buffer(config["replay_buffer"]) if buffer_kind == "device" else None
    world_size, rank = ranks(buffer)
    update = Update(loss_net, optimizer, get("learner", "target_sync_period"), world_size)
    policy = EpsilonGreedy(q_net, get("policy", "epsilon_start"), get("policy", "epsilon_end"),
                           get("policy", "epsilon_decay_steps"))

    steps_per_call, calls = learn_calls(buffer, get("trainer", "learn_steps_per_collect"))
    if buffer is not None:
        learn = LearnStep(buffer, update, steps_per_call)
    else:
        buffer = NumpyReplayBuffer(entry.sample_size, entry.capacity, COLUMN_SHAPES, COLUMN_TYPES, seed=seed)

        def learn() -> Tensor:
            return update(*(Tensor(column) for column in buffer.sample()))

    if env_kind == "gymnasium":
        collector: Collector = GymCollector(policy, gym_envs[:num_envs], buffer)
        greedy = GreedyAction(q_net)

        def evaluate() -> np.ndarray:
            return evaluate_gymnasium(greedy, gym_envs[num_envs:])

        return DQNAgent(q_net, target_net, policy, update, buffer, learn, collector, evaluate, learn_calls=calls)

    autoreset_mode = "next_step" if entry.transitions else "same_step"
    act = ActStep(policy, CartPole(num_envs, max_episode_steps, seed=None if world_size == 1 else 1000 + rank,
                                   autoreset_mode=autoreset_mode))
    # One set of evaluation CartPoles for both evaluators: the same generator state, so the host loop's
    # evaluations (EvalStep) and the fused loop's (EvalLoop) play the same start states.
    eval_envs = CartPole(eval_episodes, max_episode_steps)
    eval_step = EvalStep(q_net, eval_envs)

    def evaluate() -> np.ndarray:
        return evaluate_mindspore(eval_step, max_episode_steps)

    if buffer_kind == "numpy":
        return DQNAgent(q_net, target_net, policy, update, buffer, learn, DeviceEnvHostBufferCollector(act, buffer),
                        evaluate, learn_calls=calls)
    collector = DeviceCollector(act, buffer)
    return DQNAgent(q_net, target_net, policy, update, buffer, learn, collector, evaluate,
                    train_loop=TrainLoop(collector.step, learn, single_call=calls == 1),
                    eval_loop=EvalLoop(q_net, eval_envs), learn_calls=calls)
