"""Primitive instances and a Dense layer the DQN graphs call instead of MindSpore's wrappers.

A graph compiles each call of a Python-level wrapper (``ops.argmax``, ``Tensor.astype``,
``ops.split``, ``nn.Dense.construct``) as a function graph of its own, with its argument checks
and branches, specialized for the argument types of the call; type inference takes about half a
millisecond per node it specializes on MindSpore 2.10's CPU. A primitive instance is one node.
The kernels are the same, so the results are too.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops

ADD_N = ops.AddN()
ASSIGN = ops.Assign()
#: ``argmax`` over the last of two axes, as int32 (the actions' dtype).
ARGMAX = ops.Argmax(axis=1, output_type=ms.int32)
CAST = ops.Cast()
EXPAND_DIMS = ops.ExpandDims()
MAP = ops.Map()
MATMUL = ops.MatMul()
RELU = ops.ReLU()
REDUCE_ANY = ops.ReduceAny()
REDUCE_MAX = ops.ReduceMax()
REDUCE_SUM = ops.ReduceSum()
STRIDED_SLICE = ops.StridedSlice()


class Dense(nn.Dense):
    """``nn.Dense`` with a bias and no activation, for 2-D inputs, as two kernels and no wrapper graph.

    The parameters (``weight`` ``(out, in)``, ``bias`` ``(out,)``), their names and their
    initialization are ``nn.Dense``'s.

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.primitives import Dense
        >>> layer = Dense(3, 2)
        >>> x = ms.Tensor(np.ones((4, 3), np.float32))
        >>> expected = x.asnumpy() @ layer.weight.asnumpy().T + layer.bias.asnumpy()
        >>> bool(np.allclose(layer(x).asnumpy(), expected))
        True
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(in_channels, out_channels)
        self.matmul_t = ops.MatMul(transpose_b=True)
        self.add_bias = ops.BiasAdd()

    def construct(self, x):
        return self.add_bias(self.matmul_t(x, self.weight), self.bias)
