"""What the TF-Agents face shares: ``BufferInfo``, item ids, ``as_dataset`` and ``as_mindspore_dataset``.

:class:`TFAgentsAPI` gives :class:`~mindspore_rl_buffer.TrajectoryReplayBuffer` and
:class:`~mindspore_rl_buffer.PyUniformReplayBuffer` TF-Agents' dataset methods over two
hooks each implements: ``_draw`` (one random draw and its :class:`BufferInfo`) and
``_gather_numpy`` (every stored item as numpy ``[segments, time, ...]`` leaves, oldest
first, with their ids).

**Item ids.** Both buffers count what was added since construction or the last ``clear()``,
as TF-Agents counts its adds (``last_id``): an item's id is ``add * segments + segment``,
where ``add`` is the index of the ``add_batch`` call (the time step) that wrote it, from 0,
and ``segments`` is ``batch_size`` (1 for the numpy buffer, whose ``add`` counts items).
Ids are int64 and unique among everything added since the last ``clear()``, overwritten
items included, so an id never names two items, as keys of priority updates need;
``id // segments`` is the item's time step and ``id % segments`` its segment. With one
segment they are TF-Agents' ids exactly.
"""
from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from mindspore import Tensor

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._graph_checks import SAMPLE_SHAPE, graph_check, refuse_variable
from mindspore_rl_buffer._validation import check_bool, check_not_empty, check_optional_size
from mindspore_rl_buffer.contracts import held_int
from mindspore_rl_buffer.nest import FlatSpec
from mindspore_rl_buffer.replay_buffer import replay_buffer_attributes
from mindspore_rl_buffer.specs import check_batch_bytes


# ----------------------------------------------------------------- sampling arguments
def check_sample_args(op: str, sample_batch_size: Any, num_steps: Any,
                      time_stacked: Any = True) -> tuple[int | None, int | None, bool]:
    """The arguments shared by ``get_next`` and ``as_dataset``, checked; returned as Python ints
    (a numpy integer, which MindSpore's graphs do not take as a shape, included)."""
    return (check_optional_size(op, "sample_batch_size", sample_batch_size),
            check_optional_size(op, "num_steps", num_steps), check_bool(op, "time_stacked", time_stacked))


def _check_window_length(op: str, num_steps: int | None, max_length: int) -> int:
    steps = 1 if num_steps is None else num_steps
    if steps > max_length:
        raise ValueError(f"For '{op}', 'num_steps' ({steps}) must not exceed the {max_length} time steps "
                         f"the buffer can hold.")
    return steps


def check_window(op: str, sample_batch_size: Any, num_steps: Any, time_stacked: Any, max_length: int) -> None:
    """:func:`check_sample_args`, and windows no longer than the buffer holds: what a graph can check."""
    check_sample_args(op, sample_batch_size, num_steps, time_stacked)
    _check_window_length(op, num_steps, max_length)


@graph_check
def check_window_graph(op: str, sample_batch_size: Any, num_steps: Any, time_stacked: Any,
                       max_length: int) -> tuple[int | None, int | None]:
    """:func:`check_window` when a graph compiles, where the three arguments must be Python constants
    (they fix the sample's shape and structure); returns ``(sample_batch_size, num_steps)``."""
    refuse_variable(op, "sample_batch_size", sample_batch_size, "an int or None", SAMPLE_SHAPE)
    refuse_variable(op, "num_steps", num_steps, "an int or None", SAMPLE_SHAPE)
    refuse_variable(op, "time_stacked", time_stacked, "a bool", "the structure of the sample")
    check_window(op, sample_batch_size, num_steps, time_stacked, max_length)
    return sample_batch_size, num_steps


def check_stored(op: str, num_steps: int | None, stored: int, max_length: int) -> None:
    """Refuse to sample an empty buffer, or windows longer than what is stored."""
    steps = _check_window_length(op, num_steps, max_length)
    check_not_empty(op, stored)
    if steps > stored:
        raise ValueError(f"For '{op}', 'num_steps' ({steps}) must not exceed the {stored} time steps stored.")


def check_deterministic_pass(op: str, sample_batch_size: int | None, num_steps: int | None,
                             limits: tuple[tuple[str, int], tuple[str, int]], drop_remainder: bool) -> None:
    """Refuse a deterministic pass that would drop ALL data, whatever is stored.

    ``limits`` names the segments and the time steps a segment can hold with their values
    (``(('batch_size', 2), ('max_length', 3))``). With ``drop_remainder`` a group of segments
    smaller than ``sample_batch_size`` and a window shorter than ``num_steps`` are dropped; with
    a ``sample_batch_size``, short windows always are.
    """
    (segments_arg, segments), (length_arg, length) = limits
    if drop_remainder and sample_batch_size is not None and sample_batch_size > segments:
        raise ValueError(f"For '{op}', 'sample_batch_size' ({sample_batch_size}) must not exceed '{segments_arg}' "
                         f"({segments}) with dataset_drop_remainder=True: ALL data would be dropped by the "
                         f"deterministic pass.")
    if num_steps is not None and num_steps > length and (drop_remainder or sample_batch_size is not None):
        why = "dataset_drop_remainder=True" if drop_remainder else "a sample_batch_size (batched windows are whole)"
        raise ValueError(f"For '{op}', 'num_steps' ({num_steps}) must not exceed '{length_arg}' ({length}) with "
                         f"{why}: ALL data would be dropped by the deterministic pass.")


BufferInfo = collections.namedtuple("BufferInfo", ["ids", "probabilities"])
BufferInfo.__doc__ = """What a draw took: the items' ids (int64, see ``mindspore_rl_buffer.tf_agents``)
and each pick's sampling probability (float32)."""


# The columns as_mindspore_dataset adds after the leaves' (the second only when sampling).
_INFO_COLUMNS = ("ids", "probabilities")


def item_ids(first_add: int, steps: int, segments: int) -> np.ndarray:
    """The ids of ``steps`` consecutive time steps of every segment, from add ``first_add``:
    int64, shape ``[segments, steps]``.

    Examples:
        >>> item_ids(5, 3, 2).tolist()   # adds 5, 6, 7 of segments 0 and 1
        [[10, 12, 14], [11, 13, 15]]
    """
    adds = first_add + np.arange(steps, dtype=np.int64)
    return adds[None, :] * segments + np.arange(segments, dtype=np.int64)[:, None]


# The largest add counter times the segments a checkpoint may hold: item ids (``add * segments +
# segment``) stay far from int64's end, and no buffer adds 2**62 time steps.
MAX_ADDED_ITEMS = 2**62


def add_counter_contract(added: int, head: int, count: int, length: int, segments: int = 1) -> str | None:
    """What breaks the add counter's contract with the ring's cursors, or ``None``.

    ``added`` items (time steps of ``segments`` parallel segments) went into a ring of
    ``length`` rows that holds ``count`` of them from ``head``: so ``added >= count``,
    ``head == (added - count) % length`` and ``added * segments <= 2**62``, which keeps every
    item id in int64.

    Examples:
        >>> add_counter_contract(6, 2, 4, 4) is None
        True
        >>> add_counter_contract(2**62, 0, 4, 4, segments=2)
        'added=4611686018427387904 must be >= count=4 with (added - count) % 4 == head=0 and added * 2 <= 2**62'
    """
    if added < count or (added - count) % length != head or added * segments > MAX_ADDED_ITEMS:
        return (f"added={added} must be >= count={count} with (added - count) % {length} == head={head} "
                f"and added * {segments} <= 2**62")
    return None


def added_default(head: Any, count: Any) -> np.ndarray | None:
    """The add counter of a file written before it existed: ``added = head + count``, the smallest
    count of adds that leaves the cursors where the file has them; ``None`` if a cursor is
    missing or corrupt (the shape and dtype checks name it)."""
    head, count = held_int(head), held_int(count)
    return None if head is None or count is None else np.array(head + count, np.int64)


def deterministic_pass(leaves: list[np.ndarray], ids: np.ndarray, sample_batch_size: int | None,
                       num_steps: int | None, drop_remainder: bool = False,
                       window_shift: int | None = None) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
    """Every stored item once, in order, as TF-Agents' single deterministic pass.

    ``leaves`` are ``[segments, time, ...]`` in logical order (oldest first), ``ids`` is
    ``[segments, time]``.

    * Without ``sample_batch_size``, segment after segment. With ``num_steps`` each
      segment's time axis is cut into windows of ``num_steps`` steps starting every
      ``window_shift`` steps (``None``: every ``num_steps``, so the windows do not
      overlap); the last windows of a segment may be shorter, and are kept unless
      ``drop_remainder`` (``max_length=5, num_steps=2`` gives ``[0, 1], [2, 3], [4]``).
    * With ``sample_batch_size``, segments in groups of that many (a smaller last group is
      kept unless ``drop_remainder``), every segment of a group stepping through time
      together: elements ``[group, ...]``, or with ``num_steps`` ``[group, num_steps, ...]``
      windows cut per group as above, of which short ones are always dropped (as TF-Agents).
      A window never spans two groups.
    """
    segments, length = ids.shape
    if num_steps is None:
        times: list[Any] = list(range(length))
    else:
        shift = num_steps if window_shift is None else window_shift
        keep_short = sample_batch_size is None and not drop_remainder
        times = [slice(start, start + num_steps) for start in range(0, length, shift)
                 if keep_short or start + num_steps <= length]
    if sample_batch_size is None:
        for segment in range(segments):
            for time in times:
                yield [leaf[segment, time] for leaf in leaves], ids[segment, time]
        return
    for first in range(0, segments, sample_batch_size):
        if drop_remainder and first + sample_batch_size > segments:
            return
        group = slice(first, first + sample_batch_size)
        for time in times:
            yield [leaf[group, time] for leaf in leaves], ids[group, time]


def _host(x: Any) -> Any:
    return x.asnumpy() if isinstance(x, Tensor) else x


class TFAgentsAPI:
    """``as_dataset`` and ``as_mindspore_dataset`` over ``_draw`` and ``_gather_numpy``."""

    _flat: FlatSpec

    def _check_request_bytes(self, op: str, sample_batch_size: int | None, num_steps: int | None) -> None:
        """Bound what one ``get_next`` allocates, as a sample's items are bounded (after the argument checks)."""
        check_batch_bytes(op, "sample_batch_size * num_steps", (sample_batch_size or 1) * (num_steps or 1),
                          self._flat.specs)
    # What the deterministic pass yields: tensors (device buffers) or numpy arrays (host buffers).
    _YIELDS_TENSORS = True
    # Whether as_dataset yields the items alone (TF-Agents' numpy buffer) or (items, BufferInfo).
    _ITEMS_ALONE = False
    _dataset_drop_remainder = False
    _dataset_window_shift: int | None = None

    def _column_names(self) -> list[str]:
        """The leaves' column names: names the ring ``storage`` of a :class:`TrajectoryReplayBuffer` can hold,
        registered as ``storage.<name>`` (:meth:`FlatSpec.column_names`), other than the info columns of
        :meth:`as_mindspore_dataset`; the same for the numpy buffer, whose items move to the device."""
        return self._flat.column_names(replay_buffer_attributes() | frozenset(_INFO_COLUMNS), prefix="storage.")

    def _leaf_paths(self) -> list[list[Any]]:
        """The leaves' paths in the nest, JSON-ready (a record's ``leaf_paths``): two specs of the
        same leaves in other nests (a dict's keys renamed) hold their data in other places."""
        return [[key if isinstance(key, (str, int)) else {"repr": repr(key)} for key in path]
                for path in self._flat.paths]

    def _draw(self, op: str, sample_batch_size: int | None, num_steps: int | None) -> tuple[Any, BufferInfo]:
        """Hook: one random draw (``get_next``'s arguments, time stacked) and its :class:`BufferInfo`; an
        error names ``op``, the method that streams."""
        raise NotImplementedError

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Hook: every stored item as numpy leaves ``[segments, time, ...]``, oldest first, and their ids."""
        raise NotImplementedError

    def _pass_limits(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """Hook: the segments and the time steps a segment holds, named as the constructor names them."""
        raise NotImplementedError

    def as_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                   num_parallel_calls: int | None = None, single_deterministic_pass: bool = False):
        """An iterable over the buffer's items for training loops, as TF-Agents' ``as_dataset``.

        Each element is what :meth:`get_next` returns for the same arguments: ``(items,
        BufferInfo)`` for :class:`~mindspore_rl_buffer.TrajectoryReplayBuffer`, the items alone
        for :class:`~mindspore_rl_buffer.PyUniformReplayBuffer`. In the deterministic pass the
        ``BufferInfo`` holds the ids and an empty tuple of probabilities.

        Args:
            sample_batch_size (int): Items per element; ``None`` for single items. Default: ``None``.
            num_steps (int): Consecutive time steps per item; ``None`` for single steps.
                Default: ``None``.
            num_parallel_calls (int): Accepted for TF-Agents compatibility; calls are made one
                at a time. Default: ``None``.
            single_deterministic_pass (bool): Walk every stored item once in order instead of
                sampling forever (see ``deterministic_pass`` in ``mindspore_rl_buffer.tf_agents``; the buffer's
                ``dataset_drop_remainder`` and ``dataset_window_shift`` apply). What is stored
                is read when iteration starts. Default: ``False``.

        Returns:
            An iterable; each ``iter()`` starts afresh. Sampling is endless; the
            deterministic pass ends after the last item.

        Raises:
            TypeError: If an argument has the wrong type.
            ValueError: If a size is not positive, or the deterministic pass would drop all
                data (``sample_batch_size > batch_size`` with ``dataset_drop_remainder``;
                ``num_steps > max_length`` with ``dataset_drop_remainder`` or a
                ``sample_batch_size``). Iterating an empty buffer raises ``ValueError``.
        """
        stream = self._stream("as_dataset", sample_batch_size, num_steps, num_parallel_calls,
                              single_deterministic_pass)
        if self._ITEMS_ALONE:
            return _Iterable(lambda: (items for items, _ in stream()))
        return _Iterable(stream)

    def _stream(self, op: str, sample_batch_size: int | None, num_steps: int | None,
                num_parallel_calls: int | None, single_deterministic_pass: bool
                ) -> Callable[[], Iterator[tuple[Any, BufferInfo]]]:
        """Check the arguments; return a function that starts the stream of ``(items, BufferInfo)``."""
        sample_batch_size, num_steps, _ = check_sample_args(op, sample_batch_size, num_steps)
        check_optional_size(op, "num_parallel_calls", num_parallel_calls)
        check_bool(op, "single_deterministic_pass", single_deterministic_pass)
        if single_deterministic_pass:
            check_deterministic_pass(op, sample_batch_size, num_steps, self._pass_limits(),
                                     self._dataset_drop_remainder)
            return lambda: self._deterministic_pass(sample_batch_size, num_steps)
        return lambda: self._sampler(op, sample_batch_size, num_steps)

    def _sampler(self, op: str, sample_batch_size: int | None,
                 num_steps: int | None) -> Iterator[tuple[Any, BufferInfo]]:
        while True:
            yield self._draw(op, sample_batch_size, num_steps)

    def _deterministic_pass(self, sample_batch_size: int | None,
                            num_steps: int | None) -> Iterator[tuple[Any, BufferInfo]]:
        leaves, ids = self._gather_numpy()
        if ids.shape[1] == 0:
            raise _errors.empty_error("as_dataset")
        wrap = (lambda arrays: [Tensor(np.array(a, copy=True)) for a in arrays]) if self._YIELDS_TENSORS \
            else (lambda arrays: arrays)
        for chunk, chunk_ids in deterministic_pass(leaves, ids, sample_batch_size, num_steps,
                                                   self._dataset_drop_remainder, self._dataset_window_shift):
            yield self._flat.unflatten(wrap(chunk)), BufferInfo(wrap([chunk_ids])[0], ())

    def as_mindspore_dataset(self, sample_batch_size: int | None = None, num_steps: int | None = None,
                             single_deterministic_pass: bool = False, num_samples: int | None = None):
        """The stream of :meth:`as_dataset`, as a ``mindspore.dataset.GeneratorDataset``.

        Columns: one per leaf of the data spec (named as the buffer's columns), then ``ids``
        and, when sampling, ``probabilities``, for both buffers (the numpy buffer's
        ``as_dataset`` yields the items alone; its dataset has these columns too). The
        pipeline reads in a thread of its own; the buffer serialises its direct calls with a
        lock, and MindSpore's prefetch means a sampled batch may be a few batches older than
        the newest ``add_batch``.

        Args:
            sample_batch_size (int): As in :meth:`as_dataset`. Default: ``None``.
            num_steps (int): As in :meth:`as_dataset`. Default: ``None``.
            single_deterministic_pass (bool): As in :meth:`as_dataset`. Default: ``False``.
            num_samples (int): Stop after this many elements; ``None`` samples without end.
                Default: ``None``.

        Returns:
            ``mindspore.dataset.GeneratorDataset``.

        Raises:
            TypeError: If an argument has the wrong type.
            ValueError: As :meth:`as_dataset`.
        """
        import mindspore.dataset as ds

        op = "as_mindspore_dataset"
        check_optional_size(op, "num_samples", num_samples)
        stream = self._stream(op, sample_batch_size, num_steps, None, single_deterministic_pass)
        names = [*self._column_names(), *_INFO_COLUMNS[:1 if single_deterministic_pass else 2]]

        def rows():
            for n, (items, info) in enumerate(stream()):
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
    """Each ``iter()`` starts the stream afresh, like a ``tf.data.Dataset``."""

    def __init__(self, start: Callable[[], Iterator[Any]]) -> None:
        self._start = start

    def __iter__(self) -> Iterator[Any]:
        return self._start()
