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


def guarded(outputs, ok, data):
    """``outputs``, made to depend on the assertion ``ok`` (MindSpore prints ``data`` if it fails)."""
    done = ASSERT(ok, data)
    return tuple(ops.depend(x, done) for x in outputs)
