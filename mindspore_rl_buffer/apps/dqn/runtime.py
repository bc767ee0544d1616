"""MindSpore's CPU runtime threads for the application's graphs: :func:`pipeline_cpu_runtime`.

MindSpore 2.10 sizes its runtime's thread pool from the machine's cores: its actors (the threads that
dispatch a graph's kernels) get 18% of ``min(30, cores)``, at least one, and the kernels the rest.
With a single actor thread it turns its runtime pipeline off, and a graph's kernels launch one after
the other on that thread. Below 12 cores this is the default, and the many small kernels of a DQN
iteration then pay their launches in full (docs/platforms.md, "MindSpore 2.10 pitfalls").
"""
from __future__ import annotations

import math
import os

import mindspore as ms

#: The actor threads :func:`pipeline_cpu_runtime` asks for: the fewest with which MindSpore pipelines.
DISPATCH_THREADS = 2


def default_actor_threads(cores: int) -> int:
    """The actor threads MindSpore 2.10 gives its CPU runtime by default on ``cores`` cores.

    Examples:
        >>> from mindspore_rl_buffer.apps.dqn.runtime import default_actor_threads
        >>> [default_actor_threads(cores) for cores in (2, 8, 11, 12, 64)]
        [1, 1, 1, 2, 5]
    """
    return max(math.floor(min(30, cores) * 0.18), 1)


def pipeline_cpu_runtime(cores: int | None = None) -> tuple[int, int | None] | None:
    """Give MindSpore's CPU runtime two actor threads (``DISPATCH_THREADS``) where its default gives one.

    Call it before the process's first graph runs: MindSpore reads the setting when its runtime
    starts. The pool keeps the size MindSpore's default gives it where the cores allow, with
    ``cores - 2`` kernel threads (at least one). Nothing is set when the device is not a CPU, when
    there is one core, when MindSpore's default already has two actor threads (12 cores or more),
    or when the process has set its dispatch threads already (``mindspore.runtime.dispatch_threads_num``,
    which MindSpore lets a process set once): a choice made before stands.

    Args:
        cores: the machine's cores; ``os.cpu_count()`` by default.

    Returns:
        ``(actor threads, kernel threads)`` as set (kernel threads ``None`` when the process had
        set them), or ``None`` when nothing was set.
    """
    if ms.get_context("device_target") != "CPU":
        return None
    cores = (os.cpu_count() or 1) if cores is None else cores
    if cores < DISPATCH_THREADS or default_actor_threads(cores) >= DISPATCH_THREADS:
        return None
    kernels = max(cores - DISPATCH_THREADS, 1)
    try:
        ms.runtime.dispatch_threads_num(DISPATCH_THREADS)
    except RuntimeError:  # "can not be set repeatedly": the process chose before
        return None
    try:
        ms.device_context.cpu.op_tuning.threads_num(kernels)
    except RuntimeError:  # the process chose its kernel threads: they stand
        return DISPATCH_THREADS, None
    return DISPATCH_THREADS, kernels
