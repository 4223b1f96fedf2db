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
import functools
import math
import sys

import numpy as np

from numpy_model.datasets import DEFAULT_DATA_DIR, load_images, normalize, pad_images
from numpy_model.errors import CheckError, DataFileError, ModelFileError
from numpy_model.models import (RESNET_BLOCKS, accuracy, check_model, forward_lenet, forward_mlp,
                                forward_resnet, parse_metadata)
from numpy_model.safetensors_file import read_safetensors


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
