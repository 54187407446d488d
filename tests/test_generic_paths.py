"""The CPU fast paths against the element kernels they replace: the same
problem with the fast paths on and off (torch.ops.poolx.set_cpu_fast_paths,
which the benchmark's "generic" peer uses) gives the same bits, NaN where NaN.
"""

import contextlib

import pytest
import torch

import poolx
from reference import CUDA_EMULATION, assert_identical
from fast_path_cases import DTYPES, GEOMETRIES, SHAPES, planted_grad, planted_input

pytestmark = pytest.mark.skipif(
    CUDA_EMULATION, reason="the emulation build runs the CUDA kernels, which have no CPU fast paths")


@contextlib.contextmanager
def fast_paths(enabled):
    before = torch.ops.poolx.set_cpu_fast_paths(enabled)
    try:
        yield
    finally:
        torch.ops.poolx.set_cpu_fast_paths(before)


def every_path(x, args):
    """Each op a fast path serves, on x: forward (values, argmax, indices),
    backward, unpool by argmax and by indices, the mask."""
    values, argmax, indices = torch.ops.poolx.max_pool2d_indices(
        x, *[args[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")])
    torch.manual_seed(0)  # the same gradient for both runs
    g = planted_grad(values.shape, x.dtype, x)
    pool = {k: args[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")}
    out = {
        "values": values, "argmax": argmax, "indices": indices,
        "values only": poolx.max_pool2d(x, **pool),
        "backward": poolx.max_pool2d_backward(g, argmax, x.shape, **pool),
        "mask": poolx.argmax_to_mask(argmax, x.shape, **pool),
        "unpool by argmax": poolx.max_unpool2d_argmax(values, argmax, x.shape, **pool),
    }
    if args["stride"] == args["kernel_size"] and args["padding"] == (0, 0):
        out["unpool by indices"] = poolx.max_unpool2d(
            values, indices, args["kernel_size"], output_size=x.shape[-2:])
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_fast_paths_equal_element_kernels(geometry, channels_last, dtype):
    kernel, stride, padding, dilation = geometry
    for shape in SHAPES:
        x = planted_input(shape, dtype, channels_last)
        for ceil_mode in (False, True):
            args = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                        ceil_mode=ceil_mode)
            with torch.no_grad():
                fast = every_path(x, args)
                with fast_paths(False):
                    assert torch.ops.poolx.cpu_isa() == "none"
                    generic = every_path(x, args)
            for name, result in fast.items():
                assert_identical(result, generic[name], f"{name} {shape} {args}")



F = torch.nn.functional
# adaptive windows that overlap (13 -> 4 and 14 -> 5 share a row and column
# between neighbours), global pooling, an adaptive volume, windows of small
# planes and volumes (padded, dilated, cut short by ceil mode, tiled): each
# backward by the scatters that the fast paths compile per ISA (runs of NCHW
# planes, the table in channels_last; float16's adds by F16C) and the
# generic build widens in software. 21 planes: runs of several planes and a
# shorter last one.
# name -> input size, poolx's op, torch's, their arguments
SCATTERED_BACKWARDS = {
    "pyramid 13x13 -> 4": ((13, 13), poolx.adaptive_max_pool2d, F.adaptive_max_pool2d, (4,)),
    "14x14 -> 5": ((14, 14), poolx.adaptive_max_pool2d, F.adaptive_max_pool2d, (5,)),
    "global 7x7 -> 1": ((7, 7), poolx.adaptive_max_pool2d, F.adaptive_max_pool2d, (1,)),
    "volume 4x7x7 -> 3": ((4, 7, 7), poolx.adaptive_max_pool3d, F.adaptive_max_pool3d, (3,)),
    "volume 5x6x6 3x3x3 s2": ((5, 6, 6), poolx.max_pool3d, F.max_pool3d, (3, 2, 1)),
    "14x14 2x2": ((14, 14), poolx.max_pool2d, F.max_pool2d, (2,)),
    "9x10 3x3 s1 p1 dilation 2": ((9, 10), poolx.max_pool2d, F.max_pool2d, (3, 1, 1, 2)),
    "10x11 3x3 s3 p1 ceil mode": ((10, 11), poolx.max_pool2d, F.max_pool2d, (3, 3, 1, 1, True)),
    "volume 8x14x14 2x2x2": ((8, 14, 14), poolx.max_pool3d, F.max_pool3d, (2,)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncdhw", "channels_last"])
@pytest.mark.parametrize("name", SCATTERED_BACKWARDS)
def test_scattered_backwards_equal_generic_and_torch(name, channels_last, dtype):
    """Gradients with the fast paths on and off equal bit for bit, and equal
    torch's (which adds into the element type, rounding after every add):
    ties in the input make neighbouring windows select their shared input."""
    size, pool, torch_pool, args = SCATTERED_BACKWARDS[name]
    x = planted_input((3, 7, *size), dtype, False).nan_to_num(nan=0.0)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if len(size) == 2
                         else torch.channels_last_3d)
    x.requires_grad_()
    y = pool(x, *args)
    torch.manual_seed(1)
    g = torch.empty_like(y).copy_(planted_grad(y.shape, dtype, y.contiguous()))  # y's layout
    (fast,) = torch.autograd.grad(y, x, g)
    with fast_paths(False):
        (generic,) = torch.autograd.grad(pool(x, *args), x, g)
    assert_identical(fast, generic, f"{name}: fast vs generic")
    # torch's contiguous kernels: its channels_last_3d one routes a window of
    # only -inf to another slice (README, Limits)
    x_torch = x.detach().contiguous().requires_grad_()
    (expected,) = torch.autograd.grad(torch_pool(x_torch, *args), x_torch, g.contiguous())
    assert_identical(fast, expected, f"{name}: poolx vs torch", check_stride=False)
