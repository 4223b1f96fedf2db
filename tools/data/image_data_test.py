#!/usr/bin/python3
"""Training from the data users have, end to end: Fashion-MNIST written out as a JPEG class
folder (write_images), packed to RecordIO and to TFRecord (pack_records), and LeNet trained from
each reaches the IDX path's accuracy within 0.5 points; damaged inputs give one clear error
naming the file and the offset, or are skipped and counted when asked.

Usage: image_data_test.py WRITE_IMAGES PACK_RECORDS TRAIN
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

WRITE, PACK, TRAIN = (os.path.abspath(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (
    None, None, None)
FASHION = "/usr/share/datasets/fashion-mnist"
TRAIN_SAMPLES = 20000

# The same model, data order and schedule in every run; the IDX path's normalisation of these
# 20000 images, given to the image path as its per-channel statistics.
COMMON = ["--model=lenet", "--epochs=2", f"--train_samples={TRAIN_SAMPLES}", "--seed=3",
          "--log_interval=1000", "--output="]
GREY_28 = ["--image_channels=1", "--image_size=28", "--eval_resize=28",
           "--image_mean=0.285770416", "--image_std=0.353212327"]


def run(binary, *args, timeout=600):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    return r


def must(binary, *args):
    r = run(binary, *args)
    if r.returncode != 0:
        raise AssertionError(f"{os.path.basename(binary)} {' '.join(args)} exited "
                             f"{r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def top1(output):
    m = re.search(r"^Test top-1 ([\d.]+)%", output, re.M)
    if not m:
        raise AssertionError(f"no test accuracy in:\n{output[-2000:]}")
    return float(m.group(1))


@unittest.skipUnless(os.path.isdir(FASHION), f"needs Fashion-MNIST in {FASHION}")
class ImageData(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        cls.dir = cls.tmp.name
        cls.images = os.path.join(cls.dir, "fm")
        must(WRITE, "--dataset=fashion-mnist", f"--out={cls.images}", "--quality=100",
             f"--train_samples={TRAIN_SAMPLES}")
        for split in ("train", "val"):
            # In the list's order, so every path trains on the same sequence of samples.
            must(PACK, f"--images={cls.images}", f"--list={cls.images}/{split}.lst",
                 f"--prefix={cls.dir}/rec/{split}", "--noshuffle", "--shard_mb=2")
            must(PACK, f"--images={cls.images}", f"--list={cls.images}/{split}.lst",
                 f"--prefix={cls.dir}/tf/{split}", "--noshuffle", "--shard_mb=2",
                 "--format=tfrecord")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_lenet_from_each_format_reaches_the_idx_accuracy(self):
        self.assertGreater(len(glob.glob(f"{self.dir}/rec/train-*.rec")), 1)
        self.assertGreater(len(glob.glob(f"{self.dir}/tf/train-*.tfrecord")), 1)
        idx = top1(must(TRAIN, *COMMON, "--dataset=fashion-mnist").stdout)
        self.assertGreater(idx, 80)
        for spec in (f"imagefolder:{self.images}/train.lst",
                     f"recordio:{self.dir}/rec/train",
                     f"tfrecord:{self.dir}/tf/train-*.tfrecord"):
            with self.subTest(spec=spec):
                r = must(TRAIN, *COMMON, *GREY_28, f"--dataset={spec}")
                self.assertIn(f"{TRAIN_SAMPLES} train / 10000 test images", r.stdout)
                got = top1(r.stdout)
                print(f"{spec}: top-1 {got:.2f}% (IDX {idx:.2f}%)", file=sys.stderr)
                self.assertLessEqual(abs(got - idx), 0.5, f"{spec}: {got} vs IDX {idx}")

    def test_the_class_folders_train_with_the_standard_recipe(self):
        # The folders themselves (classes by name), random resized crops and flips: it learns.
        r = must(TRAIN, "--model=lenet", "--epochs=1", "--train_samples=20000", "--output=",
                 f"--dataset=imagefolder:{self.images}", "--augment=crop_flip",
                 "--min_crop_scale=0.6", *GREY_28, "--data_threads=2")
        self.assertGreater(top1(r.stdout), 70)

    def damaged_recordio(self, name, damage):
        """A copy of the validation records with the first record's bytes damaged."""
        src = sorted(glob.glob(f"{self.dir}/rec/val-*.rec"))[0]
        dst = os.path.join(self.dir, name)
        os.makedirs(dst, exist_ok=True)
        with open(src, "rb") as f:
            data = bytearray(f.read())
        damage(data)
        with open(f"{dst}/train-00000.rec", "wb") as f:
            f.write(data)
        with open(src[:-4] + ".idx") as f:
            index = f.read()
        with open(f"{dst}/train-00000.idx", "w") as f:
            f.write(index)
        return f"{dst}/train-00000.rec"

    def train_from(self, rec, *more):
        return run(TRAIN, *COMMON, *GREY_28, f"--dataset=recordio:{os.path.dirname(rec)}/train",
                   f"--eval_dataset=recordio:{self.dir}/rec/val", "--train_samples=0",
                   "--epochs=1", "--batch_size=100", *more, timeout=120)

    def test_damaged_records_are_named_with_file_and_offset_or_skipped(self):
        def not_a_jpeg(data):
            data[8 + 24:8 + 24 + 2] = b"\x89P"  # the first image's first bytes
        rec = self.damaged_recordio("notjpeg", not_a_jpeg)
        r = self.train_from(rec)
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:])
        self.assertIn(f"{rec} at byte offset 0", r.stderr)
        self.assertIn("not a JPEG", r.stderr)
        r = self.train_from(rec, "--skip_corrupt")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("skipped a damaged sample (1 so far, --skip_corrupt)", r.stdout)
        self.assertIn(f"{rec} at byte offset 0", r.stdout)

        def bad_magic(data):
            data[0] ^= 0xff
        rec = self.damaged_recordio("magic", bad_magic)
        r = self.train_from(rec)
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:])
        self.assertIn(f"{rec}: ", r.stderr)
        self.assertIn("magic", r.stderr)

    def test_a_png_in_the_folder_is_refused_by_name(self):
        for split in ("train", "val"):
            png = os.path.join(self.dir, "png", split, "0", "x.png")
            os.makedirs(os.path.dirname(png))
            with open(png, "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
        r = run(TRAIN, "--model=lenet", "--epochs=1", "--batch_size=1", "--output=",
                f"--dataset=imagefolder:{self.dir}/png", *GREY_28, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:])
        self.assertIn(f"{self.dir}/png/train/0/x.png: a PNG", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
