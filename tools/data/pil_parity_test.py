#!/usr/bin/python3
"""Cohort's decoder and transforms against PIL's and torchvision's, on a photo-like JPEG of
ImageNet's size (500x375, quality 90): decoded pixels equal PIL's (both are libjpeg-turbo's
accurate IDCT with fancy upsampling); torchvision's Resize(256) + CenterCrop(224) and PIL's
bilinear resize of each training crop agree within one grey level (PIL rounds to 8 bits after
each pass, Cohort keeps floats).

Usage: pil_parity_test.py TRANSFORM_IMAGE
"""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

TRANSFORM = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None

try:
    from PIL import Image, ImageDraw
    import torchvision.transforms as T
    MISSING = None
except ImportError as e:  # tools/install_deps.sh installs python3-pil and python3-torchvision
    MISSING = str(e)


def photo(path, width=500, height=375):
    """Smooth gradients, shapes and a little noise: what JPEG is made for."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([80 + 100 * x / width + 20 * np.sin(y / 17.0),
                       60 + 120 * y / height,
                       140 + 60 * np.cos((x + y) / 41.0)], axis=-1)
    pixels += rng.normal(0, 4, pixels.shape)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    draw.ellipse((120, 80, 300, 260), fill=(220, 40, 60))
    draw.rectangle((330, 200, 470, 340), fill=(20, 160, 90))
    image.save(path, quality=90)


@unittest.skipIf(MISSING, f"needs PIL and torchvision: {MISSING}")
class PilParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.jpeg = os.path.join(cls.dir, "photo.jpg")
        photo(cls.jpeg)
        cls.pil = Image.open(cls.jpeg).convert("RGB")

    def cohort(self, mode, *flags):
        out = os.path.join(self.dir, f"{mode}.out")
        r = subprocess.run([TRANSFORM, f"--image={self.jpeg}", f"--mode={mode}", f"--out={out}",
                            *flags], capture_output=True, text=True, timeout=60, check=True)
        return r.stdout, np.fromfile(out, dtype=np.uint8 if mode == "decode" else np.float32)

    def test_decoded_pixels_are_pils(self):
        _, pixels = self.cohort("decode")
        np.testing.assert_array_equal(pixels.reshape(375, 500, 3), np.asarray(self.pil))

    def test_evaluation_crop_is_torchvisions_within_a_grey_level(self):
        _, sample = self.cohort("eval", "--size=224", "--resize=256")
        want = np.asarray(T.CenterCrop(224)(T.Resize(256)(self.pil)), dtype=np.float64)
        got = sample.reshape(3, 224, 224).transpose(1, 2, 0)
        self.assertLessEqual(np.abs(got - want).max(), 1.0)

    def test_training_crops_are_pils_resize_of_their_box_within_a_grey_level(self):
        for index in range(8):
            with self.subTest(index=index):
                printed, sample = self.cohort("train", "--size=224", "--seed=5",
                                              f"--index={index}")
                words = printed.split()
                box = tuple(float(v) for v in words[1:5])
                want = self.pil.resize((224, 224), Image.BILINEAR, box=box)
                if words[6] == "1":
                    want = want.transpose(Image.FLIP_LEFT_RIGHT)
                got = sample.reshape(3, 224, 224).transpose(1, 2, 0)
                self.assertLessEqual(np.abs(got - np.asarray(want, dtype=np.float64)).max(), 1.0)

    def test_grey_is_pils_luma_within_a_grey_level(self):
        _, sample = self.cohort("eval", "--size=224", "--resize=256", "--channels=1")
        want = np.asarray(T.CenterCrop(224)(T.Resize(256)(self.pil.convert("L"))),
                          dtype=np.float64)
        self.assertLessEqual(np.abs(sample.reshape(224, 224) - want).max(), 1.5)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
