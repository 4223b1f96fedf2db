#!/usr/bin/python3
"""Cohort's exports are torchvision's models: a short CPU run of GoogLeNet and of ResNet-50 on a
small JPEG folder, each export loaded with load_state_dict(strict=True) into
torchvision.models.googlenet(aux_logits=False, transform_input=False, init_weights=False) or
torchvision.models.resnet50, and torchvision's evaluation logits held to Cohort's own
(model_logits) on the same images. GoogLeNet's training loss falls over the run.

The images are 64x64 and the run uses --image_size=64: the trainer zero-pads an in-memory
dataset (synthetic:3x64x64:K) up to the models' 224, and then evaluates its whole test split at
224 in batches of 1000, more memory than a test machine has.

Usage: torchvision_check_test.py TRAIN_BINARY MODEL_LOGITS_BINARY
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torchvision
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_model.safetensors_file import read_safetensors  # noqa: E402  (tools/numpy_model)

TRAIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
MODEL_LOGITS = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None

# Four classes told apart by colour, so a few steps learn them.
COLOURS = ((220, 40, 40), (40, 200, 40), (40, 40, 220), (200, 200, 40))
SIDE = 64


def write_image_folder(root, seed=0):
    """root/train and root/val, torchvision's ImageFolder layout: 16 and 4 JPEGs per class."""
    rng = np.random.default_rng(seed)
    for split, per_class in (("train", 16), ("val", 4)):
        for k, colour in enumerate(COLOURS):
            folder = os.path.join(root, split, f"class{k}")
            os.makedirs(folder)
            for i in range(per_class):
                pixels = np.array(colour) + rng.normal(0, 40, (SIDE, SIDE, 3))
                Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(
                    os.path.join(folder, f"{i}.jpg"), quality=90)


def torchvision_model(name, classes):
    if name == "googlenet":
        return torchvision.models.googlenet(aux_logits=False, transform_input=False,
                                            init_weights=False, num_classes=classes)
    return torchvision.models.resnet50(num_classes=classes)


class TorchvisionCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="torchvision_check.")
        cls.data = os.path.join(cls.dir, "data")
        write_image_folder(cls.data)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def train(self, model):
        """Two epochs of four steps; returns (the export's path, the training losses by step)."""
        output = os.path.join(self.dir, f"{model}.safetensors")
        r = subprocess.run(
            [TRAIN, f"--model={model}", f"--dataset=imagefolder:{self.data}",
             f"--image_size={SIDE}", f"--eval_resize={SIDE}", "--epochs=2", "--batch_size=16",
             "--lr=0.02", "--seed=3", "--log_interval=1", f"--output={output}"],
            capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # "    Step  Epoch  Speed(img/s)      Loss ...": one row a step.
        losses = [float(m.group(1)) for m in
                  re.finditer(r"^\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s", r.stdout, re.M)]
        self.assertEqual(len(losses), 8, r.stdout)
        return output, losses

    def check_torchvision_agrees(self, model, path):
        tensors, metadata = read_safetensors(path)
        self.assertEqual(metadata["model"], model)
        self.assertEqual(metadata["input_shape"], f"[3,{SIDE},{SIDE}]")
        net = torchvision_model(model, classes=len(COLOURS))
        # Every tensor of torchvision's state_dict, in its order, but the batch norms' step
        # counters, which PyTorch fills in (0) when loading a state dict that has none.
        expected = [k for k in net.state_dict() if not k.endswith(".num_batches_tracked")]
        self.assertEqual(list(tensors), expected)
        state = {name: torch.from_numpy(values) for name, values in tensors.items()}
        result = net.load_state_dict(state, strict=True)
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        counters = [v for k, v in net.state_dict().items() if k.endswith(".num_batches_tracked")]
        self.assertTrue(counters and all(int(c) == 0 for c in counters))

        images = np.random.default_rng(7).uniform(-2, 2, (4, 3, SIDE, SIDE)).astype(np.float32)
        images_path = os.path.join(self.dir, f"{model}_images.f32")
        logits_path = os.path.join(self.dir, f"{model}_logits.f32")
        images.tofile(images_path)
        r = subprocess.run([MODEL_LOGITS, f"--model_file={path}", f"--images={images_path}",
                            f"--logits={logits_path}"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        ours = np.fromfile(logits_path, dtype="<f4").reshape(4, len(COLOURS))
        net.eval()
        with torch.no_grad():
            theirs = net(torch.from_numpy(images)).numpy()
        error = np.abs(ours - theirs).max() / np.abs(theirs).max()
        print(f"{model}: torchvision's logits against Cohort's: relative error {error:.3g}")
        self.assertLess(error, 1e-4, f"cohort {ours}\ntorchvision {theirs}")

    def test_googlenet_trains_and_loads_into_torchvision(self):
        path, losses = self.train("googlenet")
        print(f"googlenet losses by step: {losses}")
        # The second epoch's steps against the first's.
        self.assertLess(np.mean(losses[4:]), 0.75 * np.mean(losses[:4]), losses)
        self.check_torchvision_agrees("googlenet", path)

    def test_resnet50_loads_into_torchvision(self):
        path, _ = self.train("resnet50")
        self.check_torchvision_agrees("resnet50", path)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
