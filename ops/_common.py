"""Helpers the operator modules share: constants, compile-time checks and the runtime guard.

Private to ``mindspore_rl_buffer.ops``. The runtime guard is one ``Assert`` kernel whose
failure ends the graph's run with ``RuntimeError: assert failed`` (MindSpore prints the
offending values); the guarded outputs depend on it, so no value leaves a failed run. A
Python ``raise`` under a tensor condition would give a nicer message but costs control
flow, about 0.3 ms a call on CPU, where the assertion is free. MindSpore refuses to run a
graph again after it failed, so callers that can check on the host first (the direct-call
path) pass ``check=False`` to the operators.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

ZERO = Tensor(0, ms.int32)
ASSERT = ops.Assert(summarize=8)
# Primitive instances where the Tensor methods and ``ops`` wrappers would compile a function graph
# of their own for each call (``Tensor.astype``, ``ops.bitwise_right_shift``): one node each.
REDUCE_ANY = ops.ReduceAny()
MAP = ops.Map()
CAST = ops.Cast()
REDUCE_SUM = ops.ReduceSum()
RIGHT_SHIFT = ops.RightShift()
GATHER = ops.Gather()
SCATTER_UPDATE = ops.ScatterUpdate()
BITWISE_AND = ops.BitwiseAnd()
BITWISE_XOR = ops.BitwiseXor()
EXPAND_DIMS = ops.ExpandDims()
SHAPE = ops.Shape()
DTYPE = ops.DType()

#: The largest capacity whose cursor arithmetic stays exact in int32: ``head + count``,
#: ``head + logical`` and the rows of a batch stay below ``2**31``.
MAX_CAPACITY = 2**30

# MindSpore 2.10's GPU Sort sorts a row of up to this many keys of any dtype in place; longer
# rows only as float16/float32 (``sort_gpu_kernel.cc``; docs/platforms.md). float32 holds
# every integer below FLOAT32_EXACT exactly.
GPU_SORT_ANY_DTYPE = 4096
FLOAT32_EXACT = 2**24


# The column dtypes MindSpore 2.10's GPU ScatterUpdate registers (scatter_functor_gpu_kernel.cc);
# ScatterNdUpdate registers every dtype (docs/platforms.md).
SCATTER_UPDATE_DTYPES = (ms.float16, ms.float32, ms.int8, ms.uint8, ms.int32, ms.int64)


def write_rows(column, rows, values):
    """In place: ``column[rows] = values`` (``rows`` int32; a repeated row must carry equal values), on any device.

    ``ScatterUpdate`` where MindSpore's GPU kernel takes the column's dtype, ``ScatterNdUpdate``
    otherwise (float64: the GPU ScatterUpdate has no float64 kernel).
    """
    if column.dtype in SCATTER_UPDATE_DTYPES:
        return SCATTER_UPDATE(column, rows, values)
    return ops.scatter_nd_update(column, rows.reshape((-1, 1)), values)


def sort_ints(values, bound=None):
    """``ops.sort`` of integer ``values`` in ``[0, bound)``, in a form MindSpore's GPU Sort accepts.

    Rows longer than :data:`GPU_SORT_ANY_DTYPE` sort as float32 keys, exact for ``bound <=
    2**24``; shorter rows (and larger or unknown bounds, ``None``, documented as unverified on
    GPU) sort as they are.

    Returns:
        Tuple of 2: the sorted values (the dtype of ``values``) and their positions (int32).
    """
    if values.shape[-1] > GPU_SORT_ANY_DTYPE and bound is not None and bound <= FLOAT32_EXACT:
        ordered, order = ops.sort(CAST(values, ms.float32))
        return CAST(ordered, values.dtype), order
    return ops.sort(values)


def draws(fn):
    """Mark ``fn`` as drawing random numbers, or calling what does, as MindSpore marks its own
    random functions (``ops.uniform``): a graph then compiles it once per call site.

    The buffers and the operators of this package draw from a generator whose state is a
    pair of Parameters (:mod:`mindspore_rl_buffer.ops.rng`): every draw reads and advances
    its counter, so two calls of one function in one graph draw apart with or without this
    mark. It is kept so that code which marks its sampling helpers keeps working; marking a
    helper makes MindSpore compile each of its call sites apart, as it does for
    ``ops.uniform``.

    Examples:
        >>> from mindspore_rl_buffer.ops import draws
        >>> @draws
        ... def learn_batch(buffer):
        ...     return buffer.sample()
        >>> learn_batch.__name__
        'learn_batch'
    """
    fn.__function_forbid_reuse__ = True  # the attribute MindSpore's own decorator sets
    return fn


@ops.constexpr
def arange(n):
    """``[0, n)`` as an int32 constant of the graph."""
    return Tensor(np.arange(n, dtype=np.int32))


@ops.constexpr
def check_columns(shapes):
    """The capacity shared by every column (of shapes ``shapes``); a compile-time error if they disagree."""
    capacities = tuple(shape[0] for shape in shapes)
    if len(set(capacities)) != 1:
        raise ValueError(f"all columns must share their leading capacity, but got {capacities}.")
    return capacities[0]


@ops.constexpr
def offsets(start, stop):
    """``[start, stop)`` as an int32 constant of the graph (``start`` may be negative)."""
    return Tensor(np.arange(start, stop, dtype=np.int32))


@ops.constexpr
def _spans(length, spans):
    """A float32 ``(len(spans), length)`` mask whose row ``j`` is 1 on ``[start_j, stop_j)``."""
    mask = np.zeros((len(spans), length), np.float32)
    for j, (start, stop) in enumerate(spans):
        mask[j, start:stop] = 1
    return Tensor(mask)


def masked_counts(flags, spans):
    """How many of ``flags[..., start:stop]`` are true, per span (float32, ``(..., len(spans))``).

    A masked sum: two kernels whatever the number of spans, where a slice and a sum per span
    would launch two kernels each.
    """
    masked = CAST(flags.reshape((*flags.shape[:-1], 1, flags.shape[-1])), ms.float32) * _spans(flags.shape[-1], spans)
    return REDUCE_SUM(masked, -1)


def each(fn, values, arg=None):
    """``tuple(fn(value) for value in values)``, or ``fn(arg, value)`` with ``arg``, as one ``ops.Map`` for the graphs.

    MindSpore 2.10 compiles a comprehension or a generator expression in a graph through a slow
    path (about 0.1 s each), and a loop that appends to a list compiles a function graph for
    every append, index and the final ``tuple()``; ``Map`` compiles ``fn`` once per column type
    (docs/platforms.md). Graph code uses it, or a loop that concatenates tuples. ``fn`` is best a
    primitive instance or a function of primitive instances (:func:`take_rows`,
    :func:`leading_axis`): an ``ops`` wrapper compiles as graphs of its own for every column type.
    ``arg``, shared by every call, comes first (``ops.partial`` binds it).

    Examples:
        >>> from mindspore import ops, Tensor
        >>> from mindspore_rl_buffer.ops._common import each, leading_axis
        >>> each(leading_axis, (Tensor([1, 2]), Tensor([3])))[0].shape
        (1, 2)
    """
    if arg is None:
        return MAP(fn, values)
    return MAP(ops.partial(fn, arg), values)


def take_rows(rows, column):
    """``column[rows]``, rows along the first axis (``ops.gather(column, rows, 0)``'s kernel)."""
    return GATHER(column, rows, 0)


def leading_axis(values):
    """``values`` with a new leading axis of length 1 (``ops.expand_dims(values, 0)``'s kernel)."""
    return EXPAND_DIMS(values, 0)


def capacity_of(columns):
    """The leading dimension every column shares (checked when the graph is compiled)."""
    return check_columns(each(SHAPE, columns))


def as_stored(values, is_bool):
    """``values`` of a column as it is stored: a bool spec's as uint8 (there is no bool ``ScatterUpdate``)."""
    return ops.cast(values, ms.uint8) if is_bool else values


def as_read(values, is_bool):
    """``values`` read from a column stored by :func:`as_stored`: back to bool for a bool spec."""
    return ops.cast(values, ms.bool_) if is_bool else values


def guarded(outputs, ok, data):
    """``outputs``, made to depend on the assertion ``ok`` (MindSpore prints ``data`` if it fails)."""
    done = ASSERT(ok, data)
    return each(_after, outputs, done)


def _after(done, value):
    """``value``, made to depend on ``done``."""
    return ops.depend(value, done)
