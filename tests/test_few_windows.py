"""Backward of NCHW planes (NCDHW volumes) of few windows, which scatter by
runs of planes (csrc/cpu/isa/scatter_runs.h; float32 windows that share no
input in planes of up to 64 windows, and float64, by a table of each window's
taps) instead of the paths by rows: gradients identical to torch's on both sides of the window counts where
the route changes (64 for planes, 1024 for bfloat16 volumes, 4096 for
others), with ties, NaN and -inf, for tiled, overlapping and padded windows;
and an argmax that names no tap of its window raises there too."""

import pytest
import torch
import torch.nn.functional as F

import poolx

from inputs import FLOAT_DTYPES, random_values, upstream_grad
from reference import assert_identical, raises_bad_argmax, torch_pool_grad

# name: (spatial size, kernel_size, stride, padding): windows per plane in the name
PLANES = {
    "4 windows, 2x2 tiled": ((4, 4), 2, 2, 0),
    "16 windows, 3x3 s2": ((9, 9), 3, 2, 0),
    "20 windows, 2x2 tiled": ((8, 10), 2, 2, 0),
    "49 windows, 3x3 s2 p1": ((13, 13), 3, 2, 1),
    "64 windows, 2x2 tiled": ((16, 16), 2, 2, 0),
    "72 windows, 2x2 tiled": ((16, 18), 2, 2, 0),
    "1 window, 7x7 global": ((7, 7), 7, 7, 0),
}
VOLUMES = {
    "8 windows, 2x2x2 tiled": ((4, 4, 4), 2, 2, 0),
    "16 windows, 1x2x2": ((4, 4, 8), (1, 2, 2), (1, 2, 2), 0),
    "64 windows, 2x2x2 tiled": ((8, 8, 8), 2, 2, 0),
    "27 windows, 3x3x3 s2 p1": ((5, 6, 5), 3, 2, 1),
    "80 windows, 2x2x2 tiled": ((8, 8, 10), 2, 2, 0),
    "256 windows, 3x3x3 s2 p1": ((8, 16, 16), 3, 2, 1),
    "1152 windows, 2x2x2 tiled": ((16, 16, 36), 2, 2, 0),
    "4096 windows, 1x2x2": ((4, 64, 64), (1, 2, 2), (1, 2, 2), 0),
    "4224 windows, 2x2x2 tiled": ((16, 32, 66), 2, 2, 0),
}


def check_gradient(pool, size, args, dtype):
    x = random_values((3, 5, *size), dtype).requires_grad_()
    values, argmax = (poolx.max_pool2d_with_argmax if len(size) == 2
                      else poolx.max_pool3d_with_argmax)(x.detach(), *args)
    grad_out = upstream_grad(values)
    got = pool(x, *args)
    (grad,) = torch.autograd.grad(got, x, grad_out)
    torch_pool = F.max_pool2d if len(size) == 2 else F.max_pool3d
    assert_identical(grad, torch_pool_grad(torch_pool, x, args, grad_out), "gradient")
    manual = (poolx.max_pool2d_backward if len(size) == 2 else poolx.max_pool3d_backward)
    assert_identical(manual(grad_out, argmax, x.shape, *args), grad, "manual backward")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", PLANES)
def test_planes_of_few_windows(name, dtype):
    size, *args = PLANES[name]
    check_gradient(poolx.max_pool2d, size, args, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", VOLUMES)
def test_volumes_of_few_windows(name, dtype):
    size, *args = VOLUMES[name]
    check_gradient(poolx.max_pool3d, size, args, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["4 windows, 2x2 tiled", "49 windows, 3x3 s2 p1",
                                  "27 windows, 3x3x3 s2 p1", "256 windows, 3x3x3 s2 p1"])
def test_an_argmax_outside_its_window_raises(name, dtype):
    """A tap past the kernel, and (padded) a tap of the kernel outside the
    input, in the first window of a plane and in the last plane's last."""
    size, *args = PLANES[name] if name in PLANES else VOLUMES[name]
    x = torch.randn(2, 3, *size, dtype=dtype)
    with_argmax, backward = ((poolx.max_pool2d_with_argmax, poolx.max_pool2d_backward)
                             if len(size) == 2 else
                             (poolx.max_pool3d_with_argmax, poolx.max_pool3d_backward))
    values, argmax = with_argmax(x, *args)
    taps = args[0] ** len(size)
    bad = [taps] + ([0] if args[2] else [])  # tap 0 of window 0: padding
    for position in [(1, 2) + (0,) * len(size), (1, 2) + (-1,) * len(size)]:
        for value in bad if position[-1] == 0 else [taps]:
            hostile = argmax.clone()
            hostile[position] = value
            where = ", ".join(str(p if p >= 0 else n + p)
                              for p, n in zip(position, argmax.shape))
            with raises_bad_argmax(rf"argmax\[{where}\] = {value} names no tap"):
                backward(values, hostile, x.shape, *args)
