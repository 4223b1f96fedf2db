"""The numpy layers the forward passes are built from, in float64 or float32 as given."""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

BN_SUFFIXES = ("weight", "bias", "running_mean", "running_var")
BN_EPS = 1e-5  # PyTorch's default, which the trainer uses.


def conv2d(x, weight, bias, padding):
    """Stride-1 convolution. x [N, C, H, W], weight [O, C, kh, kw] (OIHW)."""
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    _, _, kh, kw = weight.shape
    # windows: [N, C, H', W', kh, kw], a view without copying.
    windows = sliding_window_view(x, (kh, kw), axis=(2, 3))
    out = np.tensordot(windows, weight, axes=([1, 4, 5], [1, 2, 3]))
    # tensordot leaves [N, H', W', O].
    return out.transpose(0, 3, 1, 2) + bias[None, :, None, None]


def maxpool2x2(x):
    """2x2 max pooling with stride 2; odd trailing rows/columns are dropped."""
    n, c, h, w = x.shape
    h2, w2 = h // 2, w // 2
    x = x[:, :, :2 * h2, :2 * w2].reshape(n, c, h2, 2, w2, 2)
    return x.max(axis=(3, 5))


def relu(x):
    return np.maximum(x, 0.0)


def linear(x, tensors, layer):
    w = tensors[f"{layer}.weight"].astype(np.float64)
    b = tensors[f"{layer}.bias"].astype(np.float64)
    return x @ w.T + b


def conv3x3(x, weight, stride):
    """3x3 convolution with padding 1 and no bias, channels last.

    x [N, H, W, C], weight [O, C, 3, 3] (OIHW) -> [N, H', W', O] with
    H' = (H - 1) // stride + 1, which is PyTorch's (H + 2 - 3) // stride + 1.
    """
    n, h, w, c = x.shape
    out_h, out_w = (h - 1) // stride + 1, (w - 1) // stride + 1
    x = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    # With channels last, the three horizontal taps of a pixel are 3*C
    # consecutive values: a view [N, H+2, W', 3, C], so im2col copies whole
    # runs of 3*C values instead of single pixels' C.
    rows = sliding_window_view(x, 3, axis=2)[:, :, ::stride].swapaxes(3, 4)
    cols = np.empty((n, out_h, out_w, 3, 3, c), x.dtype)
    for i in range(3):
        cols[:, :, :, i] = rows[:, i:i + stride * (out_h - 1) + 1:stride]
    # Columns are ordered (kh, kw, C); weight rows must match.
    matrix = weight.transpose(0, 2, 3, 1).reshape(weight.shape[0], -1)
    # einsum's own SIMD loops rather than BLAS: with the reference BLAS that
    # Debian's numpy uses by default they are several times faster here.
    out = np.einsum("pk,ok->po", cols.reshape(-1, 9 * c), matrix)
    return out.reshape(n, out_h, out_w, -1)


def batch_norm(x, tensors, name):
    """Evaluation-mode batch norm over the last (channel) axis."""
    gamma, beta, mean, var = (tensors[f"{name}.{suffix}"].astype(np.float64)
                              for suffix in BN_SUFFIXES)
    # (x - mean) / sqrt(var + eps) * gamma + beta as one multiply-add.
    scale = gamma / np.sqrt(var + BN_EPS)
    shift = beta - mean * scale
    return x * scale.astype(x.dtype) + shift.astype(x.dtype)


def option_a_shortcut(x, out_channels):
    """The parameter-free shortcut of a block that halves H and W.

    x [N, H, W, C] (channels last) -> x[:, ::2, ::2] with out_channels // 4
    zero channels before and the rest after, as "option A" of He et al.
    """
    n, h, w, c = x.shape
    y = np.zeros((n, (h + 1) // 2, (w + 1) // 2, out_channels), x.dtype)
    before = out_channels // 4
    y[..., before:before + c] = x[:, ::2, ::2]
    return y
