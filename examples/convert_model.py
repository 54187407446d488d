"""Convert a model to poolx and train it: the losses are those of the original.

    python examples/convert_model.py           # a few SGD steps per model
    python examples/convert_model.py --small   # a quick run

Three models: a VGG-style classifier (nn.MaxPool2d), a UNet-style segmenter
that pools with indices and unpools with nn.MaxUnpool2d (SegNet decoder plus
UNet skips), both converted with poolx.convert; and a model that calls
F.max_pool2d in forward, run under poolx.patch().
"""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

import poolx


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class VGGStyle(nn.Module):
    def __init__(self, width, classes=10):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            conv_block(3, w), nn.MaxPool2d(2),
            conv_block(w, 2 * w), conv_block(2 * w, 2 * w), nn.MaxPool2d(2),
            conv_block(2 * w, 4 * w), nn.MaxPool2d(3, 2, 1, ceil_mode=True),
        )
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class UNetStyle(nn.Module):
    def __init__(self, width, classes=3):
        super().__init__()
        w = width
        self.enc1, self.enc2 = conv_block(3, w), conv_block(w, 2 * w)
        self.mid = conv_block(2 * w, 2 * w)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.dec2, self.dec1 = conv_block(4 * w, w), conv_block(2 * w, w)
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        p1, i1 = self.pool(e1)
        e2 = self.enc2(p1)
        p2, i2 = self.pool(e2)
        m = self.mid(p2)
        d2 = self.dec2(torch.cat([self.unpool(m, i2, output_size=e2.shape), e2], 1))
        d1 = self.dec1(torch.cat([self.unpool(d2, i1, output_size=e1.shape), e1], 1))
        return self.head(d1)


class FunctionalPooling(nn.Module):
    """Calls torch.nn.functional in forward: poolx.convert cannot see it."""

    def __init__(self, width, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, stride=2, padding=1)
        return self.fc(x.mean((2, 3)))


def train(model, batches, loss_fn, steps):
    torch.manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(steps):
        x, target = batches[step % len(batches)]
        loss = loss_fn(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def compare(name, make_model, batches, loss_fn, steps):
    torch.manual_seed(0)
    model = make_model()
    converted = poolx.convert(copy.deepcopy(model))
    poolx_types = (poolx.MaxPool2d, poolx.MaxUnpool2d)
    poolx_layers = sum(isinstance(m, poolx_types) for m in converted.modules())
    theirs = train(model, batches, loss_fn, steps)
    ours = train(converted, batches, loss_fn, steps)
    print(f"{name}: {poolx_layers} pooling layers converted; "
          f"losses torch {fmt(theirs)}, poolx {fmt(ours)}")
    return theirs, ours


def fmt(losses):
    return "[" + ", ".join(f"{v:.6f}" for v in losses) + "]"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="batch 4, 20x20, width 4, 3 steps")
    args = parser.parse_args(argv)
    if args.small:
        args.batch, args.size, args.width, args.steps = 4, 20, 4, 3

    torch.manual_seed(1)
    shape = (args.batch, 3, args.size, args.size + 3)  # odd width: pooling drops a column
    images = [torch.randn(shape) for _ in range(2)]
    labels = [torch.randint(0, 10, (args.batch,)) for _ in images]
    masks = [torch.randint(0, 3, (args.batch, *shape[2:])) for _ in images]
    results = {
        "vgg": compare("VGG-style", lambda: VGGStyle(args.width), list(zip(images, labels)),
                       F.cross_entropy, args.steps),
        "unet": compare("UNet-style", lambda: UNetStyle(args.width), list(zip(images, masks)),
                        F.cross_entropy, args.steps),
    }

    torch.manual_seed(0)
    model = FunctionalPooling(args.width)
    patched = copy.deepcopy(model)
    theirs = train(model, list(zip(images, labels)), F.cross_entropy, args.steps)
    with poolx.patch():
        ours = train(patched, list(zip(images, labels)), F.cross_entropy, args.steps)
    print(f"F.max_pool2d under poolx.patch(): losses torch {fmt(theirs)}, poolx {fmt(ours)}")
    results["patch"] = (theirs, ours)

    for name, (theirs, ours) in results.items():
        assert theirs == ours, f"{name}: losses differ"
    print("identical losses for every model")
    return results


if __name__ == "__main__":
    main()
