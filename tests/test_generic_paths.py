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
