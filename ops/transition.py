"""Transition operators: uniform valid starts, frame stacks and n-step returns, in the graph.

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
    STREAM_SAMPLE,
    ZERO,
    arange,
    guarded,
    masked_counts,
    offsets,
    uniform_int,
    write_rows,
)


@ops.constexpr
def _powers(gamma, n, skip=0):
    """``[0] * skip + [gamma^0, ..., gamma^n]`` as a float32 constant."""
    return Tensor(np.concatenate([np.zeros(skip), np.power(float(gamma), np.arange(n + 1))]).astype(np.float32))


def _physical(head, logical, max_length):
    return (head + logical) % max_length


def _broadcast_env(env, shape):
    return ops.broadcast_to(env.reshape(env.shape + (1,) * (len(shape) - len(env.shape))), shape)


def _bounds(ranks, head, count, max_length, stack_size, n_step):
    """The interior's lower adjusted rank and its number of non-final rows (the valid starts).

    The adjusted rank, ``rank + M * [written after the last wrap]``, never decreases along the
    logical rows, and rises by one at each non-final row.
    """
    size = ranks.shape[0]
    num_envs = size // max_length
    last = ops.maximum((count - n_step) * num_envs - 1, stack_size * num_envs - 1)
    flat = ops.stack((Tensor(stack_size * num_envs - 1, ms.int32), last))
    q = (head * num_envs + flat) % size
    adjusted = ops.gather(ranks, q, 0) + size * (q < head * num_envs).astype(ms.int32)
    lower = ops.gather(adjusted, ZERO, 0)
    return lower, ops.gather(adjusted, Tensor(1, ms.int32), 0) - lower


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


def select_starts(ranks, head, count, draws, max_length, stack_size, n_step):
    """The ``draws``-th valid starts: a bijection from ``[0, count_starts(...))`` onto the valid starts.

    A rank is ``q - M - F``, with ``q`` the row's flat physical index, ``M = max_length *
    num_envs`` and ``F`` the number of final rows written up to and including it since the
    last reset, time-major: so ranks never decrease along the physical rows of one wrap, those
    written after the last wrap (physical rows before ``head``) rank below all others, unwritten
    rows hold 0 above all written ones, and the ``u``-th non-final row after a row ``r`` is the
    first whose rank reaches ``rank(r) + u + 1``: one ``searchsorted`` over the ranks.

    Args:
        draws (Tensor): int32 ``(B,)``, each in ``[0, count_starts(...))``.
        max_length (int): Time rows of the ring. The others: see the module docstring.

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
    return (*_select(ranks, head, lower, draws, max_length), total)


def _select(ranks, head, lower, draws, max_length):
    size = ranks.shape[0]
    num_envs = size // max_length
    target = lower + draws + 1
    after_wrap = ops.logical_and(head > 0, target > ops.gather(ranks, offsets(size - 1, size), 0))
    q = ops.searchsorted(ranks, target - size * after_wrap.astype(ms.int32), out_int32=True)
    q = ops.minimum(q, size - 1)
    return (q // num_envs - head + max_length) % max_length, q % num_envs


def sample_starts(ranks, head, count, sample_size, max_length, stack_size, n_step, seed=None, check=True):
    """Draw ``sample_size`` starts uniformly from the valid ones (with replacement).

    Each valid start has probability ``1 / count_starts(...)`` per draw: a draw is uniform over
    ``[0, count_starts(...))``, which :func:`select_starts` maps one to one onto the valid
    starts. Work: O(sample_size * log(capacity)).

    Args:
        sample_size (int): Starts to draw.
        max_length (int): Time rows of the ring.
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
        >>> ranks = Tensor(np.array([-8, -7, -6, -5, -4, 0, 0, 0], np.int32))  # 5 rows, no episode end
        >>> rows, envs, total = sample_starts(ranks, Tensor(0, ms.int32), Tensor(5, ms.int32), 16, 8, 1, 1)
        >>> set(rows.asnumpy().tolist()) <= {1, 2, 3}, int(total)
        (True, 3)
    """
    lower, total = _bounds(ranks, head, count, max_length, stack_size, n_step)
    draws = uniform_int((sample_size,), ops.maximum(total, 1), seed, STREAM_SAMPLE)
    logical, env = _select(ranks, head, lower, draws, max_length)
    if check:
        logical, env, total = guarded((logical, env, total), total >= 1, [count, total])
    return logical, env, total


def transition_windows(reward, terminated, truncated, head, logical, env, stack_size, n_step, gamma):
    """What valid starts ``(logical, env)`` read: their stacks' rows, n-step returns and discounts.

    One gather per column reads rows ``t - stack_size .. t + n_step - 1``. Frame ``k`` steps
    back of row ``t`` is its own when no final row lies in ``[t - k, t - 1]``; the others repeat
    the episode's first frame. With ``m = min(n_step, steps to the episode's end)``, rows
    ``t .. t + m`` are one episode, so the bootstrap row's stack reaches ``m`` frames further
    back into it than ``t``'s.

    Args:
        gamma (float): Discount per step. The others: see the module docstring.

    Returns:
        Tuple of 4 tensors: the logical rows of the observation's frames and of the bootstrap
        observation's (int32, ``(B, stack_size)``, oldest first), the return (float32, ``(B,)``)
        and the discount (float32, ``(B,)``: ``gamma^m``, or 0 if the episode terminated at row
        ``t + m - 1``).

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import transition_windows
        >>> reward = Tensor(np.array([[0.0], [0.0], [0.0], [1.0], [2.0], [4.0], [8.0]], np.float32))
        >>> terminated = Tensor(np.array([[0], [1], [0], [0], [0], [1], [0]], np.uint8))  # row 2 is final
        >>> rows, next_rows, returns, discount = transition_windows(reward, terminated, terminated * 0,
        ...     Tensor(0, ms.int32), Tensor(np.array([3, 4], np.int32)), Tensor(np.zeros(2, np.int32)), 3, 2, 0.5)
        >>> rows.asnumpy().tolist(), next_rows.asnumpy().tolist()  # row 3 starts an episode
        ([[3, 3, 3], [3, 3, 4]], [[3, 4, 5], [4, 5, 6]])
        >>> returns.asnumpy().tolist(), discount.asnumpy().tolist()
        ([2.0, 4.0], [0.25, 0.0])
    """
    max_length = reward.shape[0]
    rows = logical.reshape((-1, 1)) + offsets(-stack_size, n_step)
    index = ops.stack((_physical(head, rows, max_length), _broadcast_env(env.reshape((-1, 1)), rows.shape)), -1)
    terminal = ops.gather_nd(terminated, index) != 0  # offset d = -stack_size .. n_step - 1 at column d + stack_size
    ends = ops.logical_or(terminal, ops.gather_nd(truncated, index) != 0)
    # Column d + stack_size of `alive`: no end in rows t .. t + d - 1 (and 0 before t).
    alive = masked_counts(ends, ((0, 1),) * stack_size + tuple((stack_size, stack_size + k) for k in range(n_step)))
    alive = (alive == 0).astype(ms.float32) * _powers(1.0, n_step - 1, stack_size)
    steps = alive.sum(1).astype(ms.int32)
    rewards = ops.gather_nd(reward, index).astype(ms.float32)  # (whole window: slicing small tensors is slow)
    returns = (rewards * _powers(gamma, n_step - 1, stack_size) * alive).sum(1)
    # Of the rows summed, only the last can end the episode: a termination there stops the bootstrap.
    discount = ops.gather(_powers(gamma, n_step), steps, 0) * ((terminal * alive).sum(1) == 0).astype(ms.float32)
    if stack_size == 1:
        return logical.reshape((-1, 1)), (logical + steps).reshape((-1, 1)), returns, discount
    back = offsets(-(stack_size - 1), 1) * -1  # stack_size - 1, ..., 0
    # ended(t - k - 1) == 0 for k = 1 .. K: frames t - 1 .. t - K are the row's own
    real = masked_counts(ends, tuple((stack_size - 1 - k, stack_size - 1) for k in range(1, stack_size))) == 0
    depth = real.astype(ms.float32).sum(1).astype(ms.int32)
    next_depth = ops.minimum(depth + steps, stack_size - 1)
    first = logical.reshape((-1, 1)) - ops.minimum(back, depth.reshape((-1, 1)))
    return first, (logical + steps).reshape((-1, 1)) - ops.minimum(back, next_depth.reshape((-1, 1))), returns, discount


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
    write_rows(frames, flat, observation)
    ops.scatter_update(ranks, flat, values)
    newest = offsets(steps - 1, steps)
    ended = ops.logical_or(ops.gather(terminated, newest, 0) != 0, ops.gather(truncated, newest, 0) != 0)
    return ended.reshape((num_envs,)).astype(ms.int32), finals + final.sum().astype(ms.int32)
