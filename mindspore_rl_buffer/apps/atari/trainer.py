"""The Atari trainer: the emulator on the host, one :class:`~.graph.TrainStep` launch per agent step.

:func:`build` makes the agent from an algorithm config (``configs/dqn_atari.py``): the buffer
through :func:`mindspore_rl_buffer.create_buffer`, the online and target
:class:`~.networks.NatureQNetwork`, Adam, and the training graph. :func:`train` runs it for
``max_steps`` agent steps: epsilon and beta follow linear schedules computed on the host and
passed to the graph as scalars, and an update runs every ``update_period`` agent steps once
``learning_starts`` rows are stored. :func:`play_random` runs a uniformly random agent through
the same wrappers, the baseline of ``benchmarks/atari_learning.py``.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CHECKPOINT = "dqn_atari.ckpt"
RETURNS = "returns.json"


def is_atari_config(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` is an Atari algorithm config (its ``environment`` section names a ``game``)."""
    environment = config.get("environment") if isinstance(config, Mapping) else None
    return isinstance(environment, Mapping) and "game" in environment


SECTIONS = ("replay_buffer", "learner", "policy", "environment", "trainer")
# The keys of each section but the buffer entry that the trainer reads: (required, optional).
# learner.gamma states the buffer's discount (the buffer computes the n-step returns with its own).
SECTION_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "learner": (("learning_rate", "target_sync_period"),
                ("gamma", "adam_epsilon", "huber_delta", "beta_start", "beta_end")),
    "policy": (("epsilon_start", "epsilon_end", "epsilon_decay_steps"), ()),
    "environment": (("game",), ("terminal_on_life_loss", "max_frames_per_episode", "repeat_action_probability")),
    "trainer": (("max_steps", "learning_starts", "update_period"), ("log_interval", "seed")),
}
# What each value must be: a kind of mindspore_rl_buffer.apps.dqn.config's checks (its KINDS).
SETTING_KINDS: dict[tuple[str, str], str] = {
    ("learner", "learning_rate"): "number>0", ("learner", "target_sync_period"): "int>0",
    ("learner", "gamma"): "fraction", ("learner", "adam_epsilon"): "number>0", ("learner", "huber_delta"): "number>0",
    ("learner", "beta_start"): "number>=0", ("learner", "beta_end"): "number>=0",
    ("policy", "epsilon_start"): "fraction", ("policy", "epsilon_end"): "fraction",
    ("policy", "epsilon_decay_steps"): "int>0",
    ("environment", "game"): "text", ("environment", "terminal_on_life_loss"): "bool",
    ("environment", "max_frames_per_episode"): "int>0", ("environment", "repeat_action_probability"): "fraction",
    ("trainer", "max_steps"): "steps", ("trainer", "learning_starts"): "int>=0", ("trainer", "update_period"): "int>0",
    ("trainer", "log_interval"): "int>0", ("trainer", "seed"): "seed",
}
# The buffer's columns: one agent step of one emulator, as AtariSteps gives it and the graph inserts it.
COLUMN_NAMES = ("observation", "action", "reward", "terminated", "truncated")


def check_config(config: Mapping[str, Any]) -> None:
    """Check the sections and keys of an Atari config that :func:`train` reads, and its buffer entry, before
    anything is built.

    Raises:
        TypeError: If the config or one of its sections is not a dict, or the buffer entry has a value of
            the wrong type (as :func:`mindspore_rl_buffer.config.buffer_arguments`).
        ValueError: Naming every missing section, then every missing key; an unknown entry or key (with
            the closest known one); a buffer entry the library's loader refuses, of ``number`` other than
            1, or of a type other than a ``TransitionReplayBuffer`` (prioritized or not).
    """
    from mindspore_rl_buffer import TransitionReplayBuffer
    from mindspore_rl_buffer._errors import did_you_mean, shown
    from mindspore_rl_buffer.config import buffer_arguments

    if not isinstance(config, Mapping):
        raise TypeError(f"For 'train', an Atari config must be a dict, but got {type(config).__name__}.")
    missing = [section for section in SECTIONS if section not in config]
    if missing:
        raise ValueError(f"For 'train', an Atari config must have the sections {list(SECTIONS)}, but "
                         f"{', '.join(repr(s) for s in missing)} {'is' if len(missing) == 1 else 'are'} missing.")
    for key, value in config.items():
        if key not in SECTIONS:
            raise ValueError(f"For 'train', an Atari config has the sections {list(SECTIONS)}, but got the unknown "
                             f"entry {shown(key)}{did_you_mean(key, SECTIONS) or '.'}")
        if not isinstance(value, Mapping):
            raise TypeError(f"For 'train', the '{key}' section of an Atari config must be a dict, "
                            f"but got {type(value).__name__}.")
    missing = [f"{section}.{key}" for section, (required, _) in SECTION_KEYS.items() for key in required
               if key not in config[section]]
    if missing:
        raise ValueError(f"For 'train', an Atari config must set {', '.join(repr(m) for m in missing)} "
                         f"(see configs/dqn_atari.py).")
    for section, (required, optional) in SECTION_KEYS.items():
        for key in config[section]:
            if key not in required + optional:
                raise ValueError(f"For 'train', the '{section}' section of an Atari config takes "
                                 f"{', '.join(repr(k) for k in required + optional)}, but got the unknown key "
                                 f"{shown(key)}{did_you_mean(key, required + optional) or '.'}")
    _check_values(config)
    buffer_type, number, arguments = buffer_arguments(config["replay_buffer"])
    if number != 1 or not issubclass(buffer_type, TransitionReplayBuffer):
        raise ValueError(f"For 'train', an Atari config's replay buffer must be one TransitionReplayBuffer or "
                         f"PrioritizedTransitionReplayBuffer ('number' 1), but got {number} of "
                         f"'{buffer_type.__name__}'.")
    _check_buffer(config, buffer_type, arguments)
    _check_game(config["environment"]["game"])


def _check_values(config: Mapping[str, Any]) -> None:
    """Every setting of the kind the trainer takes it as (a number spelt as text is named as such)."""
    from mindspore_rl_buffer._errors import shown
    from mindspore_rl_buffer.apps.dqn.config import KINDS, refuse_text_numbers

    for (section, key), kind in SETTING_KINDS.items():
        if key in config[section]:
            value = config[section][key]
            refuse_text_numbers(f"{section}.{key}", value)
            expected, valid = KINDS[kind]
            if not valid(value):
                raise ValueError(f"For 'train', the '{section}.{key}' of an Atari config must be {expected}, "
                                 f"but got {shown(value)}.")


def _check_buffer(config: Mapping[str, Any], buffer_type: type, arguments: Mapping[str, Any]) -> None:
    """The buffer entry holds what the trainer inserts and samples: one emulator's steps, the network's stack,
    the learner's discount, a valid start at the first update; and its constructor accepts it."""
    import mindspore as ms

    from mindspore_rl_buffer._errors import shown
    from mindspore_rl_buffer.apps.atari.env import SCREEN_SIZE
    from mindspore_rl_buffer.apps.dqn.config import argument, check_buildable, check_columns

    check_columns([tuple(shape) for shape in arguments["data_shape"]], arguments["data_type"],
                  ((SCREEN_SIZE, SCREEN_SIZE), (), (), (), ()), (ms.uint8, ms.int32, ms.float32, ms.uint8, ms.uint8),
                  COLUMN_NAMES)
    num_envs, stack_size, n_step, gamma = (argument(buffer_type, arguments, name)
                                           for name in ("num_envs", "stack_size", "n_step", "gamma"))
    if num_envs != 1:
        raise ValueError(f"For 'train', an Atari config's replay buffer must have 'num_envs' 1 (the trainer steps "
                         f"one emulator), but got {shown(num_envs)}.")
    if "gamma" in config["learner"] and gamma != config["learner"]["gamma"]:
        raise ValueError(f"For 'train', an Atari config's replay buffer 'gamma' must equal 'learner.gamma' "
                         f"({config['learner']['gamma']}): the buffer discounts the n-step returns the learner "
                         f"bootstraps from, but got {shown(gamma)}.")
    check_buildable(config["replay_buffer"])  # sizes, stack_size and n_step as the constructor takes them
    # A valid start t has stack_size <= t <= count - 1 - n_step and is not a final row; of two rows one is not.
    rows = stack_size + n_step + 2
    learning_starts = config["trainer"]["learning_starts"]
    if learning_starts < rows:
        raise ValueError(f"For 'train', the 'trainer.learning_starts' of an Atari config must be at least "
                         f"stack_size + n_step + 2 = {rows} agent steps, so that the first update finds a valid "
                         f"start in the buffer, but got {learning_starts}.")


def _check_game(game: str) -> None:
    """The game is one ALE knows (when ale-py is installed; without it, training says how to install it)."""
    from mindspore_rl_buffer.apps.atari.env import MissingAtariError, games

    try:
        known = games()
    except MissingAtariError:
        return
    if game not in known:
        from mindspore_rl_buffer._errors import did_you_mean, shown

        raise ValueError(f"For 'train', the 'environment.game' of an Atari config must be an ALE game such as "
                         f"'Breakout', but got {shown(game)}{did_you_mean(game, known) or '.'}")


def linear(start: float, end: float, steps: int, step: int) -> float:
    """``start`` moving linearly to ``end`` over ``steps`` steps, then ``end``."""
    return end if step >= steps else start + (end - start) * step / max(1, steps)


@dataclass
class Agent:
    """The parts :func:`build` makes."""

    buffer: Any
    q_net: Any
    train_step: Any
    num_actions: int


@dataclass
class Result:
    """What a run did: agent steps, learn steps, seconds, and the finished games' scores."""

    env_steps: int
    learn_steps: int
    wall_time: float
    returns: list[tuple[int, float]] = field(default_factory=list)
    losses: list[tuple[int, float]] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.env_steps / self.wall_time if self.wall_time else 0.0


def build(config: Mapping[str, Any], num_actions: int) -> Agent:
    """The buffer, networks, optimizer and training graph of ``config``."""
    from mindspore_rl_buffer import create_buffer
    from mindspore_rl_buffer.apps.atari.graph import Act, DoubleTarget, Learn, TrainStep, WeightedLoss
    from mindspore_rl_buffer.apps.atari.networks import NatureQNetwork
    from mindspore_rl_buffer.apps.dqn.networks import copy_weights
    from mindspore_rl_buffer.apps.dqn.optimizer import Adam

    buffer = create_buffer(config["replay_buffer"])
    learner = config["learner"]
    stack_size = buffer.stack_size
    frame_shape = tuple(buffer.shapes[0][1:])  # (num_envs, H, W) per time step
    q_net = NatureQNetwork(num_actions, stack_size, frame_shape)
    target_net = NatureQNetwork(num_actions, stack_size, frame_shape)
    copy_weights(q_net, target_net)
    for target in target_net.get_parameters():
        target.requires_grad = False
    # The app's Adam: mindspore.nn.Adam builds a deprecated FusedSparseAdam primitive for sparse gradients.
    optimizer = Adam(q_net.trainable_params(), learning_rate=learner["learning_rate"],
                     eps=learner.get("adam_epsilon", 1.5e-4))
    loss_net = WeightedLoss(q_net, learner.get("huber_delta", 1.0))
    learn = Learn(buffer, loss_net, DoubleTarget(q_net, target_net), optimizer, learner["target_sync_period"])
    act = Act(q_net, num_actions, stack_size, frame_shape)
    return Agent(buffer, q_net, TrainStep(buffer, learn, act), num_actions)


def atari_steps(config: Mapping[str, Any], seed: int) -> Any:
    """The config's game as :class:`~.env.AtariSteps`, first reset with ``seed``."""
    from mindspore_rl_buffer.apps.atari.env import MAX_FRAMES_PER_EPISODE, REPEAT_ACTION_PROBABILITY, AtariSteps

    environment = config["environment"]
    return AtariSteps(environment["game"], seed, environment.get("terminal_on_life_loss", True),
                      environment.get("max_frames_per_episode", MAX_FRAMES_PER_EPISODE),
                      environment.get("repeat_action_probability", REPEAT_ACTION_PROBABILITY))


def train(config: Mapping[str, Any], *, max_steps: int | None = None, seed: int | None = None,
          log: Callable[[str], None] | None = print, deadline: float | None = None) -> tuple[Result, Agent]:
    """Train DQN on the config's game for ``max_steps`` agent steps (default: the config's), or until
    the wall-clock time ``deadline`` (seconds since the epoch, checked every 100 steps) if given."""
    import mindspore as ms
    from mindspore import Tensor

    trainer, policy, learner = config["trainer"], config["policy"], config["learner"]
    seed = trainer.get("seed", 0) if seed is None else seed
    max_steps = trainer["max_steps"] if max_steps is None else max_steps
    ms.set_seed(seed)
    steps = atari_steps(config, seed)
    agent = build(config, steps.num_actions)
    learning_starts, update_period = trainer["learning_starts"], trainer["update_period"]
    log_interval = trainer.get("log_interval", 1000)
    eps = (policy["epsilon_start"], policy["epsilon_end"], policy["epsilon_decay_steps"])
    betas = (learner.get("beta_start", 0.4), learner.get("beta_end", 1.0))
    one, zero = Tensor(1, ms.int32), Tensor(0, ms.int32)
    yes, no = Tensor(True), Tensor(False)
    result = Result(0, 0, 0.0)
    action = int(np.random.default_rng(seed).integers(steps.num_actions))
    observation, row_starts = steps.observation, True
    start, loss_sum, losses = time.perf_counter(), 0.0, 0
    done = 0
    for step in range(max_steps):
        if deadline is not None and step % 100 == 0 and time.time() > deadline:
            break
        nxt = steps.step(action)
        learns = step + 1 >= learning_starts and (step + 1) % update_period == 0
        beta = linear(betas[0], betas[1], max_steps, step)
        next_action, loss = agent.train_step(
            Tensor(observation[None]), Tensor(np.array([action], np.int32)),
            Tensor(np.array([nxt.reward], np.float32)), Tensor(np.array([nxt.terminated], np.uint8)),
            Tensor(np.array([nxt.truncated], np.uint8)), yes if row_starts else no, Tensor(nxt.observation[None]),
            yes if nxt.starts else no, Tensor(linear(*eps, step), ms.float32), Tensor(beta, ms.float32),
            one if learns else zero)
        action = int(next_action.asnumpy()[0])
        observation, row_starts = nxt.observation, nxt.starts
        if learns:
            result.learn_steps += 1
            loss_sum, losses = loss_sum + float(loss.asnumpy()), losses + 1
        if (step + 1) % log_interval == 0:
            if losses:
                result.losses.append((step + 1, loss_sum / losses))
            if log is not None:
                recent = [score for _, score in steps.returns[-10:]]
                mean = f"{np.mean(recent):.1f}" if recent else "-"
                log(f"step {step + 1}: {len(steps.returns)} games, mean score of the last 10 {mean}, "
                    f"mean loss {loss_sum / max(1, losses):.4f}, {(step + 1) / (time.perf_counter() - start):.0f} "
                    f"steps/s")
            loss_sum, losses = 0.0, 0
        done = step + 1
    result.env_steps, result.wall_time = done, time.perf_counter() - start
    result.returns = list(steps.returns)
    steps.close()
    return result, agent


def play_random(config: Mapping[str, Any], max_steps: int, seed: int) -> Result:
    """A uniformly random agent through the same wrappers for ``max_steps`` agent steps."""
    steps = atari_steps(config, seed)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(max_steps):
        steps.step(int(rng.integers(steps.num_actions)))
    result = Result(max_steps, 0, time.perf_counter() - start, list(steps.returns))
    steps.close()
    return result


def save_run(result: Result, agent: Agent, out: str | Path) -> Path:
    """Write the online network's checkpoint and the scores to ``out``; the checkpoint's path."""
    import mindspore as ms

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    ms.save_checkpoint(agent.q_net, str(folder / CHECKPOINT))
    (folder / RETURNS).write_text(json.dumps({"env_steps": result.env_steps, "learn_steps": result.learn_steps,
                                              "wall_time": result.wall_time, "returns": result.returns,
                                              "losses": result.losses}, indent=1) + "\n")
    return folder / CHECKPOINT
