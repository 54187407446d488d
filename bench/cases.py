"""The benchmark cases: DESIGN.md's shapes x layouts x dtypes x modes."""

import dataclasses
import itertools

import torch


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    n: int
    c: int
    h: int
    w: int
    kernel: int
    stride: int
    padding: int = 0

    @property
    def pool_args(self):
        return dict(kernel_size=self.kernel, stride=self.stride, padding=self.padding)

    @property
    def out_hw(self):
        def size(x):
            return (x + 2 * self.padding - self.kernel) // self.stride + 1

        return size(self.h), size(self.w)


# Names exactly as in DESIGN.md ("Benchmark").
SHAPES = {
    s.name: s
    for s in [
        Shape("seed", 16384, 2, 32, 32, 2, 2),
        Shape("mnist", 8, 10, 28, 28, 2, 2),
        Shape("vgg-64@224", 32, 64, 224, 224, 2, 2),
        Shape("vgg-128@112", 32, 128, 112, 112, 2, 2),
        Shape("vgg-256@56", 32, 256, 56, 56, 2, 2),
        Shape("vgg-512@28", 32, 512, 28, 28, 2, 2),
        Shape("resnet-stem", 32, 64, 112, 112, 3, 2, 1),
        Shape("unet", 1, 64, 640, 959, 2, 2),
        Shape("segnet", 4, 64, 256, 256, 2, 2),
    ]
}
# `vgg` on the command line selects every VGG block.
SHAPE_GROUPS = {"vgg": [n for n in SHAPES if n.startswith("vgg-")]}

LAYOUTS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODES = ["inference", "forward", "backward", "forward+backward", "return_indices", "unpool",
         "unpool_argmax", "pool+unpool", "argmax_to_mask"]

# --quick: small cases, every layout and mode, float32 and bfloat16.
QUICK = dict(shapes=["mnist", "resnet-stem"], dtypes=["float32", "bfloat16"])
QUICK_BATCH = {"seed": 64, "vgg-64@224": 1, "vgg-128@112": 1, "vgg-256@56": 1, "vgg-512@28": 2,
               "resnet-stem": 2, "segnet": 1}


@dataclasses.dataclass(frozen=True)
class Case:
    shape: Shape
    layout: str
    dtype: str
    mode: str

    @property
    def key(self):
        return f"{self.shape.name}/{self.layout}/{self.dtype}/{self.mode}"


def expand_shapes(names):
    out = []
    for name in names:
        for n in SHAPE_GROUPS.get(name, [name]):
            if n not in SHAPES:
                known = ", ".join([*SHAPES, *SHAPE_GROUPS])
                raise SystemExit(f"unknown shape {name!r}; known: {known}")
            if n not in out:
                out.append(n)
    return out


def default_dtypes(device):
    return ["float32", "bfloat16", "float16"] if device == "cuda" else ["float32", "bfloat16"]


def select_cases(shapes, layouts, dtypes, modes, quick=False):
    """Cases grouped so that one (shape, layout, dtype) shares its tensors."""
    chosen = [SHAPES[n] for n in expand_shapes(shapes)]
    if quick:
        chosen = [dataclasses.replace(s, n=QUICK_BATCH.get(s.name, s.n)) for s in chosen]
    return [Case(*c) for c in itertools.product(chosen, layouts, dtypes, modes)]
