"""The Atari Q-network: the unfold convolution against ``nn.Conv2d``, the dueling head, the Nature shapes."""
from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from mindspore_rl_buffer.apps.atari.networks import Conv2d, DuelingHead, NatureQNetwork, default_unfold


@pytest.mark.parametrize("kernel, stride, size", [(8, 4, 20), (4, 2, 9), (3, 1, 7)])
def test_the_unfold_convolution_matches_nn_conv2d_forward_and_gradient(kernel, stride, size):
    rng = np.random.default_rng(kernel)
    unfolded, native = Conv2d(3, 5, kernel, stride, unfold=True), Conv2d(3, 5, kernel, stride, unfold=False)
    for mine, theirs in zip(unfolded.get_parameters(), native.get_parameters()):
        theirs.set_data(Tensor(rng.normal(size=mine.shape).astype(np.float32)))
        mine.set_data(Tensor(theirs.asnumpy()))
    x = Tensor(rng.normal(size=(2, 3, size + 1, size)).astype(np.float32))  # not square: height and width apart
    out_unfold, out_native = unfolded(x).asnumpy(), native(x).asnumpy()
    out_h, out_w = (size + 1 - kernel) // stride + 1, (size - kernel) // stride + 1
    assert out_unfold.shape == out_native.shape == (2, 5, out_h, out_w)
    np.testing.assert_allclose(out_unfold, out_native, atol=1e-4, rtol=1e-4)
    grads = [ms.grad(cell, grad_position=0, weights=cell.trainable_params())(x) for cell in (unfolded, native)]
    (dx_unfold, dw_unfold), (dx_native, dw_native) = grads
    np.testing.assert_allclose(dx_unfold.asnumpy(), dx_native.asnumpy(), atol=1e-4, rtol=1e-4)
    for mine, theirs in zip(dw_unfold, dw_native):
        np.testing.assert_allclose(mine.asnumpy(), theirs.asnumpy(), atol=1e-3, rtol=1e-4)


def test_the_unfold_form_is_the_default_on_cpu_only():
    assert default_unfold() == (ms.get_context("device_target") == "CPU")
    assert Conv2d(1, 1, 3, 1).unfold == default_unfold()


def test_the_dueling_head_is_the_value_plus_the_centred_advantage():
    head = DuelingHead(6, 3, hidden=8)
    features = Tensor(np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32))
    q = head(features).asnumpy()
    value, advantage = head.value(features).asnumpy(), head.advantage(features).asnumpy()
    np.testing.assert_allclose(q, value + advantage - advantage.mean(axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(q.mean(axis=1), value[:, 0], atol=1e-6)  # the value is the mean Q-value


def test_the_nature_network_takes_uint8_stacks_and_gives_one_q_value_per_action():
    net = NatureQNetwork(4)
    assert net.features == 64 * 7 * 7
    shapes = [tuple(p.shape) for p in net.torso.get_parameters()]
    assert shapes == [(32, 4, 8, 8), (32,), (64, 32, 4, 4), (64,), (64, 64, 3, 3), (64,)]
    frames = np.random.default_rng(1).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    q = net(Tensor(frames)).asnumpy()
    assert q.shape == (2, 4) and q.dtype == np.float32 and np.isfinite(q).all()
    np.testing.assert_allclose(net(Tensor(frames.astype(np.float32))).asnumpy(), q, atol=1e-6)  # scaled by 1/255
