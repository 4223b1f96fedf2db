"""The test sets a model is scored on: IDX files (MNIST, Fashion-MNIST), plain or gzipped, and
the CIFAR-10 binary test batch; images fitted to a model's input and normalised."""

import gzip
import math
import os

import numpy as np

from .errors import CheckError, DataFileError

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


def normalize(pixels, mean, std):
    """The model's input from 0-255 pixels: scaled to [0, 1], less the mean, over the std."""
    return (pixels.astype(np.float64) / 255.0 - mean) / std
