#!/usr/bin/python3
"""Independent accuracy checker for models exported as .safetensors.

Usage:
  check_model.py MODEL.safetensors [--data_dir DIR] [--limit N] [--batch 1000]

The model file is parsed strictly (any deviation from the layout our trainer
writes is an error), the forward pass is rebuilt in numpy from the stored
weights, and the model is evaluated on the test set in DIR: the CIFAR-10
binary test batch if DIR holds test_batch.bin, else the IDX test set. Images
smaller than the model's input are zero-padded equally on every side, as the
trainer does. Supported models: lenet, mlp and the CIFAR ResNets resnet20,
resnet32, resnet44, resnet56 and resnet110. The last line on stdout is

  top1=<percent> top5=<percent> n=<count>

Any problem with the model file or the data files is reported on stderr and
the exit code is 2.
"""

import argparse
import concurrent.futures
import functools
import gzip
import json
import math
import os
import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"

IDX_IMAGES_MAGIC = 0x00000803
IDX_LABELS_MAGIC = 0x00000801

# CIFAR-10 binary batch: records of 1 label byte and 3x32x32 pixel bytes (CHW).
CIFAR10_TEST_BATCH = "test_batch.bin"
CIFAR10_IMAGE_SHAPE = (3, 32, 32)
CIFAR10_RECORD_SIZE = 1 + math.prod(CIFAR10_IMAGE_SHAPE)
CIFAR10_CLASSES = 10

# Item size in bytes of every dtype accepted in the model file.
DTYPE_SIZES = {"F32": 4, "F16": 2, "BF16": 2}

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
BN_SUFFIXES = ("weight", "bias", "running_mean", "running_var")
BN_EPS = 1e-5  # PyTorch's default, which the trainer uses.
# Images per ResNet forward chunk: keeps the first stage's im2col buffer near
# 60 MB (100 x 32 x 32 x 144 float32) and gives each core a share of a batch.
RESNET_CHUNK = 100

MODELS = ("lenet", "mlp") + tuple(RESNET_BLOCKS)


class CheckError(ValueError):
    """Base class of every error that makes the checker exit with code 2."""


class ModelFileError(CheckError):
    """The model file is malformed or does not describe a supported model."""


class DataFileError(CheckError):
    """A test data file is missing or malformed."""


# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------

def decode_tensor(raw, dtype, shape):
    """Decodes little-endian raw bytes of the given dtype into float32."""
    if dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        # bfloat16 is the upper half of an IEEE float32.
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        values = (halves << 16).view(np.float32)
    else:
        raise ModelFileError(f"unsupported dtype {dtype!r}")
    return values.reshape(shape)


def _reject_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _is_int(value):
    # bool is a subclass of int but is not a valid size or offset.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_header(header_bytes):
    """Parses the JSON header; only trailing spaces may follow the object."""
    try:
        text = header_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFileError(f"header is not valid UTF-8: {e}") from None
    decoder = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys,
                               parse_constant=_reject_constant)
    try:
        # raw_decode does not skip leading whitespace, which keeps this strict.
        header, end = decoder.raw_decode(text)
    except ValueError as e:
        raise ModelFileError(f"header is not valid JSON: {e}") from None
    if text[end:].strip(" "):
        raise ModelFileError(
            f"header has unexpected content after the JSON object at "
            f"character {end}: {text[end:end + 20]!r}")
    if not isinstance(header, dict):
        raise ModelFileError(
            f"header is a JSON {type(header).__name__}, expected an object")
    return header


def _check_metadata(metadata):
    if not isinstance(metadata, dict):
        raise ModelFileError("__metadata__ is not a JSON object")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise ModelFileError(
                f"__metadata__[{key!r}] is {type(value).__name__}, "
                f"expected a string")
    for key in ("model", "input_shape"):
        if key not in metadata:
            raise ModelFileError(f"__metadata__ has no {key!r} entry")


def _read_safetensors_unchecked(path):
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        raise ModelFileError(f"cannot read file: {e.strerror}") from None

    if len(content) < 8:
        raise ModelFileError(
            f"file is {len(content)} bytes, too short for the 8-byte "
            f"header length")
    header_len = int.from_bytes(content[:8], "little")
    if header_len > len(content) - 8:
        raise ModelFileError(
            f"header length {header_len} exceeds the {len(content) - 8} "
            f"bytes after the length field")
    header = _parse_header(content[8:8 + header_len])
    data = memoryview(content)[8 + header_len:]

    if "__metadata__" not in header:
        raise ModelFileError("header has no __metadata__ entry")
    metadata = header["__metadata__"]
    _check_metadata(metadata)

    tensors = {}
    expected_begin = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {name!r}"
        if not isinstance(entry, dict):
            raise ModelFileError(f"{where}: entry is not a JSON object")
        keys = set(entry)
        required = {"dtype", "shape", "data_offsets"}
        if keys != required:
            missing = sorted(required - keys)
            extra = sorted(keys - required)
            raise ModelFileError(
                f"{where}: entry keys are wrong (missing {missing}, "
                f"unexpected {extra})")

        dtype = entry["dtype"]
        if dtype not in DTYPE_SIZES:
            raise ModelFileError(
                f"{where}: unsupported dtype {dtype!r} "
                f"(expected one of {sorted(DTYPE_SIZES)})")

        shape = entry["shape"]
        if not (isinstance(shape, list)
                and all(_is_int(d) and d >= 0 for d in shape)):
            raise ModelFileError(
                f"{where}: shape {shape!r} is not a list of non-negative "
                f"integers")

        offsets = entry["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(_is_int(o) and o >= 0 for o in offsets)):
            raise ModelFileError(
                f"{where}: data_offsets {offsets!r} is not a pair of "
                f"non-negative integers")
        begin, end = offsets
        if end < begin:
            raise ModelFileError(
                f"{where}: data_offsets [{begin}, {end}] ends before it "
                f"begins")
        nbytes = math.prod(shape) * DTYPE_SIZES[dtype]
        if end - begin != nbytes:
            raise ModelFileError(
                f"{where}: size mismatch: data_offsets [{begin}, {end}] span "
                f"{end - begin} bytes but shape {shape} of {dtype} needs "
                f"{nbytes}")
        if begin > expected_begin:
            raise ModelFileError(
                f"{where}: gap in data: begins at {begin} but the previous "
                f"tensor ends at {expected_begin}")
        if begin < expected_begin:
            raise ModelFileError(
                f"{where}: overlapping data: begins at {begin} but the "
                f"previous tensor ends at {expected_begin}")
        if end > len(data):
            raise ModelFileError(
                f"{where}: data_offsets end {end} is beyond the end of the "
                f"data section ({len(data)} bytes)")
        tensors[name] = decode_tensor(bytes(data[begin:end]), dtype, shape)
        expected_begin = end

    if expected_begin != len(data):
        raise ModelFileError(
            f"trailing bytes: the data section is {len(data)} bytes but the "
            f"tensors end at {expected_begin}")
    return tensors, dict(metadata)


def read_safetensors(path):
    """Reads a .safetensors file strictly.

    Returns (tensors, metadata): tensors maps name -> float32 ndarray in the
    header's order, metadata is the __metadata__ dict (str -> str).
    Raises ModelFileError naming the file on any deviation from the format.
    """
    try:
        return _read_safetensors_unchecked(path)
    except ModelFileError as e:
        raise ModelFileError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------
# Model description
# ---------------------------------------------------------------------------

def _parse_float(metadata, key, default):
    if key not in metadata:
        return default
    try:
        value = float(metadata[key])
    except ValueError:
        raise ModelFileError(
            f"__metadata__[{key!r}] = {metadata[key]!r} is not a number"
        ) from None
    if not math.isfinite(value):
        raise ModelFileError(
            f"__metadata__[{key!r}] = {metadata[key]!r} is not finite")
    return value


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
            and all(_is_int(d) and d > 0 for d in input_shape)):
        raise ModelFileError(
            f"__metadata__['input_shape'] = {metadata['input_shape']!r} is "
            f"not a JSON list of positive integers")
    mean = _parse_float(metadata, "input_mean", 0.0)
    std = _parse_float(metadata, "input_std", 1.0)
    if std <= 0:
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


# ---------------------------------------------------------------------------
# Forward pass
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# IDX data
# ---------------------------------------------------------------------------

def _read_maybe_gzip(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:
        # gzip.BadGzipFile is an OSError; a cut-off stream is an EOFError.
        reason = getattr(e, "strerror", None) or str(e)
        raise DataFileError(f"{path}: cannot read file: {reason}") from None


def _read_idx(path, magic, dims):
    """Reads an IDX file with the given magic and number of dimensions."""
    content = _read_maybe_gzip(path)
    header_size = 4 + 4 * dims
    if len(content) < header_size:
        raise DataFileError(
            f"{path}: file is {len(content)} bytes, too short for the "
            f"{header_size}-byte IDX header")
    found = int.from_bytes(content[:4], "big")
    if found != magic:
        raise DataFileError(
            f"{path}: wrong magic number 0x{found:08x}, expected "
            f"0x{magic:08x}")
    shape = tuple(int.from_bytes(content[4 + 4 * i:8 + 4 * i], "big")
                  for i in range(dims))
    expected = header_size + math.prod(shape)
    if len(content) != expected:
        what = "truncated" if len(content) < expected else "trailing bytes"
        raise DataFileError(
            f"{path}: {what}: header says {list(shape)} "
            f"({expected} bytes in all) but the file has {len(content)} "
            f"bytes")
    return np.frombuffer(content, dtype=np.uint8,
                         offset=header_size).reshape(shape)


def read_idx_images(path):
    """Reads an IDX3 image file -> uint8 [N, rows, cols]."""
    return _read_idx(path, IDX_IMAGES_MAGIC, 3)


def read_idx_labels(path):
    """Reads an IDX1 label file -> uint8 [N]."""
    return _read_idx(path, IDX_LABELS_MAGIC, 1)


def find_data_file(data_dir, name):
    """Prefers NAME.gz in data_dir and falls back to the uncompressed NAME."""
    gz_path = os.path.join(data_dir, name + ".gz")
    if os.path.exists(gz_path):
        return gz_path
    plain_path = os.path.join(data_dir, name)
    if os.path.exists(plain_path):
        return plain_path
    raise DataFileError(f"{gz_path}: not found (nor {plain_path})")


def load_test_set(data_dir):
    """Reads the IDX test set: (images uint8 [N, rows, cols], labels [N])."""
    images_path = find_data_file(data_dir, TEST_IMAGES)
    labels_path = find_data_file(data_dir, TEST_LABELS)
    images = read_idx_images(images_path)
    labels = read_idx_labels(labels_path)
    if len(images) != len(labels):
        raise DataFileError(
            f"{images_path} has {len(images)} images but {labels_path} has "
            f"{len(labels)} labels")
    return images, labels


# ---------------------------------------------------------------------------
# CIFAR-10 data
# ---------------------------------------------------------------------------

def read_cifar10_batch(path):
    """Reads a CIFAR-10 binary batch.

    Returns (images uint8 [N, 3, 32, 32], labels uint8 [N]).
    """
    content = _read_maybe_gzip(path)
    if len(content) % CIFAR10_RECORD_SIZE:
        raise DataFileError(
            f"{path}: file is {len(content)} bytes, not a whole number of "
            f"{CIFAR10_RECORD_SIZE}-byte records")
    records = np.frombuffer(content, dtype=np.uint8).reshape(
        -1, CIFAR10_RECORD_SIZE)
    labels = records[:, 0]
    bad = np.flatnonzero(labels >= CIFAR10_CLASSES)
    if bad.size:
        raise DataFileError(
            f"{path}: record {bad[0]} has label {labels[bad[0]]}, expected "
            f"0 to {CIFAR10_CLASSES - 1}")
    return records[:, 1:].reshape((-1,) + CIFAR10_IMAGE_SHAPE), labels


def load_images(data_dir):
    """Returns (images uint8 [N, C, H, W], labels uint8 [N]) from data_dir.

    The CIFAR-10 test batch is used when data_dir holds one, else the IDX
    test set (one channel).
    """
    cifar_path = os.path.join(data_dir, CIFAR10_TEST_BATCH)
    if os.path.exists(cifar_path):
        return read_cifar10_batch(cifar_path)
    images, labels = load_test_set(data_dir)
    return images[:, None], labels


def pad_images(images, input_shape):
    """Fits uint8 images [N, C, H, W] to a [C, H, W] input_shape.

    Smaller images get pixels of value 0 added equally on every side, as the
    trainer does; this comes before normalisation, so the padding
    normalises to (0 - mean) / std like a black pixel. Raises CheckError if
    the channels differ, an image is larger, or a difference is odd.
    """
    channels, height, width = input_shape
    _, c, h, w = images.shape
    if c != channels:
        raise CheckError(
            f"input_shape {list(input_shape)} has {channels} channels but "
            f"the test images have {c}")
    if h > height or w > width:
        raise CheckError(
            f"input_shape {list(input_shape)} is smaller than the {h}x{w} "
            f"test images")
    if (height - h) % 2 or (width - w) % 2:
        raise CheckError(
            f"the {h}x{w} test images cannot be padded equally on every side "
            f"to input_shape {list(input_shape)}")
    pad_h, pad_w = (height - h) // 2, (width - w) // 2
    if not pad_h and not pad_w:
        return images
    return np.pad(images, ((0, 0), (0, 0), (pad_h, pad_h), (pad_w, pad_w)))


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def normalize(pixels, mean, std):
    """The model's input from 0-255 pixels: scaled to [0, 1], less the mean, over the std."""
    return (pixels.astype(np.float64) / 255.0 - mean) / std


def evaluate(model_path, data_dir, limit=None, batch=1000):
    """Returns (top1 percent, top5 percent, n)."""
    tensors, metadata = read_safetensors(model_path)
    try:
        model, input_shape, mean, std = parse_metadata(metadata)
        classes = check_model(tensors, model, input_shape)
    except ModelFileError as e:
        raise ModelFileError(f"{model_path}: {e}") from None

    images, labels = load_images(data_dir)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    n = len(labels)
    if n == 0:
        raise DataFileError(f"{data_dir}: no test images to evaluate")

    if len(input_shape) == 3:
        try:
            images = pad_images(images, input_shape)
        except CheckError as e:
            raise CheckError(f"{model_path}: {e}") from None
    else:
        channels, rows, cols = images.shape[1:]
        if (math.prod(input_shape) != channels * rows * cols
                or (len(input_shape) >= 2
                    and input_shape[-2:] != (rows, cols))):
            raise CheckError(
                f"{model_path}: input_shape {list(input_shape)} does not "
                f"match the {channels}x{rows}x{cols} test images")
    if int(labels.max()) >= classes:
        raise CheckError(
            f"test label {int(labels.max())} is out of range for the "
            f"{classes} outputs of {model_path}")

    if model in RESNET_BLOCKS:
        forward = functools.partial(forward_resnet, model=model)
    else:
        forward = forward_lenet if model == "lenet" else forward_mlp
    top1 = top5 = 0
    for start in range(0, n, batch):
        pixels = images[start:start + batch]
        x = normalize(pixels, mean, std)
        logits = forward(tensors, x.reshape((len(pixels),) + input_shape))
        c1, c5 = accuracy(logits, labels[start:start + batch].astype(np.int64))
        top1 += c1
        top5 += c5
    return 100.0 * top1 / n, 100.0 * top5 / n, n


def _positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def main(argv=None):
    """Runs the checker; returns the process exit code (0, or 2 on error)."""
    parser = argparse.ArgumentParser(
        description="Checks the test-set accuracy of an exported model.")
    parser.add_argument("model", help="path to MODEL.safetensors")
    parser.add_argument("--data_dir", default=DEFAULT_DATA_DIR,
                        help="directory holding the CIFAR-10 "
                             "test_batch.bin or else t10k-*-ubyte[.gz] "
                             "(default: %(default)s)")
    parser.add_argument("--limit", type=_positive_int, default=None,
                        help="use only the first N test images")
    parser.add_argument("--batch", type=_positive_int, default=1000,
                        help="images per forward batch (default: %(default)s)")
    args = parser.parse_args(argv)

    try:
        top1, top5, n = evaluate(args.model, args.data_dir, args.limit,
                                 args.batch)
    except CheckError as e:
        print(f"check_model: error: {e}", file=sys.stderr)
        return 2
    print(f"top1={top1:.2f} top5={top5:.2f} n={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
