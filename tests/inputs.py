"""Test inputs: pooling configurations and random tensors that stress the max
rule (ties, NaN, -inf, all -inf windows) in every layout poolx must accept."""

from dataclasses import dataclass

import torch

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


@dataclass(frozen=True)
class Pool:
    """One max_pool2d configuration and the input plane (H, W) it runs on."""

    name: str
    hw: tuple
    kernel_size: object
    stride: object = None
    padding: object = 0
    dilation: object = 1
    ceil_mode: bool = False

    def kwargs(self):
        return dict(
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            ceil_mode=self.ceil_mode,
        )

    def args(self):
        """Positional arguments after the input, as poolx's tools take them."""
        return (self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)

    def __str__(self):
        return f"{self.name}{self.hw}: {self.kwargs()}"


# Every kind of configuration; no window lies wholly in the padding here
# (tests/test_degenerate.py covers those).
GRID = (
    Pool("tiled 2x2", (8, 8), 2),
    Pool("tiled 2x2, odd size drops a row and a column", (7, 9), 2),
    Pool("tiled 3x3", (9, 12), 3),
    Pool("tiled 1x1", (5, 6), 1),
    Pool("tiled 2x3", (6, 9), (2, 3)),
    Pool("tiled, ceil_mode partial windows", (7, 9), 2, ceil_mode=True),
    Pool("overlapping 3/2", (9, 9), 3, 2),
    Pool("overlapping 3/1", (6, 7), 3, 1),
    Pool("overlapping non-square", (7, 10), (3, 2), (2, 1)),
    Pool("padded (resnet stem)", (8, 7), 3, 2, 1),
    Pool("padded non-square", (6, 11), (3, 5), (1, 2), (1, 2)),
    Pool("dilated", (9, 10), 3, 1, 0, 2),
    Pool("dilated padded non-square", (8, 9), (2, 3), (2, 1), (1, 1), (2, 3)),
    Pool("ceil_mode overlapping padded", (8, 8), 3, 2, 1, ceil_mode=True),
    Pool("ceil_mode dilated", (9, 10), (3, 2), (2, 3), (1, 0), (1, 2), ceil_mode=True),
    Pool("kernel equals input", (5, 7), (5, 7)),
    Pool("stride above kernel", (10, 11), 2, 3),
    Pool("stride above kernel, ceil_mode", (10, 11), (2, 1), (3, 4), ceil_mode=True),
    Pool("1xN input", (1, 18), (1, 3), (1, 2)),
    Pool("256-tap window (largest uint8 argmax)", (18, 19), 16, 2),
    Pool("289-tap window (int32 argmax)", (20, 19), 17, 3, 1),
)

SMALL_GRID = tuple(GRID[i] for i in (0, 5, 7, 9, 12, 14, 19))


def random_values(shape, dtype, device="cpu", special=True):
    """Few distinct values (so windows hold ties); for floats, NaN alone and in
    clusters (several per window), scattered -inf, and a plane of only -inf."""
    if dtype in INT_DTYPES:
        info = torch.iinfo(dtype)
        x = torch.randint(max(info.min, -6), 7, shape, device=device).to(dtype)
        if special and x.numel() > 0:
            x.view(-1, *shape[-2:])[0] = info.min  # the lowest value ties everywhere
        return x
    x = (torch.randint(-12, 13, shape, device=device) / 4).to(dtype)
    if not special or x.numel() == 0:
        return x
    flat = x.view(-1)
    flat[torch.rand(flat.shape, device=device) < 0.03] = float("nan")
    flat[torch.rand(flat.shape, device=device) < 0.05] = float("-inf")
    planes = x.view(-1, *shape[-2:])
    planes[0] = float("-inf")
    if planes.shape[0] > 1:
        h, w = shape[-2:]
        i, j = int(torch.randint(0, h, ())), int(torch.randint(0, w, ()))
        planes[-1, i : i + 3, j : j + 3] = float("nan")
    return x


def distinct_values(shape, dtype=torch.float64, device="cpu"):
    """Values with no ties and gaps of 1, so numerical gradients are defined."""
    n = 1
    for s in shape:
        n *= s
    return torch.randperm(n, device=device).reshape(shape).to(dtype)


def upstream_grad(like):
    """A gradient for `like`, in its layout: random, with +0.0 and -0.0 planted."""
    g = torch.randn_like(like, dtype=like.dtype)
    r = torch.rand_like(g, dtype=torch.float32)
    g[r < 0.1] = 0.0
    g[r > 0.9] = -0.0
    return g


def layouts(shape, make):
    """(name, tensor) pairs: a tensor of `shape` (N, C, H, W) made by `make`,
    in each memory layout poolx must handle, plus an unbatched and an empty one."""
    n, c, h, w = shape
    cl = torch.channels_last
    yield "nchw", make(shape)
    yield "channels_last", make(shape).contiguous(memory_format=cl)
    yield "sliced view", make((n, c, 2 * h, w + 1))[:, :, ::2, 1:]
    yield "transposed view", make((n, c, w, h)).transpose(2, 3)
    yield "channels_last channel slice", make((n, 2 * c, h, w)).contiguous(memory_format=cl)[:, ::2]
    yield "expanded batch", make((1, c, h, w)).expand(n, c, h, w)
    yield "unbatched (C, H, W)", make((c, h, w))
    yield "batch 0", make((0, c, h, w))
    yield "batch 0 channels_last", make((0, c, h, w)).contiguous(memory_format=cl)
