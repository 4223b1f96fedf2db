#!/usr/bin/python3
"""Tests for layers.py and the forward passes models.py builds from them, against plain loops."""

import os
import sys
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_model import layers, models  # noqa: E402
from numpy_model.testing import (  # noqa: E402
    lenet_tensors, mlp_tensors, RESNET_DEPTHS, resnet_tensors)


def naive_conv2d(x, weight, bias, padding):
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    xp = np.zeros((n, c, h + 2 * padding, w + 2 * padding))
    xp[:, :, padding:padding + h, padding:padding + w] = x
    oh, ow = h + 2 * padding - kh + 1, w + 2 * padding - kw + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for oc in range(o):
            for i in range(oh):
                for j in range(ow):
                    total = bias[oc]
                    for ic in range(c):
                        for di in range(kh):
                            for dj in range(kw):
                                total += (xp[b, ic, i + di, j + dj]
                                          * weight[oc, ic, di, dj])
                    out[b, oc, i, j] = total
    return out


def naive_maxpool2x2(x):
    n, c, h, w = x.shape
    out = np.zeros((n, c, h // 2, w // 2))
    for b in range(n):
        for ch in range(c):
            for i in range(h // 2):
                for j in range(w // 2):
                    out[b, ch, i, j] = max(x[b, ch, 2 * i + di, 2 * j + dj]
                                           for di in range(2)
                                           for dj in range(2))
    return out


def reference_conv3x3(x, weight, stride):
    """NCHW, padding 1: a sum over the nine taps at stride 1, then every
    stride-th output (what a strided convolution computes)."""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2, w + 2))
    xp[:, :, 1:h + 1, 1:w + 1] = x
    out = np.zeros((n, weight.shape[0], h, w))
    for di in range(3):
        for dj in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, di:di + h, dj:dj + w],
                             weight[:, :, di, dj])
    return out[:, :, ::stride, ::stride]


def reference_batch_norm(x, t, name):
    def channel(suffix):
        return t[f"{name}.{suffix}"][None, :, None, None]
    return ((x - channel("running_mean"))
            / np.sqrt(channel("running_var") + 1e-5)
            * channel("weight") + channel("bias"))


def reference_shortcut(x, planes):
    n, c, h, w = x.shape
    y = np.zeros((n, planes, (h + 1) // 2, (w + 1) // 2))
    for ch in range(c):
        y[:, ch + planes // 4] = x[:, ch, ::2, ::2]
    return y


def reference_resnet(tensors, x, model):
    """Float64 NCHW forward pass of a CIFAR ResNet."""
    t = {n: a.astype(np.float64) for n, a in tensors.items()}
    blocks = (RESNET_DEPTHS[model] - 2) // 6

    def conv_bn(h, conv, bn, stride):
        return reference_batch_norm(
            reference_conv3x3(h, t[conv + ".weight"], stride), t, bn)

    h = np.maximum(conv_bn(x, "conv1", "bn1", 1), 0)
    for stage in (1, 2, 3):
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            stride = 2 if stage > 1 and i == 0 else 1
            out = np.maximum(conv_bn(h, p + ".conv1", p + ".bn1", stride), 0)
            out = conv_bn(out, p + ".conv2", p + ".bn2", 1)
            planes = out.shape[1]
            shortcut = h if stride == 1 else reference_shortcut(h, planes)
            h = np.maximum(out + shortcut, 0)
    pooled = h.sum(axis=(2, 3)) / (h.shape[2] * h.shape[3])
    return pooled @ t["fc.weight"].T + t["fc.bias"]


class ConvPoolTest(unittest.TestCase):
    def test_conv2d_matches_naive(self):
        rng = np.random.default_rng(1)
        for (n, c, h, w, o, k, padding) in [(2, 1, 9, 8, 3, 5, 2),
                                            (3, 4, 7, 7, 2, 3, 0),
                                            (1, 2, 6, 5, 4, 5, 0),
                                            (2, 3, 4, 6, 2, 2, 1)]:
            with self.subTest(shape=(n, c, h, w), kernel=(o, k),
                              padding=padding):
                x = rng.standard_normal((n, c, h, w))
                weight = rng.standard_normal((o, c, k, k))
                bias = rng.standard_normal(o)
                got = layers.conv2d(x, weight, bias, padding)
                want = naive_conv2d(x, weight, bias, padding)
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_conv2d_is_not_correlation_transposed(self):
        # An asymmetric kernel catches flipped or transposed weights.
        x = np.zeros((1, 1, 3, 3))
        x[0, 0, 0, 0] = 1.0
        weight = np.arange(9, dtype=np.float64).reshape(1, 1, 3, 3)
        out = layers.conv2d(x, weight, np.zeros(1), padding=1)
        # Output (i, j) sees input (i + di - 1, j + dj - 1).
        self.assertEqual(out[0, 0, 0, 0], weight[0, 0, 1, 1])
        self.assertEqual(out[0, 0, 0, 1], weight[0, 0, 1, 0])
        self.assertEqual(out[0, 0, 1, 0], weight[0, 0, 0, 1])

    def test_maxpool_matches_naive(self):
        rng = np.random.default_rng(2)
        for shape in [(2, 3, 8, 8), (1, 2, 7, 9), (3, 1, 2, 3)]:
            with self.subTest(shape=shape):
                x = rng.standard_normal(shape)
                got = layers.maxpool2x2(x)
                want = naive_maxpool2x2(x)
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_forward_lenet_matches_naive(self):
        rng = np.random.default_rng(3)
        tensors = {n: a for n, a in lenet_tensors(rng)}
        x = rng.standard_normal((2, 1, 28, 28))
        t = {n: a.astype(np.float64) for n, a in tensors.items()}
        h = naive_maxpool2x2(np.maximum(naive_conv2d(
            x, t["conv1.weight"], t["conv1.bias"], 2), 0))
        h = naive_maxpool2x2(np.maximum(naive_conv2d(
            h, t["conv2.weight"], t["conv2.bias"], 0), 0))
        # Flatten in C*H*W order, one element at a time.
        flat = np.array([[h[b, c, i, j] for c in range(16) for i in range(5)
                          for j in range(5)] for b in range(2)])
        h = np.maximum(flat @ t["fc1.weight"].T + t["fc1.bias"], 0)
        h = np.maximum(h @ t["fc2.weight"].T + t["fc2.bias"], 0)
        want = h @ t["fc3.weight"].T + t["fc3.bias"]
        got = models.forward_lenet(tensors, x)
        self.assertEqual(got.shape, (2, 10))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_forward_mlp(self):
        rng = np.random.default_rng(4)
        tensors = {n: a for n, a in mlp_tensors(rng)}
        x = rng.standard_normal((3, 1, 28, 28))
        t = {n: a.astype(np.float64) for n, a in tensors.items()}
        h = x.reshape(3, 784)
        h = np.maximum(h @ t["fc1.weight"].T + t["fc1.bias"], 0)
        h = np.maximum(h @ t["fc2.weight"].T + t["fc2.bias"], 0)
        want = h @ t["fc3.weight"].T + t["fc3.bias"]
        np.testing.assert_allclose(models.forward_mlp(tensors, x), want,
                                   rtol=0, atol=1e-10)


class ResnetLayersTest(unittest.TestCase):
    def test_conv3x3_matches_naive(self):
        rng = np.random.default_rng(10)
        for (n, c, h, w, o, stride) in [(2, 3, 6, 5, 4, 1),
                                        (1, 2, 7, 7, 3, 2),
                                        (2, 4, 8, 6, 5, 2),
                                        (1, 1, 1, 2, 2, 2)]:
            with self.subTest(shape=(n, c, h, w), out=o, stride=stride):
                x = rng.standard_normal((n, c, h, w))
                weight = rng.standard_normal((o, c, 3, 3))
                want = naive_conv2d(x, weight, np.zeros(o), 1)
                want = want[:, :, ::stride, ::stride]
                # PyTorch's output size: (H + 2 * 1 - 3) // stride + 1.
                self.assertEqual(want.shape[2:], ((h - 1) // stride + 1,
                                                  (w - 1) // stride + 1))
                got = layers.conv3x3(x.transpose(0, 2, 3, 1), weight, stride)
                self.assertEqual(got.shape, (n,) + want.shape[2:] + (o,))
                np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want,
                                           rtol=0, atol=1e-10)

    def test_batch_norm_by_hand(self):
        eps = 1e-5
        t = {"bn.weight": np.array([2.0, 1.0, 3.0]),
             "bn.bias": np.array([0.5, -1.0, 0.0]),
             "bn.running_mean": np.array([1.0, 4.0, 0.0]),
             # sqrt(var + eps) is 2, 0.5 and sqrt(eps).
             "bn.running_var": np.array([4.0 - eps, 0.25 - eps, 0.0])}
        x = np.array([[[[1.0, 2.0, 1e-3], [3.0, 4.0, -1e-3]]]])  # [1,1,2,3]
        want = np.array([[[[0.5, -5.0, 3e-3 / np.sqrt(eps)],
                           [2.5, -1.0, -3e-3 / np.sqrt(eps)]]]])
        np.testing.assert_allclose(layers.batch_norm(x, t, "bn"), want,
                                   rtol=1e-12)

    def test_option_a_shortcut_by_hand(self):
        # Channels last: x[0, i, j] = [10 * i + j, -(10 * i + j)], 3x3.
        x = np.array([[[[10 * i + j, -(10 * i + j)] for j in range(3)]
                       for i in range(3)]], dtype=np.float64)
        y = layers.option_a_shortcut(x, 4)
        # Rows and columns 0 and 2 are kept; one zero channel each side.
        want = np.array([[[[0, 0, 0, 0], [0, 2, -2, 0]],
                          [[0, 20, -20, 0], [0, 22, -22, 0]]]])
        self.assertEqual(y.shape, (1, 2, 2, 4))
        np.testing.assert_array_equal(y, want)

    def test_option_a_shortcut_stage_sizes(self):
        rng = np.random.default_rng(11)
        for c, h in ((16, 32), (32, 16)):
            with self.subTest(channels=c):
                x = rng.standard_normal((2, h, h, c))
                y = layers.option_a_shortcut(x, 2 * c)
                self.assertEqual(y.shape, (2, h // 2, h // 2, 2 * c))
                np.testing.assert_array_equal(y[..., :c // 2], 0)
                np.testing.assert_array_equal(y[..., c // 2:c // 2 + c],
                                              x[:, ::2, ::2])
                np.testing.assert_array_equal(y[..., c // 2 + c:], 0)

    def test_forward_resnet20_matches_reference(self):
        rng = np.random.default_rng(12)
        for channels, size in ((3, 32), (1, 20)):
            with self.subTest(channels=channels, size=size):
                tensors = dict(resnet_tensors(rng, "resnet20", channels))
                x = rng.standard_normal((2, channels, size, size))
                want = reference_resnet(tensors, x, "resnet20")
                got = models.forward_resnet(tensors, x, "resnet20")
                self.assertEqual(got.shape, (2, 10))
                np.testing.assert_allclose(
                    got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

    def test_forward_resnet_chunks_agree(self):
        rng = np.random.default_rng(13)
        tensors = dict(resnet_tensors(rng, "resnet20", 1))
        x = rng.standard_normal((3, 1, 8, 8))
        whole = models.forward_resnet(tensors, x, "resnet20")
        with mock.patch.object(models, "RESNET_CHUNK", 1), \
                mock.patch.object(models, "_cpu_count", lambda: 2):
            chunked = models.forward_resnet(tensors, x, "resnet20")
        np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
