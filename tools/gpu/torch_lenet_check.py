"""Loads a LeNet that Cohort exported (.safetensors) into a PyTorch LeNet with load_state_dict and
scores it on the IDX test set, next to tools/check_model.py's own numpy forward pass.

  python3 tools/gpu/torch_lenet_check.py MODEL.safetensors --data_dir DIR

Prints `torch top1=... check_model top1=... n=...` and exits 1 when the two differ by more than
0.1 points (an image or two in 10,000 may flip on rounding), 2 on a file or data error.
"""

import argparse
import os
import sys

import numpy as np

# check_model.py and numpy_model/ sit in tools/ of a checkout and beside this script in a GPU
# bundle.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, "..")]
import check_model  # noqa: E402  (the exported file's layout and the test set's preprocessing)
from numpy_model import models  # noqa: E402  (LeNet's paddings)


def lenet(in_channels, classes, flat):
    """Cohort's LeNet: two 5x5 convolutions (the first padded by 2), max pooling, three layers."""
    import torch
    import torch.nn.functional as F

    class LeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(in_channels, 6, 5,
                                         padding=models.LENET_CONV1_PADDING)
            self.conv2 = torch.nn.Conv2d(6, 16, 5, padding=models.LENET_CONV2_PADDING)
            self.fc1 = torch.nn.Linear(flat, 120)
            self.fc2 = torch.nn.Linear(120, 84)
            self.fc3 = torch.nn.Linear(84, classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    return LeNet()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--data_dir", required=True)
    args = parser.parse_args(argv)
    import torch  # after argparse: --help works where PyTorch is not installed
    from safetensors.torch import load_file
    try:
        _, metadata = check_model.read_safetensors(args.model)
        model_name, input_shape, mean, std = check_model.parse_metadata(metadata)
        ours_top1, _, n = check_model.evaluate(args.model, args.data_dir)
        images, labels = check_model.load_images(args.data_dir)
    except check_model.CheckError as e:
        print(f"torch_lenet_check: {e}", file=sys.stderr)
        return 2
    if model_name != "lenet":
        print(f"torch_lenet_check: {args.model} holds {model_name}, not lenet", file=sys.stderr)
        return 2
    state = {k: v.float() for k, v in load_file(args.model).items()}
    net = lenet(input_shape[0], state["fc3.weight"].shape[0], state["fc1.weight"].shape[1])
    net.load_state_dict(state, strict=True)
    net.eval()
    images = check_model.pad_images(images, input_shape)
    x = torch.from_numpy(check_model.normalize(images, mean, std).astype(np.float32))
    with torch.no_grad():
        predicted = net(x.reshape((len(x),) + tuple(input_shape))).argmax(1).numpy()
    torch_top1 = 100.0 * float((predicted == labels.astype(np.int64)).mean())
    print(f"torch top1={torch_top1:.2f} check_model top1={ours_top1:.2f} n={n}")
    return 0 if abs(torch_top1 - ours_top1) <= 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
