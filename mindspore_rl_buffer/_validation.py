"""Every host check of the library, in one place, with the messages of :mod:`._errors`.

Direct calls check their input here before anything is launched, so a bad call leaves the
buffer exactly as it was. The checks that also run when a graph is compiled (shapes and
dtypes of what a ``construct`` passes to a buffer, and the Python constants it passes as
``ordered``, ``batch_size`` and the like) have compile-time twins built with
``ops.constexpr`` (the ``*_graph`` names; those that must tell a graph variable from a constant
are in ``mindspore_rl_buffer._graph_checks``): they run when the graph compiles and leave nothing
in it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer.ops import LEAF_CEILING, MAX_CAPACITY, PRIORITY_CEILING

FLOAT32_MAX = float(np.finfo(np.float32).max)

INT_DTYPES = (ms.int8, ms.int16, ms.int32, ms.int64, ms.uint8, ms.uint16, ms.uint32, ms.uint64)
FLOAT_DTYPES = (ms.float16, ms.bfloat16, ms.float32, ms.float64)


# ------------------------------------------------------------------------------ scalars
SEED_END = 2**31  # seeds are ints in [0, SEED_END): what MindSpore's random operators (and numpy) take


def check_size(op: str, arg: str, value: Any, minimum: int = 1, maximum: int = MAX_CAPACITY,
               bound: str | None = None) -> int:
    """Return ``value`` if it is an int in ``[minimum, maximum]`` (not a bool); raise otherwise.

    The default ``maximum``, 2**30, bounds every count and size (sample and batch sizes,
    environments, steps): past it nothing can be allocated, so the request is refused.
    ``bound`` words the range in the error for a value above ``maximum`` (with its reason);
    by default ``an int <= maximum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _errors.type_error(op, arg, "an int", value)
    if value < minimum:
        raise _errors.value_error(op, arg, f"an int >= {minimum}", value)
    if value > maximum:
        raise _errors.value_error(op, arg, bound or f"an int <= {maximum}", value)
    return int(value)


def check_capacity(op: str, arg: str, value: Any) -> int:
    """A capacity: an int in ``[1, MAX_CAPACITY]``, where the int32 cursor arithmetic is exact."""
    return check_size(op, arg, value, bound=f"an int <= {MAX_CAPACITY} (2**30, the largest capacity whose int32 "
                                            f"cursor arithmetic is exact)")


def check_seed(op: str, value: Any) -> int | None:
    """A seed: ``None``, or an int in ``[0, 2**31)`` (what MindSpore's random operators take)."""
    if value is None:
        return None
    return check_size(op, "seed", value, minimum=0, maximum=SEED_END - 1, bound="an int in [0, 2**31)")


def check_seeds(op: str, seed: Any, seed0: Any = 0, seed1: Any = 0) -> int | None:
    """The one seed of a buffer from ``seed`` or MindSpore Reinforcement's ``seed0``/``seed1``.

    As there, ``seed1`` if it is not 0, else ``seed0`` if it is not 0, else no seed (here:
    follow ``mindspore.set_seed``); ``seed`` is this library's spelling. Giving both is refused.
    """
    for arg, value in (("seed0", seed0), ("seed1", seed1)):
        check_size(op, arg, value, minimum=0, maximum=SEED_END - 1)
    if seed is not None and (seed0 or seed1):
        raise ValueError(f"For '{op}', give either 'seed' or MindSpore Reinforcement's 'seed0'/'seed1', but got "
                         f"seed={seed}, seed0={seed0}, seed1={seed1}.")
    return check_seed(op, seed if seed is not None else (seed1 or seed0 or None))


def check_types(op: str, types: Any, dtypes: Any) -> Any:
    """The column dtypes, given as ``types`` or as MindSpore Reinforcement 0.6's ``dtypes``."""
    if types is None and dtypes is None:
        raise TypeError(f"For '{op}', the column dtypes must be given as 'types' (or 'dtypes'), but got neither.")
    if types is not None and dtypes is not None:
        raise ValueError(f"For '{op}', give the column dtypes once, as 'types' or 'dtypes', but got both.")
    return types if types is not None else dtypes


def transition_of(op: str, names: tuple[str, ...], columns: tuple[Any, ...]) -> Any:
    """The transition of ``insert(*columns)``: one list or tuple of tensors, or one tensor per column
    as separate arguments (MindSpore Reinforcement's ``insert(state, action)``)."""
    if len(columns) == 1 and (isinstance(columns[0], (list, tuple)) or len(names) > 1):
        return columns[0]
    return columns


def native(array: np.ndarray) -> np.ndarray:
    """``array`` in the machine's byte order (a big-endian ``>f4`` array is converted, values kept)."""
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def check_optional_size(op: str, arg: str, value: Any, minimum: int = 1) -> int | None:
    """:func:`check_size`, with ``None`` allowed."""
    return None if value is None else check_size(op, arg, value, minimum)


def check_bool(op: str, arg: str, value: Any) -> bool:
    """Return ``value`` if it is a bool; raise a TypeError naming ``arg`` otherwise."""
    if not isinstance(value, bool):
        raise _errors.type_error(op, arg, "a bool", value)
    return value


def check_ordered(op: str, ordered: Any, default: bool) -> bool:
    """``ordered`` of a sample call: a bool, or ``None`` for the buffer's ``default``."""
    if ordered is None:
        return default
    if not isinstance(ordered, bool):
        raise _errors.type_error(op, "ordered", "a bool or None", ordered)
    return ordered


def check_exponent(op: str, arg: str, value: Any) -> float:
    """Return ``value`` as a float if it is a real number ``>= 0`` (not a bool) that float32 holds finite."""
    if isinstance(value, Tensor) and value.shape == () and value.dtype in FLOAT_DTYPES + INT_DTYPES:
        value = value.asnumpy().item()
        if not isinstance(value, (int, float)):  # bfloat16's item is an ml_dtypes scalar
            value = float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _errors.type_error(op, arg, "a float", value)
    if value < 0 or not (isinstance(value, (int, np.integer)) or math.isfinite(value)):  # an int may pass 1e308
        raise _errors.value_error(op, arg, "a finite float >= 0", value)
    if value > FLOAT32_MAX:  # the graphs take it as float32, where it would be infinite
        raise _errors.value_error(op, arg, f"a finite float >= 0 of at most {FLOAT32_MAX:.8g} (float32's largest)",
                                  value)
    return float(value)


def check_choice(op: str, arg: str, value: Any, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of the strings ``choices``."""
    expected = " or ".join(repr(choice) for choice in choices)
    if not isinstance(value, str):
        raise _errors.type_error(op, arg, expected, value)
    if value not in choices:
        raise ValueError(f"For '{op}', '{arg}' must be {expected}, but got {value!r}"
                         f"{_errors.did_you_mean(value, choices)}")
    return value


# ------------------------------------------------------------------------ transitions
def check_batch(op, names, shapes, dtypes, got_count, got_shapes, got_dtypes):
    """Check one transition or a batch against the columns; return ``(batch_size, single)``.

    A transition has each column's shape; a batch has a leading dimension ``n`` on every
    column. Runs on the host for direct calls and, as :func:`check_batch_graph`, when a graph
    is compiled.
    """
    if got_count != len(names):
        raise ValueError(f"For '{op}', the transition must have {len(names)} columns "
                         f"{tuple(names)}, but got {got_count}.")
    batch_size, single = None, None
    for name, shape, dtype, got_shape, got_dtype in zip(names, shapes, dtypes, got_shapes, got_dtypes):
        got_shape = tuple(got_shape)
        if got_dtype != dtype:
            raise _errors.column_error(op, name, "dtype", dtype, got_dtype)
        if got_shape == tuple(shape):
            this_single, this_size = True, 1
        elif len(got_shape) == len(shape) + 1 and got_shape[1:] == tuple(shape):
            this_single, this_size = False, got_shape[0]
        else:
            expected = f"{tuple(shape)} (one item) or {('n', *shape)} (a batch)".replace("'n'", "n")
            raise _errors.column_error(op, name, "shape", expected, got_shape)
        if batch_size is None:
            batch_size, single = this_size, this_single
        elif (this_single, this_size) != (single, batch_size):
            raise ValueError(f"For '{op}', every column must hold the same number of items, but column "
                             f"'{names[0]}' has shape {tuple(got_shapes[0])} and column '{name}' "
                             f"has shape {got_shape}.")
    if batch_size > MAX_CAPACITY:  # past it the rows' int32 arithmetic would wrap
        raise ValueError(f"For '{op}', a batch must hold at most {MAX_CAPACITY} items (2**30), but column "
                         f"'{names[0]}' has shape {tuple(got_shapes[0])}.")
    return batch_size, single


check_batch_graph = ops.constexpr(check_batch)


def refuse_masked(op: str, names: Sequence[str], i: int, value: Any) -> None:
    """Refuse a numpy masked array as column ``i``: converting it would drop its mask without a word."""
    if isinstance(value, np.ma.MaskedArray):
        column = names[i] if i < len(names) else f"#{i}"
        raise _errors.column_error(op, column, "type", "an array without a mask", "a numpy masked array")


def host_tensor(op: str, names: Sequence[str], i: int, value: Any) -> Tensor:
    """Column ``i`` of a direct call's transition as a tensor (a numpy array is converted).

    A ``Parameter`` (a buffer's own column, say) is copied first: the insert writes into the
    columns while it reads its input, and a graph takes no two Parameters of one name. (A plain
    tensor sharing a column's memory is not looked for: a Parameter's address costs a wait for
    the device, about a sixth of a direct call.)
    """
    if isinstance(value, Parameter):
        return ops.deepcopy(value)
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        refuse_masked(op, names, i, value)
        column = names[i] if i < len(names) else f"#{i}"
        array = np.asarray(value)
        # object, str, datetime...: no tensor of them; nor of numpy's longdouble (float128 here)
        if array.dtype.kind not in "biuf" or array.dtype.itemsize > 8:
            raise _errors.column_error(op, column, "dtype", "a bool, int or float array of at most 64 bits",
                                       f"numpy {array.dtype}")
        return Tensor(native(array))
    raise _errors.not_an_array_error(op, tuple(names), i, value)


def check_transition(op: str, names: Sequence[str], shapes: Sequence[tuple[int, ...]], dtypes: Sequence[Any],
                     transition: Any) -> tuple[list[Tensor], int]:
    """A direct call's transition as tensors, with its batch size; raises on any mismatch."""
    if not isinstance(transition, (list, tuple)):
        raise _errors.type_error(op, "transition", "a list or tuple of tensors, one per column", transition)
    tensors = [host_tensor(op, names, i, value) for i, value in enumerate(transition)]
    batch_size, _ = check_batch(op, names, shapes, dtypes, len(tensors), [t.shape for t in tensors],
                                [t.dtype for t in tensors])
    return tensors, batch_size


# ---------------------------------------------------------------------------- indexes
def host_index(op: str, arg: str, index: Any, what: str = "an int or an int tensor") -> np.ndarray:
    """An int numpy scalar, array or int tensor as an int numpy array (scalar or 1-D), in its own dtype."""
    if isinstance(index, (bool, np.bool_)):
        raise _errors.type_error(op, arg, what, index)
    if isinstance(index, np.integer):
        return native(np.asarray(index))
    if isinstance(index, (Tensor, np.ndarray)):
        check_tensor_arg(op, arg, index.dtype, index.shape, "int", what, (0, 1))
        return index.asnumpy() if isinstance(index, Tensor) else native(index)
    raise _errors.type_error(op, arg, what, index)


def _kind(dtype: Any) -> str | None:
    """``'int'``, ``'float'`` or ``None`` (bool, complex, ...) for a MindSpore or numpy dtype."""
    if isinstance(dtype, np.dtype):
        return {"i": "int", "u": "int", "f": "float"}.get(dtype.kind)
    return "int" if dtype in INT_DTYPES else "float" if dtype in FLOAT_DTYPES else None


def check_tensor_arg(op: str, arg: str, dtype: Any, shape: Sequence[int], kind: str, what: str,
                     dims: tuple[int, ...] = (1,)) -> None:
    """A tensor (or numpy array) argument of a ``kind`` (``'int'``, ``'float'``) dtype and ``len(shape)``
    in ``dims``. On the host for direct calls and, as :func:`check_tensor_arg_graph`, when a graph
    compiles, where the same tensors would otherwise be cast or read silently."""
    if _kind(dtype) != kind:
        raise TypeError(f"For '{op}', '{arg}' must be {what}, but got a tensor of dtype {dtype}.")
    if len(shape) not in dims:
        expected = "a scalar or 1-D tensor" if 0 in dims else what
        raise ValueError(f"For '{op}', '{arg}' must be {expected}, but got a tensor of shape {tuple(shape)}.")


check_tensor_arg_graph = ops.constexpr(check_tensor_arg)


def check_logical_index(op: str, index: Any, size: int) -> np.ndarray:
    """Logical indexes in ``[-size, size)`` as non-negative int32 (0 = oldest).

    Values are judged as given, whatever their width (a Python int of any size, a uint64
    above 2**63), so the message shows the index the caller passed.
    """
    if isinstance(index, int) and not isinstance(index, bool):
        if not -size <= index < size:
            raise _errors.index_error(op, index, size)
        return np.asarray(index + size if index < 0 else index, np.int32)
    values = host_index(op, "index", index)
    bad = values >= size if values.dtype.kind == "u" else (values < -size) | (values >= size)
    if bad.any():
        raise _errors.index_error(op, values[bad].tolist()[0] if values.ndim else values.item(), size)
    return np.where(values < 0, values.astype(np.int64) + size, values).astype(np.int32)


def check_array_type(op: str, arg: str, value: Any, kind: str) -> None:
    """A TypeError naming ``arg`` unless ``value`` is a tensor or a numpy array (of a ``kind`` dtype, checked later)."""
    if not isinstance(value, (Tensor, np.ndarray)):
        raise _errors.type_error(op, arg, f"a 1-D {kind} tensor", value)


def host_array(op: str, arg: str, value: Any, kind: str) -> np.ndarray:
    """A 1-D numpy view of a tensor or array of a ``kind`` (``'int'``, ``'float'``) dtype."""
    check_array_type(op, arg, value, kind)
    check_tensor_arg(op, arg, value.dtype, value.shape, kind, f"a 1-D {kind} tensor")
    return native(value.asnumpy() if isinstance(value, Tensor) else value)


def largest_priority(alpha: float) -> float:
    """The largest priority a buffer of exponent ``alpha`` accepts: its leaf ``p ** alpha`` stays
    within ``LEAF_CEILING`` (2**96) and ``p`` within ``PRIORITY_CEILING`` (2**126)."""
    # Compared as exponents of 2: LEAF_CEILING ** (1 / alpha) overflows a float for a tiny alpha.
    if alpha == 0 or math.log2(LEAF_CEILING) / alpha >= math.log2(PRIORITY_CEILING):
        return PRIORITY_CEILING
    return float(LEAF_CEILING ** (1.0 / alpha))


def check_priorities(op: str, indices: Any, priorities: Any, size: int,
                     alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Slots in ``[0, size)`` and finite priorities in ``[0, largest_priority(alpha)]``, of one 1-D shape."""
    slots = host_array(op, "indices", indices, "int")
    values = host_array(op, "priorities", priorities, "float")
    if values.dtype.kind != "f":  # bfloat16 comes as numpy's extension type; float32 holds it exactly
        values = values.astype(np.float32)
    check_same_shape(op, slots.shape, values.shape)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        raise _errors.value_error(op, "priorities", "finite and >= 0", values[bad][0].item())
    largest = largest_priority(alpha)
    too_large = values.astype(np.float64) > largest
    if too_large.any():
        raise ValueError(f"For '{op}', 'priorities' must be at most {largest:.6g} (with alpha={alpha:g}, the "
                         f"largest whose priority ** alpha stays within 2**96 and itself within 2**126, so "
                         f"the sum tree cannot overflow float32), but got {values[too_large][0].item():.6g}.")
    out = slots >= size if slots.dtype.kind == "u" else (slots < 0) | (slots >= size)
    if out.any():
        raise _errors.slot_error(op, slots[out][0].item(), size)
    return slots, values


def check_same_shape(op: str, indices: Sequence[int], priorities: Sequence[int], arg: str = "indices") -> None:
    """``priorities`` of the shape of ``indices``, the argument ``arg`` (on the host, and as
    :func:`check_same_shape_graph` in a graph)."""
    if tuple(indices) != tuple(priorities):
        raise ValueError(f"For '{op}', 'priorities' must have the shape of '{arg}' {tuple(indices)}, "
                         f"but got {tuple(priorities)}.")


check_same_shape_graph = ops.constexpr(check_same_shape)


def check_not_empty(op: str, size: int) -> None:
    """Refuse to read an empty buffer."""
    if size == 0:
        raise _errors.empty_error(op)


@ops.constexpr
def _given_twice(count: int) -> None:
    raise TypeError(f"For 'insert', give the transition once, as columns or as 'exp', but got {count} column(s) "
                    f"and 'exp'.")


def given_columns(columns: tuple[Any, ...], exp: Any) -> tuple[Any, ...]:
    """The columns of ``insert(*columns, exp=...)``: MindSpore Reinforcement named the transition ``exp``;
    given both ways, refused (on the host, and in a graph when it compiles)."""
    if exp is None:
        return columns
    if columns:
        _given_twice(len(columns))
    return (exp,)


def check_leaves(op, descriptions, shapes, dtypes, got_shapes, got_dtypes):
    """Check the leaves of a nest against a data spec; on the host, and when a graph is compiled."""
    if got_shapes is None or got_dtypes is None:  # only inside a graph: the leaves of a host object
        raise _errors.leaf_unknown_in_graph_error(op, "items")
    for description, shape, dtype, got_shape, got_dtype in zip(descriptions, shapes, dtypes, got_shapes,
                                                                 got_dtypes):
        if got_shape is None or got_dtype is None:
            raise _errors.leaf_unknown_in_graph_error(op, description)
        if tuple(got_shape) != tuple(shape):
            raise _errors.leaf_error(op, description, "shape", tuple(shape), tuple(got_shape))
        if got_dtype != dtype:
            raise _errors.leaf_error(op, description, "dtype", dtype, got_dtype)
    return True


check_leaves_graph = ops.constexpr(check_leaves)


# ------------------------------------------------------------------ transition buffers
def check_gamma(op: str, gamma: Any) -> float:
    """A discount: a real number in ``[0, 1]`` (not a bool)."""
    try:
        value = check_exponent(op, "gamma", gamma)
    except ValueError:  # NaN, inf, a negative: the same range in the message as for 1.5
        value = math.nan
    if not 0 <= value <= 1:
        raise _errors.value_error(op, "gamma", "a float in [0, 1]", gamma)
    return value


def check_ring_length(op: str, capacity: int, num_envs: int, stack_size: int, n_step: int) -> int:
    """``capacity // num_envs`` time rows, enough for one transition; raise otherwise."""
    if capacity % num_envs:
        raise ValueError(f"For '{op}', 'capacity' ({capacity}) must be a multiple of 'num_envs' ({num_envs}): "
                         f"every time step stores one row per environment.")
    max_length = capacity // num_envs
    if max_length < stack_size + n_step + 1:
        raise ValueError(f"For '{op}', 'capacity' ({capacity}) holds {max_length} time steps of {num_envs} "
                         f"environments, but a transition with stack_size={stack_size} and n_step={n_step} needs "
                         f"at least {stack_size + n_step + 1}.")
    return max_length


def check_final_rows(op: str, last_ended: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
    """Refuse flags on a final row (the one after an episode's end); return the newest row's ``ended``.

    ``last_ended`` (``(num_envs,)``) says whether each environment's newest stored (or staged)
    row ended an episode; ``terminated`` and ``truncated`` are ``(n, num_envs)``, ``n >= 1``.
    """
    ended = (np.asarray(terminated) != 0) | (np.asarray(truncated) != 0)
    final = np.concatenate([np.asarray(last_ended, bool)[None], ended[:-1]])
    bad = np.argwhere(final & ended)
    if len(bad):
        step, env = (int(x) for x in bad[0])
        raise _errors.flagged_final_row_error(op, env, step, np.asarray(terminated)[step, env].item(),
                                              np.asarray(truncated)[step, env].item())
    return ended[-1]
