"""Transition operators: episode-aware starts, frame stacks and n-step returns, in the graph.

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
* ``logical``, ``env``: int32 logical rows (0 = oldest) and environments asked about; ``env``'s
  shape leads ``logical``'s (repeated along the rest). ``stack_size``, ``n_step`` (int): frames per
  observation, steps per return.

Episodes. Row ``t`` of an environment holds ``obs_t``, the action taken on it, and the
reward and flags that action brought. ``ended(t)`` is ``terminated(t) or truncated(t)``;
the row after an ended row is the episode's *final row*: it holds the final observation,
never starts a transition, and carries no flags (as gymnasium's next-step autoreset gives
it). So rows ``a..t`` are one episode iff none of ``a..t-1`` is a final row.

A *start* ``(t, e)`` is **valid** iff everything its sample depends on is stored:

1. ``t >= 1`` and ``ended(t - 1)`` is false (``t`` is not a final row, known from row ``t - 1``);
2. its stack is decided: ``t >= stack_size``, or an episode end lies in the stored rows
   ``[t - stack_size, t - 2]`` (the frames before the episode's first are then padding);
3. its window is complete: with ``m = min(n_step, steps to the episode's end)``, the
   bootstrap row ``t + m`` is stored (``t + m <= count - 1``).

Its sample: the frames ``t - stack_size + 1 .. t``, those before the episode's first frame
replaced by that frame (repeated, as gymnasium's frame stacking pads after a reset); the
return ``sum_{k<m} gamma^k r(t+k)``; the bootstrap frames, stacked the same way at row
``t + m`` (the final row if the episode ended in the window); and the discount ``gamma^m``,
or 0 if the episode terminated within the window (a truncation keeps bootstrapping).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import ZERO, arange, guarded, masked_counts, offsets


@ops.constexpr
def _powers(gamma, n):
    """``[gamma^0, ..., gamma^n]`` as a float32 constant."""
    return Tensor(np.power(float(gamma), np.arange(n + 1)).astype(np.float32))


def _physical(head, logical, max_length):
    return (head + logical) % max_length


def _broadcast_env(env, shape):
    return ops.broadcast_to(env.reshape(env.shape + (1,) * (len(shape) - len(env.shape))), shape)


def _ended(terminated, truncated, head, logical, env):
    """Whether an episode ended at ``(logical, env)`` (``logical`` read modulo ``max_length``)."""
    index = ops.stack((_physical(head, logical, terminated.shape[0]), _broadcast_env(env, logical.shape)), -1)
    return ops.logical_or(ops.gather_nd(terminated, index) != 0, ops.gather_nd(truncated, index) != 0)


def valid_at(terminated, truncated, head, count, logical, env, stack_size, n_step):
    """The validity rule (see the module docstring) at starts ``(logical, env)``.

    Reads ``stack_size + n_step`` flags per start; rows outside ``[0, count)`` are unknown,
    so a start that needs them is invalid. Args: see the module docstring.

    Returns:
        Tensor, bool, the shape of ``logical``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import valid_at
        >>> ended = Tensor(np.array([[0], [0], [1], [0], [0], [0]], np.uint8))  # row 3 is a final row
        >>> valid_at(ended, ended * 0, Tensor(0, ms.int32), Tensor(6, ms.int32), Tensor(np.arange(6, dtype=np.int32)),
        ...          Tensor(0, ms.int32), 1, 1).asnumpy().tolist()
        [False, True, True, False, True, False]
    """
    rows = logical.reshape((*logical.shape, 1)) + offsets(-stack_size, n_step)
    stored = ops.logical_and(rows >= 0, rows < count)
    ends = ops.logical_and(_ended(terminated, truncated, head, rows, env.reshape((*env.shape, 1))), stored)
    # Offsets -stack_size .. -2 decide the stack, -1 whether t is final, 0 .. n_step - 2 the window.
    not_final = masked_counts(ends, ((stack_size - 1, stack_size),)).reshape(logical.shape) == 0
    valid = ops.logical_and(ops.logical_and(not_final, logical >= 1), logical < count)
    if stack_size > 1:
        boundary = masked_counts(ends, ((0, stack_size - 1),)).reshape(logical.shape) > 0
        valid = ops.logical_and(valid, ops.logical_or(logical >= stack_size, boundary))
    steps = ops.ones_like(logical)
    if n_step > 1:
        window = masked_counts(ends, tuple((stack_size, stack_size + k) for k in range(1, n_step)))
        steps = steps + (window == 0).astype(ms.int32).sum(-1).astype(ms.int32)
    return ops.logical_and(valid, logical + steps <= count - 1)


def _adjusted_rank(ranks, head, flat_logical, num_envs):
    """``rank + M * [in the run written after the last wrap]``: non-decreasing in logical order."""
    size = ranks.shape[0]
    wrapped = head * num_envs
    q = (wrapped + flat_logical) % size
    return ops.gather(ranks, q, 0) + size * (q < wrapped).astype(ms.int32)


def _plan(terminated, truncated, ranks, head, count, stack_size, n_step):
    num_envs = terminated.shape[1]
    # The edge rows [0, stack_size) and [count - n_step, count), each once, and which exist.
    low, high = arange(stack_size), count - n_step + arange(n_step)
    rows = ops.concat((low, high))
    exists = ops.concat((low < count, ops.logical_and(high >= stack_size, high >= 0)))
    grid = ops.broadcast_to(rows.reshape((-1, 1)), (stack_size + n_step, num_envs))
    envs = ops.broadcast_to(arange(num_envs).reshape((1, -1)), (stack_size + n_step, num_envs))
    valid = ops.logical_and(valid_at(terminated, truncated, head, count, grid, envs, stack_size, n_step),
                            exists.reshape((-1, 1)))
    valid = valid.reshape(-1).astype(ms.int32)
    edge_cumulative, edges = ops.cumsum(valid, 0), valid.sum().astype(ms.int32)
    interior = count - n_step > stack_size
    first = Tensor(stack_size * num_envs - 1, ms.int32)
    last = ops.where(interior, (count - n_step) * num_envs - 1, first)
    lower = _adjusted_rank(ranks, head, first, num_envs)
    inner = _adjusted_rank(ranks, head, last, num_envs) - lower
    return rows, edge_cumulative, edges, inner, lower


def count_starts(terminated, truncated, ranks, head, count, stack_size, n_step):
    """How many valid starts the buffer holds, over all environments.

    The rows ``[stack_size, count - n_step)`` (the interior) are valid exactly where they are
    not final rows, which the ranks count in O(1); the at most ``stack_size + n_step`` edge
    rows per environment are checked one by one with :func:`valid_at`.

    Returns:
        Tensor, int32 scalar.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import count_starts
        >>> ended = Tensor(np.array([[0], [0], [1], [0], [0], [0], [0], [0]], np.uint8))  # row 3 is a final row
        >>> ranks = Tensor(np.array([-8, -7, -6, -6, -5, -4, 0, 0], np.int32))  # insert_steps' for 6 rows
        >>> int(count_starts(ended, ended * 0, ranks, Tensor(0, ms.int32), Tensor(6, ms.int32), 1, 1))
        3
    """
    _, _, edges, inner, _ = _plan(terminated, truncated, ranks, head, count, stack_size, n_step)
    return edges + inner


def select_starts(terminated, truncated, ranks, head, count, draws, stack_size, n_step):
    """The ``draws``-th valid starts: a bijection from ``[0, count_starts(...))`` onto the valid starts.

    Draws below the number of valid edge starts pick those (in the order of
    :func:`count_starts`' candidates); the others pick interior rows by rank. A rank is
    ``q - M - F``, with ``q`` the row's flat physical index, ``M = max_length * num_envs`` and
    ``F`` the number of final rows written up to and including it since the last reset,
    time-major: so ranks never decrease along the physical rows of one wrap, those written
    after the last wrap (physical rows before ``head``) rank below all others, unwritten rows
    hold 0 above all written ones, and the ``u``-th non-final row after a row ``r`` is the
    first whose rank reaches ``rank(r) + u + 1``: one ``searchsorted`` over the ranks.

    Args:
        draws (Tensor): int32 ``(B,)``, each in ``[0, count_starts(...))``; the others as in
            the module docstring.

    Returns:
        Tuple of 3 tensors: logical rows (int32, ``(B,)``), environments (int32, ``(B,)``)
        and the number of valid starts (int32 scalar).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import select_starts
        >>> ended = Tensor(np.array([[0], [0], [1], [0], [0], [0], [0], [0]], np.uint8))
        >>> ranks = Tensor(np.array([-8, -7, -6, -6, -5, -4, 0, 0], np.int32))
        >>> rows, envs, total = select_starts(ended, ended * 0, ranks, Tensor(0, ms.int32), Tensor(6, ms.int32),
        ...                                   Tensor(np.arange(3, dtype=np.int32)), 1, 1)
        >>> rows.asnumpy().tolist(), int(total)  # row 3 is a final row; 0 and 5 are invalid edges
        ([1, 2, 4], 3)
    """
    plan = _plan(terminated, truncated, ranks, head, count, stack_size, n_step)
    return _select(terminated.shape[0], ranks, head, plan, draws)


def _select(max_length, ranks, head, plan, draws):
    rows, edge_cumulative, edges, inner, lower = plan
    size = ranks.shape[0]
    num_envs = size // max_length
    slot = ops.minimum(ops.searchsorted(edge_cumulative, draws, out_int32=True, right=True),
                       edge_cumulative.shape[0] - 1)
    target = lower + ops.maximum(draws - edges, 0) + 1
    after_wrap = ops.logical_and(head > 0, target > ops.gather(ranks, offsets(size - 1, size), 0))
    q = ops.searchsorted(ranks, target - size * after_wrap.astype(ms.int32), out_int32=True)
    q = ops.minimum(q, size - 1)
    use_edge = draws < edges
    inner_rows = (q // num_envs - head + max_length) % max_length
    logical = ops.where(use_edge, ops.gather(rows, slot // num_envs, 0), inner_rows)
    env = ops.where(use_edge, slot % num_envs, q % num_envs)
    return logical, env, edges + inner


def sample_starts(terminated, truncated, ranks, head, count, sample_size, stack_size, n_step, seed=None,
                  check=True):
    """Draw ``sample_size`` starts uniformly from the valid ones (with replacement).

    Each valid start has probability ``1 / count_starts(...)`` per draw: a draw is uniform over
    ``[0, count_starts(...))``, which :func:`select_starts` maps one to one onto the valid
    starts. Work: O(sample_size * log(capacity) + num_envs * (stack_size + n_step)^2).

    Args:
        sample_size (int): Starts to draw.
        seed (int): Seed of the random operator; ``None`` follows ``mindspore.set_seed``. Default: ``None``.
        check (bool): Guard against a buffer without a valid start. Default: ``True``.

    Returns:
        Tuple of 3 tensors: logical rows and environments (int32, ``(sample_size,)``) and the
        number of valid starts (int32 scalar).

    Raises:
        RuntimeError: At run time, with ``check=True``, if no start is valid (``assert failed``;
            MindSpore prints the count of time rows and of valid starts).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import sample_starts
        >>> flags = Tensor(np.zeros((8, 1), np.uint8))
        >>> ranks = Tensor(np.array([-8, -7, -6, -5, -4, 0, 0, 0], np.int32))  # 5 rows, no episode end
        >>> rows, envs, total = sample_starts(flags, flags, ranks, Tensor(0, ms.int32), Tensor(5, ms.int32), 16, 1, 1)
        >>> set(rows.asnumpy().tolist()) <= {1, 2, 3}, int(total)
        (True, 3)
    """
    plan = _plan(terminated, truncated, ranks, head, count, stack_size, n_step)
    total = plan[2] + plan[3]
    draws = ops.uniform((sample_size,), ZERO, ops.maximum(total, 1), seed=seed, dtype=ms.int32)
    logical, env, total = _select(terminated.shape[0], ranks, head, plan, draws)
    if check:
        logical, env, total = guarded((logical, env, total), total >= 1, [count, total])
    return logical, env, total


def stack_rows(terminated, truncated, head, logical, env, stack_size):
    """The logical rows of the frames stacked at rows ``logical``, oldest first.

    Frame ``k`` steps back is the row's own when no final row lies in ``[t - k, t - 1]``; the
    others repeat the episode's first frame. Flags before row 0 count as no end: call this for
    rows whose stack is decided (valid starts, their bootstrap rows). ``logical``, ``env``: ``(B,)``.

    Returns:
        Tensor, int32, ``(B, stack_size)``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import stack_rows
        >>> ended = Tensor(np.array([[0], [1], [0], [0], [0], [0]], np.uint8))  # row 2 is final, 3 starts anew
        >>> stack_rows(ended, ended * 0, Tensor(0, ms.int32), Tensor(np.array([4, 5], np.int32)),
        ...            Tensor(np.zeros(2, np.int32)), 4).asnumpy().tolist()
        [[3, 3, 3, 4], [3, 3, 4, 5]]
    """
    if stack_size == 1:
        return logical.reshape((-1, 1))
    back = logical.reshape((-1, 1)) - offsets(2, stack_size + 1)  # ended(t-2 .. t-S) decide frames t-1 .. t-S+1
    ends = ops.logical_and(_ended(terminated, truncated, head, back, env.reshape((-1, 1))), back >= 0)
    prefix = masked_counts(ends, tuple((0, k) for k in range(1, stack_size)))  # ends among the first k
    depth = (prefix == 0).astype(ms.int32).sum(1, keepdims=True).astype(ms.int32)
    steps_back = offsets(-(stack_size - 1), 1) * -1  # stack_size - 1, ..., 0
    return logical.reshape((-1, 1)) - ops.minimum(steps_back, depth)


def gather_frames(frames, head, rows, env, max_length):
    """The frames at logical ``rows`` of environments ``env``: one ``gather`` of whole frames.

    Args:
        rows (Tensor): int32 logical rows, any shape (``env``'s shape leads theirs).
        max_length (int): Time rows of the ring. The others: see the module docstring.

    Returns:
        Tensor, ``rows.shape + obs_shape``.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import gather_frames
        >>> frames = Tensor(np.arange(6, dtype=np.float32).reshape(6, 1))  # 3 rows of 2 environments
        >>> gather_frames(frames, Tensor(1, ms.int32), Tensor(np.array([[0, 2]], np.int32)),
        ...               Tensor(np.array([1], np.int32)), 3).asnumpy().tolist()
        [[[3.0], [1.0]]]
    """
    num_envs = frames.shape[0] // max_length
    index = _physical(head, rows, max_length) * num_envs + _broadcast_env(env, rows.shape)
    return ops.gather(frames, index, 0)


def n_step_returns(reward, terminated, truncated, head, logical, env, n_step, gamma):
    """The n-step return, its length and its bootstrap discount for starts ``(logical, env)``.

    With ``m = min(n_step, steps to the episode's end)``: the return ``sum_{k<m} gamma^k r(t+k)``,
    ``m`` (the bootstrap row is ``t + m``) and the discount ``gamma^m``, or 0 if the episode
    terminated at row ``t + m - 1``. Args: ``gamma`` (float), the discount per step; the
    others as in the module docstring (``logical``, ``env``: ``(B,)`` valid starts).

    Returns:
        Tuple of 3 tensors of shape ``(B,)``: the return (float32), ``m`` (int32), the discount (float32).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import n_step_returns
        >>> reward = Tensor(np.array([[1.0], [2.0], [4.0], [0.0], [8.0]], np.float32))
        >>> terminated = Tensor(np.array([[0], [0], [1], [0], [0]], np.uint8))
        >>> returns, steps, discount = n_step_returns(reward, terminated, terminated * 0, Tensor(0, ms.int32),
        ...     Tensor(np.array([0, 1], np.int32)), Tensor(np.zeros(2, np.int32)), 2, 0.5)
        >>> returns.asnumpy().tolist(), steps.asnumpy().tolist(), discount.asnumpy().tolist()
        ([2.0, 4.0], [2, 2], [0.25, 0.0])
    """
    rows = logical.reshape((-1, 1)) + arange(n_step)
    index = ops.stack((_physical(head, rows, reward.shape[0]), _broadcast_env(env.reshape((-1, 1)), rows.shape)), -1)
    rewards = ops.gather_nd(reward, index).astype(ms.float32)
    terminal = ops.gather_nd(terminated, index) != 0
    ends = ops.logical_or(terminal, ops.gather_nd(truncated, index) != 0)
    alive = masked_counts(ends, tuple((0, k) for k in range(n_step))) == 0  # no end before step k
    returns = (rewards * _powers(gamma, n_step - 1) * alive.astype(ms.float32)).sum(1)
    steps = alive.astype(ms.int32).sum(1).astype(ms.int32)  # a sum of int32 is int64
    last = ops.logical_and(alive, ends)  # the end inside the window, if any
    terminal_end = ops.logical_and(last, terminal).astype(ms.int32).sum(1) > 0
    discount = ops.gather(_powers(gamma, n_step), steps, 0) * (1.0 - terminal_end.astype(ms.float32))
    return returns, steps, discount


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
        final = ops.concat((final, ops.gather(ended.astype(ms.int32), arange(terminated.shape[0] - 1), 0) > 0))
    ok = ops.logical_and(final, ended).astype(ms.int32).sum() == 0
    return final, ok


def insert_steps(frames, ranks, head, count, last_ended, finals, observation, terminated, truncated):
    """In place: write the frames and ranks of ``n`` time steps where ``ring.insert`` puts them.

    Call it with the cursors before the ring's insert of the other columns moves them; of
    ``n > max_length`` steps only the newest ``max_length`` are written. The caller guards
    that final rows carry no flags (:func:`final_rows`).

    Args:
        last_ended (Tensor): int32 ``(num_envs,)``: whether each environment's newest row ended.
        finals (Tensor): int32 scalar, final rows written since the last reset.
        observation (Tensor): ``(n, num_envs, *obs_shape)``; ``terminated``, ``truncated``:
            ``(n, num_envs)``. The others (``Parameter`` s): see the module docstring.

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
    final = final.reshape(-1).astype(ms.int32)
    written = finals + ops.cumsum(final, 0)
    rows = (head + count + arange(steps)) % max_length
    flat = (rows.reshape((-1, 1)) * num_envs + arange(num_envs)).reshape(-1)
    values = flat - size - written
    observation = observation.reshape((steps * num_envs, *observation.shape[2:]))
    skip = (steps - min(steps, max_length)) * num_envs
    if skip:
        flat, values, observation = flat[skip:], values[skip:], observation[skip:]
    ops.scatter_update(frames, flat, observation)
    ops.scatter_update(ranks, flat, values)
    newest = offsets(steps - 1, steps)
    ended = ops.logical_or(ops.gather(terminated, newest, 0) != 0, ops.gather(truncated, newest, 0) != 0)
    return ended.reshape((num_envs,)).astype(ms.int32), finals + final.sum().astype(ms.int32)
