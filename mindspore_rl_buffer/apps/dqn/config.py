"""The DQN trainer's config checks: every section and setting it reads, the environment, the buffer's columns.

:func:`check_config` runs before any network is built and names everything missing at once, so
a config with only a ``replay_buffer`` entry, or a YAML file that copies the ``.py`` layout
(a top-level ``algorithm_config:`` key), gets one clear error instead of a ``KeyError`` from
deep in the trainer. :func:`setting` reads a checked setting or its default.

The ``replay_buffer`` entry is read only through the library's config loader,
:func:`mindspore_rl_buffer.config.buffer_arguments`, never through its raw keys, so every
form the loader accepts works here: flat or nested under ``params``, ``type`` a class or its
name, dtypes MindSpore dtypes or their names.

A :class:`~mindspore_rl_buffer.TransitionReplayBuffer` entry (``configs/dqn_nstep.py``)
makes the trainer learn from n-step returns: its columns are one environment step,
``(observation, action, reward, terminated, truncated)``, and its ``num_envs`` and ``gamma``
must be the environment's and the learner's.
"""
from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mindspore as ms

from mindspore_rl_buffer import PriorityReplayBuffer, TransitionReplayBuffer
from mindspore_rl_buffer._errors import did_you_mean, shown
from mindspore_rl_buffer._validation import SEED_END, check_size
from mindspore_rl_buffer.apps.dqn.cartpole import MAX_EPISODE_STEPS, NUM_ACTIONS, OBSERVATION_SIZE
from mindspore_rl_buffer.apps.dqn.schedule import MAX_STEPS, first_learning
from mindspore_rl_buffer.config import buffer_arguments, create_buffer
from mindspore_rl_buffer.config_yaml import yaml_number_spelling
from mindspore_rl_buffer.specs import TensorSpec, check_batch_bytes

SECTIONS = ("replay_buffer", "learner", "policy", "environment", "trainer")
ENVIRONMENT = "CartPole-v1"
# One transition: (state, action, reward, next_state, terminated).
COLUMNS = ("state", "action", "reward", "next_state", "terminated")
COLUMN_SHAPES = ((OBSERVATION_SIZE,), (1,), (1,), (OBSERVATION_SIZE,), (1,))
COLUMN_TYPES = (ms.float32, ms.int32, ms.float32, ms.float32, ms.float32)
# One environment step of a TransitionReplayBuffer entry (gymnasium's next-step autoreset rows).
STEP_COLUMNS = ("observation", "action", "reward", "terminated", "truncated")
STEP_SHAPES = ((OBSERVATION_SIZE,), (), (), (), ())
STEP_TYPES = (ms.float32, ms.int32, ms.float32, ms.uint8, ms.uint8)

# The settings the trainer reads: (section, key) -> (kind, default); no default means required.
# Each kind is a range (see KINDS); NaN and infinities are in none of them.
_REQUIRED = object()
SETTINGS: dict[tuple[str, str], tuple[str, Any]] = {
    ("learner", "gamma"): ("fraction", _REQUIRED),
    ("learner", "learning_rate"): ("number>0", _REQUIRED),
    ("learner", "target_sync_period"): ("int>0", _REQUIRED),
    ("learner", "double_dqn"): ("bool", True),
    ("learner", "huber_delta"): ("number>0", 1.0),
    ("policy", "hidden_sizes"): ("widths", (128, 128)),
    ("policy", "epsilon_start"): ("fraction", _REQUIRED),
    ("policy", "epsilon_end"): ("fraction", _REQUIRED),
    ("policy", "epsilon_decay_steps"): ("int>0", _REQUIRED),
    ("environment", "num_envs"): ("envs", _REQUIRED),
    ("environment", "max_episode_steps"): ("int>0", MAX_EPISODE_STEPS),
    ("trainer", "max_steps"): ("steps", _REQUIRED),
    ("trainer", "learning_starts"): ("int>=0", _REQUIRED),
    ("trainer", "learn_steps_per_collect"): ("int>0", _REQUIRED),
    ("trainer", "eval_interval"): ("int>0", _REQUIRED),
    ("trainer", "eval_episodes"): ("envs", _REQUIRED),
    ("trainer", "eval_starts"): ("int>=0", 0),
    ("trainer", "solve_threshold"): ("number", 475.0),
    ("trainer", "solve_evaluations"): ("int>0", 3),
    ("trainer", "log_interval"): ("int>0", 50),
    ("trainer", "seed"): ("seed", 0),
}
# The keys each section may hold: its settings, and the environment's name.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    section: (*(key for (where, key) in SETTINGS if where == section), *(("name",) if section == "environment" else ()))
    for section in SECTIONS[1:]}
# At most this many training environments, and evaluation episodes (each plays in an environment of
# its own): every one is a row of the device state and of each collect's batch, and gymnasium builds
# an object per environment. 100,000 is far past what CartPole needs (8 and 100 in configs/dqn.py);
# a larger count is a typo that would allocate gigabytes before failing.
MAX_ENVS = 100_000
# The widest hidden layer: a 16384 x 16384 float32 Dense weight is already 1 GiB, held by the online
# and the target network and twice more by Adam's moments.
MAX_WIDTH = 16_384
# All the network's weights together: as many as one such layer (a deep stack of wide layers would
# otherwise pass the width check and allocate tens of GiB before failing).
MAX_WEIGHTS = MAX_WIDTH**2


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    """A real number other than NaN and the infinities, and not an int too large for a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # the trainer takes the value as a float
        return False


def _is_widths(value: Any) -> bool:
    if not (isinstance(value, (list, tuple)) and len(value) > 0
            and all(_is_int(width) and 1 <= width <= MAX_WIDTH for width in value)):
        return False
    sizes = [OBSERVATION_SIZE, *value, NUM_ACTIONS]
    return sum(a * b for a, b in zip(sizes, sizes[1:])) <= MAX_WEIGHTS


# kind -> (what it must be, as an error message says it; the check).
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    # The loops count steps, learn steps and the target sync in int32 tensors: a larger value would wrap.
    "int>0": ("an int in [1, 2**31)", lambda value: _is_int(value) and 1 <= value < 2**31),
    "int>=0": ("an int in [0, 2**31)", lambda value: _is_int(value) and 0 <= value < 2**31),
    "envs": (f"an int in [1, {MAX_ENVS}]", lambda value: _is_int(value) and 1 <= value <= MAX_ENVS),
    # The bound of --max-steps (see schedule.MAX_STEPS).
    "steps": (f"an int in [1, {MAX_STEPS}] (environment steps)",
              lambda value: _is_int(value) and 1 <= value <= MAX_STEPS),
    # What MindSpore's random operators take (it also seeds numpy and gymnasium).
    "seed": ("an int in [0, 2**31)", lambda value: _is_int(value) and 0 <= value < SEED_END),
    "fraction": ("a number in [0, 1]", lambda value: _is_finite(value) and 0 <= value <= 1),
    "number>0": ("a finite number > 0", lambda value: _is_finite(value) and value > 0),
    "number>=0": ("a finite number >= 0", lambda value: _is_finite(value) and value >= 0),
    "number": ("a finite number", _is_finite),
    "text": ("a non-empty str", lambda value: isinstance(value, str) and value.strip() != ""),
    "bool": ("a bool", lambda value: isinstance(value, bool)),
    "widths": (f"a non-empty list of ints in [1, {MAX_WIDTH}] (the hidden layers' widths) with at most "
               f"2**28 weights in all layers together (1 GiB of float32)", _is_widths),
}


@dataclass(frozen=True)
class BufferEntry:
    """What the trainer takes from a checked ``replay_buffer`` entry.

    Args:
        buffer_type (type): The buffer class the entry names.
        capacity (int): Items the buffer holds.
        sample_size (int): Items per sample.
        n_step (int): Steps per return of a :class:`~mindspore_rl_buffer.TransitionReplayBuffer`
            (its samples hold n-step returns and their discounts); ``None`` for a buffer of
            five-column transitions. Default: ``None``.
        replace (bool): Whether a sample draws with replacement. Default: ``True``.
    """

    buffer_type: type
    capacity: int
    sample_size: int
    n_step: int | None = None
    replace: bool = True

    @property
    def transitions(self) -> bool:
        """Whether the buffer stores environment steps and samples n-step transitions."""
        return self.n_step is not None


def _names(types: Any) -> list[str]:
    return [str(dtype).lower() for dtype in types]


def _check_sections(config: Any) -> None:
    if not isinstance(config, Mapping):
        raise TypeError(f"For 'train', the 'algorithm_config' must be a dict, but got {type(config).__name__}.")
    missing = [section for section in SECTIONS if section not in config]
    if missing:
        hint = ""
        if "algorithm_config" in config:
            hint = (" A YAML or JSON config's top level is the algorithm_config itself: remove the "
                    "'algorithm_config:' line and un-indent what was under it.")
        # A YAML key may be a number, a bool or null: ordered by their text, never compared with the names.
        unknown = [key for key in config if key not in SECTIONS and key != "algorithm_config"]
        if unknown:
            hint += (f" {'It has the unknown entry' if len(unknown) == 1 else 'It has the unknown entries'} "
                     f"{', '.join(shown(key) for key in unknown)}.")
        raise ValueError(f"For 'train', the 'algorithm_config' must have the entries {list(SECTIONS)}, but "
                         f"{', '.join(repr(s) for s in missing)} {'is' if len(missing) == 1 else 'are'} missing "
                         f"(got {sorted(config, key=str)}).{hint}")
    for section in SECTIONS:
        if not isinstance(config[section], Mapping):
            raise TypeError(f"For 'train', the '{section}' entry must be a dict, "
                            f"but got {type(config[section]).__name__}.")
    # A misspelt key would otherwise leave its setting at the default without a word.
    for key in config:
        if key not in SECTIONS:
            raise ValueError(f"For 'train', the 'algorithm_config' has the entries {list(SECTIONS)}, but got "
                             f"the unknown entry {shown(key)}{did_you_mean(key, SECTIONS) or '.'}")
    for section, keys in SECTION_KEYS.items():
        for key in config[section]:
            if key not in keys:
                raise ValueError(f"For 'train', the '{section}' entry takes {', '.join(repr(k) for k in keys)}, "
                                 f"but got the unknown key {shown(key)}{did_you_mean(key, keys) or '.'}")


def refuse_text_numbers(where: str, value: Any) -> None:
    """Refuse text that spells a number (``'1e-3'``, as PyYAML reads a plain ``1e-3``), in ``value`` or its list."""
    for i, item in enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]:
        spelling = yaml_number_spelling(item)
        if spelling is not None:
            name = where if i is None else f"{where}[{i}]"
            raise ValueError(f"For 'train', the '{name}' must be a number, but got the text {item!r}: YAML 1.1 "
                             f"(PyYAML) reads {item} as text, not a number; write {spelling}.")


def _check_settings(config: Mapping[str, Any]) -> None:
    for section in SECTIONS:
        for key, value in config[section].items():
            refuse_text_numbers(f"{section}.{key}", value)
        if section == "replay_buffer" and isinstance(config[section].get("params"), Mapping):
            for key, value in config[section]["params"].items():
                refuse_text_numbers(f"{section}.params.{key}", value)
    missing = [f"{section}.{key}" for (section, key), (_, default) in SETTINGS.items()
               if default is _REQUIRED and key not in config[section]]
    if missing:
        raise ValueError(f"For 'train', the config must set {', '.join(repr(m) for m in missing)} "
                         f"(see configs/dqn.py).")
    for (section, key), (kind, _) in SETTINGS.items():
        expected, valid = KINDS[kind]
        if key in config[section] and not valid(config[section][key]):
            raise ValueError(f"For 'train', the '{section}.{key}' must be {expected}, "
                             f"but got {shown(config[section][key])}.")


def check_columns(shapes: list[tuple[int, ...]], types: list[Any], expected_shapes: tuple, expected_types: tuple,
                   names: tuple[str, ...]) -> None:
    if shapes != list(expected_shapes):
        raise ValueError(f"For 'train', the replay buffer's 'data_shape' must be {list(expected_shapes)} "
                         f"({', '.join(names)}), but got {shapes}.")
    if list(types) != list(expected_types):
        raise ValueError(f"For 'train', the replay buffer's 'data_type' must be {_names(expected_types)} "
                         f"({', '.join(names)}), but got {_names(types)}.")


def argument(buffer_type: type, arguments: Mapping[str, Any], name: str) -> Any:
    """A constructor argument of the entry, or the constructor's default."""
    return arguments.get(name, inspect.signature(buffer_type).parameters[name].default)


def _check_transitions(config: Mapping[str, Any], buffer_type: type, arguments: Mapping[str, Any]) -> int:
    """The n-step entry agrees with the environment, the learner and the warm-up; returns ``n_step``."""
    values = {name: argument(buffer_type, arguments, name) for name in ("num_envs", "gamma", "stack_size", "n_step")}
    num_envs = setting(config, "environment", "num_envs")
    if values["num_envs"] != num_envs:
        raise ValueError(f"For 'train', the replay buffer's 'num_envs' must equal 'environment.num_envs' "
                         f"({num_envs}): each row holds one step of every environment, but got "
                         f"{shown(values['num_envs'])}.")
    gamma = setting(config, "learner", "gamma")
    if values["gamma"] != gamma:
        raise ValueError(f"For 'train', the replay buffer's 'gamma' must equal 'learner.gamma' ({gamma}): the "
                         f"buffer discounts the n-step returns and the learner bootstraps with the discount it "
                         f"samples, but got {shown(values['gamma'])}.")
    if values["stack_size"] != 1:
        raise ValueError(f"For 'train', the replay buffer's 'stack_size' must be 1 (the Q-network takes one "
                         f"CartPole observation), but got {shown(values['stack_size'])}.")
    n_step = values["n_step"]
    if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step < 1:
        raise ValueError(f"For 'train', the replay buffer's 'n_step' must be an int > 0, but got {shown(n_step)}.")
    # A sample needs a valid start: 2 interior rows (n_step + 3 steps stored) always hold one, since a
    # final row follows a row with a flag, which is not final (see mindspore_rl_buffer.ops.transition).
    steps = n_step + 3
    if arguments["capacity"] // num_envs < steps:
        raise ValueError(f"For 'train', the replay buffer's 'capacity' must hold n_step + 3 = {steps} steps of "
                         f"{num_envs} environments ({steps * num_envs} rows), but got {arguments['capacity']}.")
    learning_starts = setting(config, "trainer", "learning_starts")
    if first_learning(learning_starts, num_envs) < steps:
        raise ValueError(f"For 'train', the 'trainer.learning_starts' must be at least {(steps - 1) * num_envs + 1} "
                         f"with a TransitionReplayBuffer of n_step {n_step} and {num_envs} environments, so that "
                         f"the first sample finds a valid start (n_step + 3 steps stored), but got {learning_starts}.")
    # One sample serves a collect step's learn steps (LearnStep): a batch that large must be possible.
    what = "trainer.learn_steps_per_collect * replay_buffer.sample_size"
    batch = check_size("train", what, setting(config, "trainer", "learn_steps_per_collect") * arguments["sample_size"])
    check_batch_bytes("train", what, batch, [TensorSpec((OBSERVATION_SIZE,), ms.float32, "observation")], 2)
    return n_step


def _check_first_sample(config: Mapping[str, Any], sample_size: int) -> None:
    """A buffer sampled without replacement holds ``sample_size`` items when learning starts."""
    num_envs = setting(config, "environment", "num_envs")
    learning_starts = setting(config, "trainer", "learning_starts")
    stored = first_learning(learning_starts, num_envs) * num_envs
    if stored < sample_size:
        raise ValueError(f"For 'train', the replay buffer's 'sample_size' must be at most the {stored} transitions "
                         f"stored when learning starts ('trainer.learning_starts' {learning_starts}, "
                         f"{num_envs} environments) when it samples without replacement ('replace': False), but "
                         f"got {sample_size}: raise 'learning_starts' to at least {sample_size}.")


def check_buildable(entry: Mapping[str, Any]) -> None:
    """The buffer's constructor accepts the entry: it is built here (its columns' memory is
    allocated only when first written), so every rule of the constructor applies, by its own code."""
    try:
        create_buffer(entry)
    except (TypeError, ValueError) as error:
        raise type(error)(f"For 'train', the replay buffer cannot be built from its entry: {error}") from None


def check_config(config: Mapping[str, Any]) -> BufferEntry:
    """Check what the DQN trainer relies on: its sections and settings, the environment, the buffer's columns.

    Args:
        config (dict): The ``algorithm_config`` (see ``configs/dqn.py``); it is not changed.

    Returns:
        BufferEntry, the replay buffer entry as the trainer uses it.

    Raises:
        TypeError: If the config or one of its sections is not a dict, or the buffer entry
            has a value of the wrong type (as ``mindspore_rl_buffer.config.buffer_arguments``).
        ValueError: Naming every missing section (and, for a top-level ``algorithm_config`` key,
            how to fix a YAML file), every missing setting, a setting or buffer key that is text
            spelling a number (``'1e-3'``, as PyYAML reads a plain ``1e-3``; the message says how
            to write it), a setting of the wrong kind or out of
            its range (see ``SETTINGS``: ``gamma`` and the epsilons in [0, 1], a learning rate
            and ``huber_delta`` finite and > 0, ``hidden_sizes`` a non-empty list of ints in
            [1, 16384], ``num_envs`` and ``eval_episodes`` at most 100,000, ``max_steps`` at most
            10**9, as ``--max-steps``; NaN never), an
            environment other than CartPole-v1, a buffer entry the library's loader refuses,
            a ``sample_size`` above the buffer's ``capacity``,
            an entry the buffer's constructor refuses (the buffer is built to check it: a
            ``capacity`` that is not a multiple of ``num_envs``, a reserved or taken column
            name), ``number`` other than 1, a ``PriorityReplayBuffer`` (its ``sample`` returns weights
            and slots too), or buffer columns other than (state, action, reward, next_state,
            terminated); for a ``TransitionReplayBuffer``, columns other than (observation,
            action, reward, terminated, truncated), a ``num_envs`` or ``gamma`` other than
            ``environment.num_envs`` and ``learner.gamma``, a ``stack_size`` other than 1, or
            a ``capacity`` or ``trainer.learning_starts`` of fewer than ``n_step + 3`` steps.

    Examples:
        >>> import copy
        >>> from mindspore_rl_buffer.apps.dqn.config import check_config
        >>> from mindspore_rl_buffer.configs.dqn import algorithm_config
        >>> config = copy.deepcopy(algorithm_config)
        >>> entry = check_config(config)
        >>> entry.buffer_type.__name__, entry.capacity
        ('ReplayBuffer', 100000)
        >>> config['replay_buffer'] = {'number': 1, 'type': 'ReplayBuffer', 'params': {
        ...     'capacity': 256, 'sample_size': 32, 'data_shape': [(4,), (1,), (1,), (4,), (1,)],
        ...     'data_type': ['float32', 'int32', 'float32', 'float32', 'float32']}}
        >>> check_config(config).capacity
        256
        >>> from mindspore_rl_buffer.configs.dqn_nstep import algorithm_config as nstep_config
        >>> entry = check_config(nstep_config)
        >>> entry.buffer_type.__name__, entry.n_step
        ('TransitionReplayBuffer', 3)
        >>> check_config({'replay_buffer': config['replay_buffer']})
        Traceback (most recent call last):
        ...
        ValueError: For 'train', the 'algorithm_config' must have the entries [...], but 'learner', ... are missing ...
        >>> config['environment'] = {'name': 'Pendulum-v1', 'num_envs': 8}
        >>> check_config(config)
        Traceback (most recent call last):
        ...
        ValueError: For 'train', the 'environment.name' must be 'CartPole-v1' ..., but got 'Pendulum-v1'.
    """
    _check_sections(config)
    _check_settings(config)
    name = config["environment"].get("name", ENVIRONMENT)
    if name != ENVIRONMENT:
        raise ValueError(f"For 'train', the 'environment.name' must be '{ENVIRONMENT}' (the only environment "
                         f"implemented), but got {shown(name)}.")
    buffer_type, number, arguments = buffer_arguments(config["replay_buffer"])
    if number != 1:
        raise ValueError(f"For 'train', the replay buffer's 'number' must be 1, but got {number}.")
    if issubclass(buffer_type, PriorityReplayBuffer):
        raise ValueError(f"For 'train', the replay buffer's 'type' must be a buffer whose sample() returns "
                         f"the columns, such as 'ReplayBuffer' or 'ShardedReplayBuffer', but got "
                         f"'{buffer_type.__name__}'.")
    if arguments["sample_size"] > arguments["capacity"]:  # a batch larger than what the buffer can ever hold
        raise ValueError(f"For 'train', the replay buffer's 'sample_size' must be at most its 'capacity' "
                         f"({arguments['capacity']}), but got {arguments['sample_size']}.")
    replace = arguments.get("replace", True)
    if replace is False:
        _check_first_sample(config, arguments["sample_size"])
    shapes = [tuple(shape) for shape in arguments["data_shape"]]
    if issubclass(buffer_type, TransitionReplayBuffer):
        check_columns(shapes, arguments["data_type"], STEP_SHAPES, STEP_TYPES, STEP_COLUMNS)
        n_step = _check_transitions(config, buffer_type, arguments)
        check_buildable(config["replay_buffer"])
        return BufferEntry(buffer_type, arguments["capacity"], arguments["sample_size"], n_step)
    check_columns(shapes, arguments["data_type"], COLUMN_SHAPES, COLUMN_TYPES, COLUMNS)
    check_buildable(config["replay_buffer"])
    return BufferEntry(buffer_type, arguments["capacity"], arguments["sample_size"], replace=replace is not False)


def setting(config: Mapping[str, Any], section: str, key: str) -> Any:
    """The value of ``section.key`` in a checked ``config``, or its default (see :data:`SETTINGS`)."""
    _, default = SETTINGS[(section, key)]
    return config[section].get(key, default)
