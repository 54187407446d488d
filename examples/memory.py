"""Bytes saved for backward by a VGG-16 (or a 3-D U-Net) training step with
torch's max pooling, poolx save="argmax" and poolx save="recompute".

    python examples/memory.py                      # VGG-16, batch 2, 224x224
    python examples/memory.py --small              # narrow and small, quick
    python examples/memory.py --unet3d             # 3-D U-Net, 1x1x64^3, 32 channels first

The bytes are measured, not computed: torch.autograd.graph.saved_tensors_hooks
sees every tensor autograd saves; distinct storages are counted once, and the
model's parameters (which exist anyway) are left out. The pooling layers'
share is what only they keep alive.
"""

import argparse
import collections

import torch
import torch.nn.functional as F
from torch import nn

import poolx

# VGG-16 (configuration D): channels of each 3x3 conv, "M" for a 2x2 max pool.
VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16(pool, width_divisor=1, size=224, classes=1000):
    layers, channels = [], 3
    for item in VGG16:
        if item == "M":
            layers.append(pool())
        else:
            out = item // width_divisor
            layers += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU(inplace=True)]
            channels = out
    hidden, side = 4096 // width_divisor, size // 32
    return nn.Sequential(
        *layers,
        nn.Flatten(),
        nn.Linear(channels * side * side, hidden), nn.ReLU(inplace=True),
        nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
        nn.Linear(hidden, classes),
    )


class UNet3d(nn.Module):
    """A 3-D U-Net: levels of two 3x3x3 convs, 2x2x2 max pooling between them,
    transposed-conv upsampling and skip connections on the way back."""

    def __init__(self, pool, width=32, levels=4, classes=3):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
                                 nn.Conv3d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))

        widths = [width * 2**k for k in range(levels)]
        self.down = nn.ModuleList(block(cin, cout) for cin, cout in zip([1, *widths], widths))
        self.pools = nn.ModuleList(pool() for _ in widths[1:])
        self.up = nn.ModuleList(nn.ConvTranspose3d(w, w // 2, 2, stride=2)
                                for w in reversed(widths[1:]))
        self.merge = nn.ModuleList(block(w, w // 2) for w in reversed(widths[1:]))
        self.head = nn.Conv3d(width, classes, 1)

    def forward(self, x):
        skips = []
        for k, block in enumerate(self.down):
            x = block(x if k == 0 else self.pools[k - 1](x))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1])):
            x = merge(torch.cat([up(x), skip], 1))
        return self.head(x)


POOLS = {
    "torch nn.MaxPool2d": lambda: nn.MaxPool2d(2),
    'poolx save="argmax"': lambda: poolx.MaxPool2d(2),
    'poolx save="recompute"': lambda: poolx.MaxPool2d(2, save="recompute"),
}
POOLS_3D = {
    "torch nn.MaxPool3d": lambda: nn.MaxPool3d(2),
    'poolx save="argmax"': lambda: poolx.MaxPool3d(2),
    'poolx save="recompute"': lambda: poolx.MaxPool3d(2, save="recompute"),
}


def saved_for_backward(model, x, target):
    """One SGD step; returns (all activation bytes saved, bytes only pooling saved)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    sizes, owners, in_pool = {}, collections.defaultdict(set), [False]

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params:
            sizes[key] = t.untyped_storage().nbytes()
            owners[key].add(in_pool[0])
        return t

    for m in model.modules():
        if isinstance(m, (nn.MaxPool2d, nn.MaxPool3d)):
            m.register_forward_pre_hook(lambda *_: in_pool.__setitem__(0, True))
            m.register_forward_hook(lambda *_: in_pool.__setitem__(0, False))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    pool_only = sum(sizes[k] for k, who in owners.items() if who == {True})
    return sum(sizes.values()), pool_only, loss.item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--width-divisor", type=int, default=1, help="divide every channel count")
    parser.add_argument("--small", action="store_true", help="batch 2, 64x64, channels / 16")
    parser.add_argument("--unet3d", action="store_true",
                        help="a 3-D U-Net on a volume of --size (default 64) cubed, batch 1")
    args = parser.parse_args(argv)
    if args.small:
        args.size, args.width_divisor = 64, 16
    if args.unet3d:
        return unet3d_main(args.size if args.size != 224 else 64, args.width_divisor)

    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    target = torch.randint(0, 1000, (args.batch,))
    results = {}
    for name, pool in POOLS.items():
        torch.manual_seed(0)
        model = vgg16(pool, args.width_divisor, args.size)
        results[name] = saved_for_backward(model, x, target)

    report(results, f"VGG-16 (channels / {args.width_divisor}), batch {args.batch}, "
                    f"{args.size}x{args.size}", 5)
    return results


def report(results, model, pools):
    """The table of bytes saved, torch's row first; the losses must agree."""
    mib = 2.0**20
    base_total = next(iter(results.values()))[0]
    print(f"{model}, float32, one SGD step; bytes saved for backward (parameters excluded):\n")
    print(f"| pooling | saved for backward | kept only by the {pools} pooling layers "
          "| total vs torch |")
    print("|---|---|---|---|")
    for name, (total, pool_only, _) in results.items():
        print(f"| {name} | {total / mib:.2f} MiB | {pool_only / mib:.2f} MiB | "
              f"{total / base_total:.3f}x |")
    losses = {loss for _, _, loss in results.values()}
    assert len(losses) == 1, f"the losses differ: {losses}"


def unet3d_main(size, width_divisor):
    torch.manual_seed(0)
    x = torch.randn(1, 1, size, size, size)
    target = torch.randint(0, 3, (1, size, size, size))
    results = {}
    for name, pool in POOLS_3D.items():
        torch.manual_seed(0)
        results[name] = saved_for_backward(UNet3d(pool, 32 // width_divisor), x, target)
    report(results, f"3-D U-Net (4 levels, {32 // width_divisor} channels first), batch 1, "
                    f"{size}^3", 3)
    return results


if __name__ == "__main__":
    main()
