"""Bytes saved for backward by a VGG-16 training step with torch's max pooling,
poolx save="argmax" and poolx save="recompute".

    python examples/memory.py                      # VGG-16, batch 2, 224x224
    python examples/memory.py --small              # narrow and small, quick

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


POOLS = {
    "torch nn.MaxPool2d": lambda: nn.MaxPool2d(2),
    'poolx save="argmax"': lambda: poolx.MaxPool2d(2),
    'poolx save="recompute"': lambda: poolx.MaxPool2d(2, save="recompute"),
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
        if isinstance(m, nn.MaxPool2d):
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
    args = parser.parse_args(argv)
    if args.small:
        args.size, args.width_divisor = 64, 16

    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    target = torch.randint(0, 1000, (args.batch,))
    results = {}
    for name, pool in POOLS.items():
        torch.manual_seed(0)
        model = vgg16(pool, args.width_divisor, args.size)
        results[name] = saved_for_backward(model, x, target)

    mib = 2.0**20
    base_total, base_pool, _ = results["torch nn.MaxPool2d"]
    print(f"VGG-16 (channels / {args.width_divisor}), batch {args.batch}, {args.size}x{args.size}, "
          "float32, one SGD step; bytes saved for backward (parameters excluded):\n")
    print("| pooling | saved for backward | kept only by the 5 pooling layers | total vs torch |")
    print("|---|---|---|---|")
    for name, (total, pool_only, _) in results.items():
        print(f"| {name} | {total / mib:.2f} MiB | {pool_only / mib:.2f} MiB | "
              f"{total / base_total:.3f}x |")
    losses = {loss for _, _, loss in results.values()}
    assert len(losses) == 1, f"the losses differ: {losses}"
    return results


if __name__ == "__main__":
    main()
