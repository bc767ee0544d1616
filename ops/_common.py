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

import itertools

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

ZERO = Tensor(0, ms.int32)
ASSERT = ops.Assert(summarize=8)

#: The largest capacity whose cursor arithmetic stays exact in int32: ``head + count``,
#: ``head + logical`` and the rows of a batch stay below ``2**31``.
MAX_CAPACITY = 2**30

# Streams of a seeded buffer's random operators: each random operator of a buffer built with
# ``seed=s`` is the primitive seeded ``(s, stream + STREAMS * k)``, with ``k`` the number of
# operators of that buffer and stream compiled before it, so the seed alone fixes every draw
# (see :func:`uniform_int`).
STREAMS = 64
STREAM_SAMPLE = 1
STREAM_KEYS = 2
STREAM_WINDOWS = 3
STREAM_SEGMENTS = 4
STREAM_ACCEPT = 5
STREAM_SLOTS = 6
STREAM_STRATA = 7
STREAM_GLOBAL = 8


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
        return ops.scatter_update(column, rows, values)
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
        ordered, order = ops.sort(values.astype(ms.float32))
        return ordered.astype(values.dtype), order
    return ops.sort(values)


def draws(fn):
    """Mark ``fn`` as drawing random numbers, or calling what does, as MindSpore marks its own
    random functions (``ops.uniform``): a graph then compiles it once per call site.

    Unmarked, two calls of a function with the same constant arguments share one compiled
    body, so two samples in one graph held random operators with the same seeds and drew the
    same items (with ``seed=s``, and with ``seed=None`` under ``mindspore.set_seed``). Every
    function from a buffer method down to ``uniform_int`` or ``uniform_real`` must be
    marked (``buffer_method`` in ``mindspore_rl_buffer._graph`` marks the methods), and so must
    a helper of yours that samples a buffer and is called more than once in one ``construct``;
    ``tests/test_graph.py`` samples every buffer twice in one graph. (An operator of this
    package called twice in one graph with the same ``seed`` draws the same: pass each call
    its own seed.)

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


_OWNERS = itertools.count(1)
_COMPILED: dict[tuple[int, int, int], int] = {}


def owned_seed(seed):
    """A buffer's ``seed`` as it passes it to the operators: ``None``, or ``(seed, owner)`` with
    ``owner`` unique to the buffer, which numbers that buffer's random operators apart from
    every other's (see :func:`uniform_int`)."""
    return None if seed is None else (seed, next(_OWNERS))


@ops.constexpr(reuse_result=False)
def _second_seed(seed, stream, owner):
    """``stream + STREAMS * k``, ``k`` the operators of ``(seed, stream)`` of buffer ``owner`` made before this one.

    Evaluated once per operator a graph compiles (``reuse_result=False``, as MindSpore's own
    ``_get_seed``), so two samples in one graph draw differently.
    """
    key = (seed, stream, owner)
    made = _COMPILED.get(key, 0)
    _COMPILED[key] = made + 1
    return stream + STREAMS * made


@draws
def _seeds(seed, stream):
    """The ``(seed, seed2)`` of a seeded random operator: a buffer's (:func:`owned_seed`'s pair)
    numbered as compiled; an operator's ``seed`` given as an int, ``(seed, stream)`` exactly."""
    if isinstance(seed, tuple):
        return seed[0], _second_seed(seed[0], stream, seed[1])
    return seed, stream


@draws
def uniform_int(shape, high, seed=None, stream=STREAM_SAMPLE):
    """int32 draws, uniform over ``[0, high)``; ``high`` may be a tensor (a Parameter such as ``count``).

    With ``seed=None`` this is ``ops.uniform`` and follows ``mindspore.set_seed`` as MindSpore's
    own random operators do. An int seed seeds the operator ``(seed, stream)`` exactly (two calls
    with one seed draw the same: give each its own); a buffer's seed (:func:`owned_seed`) seeds
    it ``(seed, stream + 64 * k)``, ``k`` counting that buffer's operators of the stream made
    before it, so two samples in one graph draw apart. ``ops.uniform(seed=s)`` would derive its
    second seed from a process-wide counter of all random operators, so two buffers built with
    the same seed would draw differently, and a buffer's draws would depend on the buffers built
    before it. Each compiled operator keeps its own stream of draws.
    """
    if seed is None:
        return ops.uniform(shape, ZERO, high, dtype=ms.int32)
    seed, seed2 = _seeds(seed, stream)
    return ops.UniformInt(seed=seed, seed2=seed2)(shape, ZERO, high)


@draws
def uniform_real(shape, seed=None, stream=STREAM_KEYS):
    """float32 draws, uniform over ``[0, 1)``; seeded as :func:`uniform_int`."""
    if seed is None:
        return ops.rand(shape, dtype=ms.float32)
    seed, seed2 = _seeds(seed, stream)
    return ops.UniformReal(seed=seed, seed2=seed2)(shape)


@ops.constexpr
def arange(n):
    """``[0, n)`` as an int32 constant of the graph."""
    return Tensor(np.arange(n, dtype=np.int32))


@ops.constexpr
def check_columns(capacities):
    """The capacity shared by every column; a compile-time error if the columns disagree."""
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

    A masked sum: on MindSpore 2.10's CPU, slicing a small tensor measured 0.1-0.5 ms a kernel
    (and a small MatMul 2-5 ms), where the mask and the sum take a few µs.
    """
    masked = flags.reshape((*flags.shape[:-1], 1, flags.shape[-1])).astype(ms.float32) * _spans(flags.shape[-1], spans)
    return masked.sum(-1)


def capacity_of(columns):
    """The leading dimension every column shares (checked when the graph is compiled)."""
    return check_columns(tuple(column.shape[0] for column in columns))


def as_stored(values, is_bool):
    """``values`` of a column as it is stored: a bool spec's as uint8 (there is no bool ``ScatterUpdate``)."""
    return ops.cast(values, ms.uint8) if is_bool else values


def as_read(values, is_bool):
    """``values`` read from a column stored by :func:`as_stored`: back to bool for a bool spec."""
    return ops.cast(values, ms.bool_) if is_bool else values


def guarded(outputs, ok, data):
    """``outputs``, made to depend on the assertion ``ok`` (MindSpore prints ``data`` if it fails)."""
    done = ASSERT(ok, data)
    return tuple(ops.depend(x, done) for x in outputs)
