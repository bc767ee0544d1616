"""Uniform random draws for the app's graphs, from an operator MindSpore 2.10 does not deprecate.

MindSpore 2.10 deprecates ``UniformReal`` and ``UniformInt``, the primitives behind ``ops.rand``
and ``ops.uniform``, and suggests ``mint.rand`` and ``mint.randint``, which have no CPU kernel in
2.10 (kernel selection fails). ``ops.standard_laplace`` (primitive ``StandardLaplace``; CPU, GPU
and Ascend) is not deprecated, follows ``mindspore.set_seed`` as ``ops.uniform`` does, draws
afresh on every call and in every iteration of a graph loop. A standard Laplace draw ``x`` is
turned into a uniform one by its distribution function, ``F(x) = 1 - exp(-x) / 2`` for
``x >= 0`` and ``exp(x) / 2`` below, evaluated as ``h = exp(-|x|) / 2`` (so in float32 no
value is lost to ``exp`` overflowing).
"""
from __future__ import annotations

import mindspore as ms
from mindspore import ops


def uniform(shape, seed=None):
    """Floats drawn uniformly from ``[0, 1]``, float32.

    Args:
        shape (tuple[int]): Shape of the draw.
        seed (int): Seed of the operator; ``None`` follows ``mindspore.set_seed``. Default: ``None``.

    Returns:
        Tensor, float32, of shape ``shape``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.draws import uniform
        >>> ms.set_seed(0)
        >>> u = uniform((1000,)).asnumpy()
        >>> bool(0 <= u.min() < 0.01 and 0.99 < u.max() <= 1)
        True
    """
    x = ops.standard_laplace(shape, seed=seed)
    half_tail = 0.5 * ops.exp(-ops.abs(x))
    return ops.where(x < 0, half_tail, 1.0 - half_tail)


def integers(shape, high, seed=None):
    """Integers drawn uniformly from ``[0, high)``, int32, for a small Python int ``high``.

    Args:
        shape (tuple[int]): Shape of the draw.
        high (int): One past the largest value (a few actions: float32 resolution is ample).
        seed (int): As :func:`uniform`. Default: ``None``.

    Returns:
        Tensor, int32, of shape ``shape``.

    Supported Platforms:
        ``GPU`` ``CPU``
    """
    drawn = ops.floor(uniform(shape, seed) * high).astype(ms.int32)
    return ops.minimum(drawn, high - 1)  # u == 1.0 exactly would give `high`
