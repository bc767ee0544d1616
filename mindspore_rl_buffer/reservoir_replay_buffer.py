"""ReservoirReplayBuffer: a uniform sample of everything ever inserted (algorithm R), on the device."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mindspore as ms
from mindspore import Parameter, Tensor, ops

from mindspore_rl_buffer._validation import check_seeds, check_types
from mindspore_rl_buffer.ops import reservoir
from mindspore_rl_buffer.replay_buffer import ReplayBuffer


class ReservoirReplayBuffer(ReplayBuffer):
    """A reservoir: after any number of inserts, a uniform sample of all items ever inserted.

    Vitter's algorithm R: the first ``capacity`` items fill the slots in order; after that,
    the ``k``-th item inserted replaces a uniformly chosen slot with probability
    ``capacity / k`` and is dropped otherwise, so each of the ``seen`` items inserted so far
    is stored with probability ``capacity / seen``. A batch follows the same law item by
    item (of several items of one batch drawn into the same slot, the later one stays).
    Used for average-policy learning such as Deep CFR.

    State: the columns, ``count`` (``min(seen, capacity)``), ``head`` (always 0) and the
    int64 ``seen``. The stored items are the slots ``[0, size())``; :meth:`get_item` takes
    a slot (not an age: a reservoir keeps no order once full) and :meth:`sample` draws
    uniformly from the stored items, with replacement (``ordered=True`` sorts by slot).
    :meth:`reset` empties the buffer and restarts ``seen`` at 0, so a new stream starts
    fresh.

    Args:
        capacity (int): Items the reservoir holds.
        sample_size (int): Items per :meth:`sample`.
        shapes (list[tuple[int]]): The shape of one item, per column.
        types (list[mindspore.dtype]): The dtype per column (``dtypes=`` is accepted too, as
            MindSpore Reinforcement named it).
        seed0 (int): MindSpore Reinforcement's first seed: used when ``seed1`` is 0. Default: ``0``.
        seed1 (int): MindSpore Reinforcement's second seed: the buffer's seed when not 0.
            Default: ``0``. With both 0 (and no ``seed``) the draws follow ``mindspore.set_seed``.
        seed (int): Seed of the random operators of :meth:`insert` and :meth:`sample`, in
            ``[0, 2**31)``; give it or ``seed0``/``seed1``, not both. Default: ``None``.
        names (list[str]): Column names. Default: ``None`` (``column_0``, ...).

    Raises:
        TypeError: If a size is not an int, or ``shapes``/``types`` is not a list.
        ValueError: If a size is not positive, ``shapes`` and ``types`` differ in length,
            or a dtype is unknown.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer import ReservoirReplayBuffer
        >>> rrb = ReservoirReplayBuffer(3, 2, [()], [ms.int32])
        >>> rrb.insert([np.arange(100, dtype=np.int32)])
        >>> int(rrb.size()), int(rrb.seen), bool(rrb.full())
        (3, 100, True)
        >>> [x.shape for x in rrb.sample()]
        [(2,)]
        >>> _ = rrb.reset()
        >>> rrb.insert([np.arange(7, 9, dtype=np.int32)])
        >>> rrb.get_item(np.array([0, 1], np.int32))[0].asnumpy().tolist(), int(rrb.seen)
        ([7, 8], 2)
    """

    def __init__(
        self,
        capacity: int,
        sample_size: int,
        shapes: Sequence[Any],
        types: Sequence[Any] | None = None,
        seed0: int = 0,
        seed1: int = 0,
        *,
        seed: int | None = None,
        names: Sequence[str] | None = None,
        dtypes: Sequence[Any] | None = None,
    ) -> None:
        op = type(self).__name__
        seed = check_seeds(op, seed, seed0, seed1)
        super().__init__(sample_size, capacity, shapes, check_types(op, types, dtypes), seed=seed, names=names)
        self.seen = Parameter(Tensor(0, ms.int64), name="seen", requires_grad=False)

    RESERVED_NAMES = ("seen",)

    def _write(self, batch):
        """Offer the batch to the reservoir, item by item under algorithm R: while fewer than
        ``capacity`` items were seen, items fill the next slots in order; after that, the
        ``k``-th item replaces a uniformly chosen slot with probability ``capacity / k``."""
        seen, count = reservoir.insert(self.columns, self.seen, batch, self.rng())
        ops.assign(self.seen, seen)
        ops.assign(self.count, count)
        return count

    def _clear(self):
        ops.assign(self.seen, ops.zeros_like(self.seen))
        return ReplayBuffer._clear(self)

    def _settings(self) -> dict[str, Any]:
        return {"sample_size": self.sample_size, "seed": self._seed}

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """The reservoir's contract: ``head == 0`` and ``count == min(seen, capacity)``, ``0 <= seen <= 2**62``
        (int64, with room for any insert after it: a ``seen`` near ``2**63`` wrapped negative in the next
        insert's draw and made it write slot -1)."""
        head, count, seen = int(read(self.head)), int(read(self.count)), int(read(self.seen))
        if not 0 <= seen <= 2**62 or head != 0 or count != min(seen, self.capacity):
            return [f"head={head}, count={count}, seen={seen}: a reservoir keeps head=0, "
                    f"count=min(seen, {self.capacity}) and 0 <= seen <= 2**62"]
        return []
