"""Frame stacks and n-step windows of valid transition starts, in the graph.

The state and the episode rules are those of :mod:`mindspore_rl_buffer.ops.transition`; a
start is given as its flat physical row ``physical_row * num_envs + env`` (what
:func:`~mindspore_rl_buffer.ops.transition.draw_starts` returns), so the row ``d`` steps from
it is ``(start + d * num_envs) % (max_length * num_envs)``: the frame ``gather`` index with no
logical row computed. The flag and reward columns, ``(max_length, num_envs)``, are read at
those rows with one ``gather`` (one environment) or ``gather_nd`` (several).
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops
from mindspore_rl_buffer.ops._common import CAST, REDUCE_SUM, masked_counts
from mindspore_rl_buffer.ops.ring import logical_to_physical, physical_to_logical


@ops.constexpr
def _scaled(start, stop, scale):
    """``[start, stop) * scale`` as an int32 constant (time offsets as flat-row offsets)."""
    return Tensor(np.arange(start, stop, dtype=np.int32) * scale)


@ops.constexpr
def _zeros(shape):
    """A float32 constant of zeros (a ``select`` branch without a fill kernel)."""
    return Tensor(np.zeros(shape, np.float32))


@ops.constexpr
def _code_weights(stack_size, n_step, terminal, rows):
    """Per window column, what it adds to the window's code if it counts (see :func:`_window_constants`):
    ``weights``, plus ``terminal_weights`` where the row terminated; tiled to ``rows`` rows, the
    branches of one ``select``."""
    weights = _window_values(stack_size, n_step, 0.0, "weights")
    if terminal:
        weights = weights + _window_values(stack_size, n_step, 0.0, "terminal_weights")
    return Tensor(np.tile(weights, (rows, 1)))


@ops.constexpr
def _spans(stack_size, n_step):
    """The spans of :func:`_window_constants`, as :func:`masked_counts` takes them (a constant: run by Python)."""
    return (*((j, stack_size - 1) for j in range(stack_size - 1)), (0, 0),
            *((stack_size, stack_size + k) for k in range(n_step)), (0, 0))


@ops.constexpr
def _window_constants(stack_size, n_step, gamma, which):
    """:func:`_window_values` as a constant of the graph."""
    return Tensor(_window_values(stack_size, n_step, gamma, which))


def _window_values(stack_size, n_step, gamma, which):
    """Constants of :func:`stacked_windows`, over the window columns ``j`` (offset ``j - stack_size``).

    The spans (:func:`_spans`): column ``j < stack_size - 1`` counts the ends in rows
    ``t + j - stack_size .. t - 2`` (no end there: frame ``t - (stack_size - 1 - j)`` is the
    row's own); column ``stack_size + k``, ``k < n_step``, counts the ends in rows
    ``t .. t + k - 1`` (none: row ``t + k`` is summed); columns ``stack_size - 1`` and
    ``stack_size + n_step`` count nothing. ``'weights'``: with those columns' "no end" marks
    ``A``, ``sum(A * (weights + terminated * terminal_weights))`` is the window's code
    ``stack_size * m + depth + (n_step + 1) * stack_size * [terminated at t + m - 1]``.
    ``'powers'``: the return is ``sum(A * reward * powers)`` over the ``'forward'`` columns (bool:
    the rewards a return may read; only those are multiplied, since ``0 * NaN`` is NaN).
    """
    s, n = stack_size, n_step
    j = np.arange(s + n + 1)
    forward = (s <= j) & (j < s + n)
    if which == "forward":
        return forward
    if which == "weights":
        return np.where(forward, s, j < s - 1).astype(np.float32)
    if which == "terminal_weights":
        return (forward * float((n + 1) * s)).astype(np.float32)
    # gamma ** k over the window's forward columns only: 0.0 ** -k elsewhere would warn of a division by zero.
    return np.where(forward, np.power(float(gamma), np.maximum(j - s, 0)), 0.0).astype(np.float32)


@ops.constexpr
def _code_table(stack_size, n_step, gamma, which):
    """Per window code (see :func:`_window_constants`): the window columns of the observation's
    frames then of the bootstrap observation's (``'stacks'``, int32 ``(codes, 2 * stack_size)``,
    only the bootstrap's when ``stack_size == 1``), or the discount (``'discount'``)."""
    s, n = stack_size, n_step
    back = np.arange(s - 1, -1, -1)
    codes = [(hit, m, depth) for hit in (0, 1) for m in range(n + 1) for depth in range(s)]
    if which == "stacks":
        columns = [np.concatenate([s - np.minimum(back, depth) if s > 1 else [],
                                   s + m - np.minimum(back, min(depth + m, s - 1))]) for _, m, depth in codes]
        return Tensor(np.array(columns, np.int32))
    return Tensor(np.array([float(gamma) ** m * (1 - hit) for hit, m, _ in codes], np.float32))


def column_index(flat, num_envs):
    """The index :func:`read_rows` takes to read flat rows ``flat`` (int32, any shape) of a column."""
    if num_envs == 1:
        return flat
    return ops.stack((flat // num_envs, flat % num_envs), -1)


def read_rows(column, index, num_envs):
    """Rows of a ``(max_length, num_envs, *shape)`` column at a :func:`column_index`: ``flat.shape + shape``.

    One ``gather`` when ``num_envs == 1``, else one ``gather_nd``.
    """
    if num_envs == 1:
        return ops.gather(column, index, 0).reshape(index.shape + column.shape[2:])
    return ops.gather_nd(column, index)


def flat_to_logical(flat, head, max_length, num_envs):
    """Flat physical rows ``row * num_envs + env`` as (logical rows, environments), int32."""
    if num_envs == 1:
        return physical_to_logical(head, flat, max_length), ops.zeros_like(flat)
    return physical_to_logical(head, flat // num_envs, max_length), flat % num_envs


def stacked_windows(reward, terminated, truncated, starts, stack_size, n_step, gamma):
    """What valid starts read: their stacks' flat frame rows, n-step returns and discounts.

    One read per column of rows ``t - stack_size .. t + n_step``. Frame ``k`` steps back of
    row ``t`` is its own when no final row lies in ``[t - k, t - 1]``; the others repeat the
    episode's first frame. With ``m = min(n_step, steps to the episode's end)``, rows
    ``t .. t + m`` are one episode, so the bootstrap row's stack reaches ``m`` frames further
    back into it than ``t``'s. The window folds into one small integer code (``m``, the
    frames of the row's own, whether it terminated) that indexes constant tables of the stacks'
    columns in the window and of the discount: a few kernels whatever ``stack_size`` and ``n_step``.

    Args:
        starts (Tensor): int32 ``(B,)``: flat physical rows ``physical_row * num_envs + env``
            of valid starts (:func:`draw_starts`).
        gamma (float): Discount per step. The others: see the module docstring.

    Returns:
        Tuple of 4 tensors: the flat rows of ``frames`` holding the observation's frames and
        the bootstrap observation's (int32, ``(B, stack_size)``, oldest first), the return
        (float32, ``(B,)``) and the discount (float32, ``(B,)``: ``gamma^m``, or 0 if the
        episode terminated at row ``t + m - 1``).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import stacked_windows
        >>> reward = Tensor(np.array([[0.0], [0.0], [0.0], [1.0], [2.0], [4.0], [8.0]], np.float32))
        >>> terminated = Tensor(np.array([[0], [1], [0], [0], [0], [1], [0]], np.uint8))  # row 2 is final
        >>> rows, next_rows, returns, discount = stacked_windows(reward, terminated, terminated * 0,
        ...     Tensor(np.array([3, 4], np.int32)), 3, 2, 0.5)
        >>> rows.asnumpy().tolist(), next_rows.asnumpy().tolist()  # row 3 starts an episode
        ([[3, 3, 3], [3, 3, 4]], [[3, 4, 5], [4, 5, 6]])
        >>> returns.asnumpy().tolist(), discount.asnumpy().tolist()
        ([2.0, 4.0], [0.25, 0.0])
    """
    size = reward.shape[0] * reward.shape[1]
    num_envs = reward.shape[1]
    column = starts.reshape((-1, 1))
    window = (column + _scaled(-stack_size, n_step + 1, num_envs)) % size
    index = column_index(window, num_envs)
    terminal = read_rows(terminated, index, num_envs) != 0
    ends = ops.logical_or(terminal, read_rows(truncated, index, num_envs) != 0)
    whole = masked_counts(ends, _spans(stack_size, n_step)) == 0
    batch = starts.shape[0]
    weights = ops.select(terminal, _code_weights(stack_size, n_step, True, batch),
                         _code_weights(stack_size, n_step, False, batch))
    code = CAST(REDUCE_SUM(CAST(whole, ms.float32) * weights, 1), ms.int32)
    rewards = read_rows(reward, index, num_envs)
    if rewards.dtype != ms.float32:
        rewards = CAST(rewards, ms.float32)
    # Only the rewards summed are read: a NaN or an infinity in another row of the window (a stack
    # row's, another episode's) would turn the return into NaN through a weight of 0.
    summed = ops.logical_and(whole, _window_constants(stack_size, n_step, gamma, "forward"))
    returns = REDUCE_SUM(ops.select(summed, rewards, _zeros(rewards.shape))
                         * _window_constants(stack_size, n_step, gamma, "powers"), 1)
    discount = ops.gather(_code_table(stack_size, n_step, gamma, "discount"), code, 0)
    rows = ops.gather_elements(window, 1, ops.gather(_code_table(stack_size, n_step, gamma, "stacks"), code, 0))
    if stack_size == 1:
        return column, rows, returns, discount
    observation, bootstrap = ops.unstack(rows.reshape((-1, 2, stack_size)), axis=1)
    return observation, bootstrap, returns, discount


def transition_windows(reward, terminated, truncated, head, logical, env, stack_size, n_step, gamma):
    """:func:`stacked_windows` of starts given as logical rows ``logical`` of environments ``env``.

    Returns:
        Tuple of 4 tensors: the logical rows of the observation's frames and of the bootstrap
        observation's (int32, ``(B, stack_size)``, oldest first), the return and the discount
        (float32, ``(B,)``), as :func:`stacked_windows`.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Tensor
        >>> from mindspore_rl_buffer.ops import transition_windows
        >>> reward = Tensor(np.array([[0.0], [0.0], [0.0], [1.0], [2.0], [4.0], [8.0]], np.float32))
        >>> terminated = Tensor(np.array([[0], [1], [0], [0], [0], [1], [0]], np.uint8))  # row 2 is final
        >>> rows, next_rows, returns, discount = transition_windows(reward, terminated, terminated * 0,
        ...     Tensor(2, ms.int32), Tensor(np.array([1, 2], np.int32)), Tensor(np.zeros(2, np.int32)), 3, 2, 0.5)
        >>> rows.asnumpy().tolist(), next_rows.asnumpy().tolist()  # logical row 1 starts an episode
        ([[1, 1, 1], [1, 1, 2]], [[1, 2, 3], [2, 3, 4]])
        >>> returns.asnumpy().tolist(), discount.asnumpy().tolist()
        ([2.0, 4.0], [0.25, 0.0])
    """
    max_length, num_envs = reward.shape
    starts = logical_to_physical(head, logical, max_length) * num_envs + env
    rows, bootstrap, returns, discount = stacked_windows(reward, terminated, truncated, starts, stack_size, n_step,
                                                         gamma)
    return (flat_to_logical(rows, head, max_length, num_envs)[0],
            flat_to_logical(bootstrap, head, max_length, num_envs)[0], returns, discount)


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
    env = ops.broadcast_to(env.reshape(env.shape + (1,) * (len(rows.shape) - len(env.shape))), rows.shape)
    return ops.gather(frames, logical_to_physical(head, rows, max_length) * num_envs + env, 0)
