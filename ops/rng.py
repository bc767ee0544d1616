"""A counter-based random generator whose whole state is two Parameters of the buffer.

MindSpore 2.10's random primitives keep their state inside the kernel, where a checkpoint
cannot reach it, and the integer one (``UniformInt``, behind ``ops.uniform`` for int32) is
deprecated. The buffers draw instead from a generator in the manner of JAX's and Flashbax's
keys: the state is two int64 scalars, a ``key`` below ``2**62`` (two words: its low 32 bits
and the 30 above) and a ``counter``. A draw of
``n`` numbers hashes the counters ``counter, ..., counter + n - 1`` under the key and
advances ``counter`` by ``n``, so

* the stream is a pure function of ``(key, counter)``: saving both and loading them resumes
  it exactly, in any process, called directly or inside a compiled graph;
* two draws in one graph read the counter one after the other (MindSpore orders the reads
  and writes of a Parameter as written), so they draw apart.

The hash is two keyed rounds of a 32-bit integer finaliser (xor-shift, multiply, xor-shift,
multiply, xor-shift; constants from Chris Wellons' hash search, "lowbias32"), computed
exactly in int64: every product stays below ``2**63`` and is reduced modulo ``2**32``. The
ops are ``bitwise_xor``, ``bitwise_and``, ``bitwise_right_shift``, ``mul``, ``add``
and ``assign_add``, all documented for Ascend, GPU and CPU. An integer in ``[0, high)`` is ``(bits * high) >> 32``
(Lemire's multiply-shift), whose probabilities differ from ``1 / high`` by less than
``high / 2**32`` relatively; a float in ``[0, 1)`` takes the top 24 bits.

The numpy model of the generator, bit for bit, is in ``tests/helpers.py``.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops
from mindspore.common.seed import _get_graph_seed  # MindSpore's numbering of unseeded random operators
from mindspore_rl_buffer.ops._common import BITWISE_AND, BITWISE_XOR, CAST, RIGHT_SHIFT

#: The bound of a key and of the counter a stream may reach: every ``counter + i`` stays exact in int64.
KEY_END = COUNTER_END = 2**62
_M1, _M2 = 0x7FEB352D, 0x846CA68B  # the finaliser's multipliers (the second above 2**31)


# Bitwise ops, exact on every int64: MindSpore 2.10's CPU FloorDiv and FloorMod of int64 go
# through floating point and are wrong above 2**53 (docs/platforms.md).
def _shift(x, bits):
    """``x >> bits`` for ``x >= 0``."""
    return RIGHT_SHIFT(x, Tensor(bits, ms.int64))


def _low32(x):
    """``x mod 2**32``, in ``[0, 2**32)`` for any int64 ``x`` (two's complement)."""
    return BITWISE_AND(x, Tensor(2**32 - 1, ms.int64))


def _mul32(x, multiplier):
    """``x * multiplier mod 2**32`` for ``0 <= x < 2**32``, exact in int64."""
    if multiplier < 2**31:
        return _low32(x * multiplier)
    # multiplier = 2**32 - m with m < 2**31: x * multiplier = x * -m (mod 2**32), one kernel
    return _low32(x * -(2**32 - multiplier))


def _finalise(x):
    x = BITWISE_XOR(x, _shift(x, 16))
    x = _mul32(x, _M1)
    x = BITWISE_XOR(x, _shift(x, 15))
    x = _mul32(x, _M2)
    return BITWISE_XOR(x, _shift(x, 16))


@ops.constexpr
def _offsets(n):
    """``-n, ..., -1``: added to the advanced counter, the counters the draw hashes."""
    return Tensor(np.arange(-n, 0, dtype=np.int64))


@ops.constexpr
def _size(shape):
    return int(np.prod(shape))


@ops.constexpr
def _step(n):
    return Tensor(n, ms.int64)


@ops.constexpr
def _no_state():
    raise TypeError("For the random draws, 'rng' must be a generator state (key, counter) made by "
                    "mindspore_rl_buffer.ops.random_state, but got None.")


def random_bits(rng, n):
    """``n`` independent 32-bit draws (int64 in ``[0, 2**32)``); advances ``rng``'s counter by ``n``.

    Args:
        rng (tuple[Parameter, Parameter]): The generator's state: the int64 scalars ``key``
            (in ``[0, 2**62)``) and ``counter``, as :func:`random_state` makes them.
        n (int): How many draws (a constant of the graph).

    Returns:
        Tensor, int64, of shape ``(n,)``.

    Supported Platforms:
        ``Ascend`` ``GPU`` ``CPU``
    """
    if rng is None:
        _no_state()
    key, counter = rng
    # The counter advanced and read in one side-effecting kernel: MindSpore can neither merge two
    # draws of one graph nor reorder them around each other.
    at = ops.assign_add(counter, _step(n)) + _offsets(n)
    low, high = _low32(at), _shift(at, 32)
    # A scalar key split by two scalar kernels: a slice of a small tensor costs far more on CPU.
    x = _finalise(BITWISE_XOR(low, _low32(key)))
    x = _finalise(BITWISE_XOR(BITWISE_XOR(x, high), _shift(key, 32)))
    return x


def uniform_int(shape, high, rng):
    """int32 draws, uniform over ``[0, high)``; ``high`` (int32, at least 1) may be a tensor such as ``count``.

    Supported Platforms:
        ``Ascend`` ``GPU`` ``CPU``
    """
    bits = random_bits(rng, _size(shape))
    bound = ops.cast(high, ms.int64) if isinstance(high, Tensor) else high
    return CAST(_shift(bits * bound, 32), ms.int32).reshape(shape)


def uniform_real(shape, rng):
    """float32 draws, uniform over ``[0, 1)`` on a grid of ``2**-24``.

    Supported Platforms:
        ``Ascend`` ``GPU`` ``CPU``
    """
    top = CAST(_shift(random_bits(rng, _size(shape)), 8), ms.float32)
    return (top * (1.0 / 2**24)).reshape(shape)


def _splitmix64(value: int) -> int:
    """One output of SplitMix64 for the state ``value`` (host side: seeds -> keys)."""
    z = (value + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


def _unseeded_number() -> tuple[int, int] | None:
    """``(global seed, number)`` for a key made with ``seed=None``, or ``None`` without a global seed.

    Numbered as MindSpore numbers the seeds of its own unseeded random operators (a count per
    name that ``mindspore.set_seed`` restarts), so the same program under the same global seed
    gets the same keys, and numpy's global generator is left alone.
    """
    if ms.get_seed() is None:
        return None
    return _get_graph_seed(None, "mindspore_rl_buffer.rng")


def initial_key(seed: int | None) -> np.ndarray:
    """The key a generator starts from: an int64 in ``[0, 2**62)``, as a 0-d array.

    ``seed`` an int: a function of the seed alone. ``None``: a function of the global seed of
    ``mindspore.set_seed`` and of how many keys were made with ``seed=None`` since it was set
    (see :func:`_unseeded_number`); without a global seed, from the operating system's entropy.
    """
    if seed is not None:
        return np.array(_splitmix64(int(seed)) % KEY_END, np.int64)
    number = _unseeded_number()
    if number is None:
        return np.array(int(np.random.SeedSequence().generate_state(1, np.uint64)[0]) % KEY_END, np.int64)
    global_seed, count = number
    return np.array(_splitmix64(_splitmix64(2**32 + global_seed) ^ count) % KEY_END, np.int64)


def random_state(seed: int | None = None, name: str = "rng") -> tuple[Parameter, Parameter]:
    """A fresh generator state: the Parameters ``<name>_key`` and ``<name>_counter`` (counter 0).

    Keep both as attributes of your Cell (so that they are saved with it) and pass them as a
    pair to the operators that draw.

    Args:
        seed (int): The seed; ``None`` follows ``mindspore.set_seed`` (see ``ops.rng.initial_key``).
            Default: ``None``.
        name (str): Prefix of the two Parameters' names. Default: ``'rng'``.

    Returns:
        Tuple of 2 Parameters: the int64 scalars key and counter.

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.ops import random_state, uniform_int
        >>> rng = random_state(seed=0)
        >>> draws = uniform_int((1000,), ms.Tensor(6, ms.int32), rng).asnumpy()
        >>> int(rng[1]), int(draws.min()), int(draws.max())
        (1000, 0, 5)
    """
    return (Parameter(Tensor(initial_key(seed)), name=f"{name}_key", requires_grad=False),
            Parameter(Tensor(0, ms.int64), name=f"{name}_counter", requires_grad=False))


def state_problems(key: np.ndarray, counter: np.ndarray) -> list[str]:
    """What is wrong with a generator state read from a file (empty if nothing)."""
    key, counter = np.asarray(key), np.asarray(counter)
    problems = []
    if key.shape != () or not 0 <= int(key) < KEY_END:
        problems.append(f"the random key must be an int in [0, 2**62), but got {key.tolist()}")
    if counter.shape != () or not 0 <= int(counter) < COUNTER_END:
        problems.append(f"the random counter must be in [0, 2**62), but got {counter.tolist()}")
    return problems
