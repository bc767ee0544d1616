"""Uniform random draws for the app's graphs, from the buffers' counter-based generator.

Each Cell that draws keeps a generator state of its own, the int64 Parameters ``<name>_key``
and ``<name>_counter`` (:func:`state`), and passes it to :func:`uniform` or :func:`integers`:
the draws are those of :func:`mindspore_rl_buffer.ops.uniform_real` (see the seeding guide).
The run's seed reaches the graphs only through the keys' values, never as a constant of the
graph, so a compiled graph serves every seed: ``train``'s compile cache is shared by them
(:mod:`.compile_cache`). The MindSpore random operators this replaced (``StandardLaplace``,
``UniformReal``) keep their seeds in the compiled graph.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import Parameter

from mindspore_rl_buffer.apps.dqn.primitives import CAST, FLOOR, MINIMUM
from mindspore_rl_buffer.ops import random_state, uniform_real


def state(name: str, seed: int | None = None) -> tuple[Parameter, Parameter]:
    """A fresh generator state for a Cell that draws: keep both Parameters as its attributes.

    Args:
        name (str): Prefix of the Parameters' names.
        seed (int): The seed; ``None`` follows ``mindspore.set_seed`` (a key of its own for each
            state made since, in order). Default: ``None``.

    Returns:
        Tuple of 2 Parameters, the key and the counter.
    """
    return random_state(seed, name=name)


def uniform(shape, rng):
    """Floats drawn uniformly from ``[0, 1)``, float32; advances ``rng``.

    Args:
        shape (tuple[int]): Shape of the draw.
        rng (tuple[Parameter, Parameter]): The generator state (:func:`state`).

    Returns:
        Tensor, float32, of shape ``shape``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.draws import state, uniform
        >>> u = uniform((1000,), state("example", seed=0)).asnumpy()
        >>> bool(0 <= u.min() < 0.01 and 0.99 < u.max() < 1)
        True
    """
    return uniform_real(shape, rng)


def integers(shape, high, rng):
    """Integers drawn uniformly from ``[0, high)``, int32, for a small Python int ``high``; advances ``rng``.

    Args:
        shape (tuple[int]): Shape of the draw.
        high (int): One past the largest value (a few actions: float32 resolution is ample).
        rng (tuple[Parameter, Parameter]): The generator state (:func:`state`).

    Returns:
        Tensor, int32, of shape ``shape``.

    Supported Platforms:
        ``GPU`` ``CPU``
    """
    return below(uniform(shape, rng), high)


def below(unit, high):
    """Uniform draws ``unit`` from ``[0, 1)`` as integers in ``[0, high)``, int32, for a small Python int ``high``."""
    return MINIMUM(CAST(FLOOR(unit * high), ms.int32), high - 1)  # a product rounded up to `high`
