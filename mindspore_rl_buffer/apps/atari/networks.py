"""The Atari Q-network: the Nature-DQN convolutional torso and a dueling head.

:class:`Conv2d` holds the weights of an ``nn.Conv2d`` and computes the convolution either
with it (``unfold=False``: cuDNN on a GPU) or as ``ops.unfold`` (im2col) and a ``matmul``
(``unfold=True``). On this project's CPU, MindSpore 2.10's ``nn.Conv2d`` takes about 0.8 s for
a forward pass of 32 Nature-CNN inputs; the unfold form is about 40x faster. Both forms
read the same Parameters, so a checkpoint serves either. :func:`default_unfold` picks the
unfold form on CPU only; the choice is made once, when the network is built, never inside
a ``construct``.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops

# Nature DQN (Mnih et al., 2015): (out_channels, kernel, stride) per convolution, then 512 units.
NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
HIDDEN = 512


def default_unfold() -> bool:
    """Whether convolutions run as unfold + matmul: ``True`` when the device target is CPU."""
    return ms.get_context("device_target") == "CPU"


def conv_output_size(size: int, kernel: int, stride: int) -> int:
    """Output height (or width) of a valid (unpadded) convolution."""
    return (size - kernel) // stride + 1


class Conv2d(nn.Cell):
    """A valid (unpadded) 2-D convolution with bias, as ``nn.Conv2d`` or as unfold + matmul.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int): Square kernel size.
        stride (int): Stride in both directions.
        unfold (bool): Compute with ``ops.unfold`` and ``matmul`` instead of ``nn.Conv2d``.
            Default: ``None``, which is :func:`default_unfold`.

    Inputs:
        - **x** (Tensor) - float32 ``(B, in_channels, H, W)``.

    Outputs:
        Tensor, float32 ``(B, out_channels, H', W')`` with ``H' = (H - kernel_size) // stride + 1``.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
                 unfold: bool | None = None) -> None:
        super().__init__()
        self.unfold = default_unfold() if unfold is None else bool(unfold)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, pad_mode="valid", has_bias=True)
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride

    def construct(self, x):
        if not self.unfold:
            return self.conv(x)
        batch, _, height, width = x.shape
        out_h = (height - self.kernel_size) // self.stride + 1
        out_w = (width - self.kernel_size) // self.stride + 1
        # (B, C * k * k, L): channel slowest, then kernel row, then kernel column, as the weight's layout
        columns = ops.unfold(x, self.kernel_size, stride=self.stride)
        weight = self.conv.weight.reshape((self.out_channels, -1))
        out = ops.matmul(weight, columns) + self.conv.bias.reshape((1, self.out_channels, 1))
        return out.reshape((batch, self.out_channels, out_h, out_w))


class DuelingHead(nn.Cell):
    """Q-values from features: ``V(s) + A(s, a) - mean_a A(s, a)`` (Wang et al., 2016).

    Args:
        in_features (int): Feature size.
        num_actions (int): Actions.
        hidden (int): Units of each stream's hidden layer. Default: ``512``.

    Inputs:
        - **features** (Tensor) - float32 ``(B, in_features)``.

    Outputs:
        Tensor, float32 ``(B, num_actions)``.
    """

    def __init__(self, in_features: int, num_actions: int, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.value = nn.SequentialCell([nn.Dense(in_features, hidden, activation="relu"), nn.Dense(hidden, 1)])
        self.advantage = nn.SequentialCell([nn.Dense(in_features, hidden, activation="relu"),
                                            nn.Dense(hidden, num_actions)])

    def construct(self, features):
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(axis=1, keep_dims=True)


class NatureQNetwork(nn.Cell):
    """The Nature-DQN torso (conv 32x8x8/4, 64x4x4/2, 64x3x3/1, ReLU) and a dueling head.

    Args:
        num_actions (int): Actions.
        stack_size (int): Frames per observation (input channels). Default: ``4``.
        frame_shape (tuple[int, int]): Height and width of a frame. Default: ``(84, 84)``.
        unfold (bool): Convolutions as unfold + matmul (see :class:`Conv2d`). Default: ``None``,
            which is :func:`default_unfold`.

    Inputs:
        - **observation** (Tensor) - uint8 (or float, 0-255) ``(B, stack_size, *frame_shape)``.

    Outputs:
        Tensor, float32 ``(B, num_actions)``.

    Supported Platforms:
        ``GPU`` ``CPU``
    """

    def __init__(self, num_actions: int, stack_size: int = 4, frame_shape: tuple[int, int] = (84, 84),
                 unfold: bool | None = None) -> None:
        super().__init__()
        layers = []
        channels, (height, width) = stack_size, frame_shape
        for out_channels, kernel, stride in NATURE_CONVS:
            layers += [Conv2d(channels, out_channels, kernel, stride, unfold=unfold), nn.ReLU()]
            channels = out_channels
            height, width = conv_output_size(height, kernel, stride), conv_output_size(width, kernel, stride)
        self.torso = nn.SequentialCell(layers)
        self.features = channels * height * width  # 3136 for 84x84 frames
        self.head = DuelingHead(self.features, num_actions)

    def construct(self, observation):
        x = observation.astype(ms.float32) / 255.0
        x = self.torso(x)
        return self.head(x.reshape((x.shape[0], -1)))
