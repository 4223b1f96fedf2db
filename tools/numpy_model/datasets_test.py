#!/usr/bin/python3
"""Tests for datasets.py: IDX and CIFAR-10 test sets, images fitted to the input."""

import os
import re
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_model import datasets, errors  # noqa: E402
from numpy_model.testing import write_idx, write_cifar10, TempDirTestCase  # noqa: E402


class PadImagesTest(unittest.TestCase):
    def test_pads_equally_with_zero_pixels(self):
        images = np.arange(1, 13, dtype=np.uint8).reshape(2, 1, 2, 3)
        padded = datasets.pad_images(images, (1, 4, 5))
        self.assertEqual(padded.dtype, np.uint8)
        want = np.zeros((2, 1, 4, 5), np.uint8)
        want[:, :, 1:3, 1:4] = images
        np.testing.assert_array_equal(padded, want)

    def test_fashion_mnist_to_32(self):
        images = np.full((3, 1, 28, 28), 200, np.uint8)
        padded = datasets.pad_images(images, (1, 32, 32))
        self.assertEqual(padded.shape, (3, 1, 32, 32))
        self.assertEqual(int(padded[:, :, 2:30, 2:30].min()), 200)
        self.assertEqual(int(padded.sum()), 200 * 3 * 28 * 28)

    def test_same_size_unchanged(self):
        images = np.ones((2, 3, 32, 32), np.uint8)
        self.assertIs(datasets.pad_images(images, (3, 32, 32)), images)

    def test_rejected(self):
        images = np.zeros((2, 1, 28, 28), np.uint8)
        cases = [((3, 32, 32), "has 3 channels but the test images have 1"),
                 ((1, 27, 32), "smaller than the 28x28"),
                 ((1, 32, 26), "smaller than the 28x28"),
                 ((1, 31, 32), "cannot be padded equally"),
                 ((1, 32, 29), "cannot be padded equally")]
        for input_shape, pattern in cases:
            with self.subTest(input_shape=input_shape):
                with self.assertRaisesRegex(errors.CheckError, pattern):
                    datasets.pad_images(images, input_shape)


class IdxTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(6)
        self.images = rng.integers(0, 256, (7, 4, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, 7, dtype=np.uint8)

    def test_round_trip_gzip_and_plain(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                write_idx(images_path, datasets.IDX_IMAGES_MAGIC, self.images)
                write_idx(labels_path, datasets.IDX_LABELS_MAGIC, self.labels)
                np.testing.assert_array_equal(
                    datasets.read_idx_images(images_path), self.images)
                np.testing.assert_array_equal(
                    datasets.read_idx_labels(labels_path), self.labels)

    def test_wrong_magic(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                # Each written with the other's magic number.
                write_idx(images_path, datasets.IDX_LABELS_MAGIC, self.images)
                write_idx(labels_path, datasets.IDX_IMAGES_MAGIC, self.labels)
                with self.assertRaisesRegex(errors.DataFileError,
                                            re.escape(images_path) +
                                            ".*wrong magic"):
                    datasets.read_idx_images(images_path)
                with self.assertRaisesRegex(errors.DataFileError,
                                            re.escape(labels_path) +
                                            ".*wrong magic"):
                    datasets.read_idx_labels(labels_path)

    def test_truncated_data(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                write_idx(images_path, datasets.IDX_IMAGES_MAGIC, self.images,
                          count=8)
                write_idx(labels_path, datasets.IDX_LABELS_MAGIC, self.labels,
                          count=8)
                with self.assertRaisesRegex(errors.DataFileError, "truncated"):
                    datasets.read_idx_images(images_path)
                with self.assertRaisesRegex(errors.DataFileError, "truncated"):
                    datasets.read_idx_labels(labels_path)

    def test_trailing_bytes(self):
        path = self.path("labels")
        write_idx(path, datasets.IDX_LABELS_MAGIC, self.labels, count=6)
        with self.assertRaisesRegex(errors.DataFileError, "trailing bytes"):
            datasets.read_idx_labels(path)

    def test_truncated_header(self):
        path = self.path("images")
        with open(path, "wb") as f:
            f.write(struct.pack(">II", datasets.IDX_IMAGES_MAGIC, 7))
        with self.assertRaisesRegex(errors.DataFileError, "too short"):
            datasets.read_idx_images(path)

    def test_corrupt_gzip(self):
        path = self.path("images.gz")
        with open(path, "wb") as f:
            f.write(b"not gzip at all")
        with self.assertRaisesRegex(errors.DataFileError,
                                    re.escape(path) + ".*cannot read"):
            datasets.read_idx_images(path)
        # A gzip stream cut short.
        write_idx(path, datasets.IDX_IMAGES_MAGIC, self.images)
        with open(path, "rb") as f:
            content = f.read()
        with open(path, "wb") as f:
            f.write(content[:len(content) // 2])
        with self.assertRaisesRegex(errors.DataFileError, "cannot read"):
            datasets.read_idx_images(path)

    def test_mismatched_counts(self):
        write_idx(self.path(datasets.TEST_IMAGES + ".gz"), datasets.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  self.labels[:6])
        with self.assertRaisesRegex(errors.DataFileError, "7 images .* 6 labels"):
            datasets.load_test_set(self.dir)

    def test_gzip_preferred_plain_fallback(self):
        write_idx(self.path(datasets.TEST_IMAGES), datasets.IDX_IMAGES_MAGIC,
                  self.images[:2])
        write_idx(self.path(datasets.TEST_LABELS), datasets.IDX_LABELS_MAGIC,
                  self.labels[:2])
        images, labels = datasets.load_test_set(self.dir)
        self.assertEqual(len(images), 2)
        write_idx(self.path(datasets.TEST_IMAGES + ".gz"), datasets.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  self.labels)
        images, labels = datasets.load_test_set(self.dir)
        np.testing.assert_array_equal(images, self.images)
        np.testing.assert_array_equal(labels, self.labels)

    def test_missing_files(self):
        with self.assertRaisesRegex(errors.DataFileError, "not found"):
            datasets.load_test_set(self.dir)

    def test_load_images_adds_channel_axis(self):
        write_idx(self.path(datasets.TEST_IMAGES + ".gz"), datasets.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  self.labels)
        images, labels = datasets.load_images(self.dir)
        np.testing.assert_array_equal(images, self.images[:, None])
        np.testing.assert_array_equal(labels, self.labels)


class Cifar10Test(TempDirTestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(15)
        self.images = rng.integers(0, 256, (5, 3, 32, 32), dtype=np.uint8)
        self.labels = np.array([3, 0, 9, 1, 3], np.uint8)
        self.batch = self.path(datasets.CIFAR10_TEST_BATCH)

    def test_round_trip(self):
        write_cifar10(self.batch, self.images, self.labels)
        images, labels = datasets.read_cifar10_batch(self.batch)
        np.testing.assert_array_equal(images, self.images)
        np.testing.assert_array_equal(labels, self.labels)

    def test_record_layout(self):
        # Label byte, then the red, green and blue planes, each row by row.
        record = bytes([7]) + bytes(range(256)) * 12
        with open(self.batch, "wb") as f:
            f.write(record)
        images, labels = datasets.read_cifar10_batch(self.batch)
        self.assertEqual(labels.tolist(), [7])
        self.assertEqual(images.shape, (1, 3, 32, 32))
        self.assertEqual(images[0, 0, 0, 5], 5)
        self.assertEqual(images[0, 0, 1, 0], 32)
        self.assertEqual(images[0, 1, 0, 0], (32 * 32) % 256)

    def test_partial_record(self):
        write_cifar10(self.batch, self.images, self.labels)
        with open(self.batch, "ab") as f:
            f.write(b"\0" * 100)
        with self.assertRaisesRegex(errors.DataFileError,
                                    re.escape(self.batch) +
                                    ".*not a whole number of 3073-byte"):
            datasets.read_cifar10_batch(self.batch)

    def test_bad_label(self):
        self.labels[2] = 10
        write_cifar10(self.batch, self.images, self.labels)
        with self.assertRaisesRegex(errors.DataFileError,
                                    "record 2 has label 10, expected 0 to 9"):
            datasets.read_cifar10_batch(self.batch)

    def test_preferred_over_idx(self):
        write_idx(self.path(datasets.TEST_IMAGES), datasets.IDX_IMAGES_MAGIC,
                  np.zeros((2, 28, 28)))
        write_idx(self.path(datasets.TEST_LABELS), datasets.IDX_LABELS_MAGIC,
                  np.zeros(2))
        write_cifar10(self.batch, self.images, self.labels)
        images, labels = datasets.load_images(self.dir)
        self.assertEqual(images.shape, (5, 3, 32, 32))
        np.testing.assert_array_equal(labels, self.labels)


if __name__ == "__main__":
    unittest.main()
