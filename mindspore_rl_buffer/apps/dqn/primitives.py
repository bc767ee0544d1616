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

ABS = ops.Abs()
ADD_N = ops.AddN()
ADDCMUL = ops.Addcmul()
#: ``Addcmul``'s factor where ``ops.addcmul``'s default (1) is meant.
ADDCMUL_ONE = ms.Tensor(1.0, ms.float32)
ASSIGN = ops.Assign()
#: ``argmax`` over the last of two axes, as int32 (the actions' dtype).
ARGMAX = ops.Argmax(axis=1, output_type=ms.int32)
CAST = ops.Cast()
CONCAT_COLUMNS = ops.Concat(axis=1)
CONCAT_ROWS = ops.Concat(axis=0)
COS = ops.Cos()
EXPAND_DIMS = ops.ExpandDims()
FLOOR = ops.Floor()
#: ``gather_elements`` along the last of two axes: ``GatherD(x, 1, index)``.
GATHER_D = ops.GatherD()
LOGICAL_AND = ops.LogicalAnd()
LOGICAL_NOT = ops.LogicalNot()
LOGICAL_OR = ops.LogicalOr()
MAP = ops.Map()
MATMUL = ops.MatMul()
MINIMUM = ops.Minimum()
ONES = ops.Ones()
RELU = ops.ReLU()
REDUCE_ANY = ops.ReduceAny()
REDUCE_MAX = ops.ReduceMax()
REDUCE_SUM = ops.ReduceSum()
RESHAPE = ops.Reshape()
SELECT = ops.Select()
SIN = ops.Sin()
#: Stacks a tuple of tensors along a new axis 1: ``(n,)`` columns into ``(n, k)``.
STACK_COLUMNS = ops.Stack(axis=1)
STOP_GRADIENT = ops.StopGradient()
STRIDED_SLICE = ops.StridedSlice()
TRANSPOSE = ops.Transpose()
#: Unstacks ``(n, k)`` into its ``k`` columns.
UNSTACK_COLUMNS = ops.Unstack(axis=1)
ZEROS_LIKE = ops.ZerosLike()


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
