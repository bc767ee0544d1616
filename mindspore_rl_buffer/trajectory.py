"""TrajectoryReplayBuffer: TF-Agents' ``TFUniformReplayBuffer`` over the ring core.

It holds a ring buffer, ``storage``, whose item is one time step of every segment (column
``c`` of shape ``(max_length, batch_size, *spec_c.shape)``), with ``head``/``count`` cursors
over time, and reads it through the operators of :mod:`mindspore_rl_buffer.ops`; an int64
Parameter, ``added``, counts the time steps added (TF-Agents' ``last_id + 1``) and gives
the items their ids (see :mod:`mindspore_rl_buffer.tf_agents`).
"""
from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
import optree
from mindspore import Parameter, Tensor, ops

from mindspore_rl_buffer._graph import BufferCell, Launch, buffer_method, discard, graph_nest, plain_in_graph
from mindspore_rl_buffer._validation import (
    check_bool,
    check_capacity,
    check_leaves_graph,
    check_optional_size,
    check_seed,
    check_size,
)
from mindspore_rl_buffer.checkpoint import Checkpointable, spec_record
from mindspore_rl_buffer.nest import FlatSpec, leaf_at
from mindspore_rl_buffer.ops import ring
from mindspore_rl_buffer.ops.rng import uniform_int
from mindspore_rl_buffer.replay_buffer import ReplayBuffer
from mindspore_rl_buffer.specs import MAX_ITEM_DIMS
from mindspore_rl_buffer.tf_agents import (
    BufferInfo,
    TFAgentsAPI,
    add_counter_contract,
    added_default,
    check_sample_args,
    check_stored,
    check_window_graph,
    item_ids,
)


def _host_add_batch(self: TrajectoryReplayBuffer, items: Any) -> Launch:
    leaves = self._flat.flatten("add_batch", items, (self._batch_size,))
    return Launch(self._flat.unflatten(leaves), finish=discard)


def _host_get_next(self: TrajectoryReplayBuffer, sample_batch_size: Any = None, num_steps: Any = None,
                   time_stacked: Any = True, *, op: str = "get_next") -> Launch:
    sample_batch_size, num_steps, time_stacked = check_sample_args(op, sample_batch_size, num_steps, time_stacked)
    check_stored(op, num_steps, int(self.storage.count), self._max_length)
    self._check_request_bytes(op, sample_batch_size, num_steps)

    def restore(outputs: Any) -> Any:
        items, info = outputs
        if num_steps is not None and not time_stacked:
            return tuple(self._flat.restore(item) for item in items), info
        return self._flat.restore(items), info

    return Launch(sample_batch_size, num_steps, time_stacked, finish=restore)


def _host_gather_all(self: TrajectoryReplayBuffer) -> Launch:
    stored = int(self.storage.count)

    def stored_steps(items: Any) -> Any:
        return self._flat.restore([x[:, :stored] for x in optree.tree_leaves(items)])

    return Launch(finish=stored_steps)


def _host_gathered(self: TrajectoryReplayBuffer) -> Launch:
    def to_numpy(outputs: Any) -> tuple[list[np.ndarray], np.ndarray]:
        leaves, count, added = outputs
        stored = int(count)
        ids = item_ids(int(added) - stored, stored, self._batch_size)
        return [x.asnumpy()[:, :stored] for x in leaves], ids

    return Launch(finish=to_numpy)


# The deepest data spec a graph takes: a direct add_batch of a 5-level nest failed in MindSpore 2.10
# ("List, tuple and dict nesting is not allowed more than 6 levels").
MAX_NEST_DEPTH = 4


class TrajectoryReplayBuffer(BufferCell, Checkpointable, TFAgentsAPI):
    """TF-Agents' ``TFUniformReplayBuffer`` on the device: ``batch_size`` segments of ``max_length`` steps.

    Each :meth:`add_batch` appends one time step to every segment (one per environment);
    once ``max_length`` steps are stored the oldest step is overwritten. Storage: column
    ``c`` of shape ``(max_length, batch_size, *spec_c.shape)`` with ``head``/``count``
    cursors over time, the same core and operators as :class:`ReplayBuffer`.

    Item ids (``BufferInfo.ids``, int64) are ``add * batch_size + segment``, where ``add``
    counts the ``add_batch`` calls since construction or the last :meth:`clear` (the
    ``added`` Parameter): unique among all items added since, overwritten ones included.

    Args:
        data_spec: A :class:`TensorSpec` or any nest of them (tuple, list, dict, namedtuple).
        batch_size (int): Parallel segments; every leaf added has this outer dimension.
        max_length (int): Time steps per segment. Default: ``1000``.
        seed (int): Seed of the sampling operators; ``None`` follows ``mindspore.set_seed``.
            Default: ``None``.
        dataset_drop_remainder (bool): In :meth:`as_dataset`'s deterministic pass, drop a
            window shorter than ``num_steps`` and a group of segments smaller than
            ``sample_batch_size`` instead of yielding it. Default: ``False``.
        dataset_window_shift (int): In the deterministic pass, start a window every this many
            steps (1 gives overlapping windows ``[0, 1], [1, 2], ...``); ``None`` for
            ``num_steps``, consecutive windows that do not overlap. Default: ``None``.

    Raises:
        TypeError: If a leaf of ``data_spec`` is not a TensorSpec, a size (or
            ``dataset_window_shift``) is not an int, or ``dataset_drop_remainder`` is not a bool.
        ValueError: If a size (or ``dataset_window_shift``) is not positive.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import TensorSpec, TrajectoryReplayBuffer
        >>> spec = (TensorSpec([3], ms.float32, 'action'), {'reward': TensorSpec([], ms.float32)})
        >>> rb = TrajectoryReplayBuffer(spec, batch_size=2, max_length=10)
        >>> for t in range(4):
        ...     rb.add_batch((np.full((2, 3), t, np.float32), {'reward': np.full(2, t, np.float32)}))
        >>> (action, reward), info = rb.get_next(sample_batch_size=5, num_steps=2)
        >>> action.shape, reward['reward'].shape, info.ids.shape, info.probabilities.shape
        ((5, 2, 3), (5, 2), (5, 2), (5,))
        >>> rb.gather_all()[1]['reward'].shape
        (2, 4)
        >>> [info.ids.asnumpy().tolist() for _, info in rb.as_dataset(num_steps=3, single_deterministic_pass=True)]
        [[0, 2, 4], [6], [1, 3, 5], [7]]
    """

    BINDING_SETTINGS = ("batch_size", "max_length")

    def __init__(self, data_spec: Any, batch_size: int, max_length: int = 1000, *, seed: int | None = None,
                 dataset_drop_remainder: bool = False, dataset_window_shift: int | None = None) -> None:
        super().__init__()
        op = type(self).__name__
        self._batch_size = check_size(op, "batch_size", batch_size)
        self._max_length = check_size(op, "max_length", max_length)
        # num_frames (count * batch_size) is int32 arithmetic: keep it exact.
        check_capacity(op, "batch_size * max_length", self._batch_size * self._max_length)
        self._dataset_drop_remainder = check_bool(op, "dataset_drop_remainder", dataset_drop_remainder)
        self._dataset_window_shift = check_optional_size(op, "dataset_window_shift", dataset_window_shift)
        self._flat = FlatSpec.of(data_spec)
        for i, path in enumerate(self._flat.paths):  # MindSpore's graphs build dicts of such keys only
            for key in path:
                if not isinstance(key, (str, int, float, tuple)):
                    raise TypeError(f"For '{op}', the dict keys of 'data_spec' must be str, int, float or tuple, "
                                    f"as in MindSpore's graphs, but {self._flat.describe(i)} has the key {key!r}.")
        deepest = max(range(len(self._flat.paths)), key=lambda i: len(self._flat.paths[i]))
        if len(self._flat.paths[deepest]) > MAX_NEST_DEPTH:  # MindSpore's graphs take nests of up to 6 levels
            raise ValueError(f"For '{op}', 'data_spec' must nest at most {MAX_NEST_DEPTH} levels deep (a call's "
                             f"graph takes the nest within MindSpore's limit of 6 levels), but "
                             f"{self._flat.describe(deepest)} is {len(self._flat.paths[deepest])} levels deep.")
        self._data_spec = data_spec
        self._paths = self._flat.paths
        self._template = self._flat.template
        self._descriptions = self._flat.descriptions()
        self._leaf_shapes = self._flat.shapes((self._batch_size,))
        for leaf, shape in zip(self._descriptions, self._flat.shapes(())):
            if len(shape) >= MAX_ITEM_DIMS:  # stored with a segment axis, below the rows
                raise ValueError(f"For '{op}', the shape of {leaf} must have at most {MAX_ITEM_DIMS - 1} dims (stored "
                                 f"with the segment axis and the rows in MindSpore's tensors of up to 8 dims), but got "
                                 f"{shape}.")
        self._leaf_dtypes = self._flat.dtypes()
        self._seed = check_seed(op, seed)
        self._segments = Tensor(self._batch_size, ms.int32)
        self.storage = ReplayBuffer(1, self._max_length, list(self._leaf_shapes), list(self._leaf_dtypes),
                                    names=self._column_names(), seed=self._seed)
        self.added = Parameter(Tensor(0, ms.int64), name="added", requires_grad=False)

    @property
    def data_spec(self) -> Any:
        """The nest of :class:`TensorSpec` items have."""
        return self._data_spec

    @property
    def capacity(self) -> int:
        """Items the buffer holds, ``batch_size * max_length``."""
        return self._batch_size * self._max_length

    @property
    def batch_size(self) -> int:
        """Parallel segments."""
        return self._batch_size

    @property
    def max_length(self) -> int:
        """Time steps per segment."""
        return self._max_length

    def num_frames(self):
        """Items stored (``batch_size`` times the time steps stored), an int32 scalar tensor."""
        return self.storage.size() * self._batch_size

    # ------------------------------------------------------------------------ add_batch
    @buffer_method(_host_add_batch, returns_self=True)
    def add_batch(self, items, *, check=True):
        """Append one time step to every segment.

        Args:
            items: A nest like ``data_spec``; every leaf has outer dimension ``batch_size``.

        Returns:
            None when called directly; the buffer itself inside a graph.

        Raises:
            ValueError: If the structure, a shape or a dtype does not match the spec; the
                message names the leaf path, e.g. ``the shape of items[1][0] 'lidar' must be
                (32, 5), but got (32, 4)``; nothing is written.
            TypeError: If a leaf is not a tensor or numpy array.
        """
        leaves = [leaf_at(items, path) for path in self._paths]
        check_leaves_graph("add_batch", self._descriptions, self._leaf_shapes, self._leaf_dtypes,
                           [x.shape for x in leaves], [x.dtype for x in leaves])
        _ = self.storage.insert(leaves)
        ops.assign(self.added, self.added + 1)
        return self.storage.count

    # ------------------------------------------------------------------------- get_next
    def get_next(self, sample_batch_size=None, num_steps=None, time_stacked=True):
        """Sample items: random (segment, time) picks, optionally ``num_steps`` long.

        A pick of ``num_steps`` steps stays within one segment and never crosses the write
        position (no mix of the newest and the oldest steps).

        Args:
            sample_batch_size (int): Picks; ``None`` for one pick without a batch dimension.
                Default: ``None``.
            num_steps (int): Consecutive steps per pick; ``None`` for one step without a time
                dimension. Default: ``None``.
            time_stacked (bool): Stack the steps into leaves of shape
                ``[sample_batch_size, num_steps, ...]``; otherwise return a tuple of
                ``num_steps`` items. Default: ``True``.

        Returns:
            ``(items, BufferInfo(ids, probabilities))``; ``ids`` (int64, see the class) has the
            leading shape of the items, ``probabilities`` (float32) one entry per pick:
            ``1 / (batch_size * (stored - num_steps + 1))``. Inside a graph the info is the
            plain pair ``(ids, probabilities)``: unpack it (``items, (ids, probabilities) =
            rb.get_next(...)``), which reads the same on direct calls; ``info.ids`` works on
            direct calls only.

        Raises:
            TypeError: If ``sample_batch_size`` or ``num_steps`` is not an int or None, or
                ``time_stacked`` not a bool; inside a graph, if one of them is not a Python
                constant (a ``mindspore.mutable``, say).
            ValueError: If the buffer is empty or ``num_steps`` exceeds the steps stored
                (direct calls). Inside a graph the run fails with ``RuntimeError: assert failed``
                instead, and that compiled graph cannot run again.
        """
        items, (ids, probabilities) = self._get_next(sample_batch_size, num_steps, time_stacked)
        if num_steps is not None and not time_stacked:
            items = tuple(graph_nest(self._template, step) for step in items)
        else:
            items = graph_nest(self._template, items)
        return items, plain_in_graph(BufferInfo, ids, probabilities)

    @buffer_method(_host_get_next)
    def _get_next(self, sample_batch_size, num_steps, time_stacked, *, check=True):
        # get_next's graph body: the items' leaves (a tuple of them per step when not time
        # stacked) and a plain (ids, probabilities) pair. Its constant arguments are checked
        # at compile time, as a direct call checks them.
        sample_batch_size, num_steps = check_window_graph("get_next", sample_batch_size, num_steps, time_stacked,
                                                          self._max_length)
        picks = 1 if sample_batch_size is None else sample_batch_size
        steps = 1 if num_steps is None else num_steps
        storage = self.storage
        rows, logical = ring.sample_windows(storage.head, storage.count, picks, steps, self._max_length,
                                            self.storage.rng(), check)
        segments = uniform_int((picks, 1), self._segments, self.storage.rng())
        segments = ops.broadcast_to(segments, (picks, steps))
        index = ops.stack((rows, segments), -1)
        leaves = list(storage.decode([ops.gather_nd(column, index) for column in storage.columns]))
        first_add = self.added - ops.cast(storage.count, ms.int64)
        ids = (first_add + ops.cast(logical, ms.int64)) * self._batch_size + ops.cast(segments, ms.int64)
        valid = ((storage.count - steps + 1) * self._batch_size).astype(ms.float32)
        probabilities = ops.ones((picks,), ms.float32) / valid
        if num_steps is None:
            leaves = [x[:, 0] for x in leaves]
            ids = ids[:, 0]
        if sample_batch_size is None:
            leaves = [x[0] for x in leaves]
            ids = ids[0]
            probabilities = probabilities[0]
        if num_steps is not None and not time_stacked:
            if sample_batch_size is None:
                items = tuple(tuple(x[t] for x in leaves) for t in range(num_steps))
                return items, (tuple(ids[t] for t in range(num_steps)), probabilities)
            items = tuple(tuple(x[:, t] for x in leaves) for t in range(num_steps))
            return items, (tuple(ids[:, t] for t in range(num_steps)), probabilities)
        return tuple(leaves), (ids, probabilities)

    # ----------------------------------------------------------------------- gather_all
    def gather_all(self):
        """Every stored item, as leaves of shape ``[batch_size, time, ...]``, oldest first.

        Inside a graph the time dimension is ``max_length`` (shapes are static there): the
        first ``size()`` steps are the stored ones.
        """
        return graph_nest(self._template, self._gather_all())

    @buffer_method(_host_gather_all)
    def _gather_all(self, *, check=True):
        return tuple(self._ordered_leaves())

    def _ordered_leaves(self):
        columns = self.storage.decode(ring.gather_ordered(self.storage.columns, self.storage.head))
        return [ops.swapaxes(x, 0, 1) for x in columns]

    @buffer_method(_host_gathered)
    def _gathered(self, *, check=True):
        """Every row in logical order with ``count`` and ``added`` read in the same launch."""
        return self._ordered_leaves(), self.storage.count + 0, self.added + 0

    def _gather_numpy(self) -> tuple[list[np.ndarray], np.ndarray]:
        return self._gathered()

    def _draw(self, op: str, sample_batch_size: int | None, num_steps: int | None) -> tuple[Any, BufferInfo]:
        items, (ids, probabilities) = self._get_next(sample_batch_size, num_steps, True, op=op)
        return graph_nest(self._template, items), BufferInfo(ids, probabilities)

    def _pass_limits(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return ("batch_size", self._batch_size), ("max_length", self._max_length)

    # --------------------------------------------------------------------------- clear
    @buffer_method(returns_self=True)
    def clear(self, *, check=True):
        """Empty the buffer: cursors and the add counter back to 0, so ids start again from 0
        (as TF-Agents' ``clear`` resets its ``last_id``); nothing is re-allocated.

        A bare ``self.buffer.clear()`` statement works inside a ``construct``: although
        ``clear`` is on the list of names MindSpore's parser treats as list methods, MindSpore
        2.10 was measured to leave that statement alone (tested). Should a later MindSpore
        rebind the buffer as it does for ``insert(...)``, the buffer raises the same error
        naming the fix.
        """
        count = self.storage.reset()
        ops.assign(self.added, ops.zeros_like(self.added))
        return count

    # ------------------------------------------------------------------------- records
    def checkpoint_record(self) -> dict[str, Any]:
        """See ``mindspore_rl_buffer.checkpoint.Checkpointable``."""
        specs = [spec.__class__(spec.shape, spec.dtype, name)
                 for spec, name in zip(self._flat.specs, self._column_names())]
        settings = {"batch_size": self._batch_size, "max_length": self._max_length, "seed": self._seed,
                    "dataset_drop_remainder": self._dataset_drop_remainder,
                    "dataset_window_shift": self._dataset_window_shift}
        return {"type": type(self).__name__, "capacity": self.capacity, "specs": spec_record(tuple(specs)),
                "settings": settings, "leaf_paths": self._leaf_paths()}

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The add counter against the storage's cursors (the storage checks its own contract)."""
        problem = add_counter_contract(int(read(self.added)), int(read(self.storage.head)),
                                       int(read(self.storage.count)), self._max_length, self._batch_size)
        return [problem] if problem else []

    def checkpoint_defaults(self, read: Any) -> dict[Any, np.ndarray]:
        """Files written before the add counter existed: see ``mindspore_rl_buffer.tf_agents.added_default``."""
        added = added_default(read(self.storage.head), read(self.storage.count))
        return {} if added is None else {self.added: added}
