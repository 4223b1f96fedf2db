"""What the tests of the numpy checker build their inputs with: .safetensors, IDX and CIFAR-10
files, random models, a temporary folder per test."""

import gzip
import json
import os
import struct
import tempfile
import unittest

import numpy as np


def encode_tensor(array, dtype):
    array = np.asarray(array, dtype=np.float32)
    if dtype == "F32":
        return array.astype("<f4").tobytes()
    if dtype == "F16":
        return array.astype("<f2").tobytes()
    if dtype == "BF16":
        # Truncation is enough for values that are exact in bfloat16.
        return (array.view(np.uint32) >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def build_safetensors(tensors, metadata, dtype="F32"):
    """Returns (header dict, data bytes) laid out like the trainer writes."""
    header = {"__metadata__": metadata} if metadata is not None else {}
    data = b""
    for name, array in tensors:
        raw = encode_tensor(array, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(array)),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def write_raw_safetensors(path, header, data, header_len=None, pad=0):
    header_bytes = json.dumps(header).encode("utf-8") + b" " * pad
    if header_len is None:
        header_len = len(header_bytes)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len) + header_bytes + data)


def write_safetensors(path, tensors, metadata, dtype="F32"):
    header, data = build_safetensors(tensors, metadata, dtype)
    write_raw_safetensors(path, header, data)


def write_idx(path, magic, array, count=None):
    """Writes an IDX file; count overrides the first dimension in the header."""
    array = np.asarray(array, dtype=np.uint8)
    dims = list(array.shape)
    if count is not None:
        dims[0] = count
    content = struct.pack(">I", magic) + b"".join(
        struct.pack(">I", d) for d in dims) + array.tobytes()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(content)


def lenet_tensors(rng, scale=0.1):
    shapes = [("conv1.weight", (6, 1, 5, 5)), ("conv1.bias", (6,)),
              ("conv2.weight", (16, 6, 5, 5)), ("conv2.bias", (16,)),
              ("fc1.weight", (120, 400)), ("fc1.bias", (120,)),
              ("fc2.weight", (84, 120)), ("fc2.bias", (84,)),
              ("fc3.weight", (10, 84)), ("fc3.bias", (10,))]
    return [(name, (rng.standard_normal(shape) * scale).astype(np.float32))
            for name, shape in shapes]


def mlp_tensors(rng, hidden=(32, 16)):
    shapes = [("fc1.weight", (hidden[0], 784)), ("fc1.bias", (hidden[0],)),
              ("fc2.weight", (hidden[1], hidden[0])),
              ("fc2.bias", (hidden[1],)),
              ("fc3.weight", (10, hidden[1])), ("fc3.bias", (10,))]
    return [(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))
            for name, shape in shapes]


# Depth of each CIFAR ResNet and its trainable parameter count (conv and fc
# weights, batch-norm gamma and beta) for 3 input channels and 10 classes.
RESNET_DEPTHS = {"resnet20": 20, "resnet32": 32, "resnet44": 44,
                 "resnet56": 56, "resnet110": 110}
RESNET_PARAMETERS = {"resnet20": 269722, "resnet32": 464154,
                     "resnet44": 658586, "resnet56": 853018,
                     "resnet110": 1727962}
RUNNING_STATS = (".running_mean", ".running_var")


def resnet_tensors(rng, model, in_channels=3, classes=10):
    """A random CIFAR ResNet in file order, its layout spelled out here
    rather than taken from check_model. Batch-norm statistics are kept near
    those of a trained net so activations stay of order one."""
    blocks = (RESNET_DEPTHS[model] - 2) // 6
    tensors = []

    def conv_bn(prefix, conv, bn, out_channels, conv_in_channels):
        fan_in = 9 * conv_in_channels
        tensors.append((f"{prefix}{conv}.weight", rng.standard_normal(
            (out_channels, conv_in_channels, 3, 3)) * np.sqrt(2 / fan_in)))
        tensors.append((f"{prefix}{bn}.weight",
                        rng.uniform(0.5, 1.5, out_channels)))
        tensors.append((f"{prefix}{bn}.bias",
                        rng.uniform(-0.2, 0.2, out_channels)))
        tensors.append((f"{prefix}{bn}.running_mean",
                        rng.uniform(-0.2, 0.2, out_channels)))
        tensors.append((f"{prefix}{bn}.running_var",
                        rng.uniform(0.5, 2.0, out_channels)))

    conv_bn("", "conv1", "bn1", 16, in_channels)
    planes_in = 16
    for stage, planes in ((1, 16), (2, 32), (3, 64)):
        for i in range(blocks):
            prefix = f"layer{stage}.{i}."
            conv_bn(prefix, "conv1", "bn1", planes, planes_in)
            conv_bn(prefix, "conv2", "bn2", planes, planes)
            planes_in = planes
    tensors.append(("fc.weight", rng.standard_normal((classes, 64)) * 0.1))
    tensors.append(("fc.bias", rng.standard_normal(classes) * 0.1))
    return [(name, a.astype(np.float32)) for name, a in tensors]


def resnet_metadata(model="resnet20", input_shape="[1,32,32]"):
    return {"model": model, "input_shape": input_shape,
            "input_mean": "0.2860", "input_std": "0.3530",
            "dataset": "fashion-mnist", "format": "pt"}


def write_cifar10(path, images, labels):
    records = np.concatenate(
        [np.asarray(labels, np.uint8)[:, None],
         np.asarray(images, np.uint8).reshape(len(labels), -1)], axis=1)
    with open(path, "wb") as f:
        f.write(records.tobytes())


LENET_METADATA = {"model": "lenet", "input_shape": "[1,28,28]",
                  "input_mean": "0.2860", "input_std": "0.3530"}
MLP_METADATA = {"model": "mlp", "input_shape": "[1,28,28]",
                "input_mean": "0.2860", "input_std": "0.3530"}


class TempDirTestCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)
