"""python -m bench --models: one training step (forward, loss, backward,
optimizer step) of whole networks, stock against poolx.convert, in both
layouts, under the run's one allocator. The two copies start from the same
weights and see the same batch, so their losses must be equal."""

import copy
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

import poolx


def conv_bn_relu(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True)]


def vgg11(classes=10):
    layers, cin = [], 3
    for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        layers += [nn.MaxPool2d(2, 2)] if v == "M" else conv_bn_relu(cin, v)
        cin = v if v != "M" else cin
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout))
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


def resnet18(classes=10):
    blocks, cin = [], 64
    for cout, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                         (512, 1)]:
        blocks.append(BasicBlock(cin, cout, stride))
        cin = cout
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                         nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1), *blocks,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


class SegNet(nn.Module):
    """Encoder-decoder whose decoder unpools by the encoder's indices."""

    def __init__(self, classes=8, widths=(32, 64, 128)):
        super().__init__()
        cins = (3, *widths[:-1])
        self.enc = nn.ModuleList(nn.Sequential(*conv_bn_relu(i, o)) for i, o in zip(cins, widths))
        self.dec = nn.ModuleList(nn.Sequential(*conv_bn_relu(o, i if i != 3 else widths[0]))
                                 for i, o in zip(cins, widths))
        self.pool = nn.MaxPool2d(2, 2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        saved = []
        for enc in self.enc:
            x = enc(x)
            saved.append(x.shape)
            x, idx = self.pool(x)
            saved[-1] = (saved[-1], idx)
        for dec, (shape, idx) in zip(reversed(self.dec), reversed(saved)):
            x = dec(self.unpool(x, idx, output_size=shape))
        return self.head(x)


class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(320, 10)

    def forward(self, x):
        x = F.relu(self.pool(self.conv1(x)))
        x = F.relu(self.pool(self.conv2(x)))
        return self.fc(x.flatten(1))


# name: (model, input batch shape, per-pixel labels?)
MODELS = {
    "vgg11": (vgg11, (8, 3, 128, 128), False),
    "resnet18": (resnet18, (8, 3, 128, 128), False),
    "segnet": (SegNet, (4, 3, 128, 128), True),
    "mnist": (MnistNet, (64, 1, 28, 28), False),
}


def step_fn(model, x, target):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def time_step(step):
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def measure_model(name, layout, rounds, steps, device="cpu"):
    build, shape, dense = MODELS[name]
    torch.manual_seed(0)
    stock = build().to(device=device, memory_format=layout)
    converted = poolx.convert(copy.deepcopy(stock))
    x = torch.randn(shape).to(device=device, memory_format=layout)
    classes = 8 if dense else 10
    target = torch.randint(0, classes, (shape[0], *shape[2:]) if dense else (shape[0],))
    target = target.to(device)
    steps_of = {"stock": step_fn(stock, x, target), "poolx": step_fn(converted, x, target)}
    first = {k: s() for k, s in steps_of.items()}  # also the warm-up
    times = {k: [] for k in steps_of}
    for i in range(rounds * steps):  # single steps in turns: a drift hits both alike
        order = list(steps_of) if i % 2 == 0 else list(reversed(steps_of))  # who goes first
        for k in order:
            times[k].append(time_step(steps_of[k]))
    median = {k: statistics.median(v) for k, v in times.items()}
    return {"model": name, "device": device,
            "layout": "channels_last" if layout == torch.channels_last else "nchw",
            "input": list(shape), "median_s": median, "speedup": median["stock"] / median["poolx"],
            "first_loss": first, "losses_equal": first["stock"] == first["poolx"]}


def main(args, allocator_name):
    import json
    import os

    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = max(3, args.rounds)
    steps = 1 if args.quick else 5  # steps per round, each timed alone
    records = []
    for name in args.models or MODELS:
        for layout in (torch.contiguous_format, torch.channels_last):
            rec = measure_model(name, layout, rounds, steps, args.device)
            records.append(rec)
            print(f"{rec['model']:<9} {rec['layout']:<13} stock {rec['median_s']['stock'] * 1e3:8.1f} ms"
                  f"  poolx {rec['median_s']['poolx'] * 1e3:8.1f} ms  x{rec['speedup']:.3f}"
                  f"  losses equal: {rec['losses_equal']}", flush=True)
    geo = statistics.geometric_mean(r["speedup"] for r in records)
    print(f"geometric mean of the speedups: {geo:.3f} (allocator: {allocator_name}, "
          f"{torch.get_num_threads()} threads)")
    results = {"device": args.device, "allocator": allocator_name, "threads": torch.get_num_threads(),
               "rounds": rounds, "steps_per_round": steps, "models": records,
               "geometric_mean_speedup": geo}
    path = args.json.format(device="models") if args.json else None
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {path}")
    if not all(r["losses_equal"] for r in records):
        raise SystemExit("a converted model's loss differs from the stock model's")
    return results
