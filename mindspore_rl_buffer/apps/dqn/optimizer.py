"""Adam for dense gradients on the ``Adam`` kernel, without the deprecated primitive ``nn.Adam`` builds.

``mindspore.nn.Adam`` creates a ``FusedSparseAdam`` primitive in its constructor for sparse
gradients, whatever the gradients are, and MindSpore 2.10 logs that primitive's deprecation
on every run. The Q-network's gradients are dense, so :class:`Adam` runs only the kernel that
``nn.Adam`` runs for them, ``ops.Adam`` (CPU, GPU and Ascend), with the same bias correction.
"""
from __future__ import annotations

from collections.abc import Sequence

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from mindspore_rl_buffer.apps.dqn.primitives import ASSIGN, MAP


class Adam(nn.Optimizer):
    """Adam (Kingma and Ba) with bias correction, for dense gradients.

    Each step multiplies the running powers ``beta1**t`` and ``beta2**t`` and applies
    ``ops.Adam`` to every parameter, as ``mindspore.nn.Adam`` does for dense gradients
    (``tests/apps/dqn/test_learner.py`` checks that the two agree step by step).

    Args:
        params (Sequence[Parameter]): The parameters to train.
        learning_rate (float): Step size. Default: ``1e-3``.
        beta1 (float): Decay of the first moment. Default: ``0.9``.
        beta2 (float): Decay of the second moment. Default: ``0.999``.
        eps (float): Added to the denominator. Default: ``1e-8``.

    Inputs:
        - **gradients** (tuple[Tensor]) - One per parameter, of its shape.

    Outputs:
        Tensor, bool scalar: ``True`` once the updates are applied.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore import Parameter, Tensor
        >>> from mindspore_rl_buffer.apps.dqn.optimizer import Adam
        >>> weight = Parameter(Tensor(np.ones(2, np.float32)), name="weight")
        >>> _ = Adam([weight], learning_rate=0.1)((Tensor(np.array([1.0, -1.0], np.float32)),))
        >>> [round(float(w), 4) for w in weight.asnumpy()]   # the first step moves each weight by the learning rate
        [0.9, 1.1]
    """

    def __init__(self, params: Sequence[Parameter], learning_rate: float = 1e-3, beta1: float = 0.9,
                 beta2: float = 0.999, eps: float = 1e-8) -> None:
        super().__init__(learning_rate, params)
        self.beta1 = Tensor(beta1, ms.float32)
        self.beta2 = Tensor(beta2, ms.float32)
        self.eps = Tensor(eps, ms.float32)
        self.beta1_power = Parameter(Tensor(1.0, ms.float32), name="beta1_power", requires_grad=False)
        self.beta2_power = Parameter(Tensor(1.0, ms.float32), name="beta2_power", requires_grad=False)
        self.moment1 = self._parameters.clone(prefix="moment1", init="zeros")
        self.moment2 = self._parameters.clone(prefix="moment2", init="zeros")
        self.adam = ops.Adam()

    def construct(self, gradients):
        lr = self.get_lr()
        beta1_power = self.beta1_power * self.beta1
        beta2_power = self.beta2_power * self.beta2
        ASSIGN(self.beta1_power, beta1_power)
        ASSIGN(self.beta2_power, beta2_power)
        updated = MAP(ops.partial(self.adam_step, beta1_power, beta2_power, lr), self._parameters, self.moment1,
                      self.moment2, gradients)
        return ops.depend(True, updated)

    def adam_step(self, beta1_power, beta2_power, lr, param, m, v, gradient):
        """One parameter's update."""
        return self.adam(param, m, v, beta1_power, beta2_power, lr, self.beta1, self.beta2, self.eps, gradient)
