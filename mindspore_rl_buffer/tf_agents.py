"""What the TF-Agents face shares: ``BufferInfo``, ``as_dataset`` and ``as_mindspore_dataset``.

:class:`TFAgentsAPI` gives :class:`~mindspore_rl_buffer.TrajectoryReplayBuffer` and
:class:`~mindspore_rl_buffer.PyUniformReplayBuffer` TF-Agents' dataset methods over two
hooks each implements: ``get_next`` and ``_gather_numpy`` (every stored item as numpy
``[segments, time, ...]`` leaves, oldest first, with their ids).
"""
from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._validation import check_bool, check_optional_size, check_sample_args
from mindspore_rl_buffer.nest import FlatSpec

BufferInfo = collections.namedtuple("BufferInfo", ["ids", "probabilities"])
BufferInfo.__doc__ = """What :meth:`get_next` drew: the items' ids and each pick's sampling probability."""


def deterministic_pass(leaves: list[np.ndarray], ids: np.ndarray, sample_batch_size: int | None,
                       num_steps: int | None) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
    """Every stored item once, in order: segment by segment, oldest first (as TF-Agents).

    ``leaves`` are ``[segments, time, ...]`` in logical order. With ``num_steps`` the time
    axis is cut into consecutive, non-overlapping windows (a last partial window is
    dropped); with ``sample_batch_size`` segments are read in groups of that many, the last
    group possibly smaller, all segments of a group stepping through time together.
    """
    segments, length = ids.shape
    steps = 1 if num_steps is None else num_steps
    starts = range(0, length - steps + 1, steps)
    group = 1 if sample_batch_size is None else sample_batch_size
    for first in range(0, segments, group):
        chosen = slice(first, first + group)
        for start in starts:
            time = start if num_steps is None else slice(start, start + steps)
            if sample_batch_size is None:
                yield [leaf[first, time] for leaf in leaves], ids[first, time]
            else:
                yield [leaf[chosen, time] for leaf in leaves], ids[chosen, time]


def _host(x: Any) -> Any:
    return x.asnumpy() if isinstance(x, Tensor) else x


class TFAgentsAPI:
    """``as_dataset`` and ``as_mindspore_dataset`` over ``get_next`` and ``_gather_numpy``."""

    _flat: FlatSpec
    # What the deterministic pass yields: tensors (device buffers) or numpy arrays (host buffers).
    _YIELDS_TENSORS = True

    def get_next(self, sample_batch_size=None, num_steps=None, time_stacked=True):
        raise NotImplementedError

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Hook: every stored item as numpy leaves ``[segments, time, ...]``, oldest first, and their ids."""
        raise NotImplementedError

    def as_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                   num_parallel_calls: int | None = None, single_deterministic_pass: bool = False):
        """An iterable of ``(items, BufferInfo)`` for training loops.

        Args:
            sample_batch_size (int): Items per element; ``None`` for single items. Default: ``None``.
            num_steps (int): Consecutive time steps per item; ``None`` for single steps.
                Default: ``None``.
            num_parallel_calls (int): Accepted for TF-Agents compatibility; calls are made one
                at a time. Default: ``None``.
            single_deterministic_pass (bool): Walk every stored item once in order (segment by
                segment, oldest first) instead of sampling forever. Default: ``False``.

        Returns:
            An iterable; sampling is endless, the deterministic pass ends after the last item.
        """
        op = "as_dataset"
        check_sample_args(op, sample_batch_size, num_steps)
        check_optional_size(op, "num_parallel_calls", num_parallel_calls)
        check_bool(op, "single_deterministic_pass", single_deterministic_pass)
        if single_deterministic_pass:
            return _Iterable(self._deterministic_pass, sample_batch_size, num_steps)
        return _Iterable(self._sampler, sample_batch_size, num_steps)

    def _sampler(self, sample_batch_size: int | None, num_steps: int | None) -> Iterator[Any]:
        while True:
            yield self.get_next(sample_batch_size, num_steps)

    def _deterministic_pass(self, sample_batch_size: int | None, num_steps: int | None) -> Iterator[Any]:
        leaves, ids = self._gather_numpy()
        if ids.shape[1] == 0:
            raise _errors.empty_error("as_dataset")
        wrap = (lambda arrays: [Tensor(np.array(a, copy=True)) for a in arrays]) if self._YIELDS_TENSORS \
            else (lambda arrays: arrays)
        for chunk, chunk_ids in deterministic_pass(leaves, ids, sample_batch_size, num_steps):
            yield self._flat.unflatten(wrap(chunk)), BufferInfo(wrap([chunk_ids])[0], ())

    def as_mindspore_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                             single_deterministic_pass: bool = False, num_samples: int | None = None):
        """The same stream as :meth:`as_dataset`, as a ``mindspore.dataset.GeneratorDataset``.

        Columns: one per leaf of the data spec (named as the buffer's columns), then ``ids``
        and, when sampling, ``probabilities``. The pipeline reads in a thread of its own; the
        buffer serialises its direct calls with a lock, and MindSpore's prefetch means a
        sampled batch may be a few batches older than the newest ``add_batch``.

        Args:
            num_samples (int): Stop after this many elements; ``None`` samples without end.
                Default: ``None``.
        """
        import mindspore.dataset as ds

        check_optional_size("as_mindspore_dataset", "num_samples", num_samples)
        dataset = self.as_dataset(sample_batch_size, num_steps, None, single_deterministic_pass)
        names = [*self._flat.column_names(), "ids"] + ([] if single_deterministic_pass else ["probabilities"])

        def rows():
            for n, (items, info) in enumerate(dataset):
                if num_samples is not None and n >= num_samples:
                    return
                leaves = [np.asarray(_host(x)) for x in self._flat.leaves(items)]
                extra = [np.asarray(_host(info.ids))]
                if not single_deterministic_pass:
                    extra.append(np.asarray(_host(info.probabilities)))
                yield tuple(leaves + extra)

        return ds.GeneratorDataset(rows, column_names=names, shuffle=False, num_parallel_workers=1,
                                   python_multiprocessing=False)


class _Iterable:
    """Each ``iter()`` starts the generator afresh, like a ``tf.data.Dataset``."""

    def __init__(self, generate: Any, sample_batch_size: int | None, num_steps: int | None) -> None:
        self._generate, self._sample_batch_size, self._num_steps = generate, sample_batch_size, num_steps

    def __iter__(self) -> Iterator[Any]:
        return self._generate(self._sample_batch_size, self._num_steps)
