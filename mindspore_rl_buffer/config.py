"""Algorithm config files and the buffers they declare, in every form MindSpore RL wrote them.

A buffer entry, flat, as MindSpore RL 0.6's dqn config wrote it::

    'replay_buffer': {'number': 1, 'type': ReplayBuffer, 'capacity': 100000,
                      'data_shape': [(4,), (1,), (1,), (4,)],
                      'data_type': [ms.float32, ms.int32, ms.float32, ms.float32],
                      'sample_size': 64}

or with ``params``, as MindSpore RL 0.7 writes it, the shapes and dtypes either inside
``params`` or at the top level of the entry (where its sessions put them)::

    {'number': 1, 'type': UniformReplayBuffer, 'params': {'capacity': 100000, 'sample_size': 64},
     'data_shape': [...], 'data_type': [...]}

``number > 1`` (at most :data:`MAX_NUMBER`, 1024) gives an ``nn.CellList`` of independent
buffers; ``sample_size`` defaults to 1 (as MindSpore RL's loader has it). An entry without
shapes takes them from an environment's spaces with ``create_buffer(entry, env=...)`` (see
:mod:`.spaces`). A config's ``replay_buffer`` may also be
``{'multi_type_replaybuffer': True, 'name': entry, ...}``, which :func:`create_buffer` turns
into a dict of buffers by name.

The keys a type accepts are its constructor's arguments (``shapes``/``types`` spelt
``data_shape``/``data_type``): ``PriorityReplayBuffer`` also requires ``alpha``; it and
``ReservoirReplayBuffer`` take ``seed``/``seed0``/``seed1`` and ``names`` but not ``ordered``
or ``replace``; ``TransitionReplayBuffer`` takes ``num_envs``, ``stack_size``, ``n_step``,
``gamma``, ``names`` and ``seed``, and ``PrioritizedTransitionReplayBuffer`` those and ``alpha``.
Reading an entry is a pure function (:func:`buffer_arguments`) from the dict to validated
constructor arguments; it never changes the caller's dict.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from mindspore import nn

from mindspore_rl_buffer import _errors, _validation
from mindspore_rl_buffer._validation import check_capacity, check_exponent, check_ring_length, check_size
from mindspore_rl_buffer.compat import UniformReplayBuffer
from mindspore_rl_buffer.core import RingBuffer, reserved_names, taken_names
from mindspore_rl_buffer.priority_replay_buffer import PriorityReplayBuffer
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.reservoir_replay_buffer import ReservoirReplayBuffer
from mindspore_rl_buffer.sharded import ShardedReplayBuffer
from mindspore_rl_buffer.spaces import space_columns
from mindspore_rl_buffer.specs import (
    TensorSpec,
    check_batch_bytes,
    check_column_bytes,
    check_column_names,
    check_transition_layout,
    check_without_replacement,
    column_specs,
    transition_names,
)
from mindspore_rl_buffer.transition import TransitionReplayBuffer

# Buffer classes by name, for ``'type'`` given as a string.
BUFFER_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (ReplayBuffer, UniformReplayBuffer, PriorityReplayBuffer, ReservoirReplayBuffer)
}

_REQUIRED = ("capacity", "data_shape", "data_type")
_OUTER = ("number", "type", "params")
# Keys MindSpore RL's loader reads from the top level of an entry even beside `params`.
_BESIDE_PARAMS = ("data_shape", "data_type")
_MULTI = "multi_type_replaybuffer"
# Constructor arguments under the names config files give them; `dtypes` is an alias of `types`.
_CONFIG_NAMES = {"shapes": "data_shape", "types": "data_type"}
_CONSTRUCTOR_NAMES = {value: key for key, value in _CONFIG_NAMES.items()}
_NOT_CONFIG_KEYS = ("dtypes", "batch_size")
# The most buffers one entry may declare. MindSpore RL's configs give `number` 1, or one
# buffer per actor; each buffer is a Cell with its own Parameters and compiled graphs, so a
# mistyped count would go on building (10**11 held 1.5 GB after 25 s). 1024 is far above one
# buffer per actor of any single-host job, and refuses such a count before anything is built.
MAX_NUMBER = 1024


def register_buffer_type(cls: type) -> type:
    """Make ``cls`` available to :func:`create_buffer` under its class name.

    A class registered again under its name replaces the earlier one (a class defined anew, as a
    notebook's cell run twice defines it), except for the library's own buffers: a class of
    another module named ``ReplayBuffer`` would change what every config naming it builds.

    Raises:
        TypeError: If ``cls`` is not an ``nn.Cell`` class.
        ValueError: If its name is one of the library's buffers and it is another class.
    """
    if not (isinstance(cls, type) and issubclass(cls, nn.Cell)):
        got = cls.__name__ if isinstance(cls, type) else type(cls).__name__
        raise TypeError(f"For 'register_buffer_type', 'cls' must be a buffer class (an nn.Cell), but got {got}.")
    own = BUFFER_TYPES.get(cls.__name__)
    if (own is not None and own.__module__.partition(".")[0] == "mindspore_rl_buffer"
            and (own.__module__, own.__qualname__) != (cls.__module__, cls.__qualname__)):
        raise ValueError(f"For 'register_buffer_type', the name {cls.__name__} is the library's "
                         f"{own.__module__}.{own.__qualname__}, but got the class {cls.__module__}.{cls.__qualname__}: "
                         f"give your class another name, or pass the class itself as 'type'.")
    BUFFER_TYPES[cls.__name__] = cls
    return cls


def _config_keys(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys an entry of type ``cls`` requires and those it may add, from its constructor."""
    parameters = [parameter for parameter in inspect.signature(cls).parameters.values()
                  if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
                  and parameter.name not in _NOT_CONFIG_KEYS]
    names = [_CONFIG_NAMES.get(p.name, p.name) for p in parameters]
    required = [name for name, p in zip(names, parameters) if p.default is p.empty and name != "sample_size"]
    optional = [name for name in names if name not in required and name not in _REQUIRED]
    return tuple(dict.fromkeys([*_REQUIRED, *required])), tuple(optional)


def _buffer_type(value: Any) -> type:
    """The class of ``'type'``: any ``nn.Cell`` class given as a class (a user's own buffer, as MindSpore
    Reinforcement's loader built MAPPO's and Dreamer's), or the name of a registered one."""
    if isinstance(value, type) and issubclass(value, nn.Cell):
        return value
    if isinstance(value, str) and value in BUFFER_TYPES:
        return BUFFER_TYPES[value]
    name = value.__name__ if isinstance(value, type) else (
        value if isinstance(value, str) and len(value) <= _errors.QUOTED_CHARACTERS else _errors.shown(value))
    raise ValueError(f"For 'create_buffer', 'type' must be a buffer class (an nn.Cell) or one of "
                     f"{sorted(BUFFER_TYPES)}, but got {name}{_errors.did_you_mean(name, BUFFER_TYPES)}")


def _takes_any_key(cls: type) -> bool:
    """Whether the constructor of ``cls`` takes ``**kwargs`` (a subclass passing them on): then any key applies."""
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls).parameters.values())


def _params(op: str, spec: Mapping[str, Any], cls: type, allowed: tuple[str, ...] | None) -> dict[str, Any]:
    """The constructor keys of an entry, flat or with ``params`` (and shapes beside it); ``allowed``
    ``None`` takes every key."""
    if "params" in spec:
        params = spec["params"]
        if not isinstance(params, Mapping):
            raise _errors.type_error(op, "params", "a dict", params)
        unknown = [key for key in spec if key not in _OUTER + _BESIDE_PARAMS]
        params = dict(params)
        for key in _BESIDE_PARAMS:
            if key in spec:
                if key in params:
                    raise ValueError(f"For '{op}', the key '{key}' must be given once, in 'params' or beside it, "
                                     f"but it is in both.")
                params[key] = spec[key]
    else:
        unknown = [] if allowed is None else [key for key in spec if key not in _OUTER + allowed]
        params = {key: value for key, value in spec.items() if key not in _OUTER}
    if allowed is None:
        return params
    unknown += [key for key in params if key not in allowed]
    if unknown:
        key = unknown[0]
        if any(key in sum(_config_keys(other), ()) for other in BUFFER_TYPES.values()):
            optional = [key for key in allowed if key not in _REQUIRED]
            raise ValueError(f"For '{op}', the key '{key}' does not apply to {cls.__name__}, which takes "
                             f"{', '.join(repr(option) for option in optional)}.")
        raise ValueError(f"For '{op}', unknown key '{key}'"
                         f"{_errors.did_you_mean(key, _OUTER + allowed)}")
    return params


def buffer_arguments(spec: Mapping[str, Any], env: Any = None,
                     done: bool = False) -> tuple[type, int, dict[str, Any]]:
    """Validate a buffer entry; return ``(buffer class, number, constructor keyword arguments)``.

    Args:
        spec (dict): The entry, flat or with ``params`` (see the module docstring).
        env: An environment whose spaces give the columns when the entry has no
            ``data_shape``/``data_type`` (see :func:`~mindspore_rl_buffer.spaces.space_columns`).
            Default: ``None``.
        done (bool): With ``env``, add a done column. Default: ``False``.

    Raises:
        TypeError: If ``spec`` (or its ``params``) is not a dict, ``data_shape``, ``data_type`` or
            ``names`` is not a list or tuple, or another value has the wrong type.
        ValueError: If a key is missing, given twice or unknown for the type, a size is not
            positive, ``number`` exceeds :data:`MAX_NUMBER`, ``alpha`` is negative, shapes and
            types differ in length, a dtype is unknown, or ``sample_size > capacity`` without
            replacement.

    Examples:
        >>> cls, number, kwargs = buffer_arguments({'type': 'ReplayBuffer', 'capacity': 8,
        ...     'data_shape': [(4,)], 'data_type': ['float32'], 'sample_size': 2})
        >>> cls.__name__, number, kwargs['capacity']
        ('ReplayBuffer', 1, 8)
        >>> buffer_arguments({'type': 'ReplayBuffer', 'capacity': 8, 'data_shape': [(4,)],
        ...     'data_type': ['foat32'], 'sample_size': 2})
        Traceback (most recent call last):
        ...
        ValueError: For 'create_buffer', unknown data_type[0] foat32; did you mean float32?
    """
    op = "create_buffer"
    if not isinstance(spec, Mapping):
        raise _errors.type_error(op, "spec", "a dict", spec)
    if "type" not in spec:
        raise ValueError(f"For '{op}', the key 'type' is missing: expected a buffer class or one "
                         f"of {sorted(BUFFER_TYPES)}.")
    cls = _buffer_type(spec["type"])
    required, optional = _config_keys(cls)
    params = _params(op, spec, cls, None if _takes_any_key(cls) else required + optional)
    number = check_size(op, "number", spec.get("number", 1), maximum=MAX_NUMBER,
                        bound=f"an int <= {MAX_NUMBER} (the most buffers one entry may build)")
    if "data_shape" not in params and "data_type" not in params and env is not None:
        shapes, types, names = space_columns(env, done, op)
        params = {"data_shape": shapes, "data_type": types, "names": names, **params}
    for key in required:
        if key not in params:
            how = (" Give 'data_shape' and 'data_type', or pass env= (an environment whose spaces give them, as "
                   "MindSpore Reinforcement's sessions fill them)." if key in ("data_shape", "data_type") else "")
            raise ValueError(f"For '{op}', the key '{key}' is missing.{how}")
    kwargs = dict(params)
    kwargs["capacity"] = check_capacity(op, "capacity", params["capacity"])
    kwargs["sample_size"] = check_size(op, "sample_size", params.get("sample_size", 1))
    if "alpha" in kwargs:
        kwargs["alpha"] = check_exponent(op, "alpha", params["alpha"])
    if _ours(cls):  # a user's class may give these names other meanings
        _check_options(op, kwargs)
    if not kwargs.get("replace", True):
        check_without_replacement(op, kwargs["sample_size"], kwargs["capacity"])
    for key in ("data_shape", "data_type", "names"):
        if params.get(key) is not None and not isinstance(params[key], (list, tuple)):
            raise _errors.type_error(op, key, "a list or tuple with one entry per column", params[key])
    try:
        specs = column_specs(params["data_shape"], params["data_type"], params.get("names"))
    except TypeError as error:
        raise TypeError(f"For '{op}', {error}") from None
    except ValueError as error:
        raise ValueError(f"For '{op}', {error}") from None
    kwargs["data_shape"] = [spec.shape for spec in specs]
    kwargs["data_type"] = [spec.dtype for spec in specs]
    return cls, number, kwargs


def _ours(cls: type) -> bool:
    """Whether ``cls`` is one of this library's buffer classes (not a user's, nor a user's subclass)."""
    return cls.__module__.partition(".")[0] == __name__.partition(".")[0]


def _check_options(op: str, kwargs: Mapping[str, Any]) -> None:
    """An entry's scalar options, checked as the constructors check them: refused before anything is built."""
    for key, check in (("replace", _validation.check_bool), ("ordered", _validation.check_bool),
                       ("num_envs", check_size), ("stack_size", check_size), ("n_step", check_size)):
        if key in kwargs:
            check(op, key, kwargs[key])
    if "gamma" in kwargs:
        _validation.check_gamma(op, kwargs["gamma"])
    if "sampling" in kwargs:
        _validation.check_choice(op, "sampling", kwargs["sampling"], ("local", "global"))
    _validation.check_seeds(op, kwargs.get("seed"), kwargs.get("seed0", 0), kwargs.get("seed1", 0))


def create_buffer(spec: Mapping[str, Any], env: Any = None, *, done: bool = False) -> Any:
    """Build the buffers a config entry declares.

    Args:
        spec (dict): A buffer entry, flat or with ``params`` (see the module docstring);
            ``type`` is a class or its name, dtypes MindSpore dtypes or names. Or a
            ``{'multi_type_replaybuffer': True, name: entry, ...}`` mapping.
        env: An environment whose spaces give the columns of entries without shapes.
            Default: ``None``.
        done (bool): With ``env``, add a ``done`` column (bool). Default: ``False``.

    Returns:
        The buffer; an ``nn.CellList`` of ``number`` independent buffers when ``number > 1``;
        for ``multi_type_replaybuffer``, a dict of those by name.

    Raises:
        TypeError, ValueError: As ``buffer_arguments``; the message names the key.

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import ReplayBuffer, create_buffer
        >>> rb = create_buffer({'number': 1, 'type': ReplayBuffer, 'capacity': 100,
        ...                     'data_shape': [(4,), (1,)], 'data_type': [ms.float32, 'int32'],
        ...                     'sample_size': 8})
        >>> rb.capacity, [s.shape for s in rb.specs]
        (100, [(4,), (1,)])
        >>> len(create_buffer({'number': 2, 'type': 'ReplayBuffer', 'params': {'capacity': 10,
        ...     'data_shape': [(1,)], 'data_type': ['float32'], 'sample_size': 4}}))
        2
        >>> prb = create_buffer({'type': 'PriorityReplayBuffer', 'alpha': 0.6, 'capacity': 100,
        ...                      'data_shape': [(4,)], 'data_type': ['float32'], 'sample_size': 8})
        >>> type(prb).__name__, prb.alpha, prb.capacity, prb.sample_size
        ('PriorityReplayBuffer', 0.6, 100, 8)
    """
    if isinstance(spec, Mapping) and _MULTI in spec:
        if spec[_MULTI] is not True:  # "yes" or 1 had been taken as true, False as a key of one entry
            raise _errors.value_error("create_buffer", _MULTI, "True (it marks named entries)", spec[_MULTI])
        if len(spec) == 1:  # an empty dict back would fail later, far from the config
            raise ValueError(f"For 'create_buffer', a {_MULTI} config must hold at least one named buffer entry "
                             f"beside '{_MULTI}', but got none.")
        # Every entry is validated before any buffer is built, its columns as its constructor checks them.
        arguments = {name: _entry_arguments(name, entry, env, done) for name, entry in spec.items() if name != _MULTI}
        return {name: _named(name, _build, *entry) for name, entry in arguments.items()}
    return _build(*buffer_arguments(spec, env, done))


def _entry_arguments(name: str, entry: Any, env: Any, done: bool) -> tuple[type, int, dict[str, Any]]:
    """:func:`buffer_arguments` of the entry ``name`` of a multi-type config, its columns checked as its
    constructor checks them (:func:`_check_columns`); its errors name the entry."""
    def check() -> tuple[type, int, dict[str, Any]]:
        cls, number, kwargs = buffer_arguments(entry, env, done)
        if _ours(cls):
            _check_columns(cls, kwargs)
        return cls, number, kwargs

    return _named(name, check)


def _named(name: str, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``; a ``TypeError`` or ``ValueError`` it raises names the entry ``name`` of a multi-type config
    (a constructor's check that :func:`_check_columns` does not make, such as a world size, is named too)."""
    try:
        return call(*args)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{str(error).rstrip('.')} (in the entry {name!r} of the multi_type_replaybuffer "
                          f"config).") from None


def _check_columns(cls: type, kwargs: Mapping[str, Any]) -> None:
    """The checks the constructor of the library's buffer class ``cls`` makes of the columns of validated
    arguments (from :func:`buffer_arguments`), by the functions it calls and with its messages, made
    without building anything: the column names, the item shapes and sizes, a transition buffer's
    layout and ring length, and the sample's bytes."""
    op = cls.__name__
    names, shapes, sample_size = kwargs.get("names"), kwargs["data_shape"], kwargs["sample_size"]
    if issubclass(cls, TransitionReplayBuffer):  # the frames on the buffer, the other columns in its ring
        names = transition_names(len(shapes)) if names is None else names
        check_column_names(op, names, reserved_names(cls, RingBuffer), taken_names(nn.Cell(), cls, RingBuffer))
        specs = column_specs(shapes, kwargs["data_type"], names)
        check_transition_layout(op, specs)
        defaults = inspect.signature(cls).parameters
        num_envs, stack_size, n_step = (kwargs.get(key, defaults[key].default)
                                        for key in ("num_envs", "stack_size", "n_step"))
        max_length = check_ring_length(op, kwargs["capacity"], num_envs, stack_size, n_step)
        check_column_bytes(op, max_length * num_envs, specs[:1])
        check_column_bytes(op, max_length, [TensorSpec((num_envs, *s.shape), s.dtype, s.name) for s in specs[1:]])
        check_batch_bytes(op, "sample_size", sample_size, specs[:1], 2 * stack_size)
    elif issubclass(cls, (RingBuffer, ShardedReplayBuffer)):
        # A sharded buffer keeps its columns in a ReplayBuffer of its rank's shard, of at most 'capacity' rows.
        holder = cls if issubclass(cls, RingBuffer) else ReplayBuffer
        if names is not None:
            check_column_names(op, names, reserved_names(holder), taken_names(nn.Cell(), holder))
        specs = column_specs(shapes, kwargs["data_type"], names)
        check_column_bytes(op, kwargs["capacity"] if holder is cls else 1, specs)
        check_batch_bytes(op, "sample_size", sample_size, specs)


def _build(cls: type, number: int, kwargs: dict[str, Any]) -> Any:
    """The buffers of one validated entry (from :func:`buffer_arguments`)."""
    # By name: the buffer types order their positional arguments differently.
    kwargs = {_CONSTRUCTOR_NAMES.get(key, key): value for key, value in kwargs.items()}
    if number == 1:
        return cls(**kwargs)
    return nn.CellList([cls(**_seeded(cls, kwargs, i)) for i in range(number)])


def _seeded(cls: type, kwargs: dict[str, Any], i: int) -> dict[str, Any]:
    """The arguments of buffer ``i`` of an entry: a seed given moves on by ``i``, so that the buffers draw apart."""
    if i == 0 or not _ours(cls):
        return kwargs
    seed = _validation.check_seeds(cls.__name__, kwargs.get("seed"), kwargs.get("seed0", 0), kwargs.get("seed1", 0))
    if seed is None:
        return kwargs
    rest = {key: value for key, value in kwargs.items() if key not in ("seed", "seed0", "seed1")}
    return {**rest, "seed": (seed + i) % _validation.SEED_END}
