"""The supported models: their tensors' names and shapes, and their forward passes."""

import concurrent.futures
import functools
import json
import math
import os

import numpy as np

from .errors import ModelFileError
from .layers import (BN_SUFFIXES, batch_norm, conv2d, conv3x3, linear, maxpool2x2,
                     option_a_shortcut, relu)
from .safetensors_file import is_int

LENET_TENSORS = (
    "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
    "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
    "fc3.weight", "fc3.bias",
)
MLP_TENSORS = (
    "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
    "fc3.weight", "fc3.bias",
)
LENET_CONV1_PADDING = 2
LENET_CONV2_PADDING = 0

# CIFAR ResNets (He et al. 2016): depth 6n + 2, n BasicBlocks in each stage.
RESNET_BLOCKS = {"resnet20": 3, "resnet32": 5, "resnet44": 7, "resnet56": 9,
                 "resnet110": 18}
# Channels of the stem and of each stage; stages after the first open with a
# stride-2 block.
RESNET_CHANNELS = (16, 32, 64)
# Images per ResNet forward chunk: keeps the first stage's im2col buffer near
# 60 MB (100 x 32 x 32 x 144 float32) and gives each core a share of a batch.
RESNET_CHUNK = 100

MODELS = ("lenet", "mlp") + tuple(RESNET_BLOCKS)


def _parse_channels(metadata, key, default):
    """One number for every channel, or "a,b,c" (one per channel: an array of shape (C, 1, 1),
    which broadcasts over (N, C, H, W) images)."""
    if key not in metadata:
        return default
    try:
        values = [float(v) for v in metadata[key].split(",")]
    except ValueError:
        raise ModelFileError(
            f"__metadata__[{key!r}] = {metadata[key]!r} is not a number or a comma-separated "
            f"list of them") from None
    if not all(math.isfinite(v) for v in values):
        raise ModelFileError(
            f"__metadata__[{key!r}] = {metadata[key]!r} is not finite")
    return values[0] if len(values) == 1 else np.array(values).reshape(-1, 1, 1)


def parse_metadata(metadata):
    """Returns (model, input_shape tuple, mean, std) from the metadata."""
    model = metadata["model"]
    if model not in MODELS:
        raise ModelFileError(
            f"__metadata__['model'] = {model!r}, expected one of "
            f"{list(MODELS)}")
    try:
        input_shape = json.loads(metadata["input_shape"])
    except ValueError:
        input_shape = None
    if not (isinstance(input_shape, list) and input_shape
            and all(is_int(d) and d > 0 for d in input_shape)):
        raise ModelFileError(
            f"__metadata__['input_shape'] = {metadata['input_shape']!r} is "
            f"not a JSON list of positive integers")
    mean = _parse_channels(metadata, "input_mean", 0.0)
    std = _parse_channels(metadata, "input_std", 1.0)
    if np.any(np.asarray(std) <= 0):
        raise ModelFileError(
            f"__metadata__['input_std'] = {metadata['input_std']!r} must be "
            f"positive")
    return model, tuple(input_shape), mean, std


def _shape_error(name, actual, expected):
    return ModelFileError(
        f"tensor {name} has shape {list(actual)}, expected {expected}")


def _check_linear_chain(tensors, layers, in_features):
    """Checks fcN.weight [out, in] / fcN.bias [out] along a chain of layers.

    Returns the output size of the last layer.
    """
    for layer in layers:
        w, b = tensors[f"{layer}.weight"], tensors[f"{layer}.bias"]
        if w.ndim != 2 or w.shape[1] != in_features or w.shape[0] == 0:
            raise _shape_error(f"{layer}.weight", w.shape,
                               f"[out>0, {in_features}]")
        if b.shape != (w.shape[0],):
            raise _shape_error(f"{layer}.bias", b.shape, f"[{w.shape[0]}]")
        in_features = w.shape[0]
    return in_features


def _check_conv(tensors, layer, in_channels):
    w, b = tensors[f"{layer}.weight"], tensors[f"{layer}.bias"]
    if w.ndim != 4 or w.shape[1] != in_channels or 0 in w.shape:
        raise _shape_error(f"{layer}.weight", w.shape,
                           f"[out>0, {in_channels}, kh>0, kw>0]")
    if b.shape != (w.shape[0],):
        raise _shape_error(f"{layer}.bias", b.shape, f"[{w.shape[0]}]")
    return w.shape


def resnet_blocks(model):
    """Yields (prefix, in_channels, out_channels, stride) per BasicBlock."""
    in_channels = RESNET_CHANNELS[0]
    for stage, channels in enumerate(RESNET_CHANNELS, start=1):
        for i in range(RESNET_BLOCKS[model]):
            stride = 2 if stage > 1 and i == 0 else 1
            yield f"layer{stage}.{i}", in_channels, channels, stride
            in_channels = channels


def resnet_tensor_shapes(model, in_channels, classes):
    """Returns [(name, shape)] of a CIFAR ResNet in the trainer's order."""
    def conv_bn(conv, bn, out_channels, conv_in_channels):
        return [(f"{conv}.weight", (out_channels, conv_in_channels, 3, 3))] + [
            (f"{bn}.{suffix}", (out_channels,)) for suffix in BN_SUFFIXES]

    shapes = conv_bn("conv1", "bn1", RESNET_CHANNELS[0], in_channels)
    for prefix, block_in, block_out, _ in resnet_blocks(model):
        shapes += conv_bn(f"{prefix}.conv1", f"{prefix}.bn1", block_out,
                          block_in)
        shapes += conv_bn(f"{prefix}.conv2", f"{prefix}.bn2", block_out,
                          block_out)
    shapes += [("fc.weight", (classes, RESNET_CHANNELS[-1])),
               ("fc.bias", (classes,))]
    return shapes


def _check_names(tensors, model, expected):
    missing = [n for n in expected if n not in tensors]
    unexpected = [n for n in tensors if n not in expected]
    if missing or unexpected:
        raise ModelFileError(
            f"{model} model tensors do not match: missing {missing}, "
            f"unexpected {unexpected}")


def _check_resnet(tensors, model, input_shape):
    if len(input_shape) != 3:
        raise ModelFileError(
            f"{model} needs a [C, H, W] input_shape, got {list(input_shape)}")
    names = [n for n, _ in resnet_tensor_shapes(model, input_shape[0], 0)]
    _check_names(tensors, model, names)
    # The names match; the trainer also writes them in model order.
    for i, (found, wanted) in enumerate(zip(tensors, names)):
        if found != wanted:
            raise ModelFileError(
                f"{model} model tensors are out of order: position {i} holds "
                f"{found}, expected {wanted}")

    fc = tensors["fc.weight"]
    width = RESNET_CHANNELS[-1]
    if fc.ndim != 2 or fc.shape[0] == 0 or fc.shape[1] != width:
        raise _shape_error("fc.weight", fc.shape, f"[classes>0, {width}]")
    classes = fc.shape[0]
    for name, shape in resnet_tensor_shapes(model, input_shape[0], classes):
        if tensors[name].shape != shape:
            raise _shape_error(name, tensors[name].shape, list(shape))
        if name.endswith(".running_var"):
            # Written as "not >= 0" so that NaN is rejected too.
            bad = np.flatnonzero(~(tensors[name] >= 0))
            if bad.size:
                raise ModelFileError(
                    f"tensor {name} holds {tensors[name][bad[0]]} at index "
                    f"{bad[0]}, but a running variance must be >= 0")
    return classes


def check_model(tensors, model, input_shape):
    """Checks tensor names and shapes; returns the number of output classes."""
    if model in RESNET_BLOCKS:
        return _check_resnet(tensors, model, input_shape)
    expected = LENET_TENSORS if model == "lenet" else MLP_TENSORS
    _check_names(tensors, model, expected)

    if model == "mlp":
        return _check_linear_chain(tensors, ("fc1", "fc2", "fc3"),
                                   math.prod(input_shape))

    if len(input_shape) != 3:
        raise ModelFileError(
            f"lenet needs a [C, H, W] input_shape, got {list(input_shape)}")
    channels, height, width = input_shape
    out1, _, kh1, kw1 = _check_conv(tensors, "conv1", channels)
    out2, _, kh2, kw2 = _check_conv(tensors, "conv2", out1)
    # conv1 (padding 2) -> pool 2 -> conv2 (no padding) -> pool 2.
    h = (height + 2 * LENET_CONV1_PADDING - kh1 + 1) // 2
    w = (width + 2 * LENET_CONV1_PADDING - kw1 + 1) // 2
    h = (h + 2 * LENET_CONV2_PADDING - kh2 + 1) // 2
    w = (w + 2 * LENET_CONV2_PADDING - kw2 + 1) // 2
    if h <= 0 or w <= 0:
        raise ModelFileError(
            f"lenet convolutions with kernels {[kh1, kw1]} and {[kh2, kw2]} "
            f"do not fit input_shape {list(input_shape)}")
    return _check_linear_chain(tensors, ("fc1", "fc2", "fc3"), out2 * h * w)


def forward_lenet(tensors, x):
    """x [N, C, H, W] float64 -> logits [N, classes]."""
    def conv(x, layer, padding):
        return conv2d(x, tensors[f"{layer}.weight"].astype(np.float64),
                      tensors[f"{layer}.bias"].astype(np.float64), padding)

    x = maxpool2x2(relu(conv(x, "conv1", LENET_CONV1_PADDING)))
    x = maxpool2x2(relu(conv(x, "conv2", LENET_CONV2_PADDING)))
    x = x.reshape(x.shape[0], -1)  # C*H*W order, as torch.flatten.
    x = relu(linear(x, tensors, "fc1"))
    x = relu(linear(x, tensors, "fc2"))
    return linear(x, tensors, "fc3")


def forward_mlp(tensors, x):
    """x [N, ...] float64 -> logits [N, classes]."""
    x = x.reshape(x.shape[0], -1)
    x = relu(linear(x, tensors, "fc1"))
    x = relu(linear(x, tensors, "fc2"))
    return linear(x, tensors, "fc3")



def _forward_resnet_chunk(tensors, model, x):
    """x [N, H, W, C] float32 -> pooled features [N, 64] float64."""
    def conv_bn(x, conv, bn, stride):
        return batch_norm(conv3x3(x, tensors[f"{conv}.weight"], stride),
                          tensors, bn)

    x = relu(conv_bn(x, "conv1", "bn1", 1))
    for prefix, in_channels, out_channels, stride in resnet_blocks(model):
        out = relu(conv_bn(x, f"{prefix}.conv1", f"{prefix}.bn1", stride))
        out = conv_bn(out, f"{prefix}.conv2", f"{prefix}.bn2", 1)
        if stride == 1 and in_channels == out_channels:
            out += x
        else:
            out += option_a_shortcut(x, out_channels)
        x = relu(out)
    return x.mean(axis=(1, 2), dtype=np.float64)


def _cpu_count():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def forward_resnet(tensors, x, model):
    """x [N, C, H, W] -> logits [N, classes] (float64).

    Convolutions run in float32, the trainer's precision, channels last.
    Chunks of RESNET_CHUNK images run on all cores in threads: numpy
    releases the GIL in einsum and in array copies.
    """
    tensors = {name: np.asarray(a, np.float32) for name, a in tensors.items()}
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=np.float32)
    chunks = [x[i:i + RESNET_CHUNK] for i in range(0, len(x), RESNET_CHUNK)]
    run = functools.partial(_forward_resnet_chunk, tensors, model)
    workers = min(len(chunks), _cpu_count())
    if workers <= 1:
        features = [run(chunk) for chunk in chunks]
    else:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            features = list(pool.map(run, chunks))
    return linear(np.concatenate(features), tensors, "fc")


def accuracy(logits, labels, k=5):
    """Returns (top1 correct count, top-k correct count).

    Ties are broken by class index (lowest first) via a stable sort.
    """
    order = np.argsort(-logits, axis=1, kind="stable")
    top1 = int(np.count_nonzero(order[:, 0] == labels))
    topk = int(np.count_nonzero(
        (order[:, :k] == labels[:, None]).any(axis=1)))
    return top1, topk
