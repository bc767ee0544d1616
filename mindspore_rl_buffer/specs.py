"""Column specs: one frozen ``(shape, dtype, name)`` per stored field.

A buffer's columns are driven by its specs: column ``c`` is a ``Parameter`` of shape
``(capacity, *specs[c].shape)`` and dtype ``specs[c].dtype``, named ``specs[c].name``.
"""
from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import mindspore as ms
import numpy as np

from mindspore_rl_buffer import _errors

# Every dtype a column may have, by name (bfloat16 is known here to be refused by name, see
# to_dtype). A bool column is stored as uint8: see storage_dtype.
DTYPES: dict[str, ms.dtype.Type] = {
    "bool": ms.bool_,
    "int8": ms.int8,
    "int16": ms.int16,
    "int32": ms.int32,
    "int64": ms.int64,
    "uint8": ms.uint8,
    "uint16": ms.uint16,
    "uint32": ms.uint32,
    "uint64": ms.uint64,
    "float16": ms.float16,
    "bfloat16": ms.bfloat16,
    "float32": ms.float32,
    "float64": ms.float64,
}
_ALIASES = {"bool_": "bool", "float": "float32", "int": "int32", "double": "float64", "half": "float16"}


def storage_dtype(dtype: ms.dtype.Type) -> ms.dtype.Type:
    """The dtype a column of ``dtype`` is stored in on the device: uint8 for bool (MindSpore's
    ScatterUpdate, which writes the columns, has no bool kernel), ``dtype`` otherwise. The
    buffers convert at their boundaries, so users put in and get back bool tensors."""
    return ms.uint8 if dtype == ms.bool_ else dtype


def numpy_dtype(dtype: ms.dtype.Type) -> np.dtype:
    """The numpy dtype of a MindSpore dtype (``bfloat16`` has none in numpy)."""
    name = str(dtype).lower()
    if name == "bfloat16":
        raise ValueError("bfloat16 columns have no numpy dtype; use them on the device only.")
    return np.dtype("bool" if name == "bool" else name)


def mindspore_dtype(value: Any) -> ms.dtype.Type:
    """The MindSpore dtype of a tensor or numpy array."""
    return value.dtype if isinstance(value, ms.Tensor) else DTYPES[np.asarray(value).dtype.name]


def to_dtype(value: Any, where: str) -> ms.dtype.Type:
    """Read a dtype given as a MindSpore dtype, a numpy dtype or a name such as ``'float32'``.

    Args:
        value: The dtype.
        where: How the error names it, e.g. ``"data_type[2]"``.

    Returns:
        The MindSpore dtype.

    Raises:
        ValueError: If ``value`` names no known dtype; the message suggests the closest name.

    Examples:
        >>> import mindspore as ms
        >>> to_dtype('float32', 'dtype') == ms.float32
        True
        >>> to_dtype('foat32', 'data_type[2]')
        Traceback (most recent call last):
        ...
        ValueError: unknown data_type[2] foat32; did you mean float32?
    """
    if isinstance(value, ms.dtype.Type):
        name = str(value).lower()
    elif isinstance(value, (np.dtype, type)) and not isinstance(value, str):
        try:
            name = np.dtype(value).name
        except TypeError:
            name = getattr(value, "__name__", str(value))
    else:
        name = str(value)
        if name.startswith(("ms.", "mindspore.", "np.", "numpy.")):
            name = name.split(".", 1)[1]
    name = _ALIASES.get(name, name)
    if name == "bfloat16":
        raise ValueError(f"{where} bfloat16 is not supported: MindSpore 2.10's CPU ScatterUpdate and "
                         f"StridedSlice, which write the columns, have no bfloat16 kernel (and numpy has no "
                         f"bfloat16 for the host side); store float32 (or float16).")
    if name not in DTYPES:
        raise ValueError(f"unknown {where} {value}{_errors.did_you_mean(name, DTYPES)}")
    return DTYPES[name]


def _to_shape(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{where} must be a tuple of non-negative ints, but got {type(value).__name__}.")
    for dim in value:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise ValueError(f"{where} must be a tuple of non-negative ints, but got {tuple(value)!r}.")
    return tuple(int(dim) for dim in value)


@dataclass(frozen=True)
class TensorSpec:
    """The shape, dtype and name of one stored field (one item, without the batch dimension).

    Args:
        shape (tuple[int]): Shape of one item; ``()`` for a scalar.
        dtype (mindspore.dtype): Its dtype; a name such as ``'float32'`` is accepted.
        name (str): The column's name, used for its ``Parameter`` and in errors. Default: ``None``.

    Examples:
        >>> import mindspore as ms
        >>> TensorSpec([3], 'float32', 'action')
        TensorSpec(shape=(3,), dtype=mindspore.float32, name='action')
    """

    shape: tuple[int, ...]
    dtype: ms.dtype.Type
    name: str | None = None

    def __post_init__(self) -> None:
        what = f"the shape of spec '{self.name}'" if self.name else "the shape of a spec"
        object.__setattr__(self, "shape", _to_shape(self.shape, what))
        object.__setattr__(self, "dtype", to_dtype(self.dtype, "dtype"))
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"the name of a spec must be a str, but got {type(self.name).__name__}.")

    @property
    def nbytes(self) -> int:
        """Bytes of one item."""
        itemsize = 2 if self.dtype == ms.bfloat16 else numpy_dtype(self.dtype).itemsize
        return math.prod(self.shape) * itemsize  # Python ints: no overflow for any shape


def column_specs(
    shapes: Sequence[Any], types: Sequence[Any], names: Sequence[str] | None = None, op: str | None = None
) -> tuple[TensorSpec, ...]:
    """Pair up per-column shapes, types and names into validated specs; an error starts with
    ``For 'op',`` when ``op`` (the constructor) is given.

    Raises:
        TypeError: If ``shapes`` or ``types`` is not a list or tuple.
        ValueError: If their lengths differ, a shape is malformed, a dtype is unknown or
            names repeat.
    """
    if op is not None:
        try:
            return column_specs(shapes, types, names)
        except (TypeError, ValueError) as error:
            raise type(error)(f"For '{op}', {error}") from None
    for arg, value in (("shapes", shapes), ("types", types)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"'{arg}' must be a list or tuple with one entry per column, "
                            f"but got {type(value).__name__}.")
    if len(shapes) != len(types):
        raise ValueError(f"'shapes' and 'types' must have one entry per column, but got "
                         f"{len(shapes)} shapes and {len(types)} types.")
    if not shapes:
        raise ValueError("a buffer needs at least one column, but 'shapes' is empty.")
    if names is None:
        names = [f"column_{i}" for i in range(len(shapes))]
    if len(names) != len(shapes):
        raise ValueError(f"'names' must have one entry per column ({len(shapes)}), but got {len(names)}.")
    if len(set(names)) != len(names):
        raise ValueError(f"column names must be unique, but got {list(names)}.")
    return tuple(
        TensorSpec(_to_shape(shape, f"shapes[{i}]"), to_dtype(dtype, f"data_type[{i}]"), name)
        for i, (shape, dtype, name) in enumerate(zip(shapes, types, names))
    )


def spec_fields(specs: Sequence[TensorSpec]) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], tuple[Any, ...]]:
    """The names, shapes and dtypes of ``specs``, as plain tuples.

    A buffer keeps them as attributes for the graphs: MindSpore compiles a plain tuple read
    from a Cell as a constant, where a generator over the specs in a property compiled through
    its slower interpreted path (about 0.1 s of every compile that reads the three).
    """
    return (tuple(spec.name for spec in specs), tuple(tuple(spec.shape) for spec in specs),
            tuple(spec.dtype for spec in specs))


MAX_COLUMN_BYTES = 2**40  # 1 TiB: more than any device holds; a larger column is a mistake, not a buffer
MAX_ITEM_DIMS = 7  # a column adds its rows: a gather of 8-D items fails in the graph (9-D input)


def check_column_bytes(op: str, rows: int, specs: Sequence[Any], leaves: Sequence[str] | None = None) -> None:
    """Every column of ``rows`` rows of its spec: items of positive dims, at most ``MAX_ITEM_DIMS`` of them, and
    at most ``MAX_COLUMN_BYTES`` in all. An error names the column by its spec's name, or as ``leaves[i]``
    (``items['obs']``) when the specs are the leaves of a nest."""
    named = leaves if leaves is not None else [f"column '{spec.name}'" for spec in specs]
    for spec, where in zip(specs, named):
        if any(dim > MAX_COLUMN_BYTES for dim in spec.shape):  # too large whatever the rest; and before a size
            raise _errors.leaf_error(op, where, "shape", f"dims of at most {MAX_COLUMN_BYTES} (a column holds at "
                                     f"most 1 TiB)", spec.shape)
        if 0 in spec.shape:
            raise _errors.leaf_error(op, where, "shape", "a tuple of ints >= 1 (an empty item stores nothing)",
                                     spec.shape)
        if len(spec.shape) > MAX_ITEM_DIMS:
            raise _errors.leaf_error(op, where, "shape", f"at most {MAX_ITEM_DIMS} dims (MindSpore's kernels take "
                                     f"tensors of up to 8 dims, one of them the rows)", spec.shape)
        size = rows * spec.nbytes
        if size > MAX_COLUMN_BYTES:
            raise _errors.leaf_error(op, where, "size", f"at most {MAX_COLUMN_BYTES} bytes (1 TiB)",
                                     f"{rows} rows of shape {spec.shape} and dtype {spec.dtype}: {size} bytes")



def output_bound() -> tuple[int, str]:
    """The most bytes one output column may take, and how a message says it: 1 TiB, or on a CPU the
    machine's physical memory (an output larger cannot be allocated there, and Linux kills the
    process that tries rather than failing the allocation)."""
    bound, what = MAX_COLUMN_BYTES, "1 TiB"
    if ms.get_context("device_target") == "CPU" and hasattr(os, "sysconf"):
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):  # a platform without these names
            return bound, what
        if 0 < memory < bound:
            bound, what = memory, "this machine's physical memory, the CPU device's"
    return bound, what


def check_batch_bytes(op: str, arg: str, n: int, specs: Sequence[Any], copies: int = 1) -> None:
    """``n`` items (``copies`` of each, e.g. a frame stack) of every column at most :func:`output_bound`:
    what a sample's outputs or a writer's stage allocate, refused before MindSpore fails to allocate it
    (which it logs without raising, then fails the next call)."""
    bound, what = output_bound()
    for spec in specs:
        size = n * copies * spec.nbytes
        if size > bound:
            raise ValueError(f"For '{op}', '{arg}' must be small enough that its items of column '{spec.name}' take at "
                             f"most {bound} bytes ({what}), but got {n}: {size} bytes.")

#: Bytes per row of the capacity that a sample without replacement works in: a random key for every
#: row, hashed in int64 (``ops.rng``), about 27 int64 intermediates, then float32 keys and ``topk``. Counted
#: as if none were freed early; a process measured here peaked at 150-170 bytes per row.
DRAW_BYTES_PER_ROW = 232


def check_without_replacement(op: str, sample_size: int, capacity: int) -> None:
    """A buffer that samples without replacement: ``sample_size`` at most ``capacity``, and the sample's
    working memory (a random key per row, :data:`DRAW_BYTES_PER_ROW`) at most :func:`output_bound`,
    refused when the buffer is built, since the first sample would otherwise end the process on a CPU."""
    if sample_size > capacity:
        raise ValueError(f"For '{op}' without replacement, 'sample_size' ({sample_size}) must not exceed 'capacity' "
                         f"({capacity}).")
    bound, what = output_bound()
    size = capacity * DRAW_BYTES_PER_ROW
    if size > bound:
        raise ValueError(f"For '{op}' without replacement, 'capacity' must be small enough that a sample's random key "
                         f"for every row ({DRAW_BYTES_PER_ROW} bytes a row as it is computed) takes at most {bound} "
                         f"bytes ({what}), but got {capacity}: {size} bytes. Sample with replacement, or use a "
                         f"smaller capacity.")


MAX_NAME_LENGTH = 1024  # the longest Parameter name MindSpore takes


def shown_name(name: str) -> str:
    """``name`` as a message quotes it: its first 40 characters, then ``...``."""
    return name if len(name) <= 40 else f"{name[:40]}..."


def length_problem(name: str, prefix: str = "") -> str | None:
    """Why ``name`` is too long for a column whose Parameter MindSpore names ``prefix + name``;
    ``None`` if it is not."""
    if len(prefix) + len(name) <= MAX_NAME_LENGTH:
        return None
    if not prefix:
        return f"must have at most {MAX_NAME_LENGTH} characters (MindSpore's longest Parameter name), not {len(name)}"
    return (f"must have at most {MAX_NAME_LENGTH - len(prefix)} characters (the buffer registers its Parameter as "
            f"{shown_name(prefix) + '<name>'!r}, and MindSpore's longest Parameter name has {MAX_NAME_LENGTH}), "
            f"not {len(name)}")


def name_problem(name: str, taken: Collection[str] = (), prefix: str = "") -> str | None:
    """Why ``name`` cannot name a column on a buffer Cell whose attributes are ``taken``; ``None`` if it can.

    MindSpore registers each column's Parameter on the Cell under its name: it strips the name,
    takes at most ``MAX_NAME_LENGTH`` characters, and refuses a name an attribute already holds.
    A buffer that keeps its columns in an inner Cell (``storage``) registers them as ``prefix + name``.
    """
    if name != name.strip():
        return "must not start or end with whitespace (MindSpore strips it from a Parameter's name)"
    problem = length_problem(name, prefix)
    if problem:
        return problem
    if name.startswith("_") or name in taken:
        return ("is taken by the buffer: MindSpore registers each column on the buffer Cell under its name, and "
                "the Cell has an attribute or method of that name (names starting with '_' are kept for them)")
    return None


def check_column_names(op: str, names: Sequence[Any], reserved: Sequence[str], taken: Collection[str] = (),
                       prefix: str = "") -> None:
    """Column names: a list or tuple of non-empty strings, none of them a name the buffer keeps its own
    state under (``reserved``) or cannot register a column under (:func:`name_problem`, with the
    ``prefix`` its Parameters get)."""
    if not isinstance(names, (list, tuple)):  # a str or a dict would be taken apart silently
        raise _errors.type_error(op, "names", "a list of str", names)
    for name in names:
        if not isinstance(name, str):
            raise _errors.type_error(op, "names", "a list of str", name)
        if not name:
            raise _errors.value_error(op, "names", "non-empty strings", name)
        if name in reserved:
            raise ValueError(f"For '{op}', the column name {name!r} is reserved: the buffer keeps its own "
                             f"state under the names {sorted(reserved)}; choose another name.")
        problem = name_problem(name, taken, prefix)
        if problem:
            raise ValueError(f"For '{op}', the column name {shown_name(name)!r} {problem}; choose another name.")


TRANSITION_ROLES = ("observation", "action", "reward", "terminated", "truncated")


def transition_names(count: int) -> list[str]:
    """The names of a transition buffer's ``count`` columns given none: its roles, then ``extra_0``, ``extra_1``, ..."""
    return [*TRANSITION_ROLES, *(f"extra_{i}" for i in range(count - len(TRANSITION_ROLES)))][:count]


def check_transition_layout(op: str, specs: Sequence[Any]) -> None:
    """The columns of a transition buffer: its five roles first, then extras; scalar reward and flags of
    dtypes the graph compares to 0; an observation name beside its ring's."""
    if len(specs) < len(TRANSITION_ROLES):
        raise ValueError(f"For '{op}', 'shapes' must list at least {len(TRANSITION_ROLES)} columns "
                         f"{TRANSITION_ROLES} (then any extra columns), but got {len(specs)}.")
    for spec in specs[2:5]:
        if spec.shape != ():
            raise _errors.column_error(op, spec.name, "shape", "() (one value per environment and step)", spec.shape)
    if specs[0].name.startswith("storage."):  # the frames sit beside the ring that holds the other columns
        raise ValueError(f"For '{op}', the column name {specs[0].name[:40]!r} is taken by the buffer: its ring "
                         f"registers its Parameters as 'storage.<name>'; choose another name.")
    for spec in specs[3:5]:
        if spec.dtype in (ms.uint16, ms.uint32, ms.uint64):
            raise _errors.column_error(op, spec.name, "dtype", "bool, uint8, a signed int or a float (the graph "
                                       "compares flags to 0, which MindSpore 2.10 cannot for uint16, uint32, uint64)",
                                       spec.dtype)


def check_prefixed_names(op: str, prefix: str, names: Sequence[str]) -> None:
    """Refuse a ``prefix`` (``<attribute>.``, which a Cell holding the buffer gives its Parameters)
    that would make one of the Parameter ``names`` longer than MindSpore takes, naming that
    Parameter, instead of MindSpore's error quoting the whole name."""
    for name in names:
        full = prefix + name
        if len(full) > MAX_NAME_LENGTH:
            raise ValueError(f"For '{op}', its Parameter {shown_name(name)!r}, named {shown_name(full)!r} under the "
                             f"prefix {shown_name(prefix)!r} of the Cell that holds the buffer, must have a name of at "
                             f"most {MAX_NAME_LENGTH} characters (MindSpore's longest Parameter name), but got "
                             f"{len(full)}; choose a shorter column name or attribute name.")
