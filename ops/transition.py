"""Transition operators: the rows written, the uniform valid starts, in the graph.

Their frame stacks and n-step returns are read by :mod:`mindspore_rl_buffer.ops.stacks`.

The state extends the cursor contract of ``ops`` to ``num_envs`` environments stepped
together (time-major, as TF-Agents' segments): ``head`` and ``count`` (int32 scalars) count
*time rows* of a ring of ``max_length`` rows, each holding one step of every environment.
Arguments named alike mean the same in every operator:

* ``terminated``, ``truncated``, ``reward``: columns ``(max_length, num_envs)``, any dtype;
  flags are true when non-zero, rewards are read as float32.
* ``frames``: the observations, ``(max_length * num_envs, *obs_shape)``, step ``p`` of
  environment ``e`` at row ``p * num_envs + e``: the memory layout of a
  ``(max_length, num_envs, *obs_shape)`` column, declared flat so that ``gather`` reads whole
  frames (``gather_nd`` on the 2-D form measured ~40x slower, and reshaping a ``Parameter``
  inside a graph copies all of it).
* ``ranks``: int32 ``(max_length * num_envs,)``, written by :func:`insert_steps`, read by
  :func:`select_starts`.
* ``starts`` (optional): int32 ``(max_length * num_envs + 1,)``, the start table: written by
  :func:`insert_steps` beside the ranks, it turns the search for a drawn start into one
  ``gather`` (see :func:`select_starts`). Without it the operators search the ranks.
* ``logical``, ``env``: int32 ``(B,)`` logical rows (0 = oldest) and environments of starts.
  ``stack_size``, ``n_step`` (int): frames per observation, steps per return.

Episodes. Row ``t`` of an environment holds ``obs_t``, the action taken on it, and the
reward and flags that action brought. ``ended(t)`` is ``terminated(t) or truncated(t)``;
the row after an ended row is the episode's *final row*: it holds the final observation,
never starts a transition, and carries no flags (as gymnasium's next-step autoreset gives
it). So rows ``a..t`` are one episode iff none of ``a..t-1`` is a final row.

A start ``(t, e)`` is **valid** iff ``stack_size <= t <= count - 1 - n_step`` and ``t`` is
not a final row. Everything its sample reads then lies in the stored rows
``[t - stack_size, t + n_step]``: no stack reaches into overwritten rows, no window crosses
the write position. (So the ``n_step`` newest rows wait for ``n_step`` more steps before they
are drawn, even when their episode has ended, as in Dopamine; and the ``stack_size`` oldest
rows, next to be overwritten, are not drawn.) Its sample: the frames
``t - stack_size + 1 .. t``, those before the episode's first frame replaced by that frame
(repeated, as gymnasium's frame stacking pads after a reset); with
``m = min(n_step, steps to the episode's end)``, the return ``sum_{k<m} gamma^k r(t+k)``; the
bootstrap frames, stacked the same way at row ``t + m`` (the final row if the episode ended
in the window); and the discount ``gamma^m``, or 0 if the episode terminated within the
window (a truncation keeps bootstrapping).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import (
    CAST,
    REDUCE_ANY,
    arange,
    draws,
    guarded,
    offsets,
    write_rows,
)
from mindspore_rl_buffer.ops.rng import uniform_int
from mindspore_rl_buffer.ops.stacks import flat_to_logical


def rank_period(size):
    """The period of the ranks a start table is kept with: the largest multiple of the ring's
    ``size`` rows up to ``2**30``.

    With a table, :func:`insert_steps` counts the final rows modulo it, so the ranks stay far
    inside int32 however many episodes end (counted exactly they would wrap after ``2**31``
    final rows, and the sample would draw rows it must not); the ranks of two stored rows then
    differ by their count of non-final rows between them modulo it, and their table slots
    (modulo ``size``) are unchanged.

    Examples:
        >>> from mindspore_rl_buffer.ops import rank_period
        >>> rank_period(30), rank_period(2**30), rank_period(1_000_000) % 1_000_000
        (1073741820, 1073741824, 0)
    """
    return size * max(1, 2**30 // size)


@ops.constexpr
def _period(size):
    """:func:`rank_period` as an int32 constant of the graph (evaluated by Python, exactly: graph mode
    folds ``2**30 // size`` through floats, and a float period rounds to ``2**30``)."""
    return Tensor(rank_period(size), ms.int32)


@ops.constexpr
def _full(length, value):
    return Tensor(np.full(length, value, np.int32))


def _bounds(ranks, head, count, max_length, stack_size, n_step):
    """The interior's lower adjusted rank plus one, and its number of non-final rows (the valid starts).

    The adjusted rank, ``rank + M * [written after the last wrap]``, never decreases along the
    logical rows, and rises by one at each non-final row.
    """
    size = ranks.shape[0]
    num_envs = size // max_length
    if num_envs == 1:
        first, last = head, count - (n_step + 1)
    else:
        first, last = head * num_envs, count * num_envs - (n_step * num_envs + 1)
    flat = ops.stack((Tensor(stack_size * num_envs - 1, ms.int32), ops.maximum(last, stack_size * num_envs - 1)))
    q = (first + flat) % size
    lower, upper = ops.unstack(ops.gather(ranks, q, 0) + ops.where(q < first, _full(2, size + 1), _full(2, 1)))
    return lower, ops.floor_mod(upper - lower, _period(size))


def count_starts(ranks, head, count, max_length, stack_size, n_step):
    """How many valid starts the buffer holds, over all environments: O(1) from the ranks.

    Args:
        max_length (int): Time rows of the ring. The others: see the module docstring.

    Returns:
        Tensor, int32 scalar.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import count_starts
        >>> ranks = Tensor(np.array([-8, -7, -6, -6, -5, -4, -3, 0], np.int32))  # 7 rows; row 3 is final
        >>> int(count_starts(ranks, Tensor(0, ms.int32), Tensor(7, ms.int32), 8, 1, 1))  # rows 1, 2, 4, 5
        4
    """
    return _bounds(ranks, head, count, max_length, stack_size, n_step)[1]


def select_starts(ranks, head, count, draws, max_length, stack_size, n_step, starts=None):
    """The ``draws``-th valid starts: a bijection from ``[0, count_starts(...))`` onto the valid starts.

    A rank is ``q - M - F``, with ``q`` the row's flat physical index, ``M = max_length *
    num_envs`` and ``F`` the number of final rows written up to and including it since the
    last reset, time-major: so ranks never decrease along the physical rows of one wrap, those
    written after the last wrap (physical rows before ``head``) rank below all others, unwritten
    rows hold 0 above all written ones, and the ``u``-th non-final row after a row ``r`` is the
    first whose rank reaches ``rank(r) + u + 1``: one ``searchsorted`` over the ranks.

    With the start table ``starts`` it is one ``gather`` instead, O(1) a draw: the rank of a
    non-final row is its number among the non-final rows written since the reset, less a
    multiple of the ring's rows, so no two stored non-final rows share their rank modulo the
    ring's rows, and :func:`insert_steps` writes each one's flat row at that slot; it counts ``F``
    modulo :func:`rank_period`, a multiple of the ring's rows, so the slots are the same and
    the ranks never wrap around int32 (without a table they wrap after about ``2**31`` final
    rows since the last reset). (MindSpore's
    CPU ``searchsorted`` checks that the whole sequence is sorted first: 30-45 µs a call from
    about 12,000 rows on, measured; the gather costs a few.)

    Args:
        draws (Tensor): int32 ``(B,)``, each in ``[0, count_starts(...))``.
        max_length (int): Time rows of the ring. The others: see the module docstring.
        starts (Tensor): The start table, or ``None`` to search the ranks. Default: ``None``.

    Returns:
        Tuple of 3 tensors: logical rows (int32, ``(B,)``), environments (int32, ``(B,)``)
        and the number of valid starts (int32 scalar).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import select_starts
        >>> ranks = Tensor(np.array([-8, -7, -6, -6, -5, -4, -3, 0], np.int32))
        >>> rows, envs, total = select_starts(ranks, Tensor(0, ms.int32), Tensor(7, ms.int32),
        ...                                   Tensor(np.arange(4, dtype=np.int32)), 8, 1, 1)
        >>> rows.asnumpy().tolist(), int(total)  # row 3 is a final row
        ([1, 2, 4, 5], 4)
    """
    lower, total = _bounds(ranks, head, count, max_length, stack_size, n_step)
    flat = _select(ranks, lower, draws, starts)
    return (*flat_to_logical(flat, head, max_length, ranks.shape[0] // max_length), total)


def _select(ranks, lower, draws, starts=None):
    """The flat physical rows of the ``draws``-th valid starts (``lower``: from :func:`_bounds`).

    Targets above the last physical row's rank lie among the rows written after the last wrap
    (before ``head``); before the first wrap that row is unwritten (rank 0) or the newest.
    The start table holds each at its target modulo the ring's rows.
    """
    size = ranks.shape[0]
    target = lower + draws
    if starts is not None:
        return ops.gather(starts, ops.floor_mod(target, size), 0)
    target = ops.where(target > ops.gather(ranks, offsets(size - 1, size), 0), target - size, target)
    return ops.minimum(ops.searchsorted(ranks, target, out_int32=True), size - 1)


@draws
def draw_starts(ranks, head, count, sample_size, max_length, stack_size, n_step, rng=None, check=True,
                starts=None):
    """Draw ``sample_size`` starts uniformly from the valid ones (with replacement), as flat rows.

    Each valid start has probability ``1 / count_starts(...)`` per draw: a draw is uniform over
    ``[0, count_starts(...))``, which :func:`select_starts` maps one to one onto the valid
    starts. Work: O(sample_size * log(capacity)); O(sample_size) with the start table.

    Args:
        sample_size (int): Starts to draw.
        max_length (int): Time rows of the ring.
        rng (tuple[Parameter, Parameter]): The generator's state, advanced by the draw
            (see :func:`~mindspore_rl_buffer.ops.random_state`). Default: ``None``.
        check (bool): Guard against a buffer without a valid start. Default: ``True``.
        starts (Tensor): The start table (:func:`select_starts`), or ``None``. Default: ``None``.

    Returns:
        Tuple of 2 tensors: the starts' flat physical rows ``physical_row * num_envs + env``
        (int32, ``(sample_size,)``) and the number of valid starts (int32 scalar).

    Raises:
        RuntimeError: At run time, with ``check=True``, if no start is valid (``assert failed``;
            MindSpore prints the count of time rows and of valid starts).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import draw_starts, random_state
        >>> ranks = Tensor(np.array([-8, -7, -6, -6, -5, -4, -3, 0], np.int32))  # 7 rows; row 3 is final
        >>> rows, total = draw_starts(ranks, Tensor(0, ms.int32), Tensor(7, ms.int32), 64, 8, 1, 1, random_state(0))
        >>> sorted(set(rows.asnumpy().tolist())), int(total)
        ([1, 2, 4, 5], 4)
    """
    lower, total = _bounds(ranks, head, count, max_length, stack_size, n_step)
    flat = _select(ranks, lower, uniform_int((sample_size,), ops.maximum(total, 1), rng), starts)
    if check:
        flat, total = guarded((flat, total), total >= 1, [count, total])
    return flat, total


@draws
def sample_starts(ranks, head, count, sample_size, max_length, stack_size, n_step, rng=None, check=True,
                  starts=None):
    """:func:`draw_starts` as logical rows and environments.

    Returns:
        Tuple of 3 tensors: logical rows and environments (int32, ``(sample_size,)``) and the
        number of valid starts (int32 scalar).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import random_state, sample_starts
        >>> ranks = Tensor(np.array([-8, -7, -6, -5, -4, 0, 0, 0], np.int32))  # 5 rows, no episode end
        >>> rows, envs, total = sample_starts(ranks, Tensor(0, ms.int32), Tensor(5, ms.int32), 16, 8, 1, 1,
        ...                                    random_state(0))
        >>> set(rows.asnumpy().tolist()) <= {1, 2, 3}, int(total)
        (True, 3)
    """
    flat, total = draw_starts(ranks, head, count, sample_size, max_length, stack_size, n_step, rng, check, starts)
    return (*flat_to_logical(flat, head, max_length, ranks.shape[0] // max_length), total)


def final_rows(last_ended, terminated, truncated):
    """The final rows of a batch of ``n >= 1`` steps, and whether none carries a flag.

    Row ``j`` is final when row ``j - 1`` ended an episode (``last_ended``, int32
    ``(num_envs,)``, for ``j = 0``); ``terminated``, ``truncated``: ``(n, num_envs)``.

    Returns:
        Tuple of 2 tensors: the final rows (bool, ``(n, num_envs)``) and whether none carries a flag.

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import final_rows
        >>> terminated = Tensor(np.array([[0, 1], [0, 0]], np.uint8))
        >>> final, ok = final_rows(Tensor(np.array([1, 0], np.int32)), terminated, terminated * 0)
        >>> final.asnumpy().tolist(), bool(ok)
        ([[True, False], [False, True]], True)
    """
    ended = ops.logical_or(terminated != 0, truncated != 0)
    final = last_ended.reshape((1, -1)) > 0
    if terminated.shape[0] > 1:
        final = ops.concat((final, ops.gather(CAST(ended, ms.int32), arange(terminated.shape[0] - 1), 0) > 0))
    ok = ops.logical_not(REDUCE_ANY(ops.logical_and(final, ended)))
    return final, ok


def insert_steps(frames, ranks, head, count, last_ended, finals, observation, terminated, truncated, starts=None):
    """In place: write the frames and ranks of ``n`` time steps where ``ring.insert`` puts them.

    Call it with the cursors before the ring's insert of the other columns moves them; of
    ``n > max_length`` steps only the newest ``max_length`` are written. The caller guards
    that final rows carry no flags (:func:`final_rows`).

    Args:
        last_ended (Tensor): int32 ``(num_envs,)``: whether each environment's newest row ended.
        finals (Tensor): int32 scalar, final rows written since the last reset (modulo
            :func:`rank_period` when ``starts`` is given).
        observation (Tensor): ``(n, num_envs, *obs_shape)``; ``terminated``, ``truncated``:
            ``(n, num_envs)``. The others (``Parameter`` s): see the module docstring.
        starts (Parameter): The start table to write beside the ranks (:func:`select_starts`),
            or ``None``. Default: ``None``.

    Returns:
        Tuple of 2 tensors for the caller to assign: ``last_ended`` and ``finals`` after the batch.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.ops import insert_steps
        >>> frames = Parameter(Tensor(np.zeros((4, 1), np.float32)), requires_grad=False)
        >>> ranks = Parameter(Tensor(np.zeros(4, np.int32)), requires_grad=False)
        >>> ended = np.array([[1], [0], [0]], np.uint8)
        >>> last, finals = insert_steps(frames, ranks, Tensor(0, ms.int32), Tensor(0, ms.int32),
        ...     Tensor([0], ms.int32), Tensor(0, ms.int32), Tensor(np.arange(3, dtype=np.float32).reshape(3, 1, 1)),
        ...     Tensor(ended), Tensor(ended * 0))
        >>> frames.asnumpy()[:, 0].tolist(), ranks.asnumpy().tolist(), last.asnumpy().tolist(), int(finals)
        ([0.0, 1.0, 2.0, 0.0], [-4, -4, -3, 0], [0], 1)
    """
    steps, num_envs = terminated.shape[0], terminated.shape[1]
    if steps == 0:
        return last_ended, finals
    size, max_length = ranks.shape[0], ranks.shape[0] // num_envs
    final, _ = final_rows(last_ended, terminated, truncated)
    final = CAST(final.reshape(-1), ms.int32)
    written = finals + ops.cumsum(final, 0)
    if starts is not None:
        written = ops.floor_mod(written, _period(size))
    end = (head + count) % max_length
    rows = end.reshape((1,)) if steps == 1 else (end + arange(steps)) % max_length
    flat = (rows.reshape((-1, 1)) * num_envs + arange(num_envs)).reshape(-1)
    values = flat - size - written
    observation = observation.reshape((steps * num_envs, *observation.shape[2:]))
    skip = (steps - max_length) * num_envs if steps > max_length else 0  # not min(): see ring.insert
    if skip:
        flat, values, observation, final = flat[skip:], values[skip:], observation[skip:], final[skip:]
    write_rows(frames, flat, observation)
    ops.scatter_update(ranks, flat, values)
    if starts is not None:  # final rows are never drawn: they write the spare slot past the end
        ops.scatter_update(starts, ops.where(final > 0, _full(flat.shape[0], size), ops.floor_mod(values, size)), flat)
    # The newest row's flags, and the final rows counted through it: the last of the ranks'
    # running count ``written``, not a second sum.
    ended = ops.logical_or(terminated != 0, truncated != 0)
    if steps > 1:
        ended = ops.gather(ended, offsets(steps - 1, steps), 0)
    total = written.shape[0]
    return CAST(ended.reshape((num_envs,)), ms.int32), ops.gather(written, offsets(total - 1, total), 0).reshape(())
