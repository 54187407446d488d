"""return_indices in channels_last layouts, whose kernels write each int64
index straight from the argmax lanes where a window has up to 16 taps (and
convert rows of the argmax past that, and for tiled 2x2 windows on AVX-512): every dimensionality, adaptive
windows, channel counts that end vectors early or fill the pairs of 16-bit
lanes, ties, NaN and -inf, with ordinary and streaming stores, against
torch's values and indices bit for bit."""

import functools

import pytest
import torch
import torch.nn.functional as F

import poolx

from inputs import random_values
from reference import assert_identical, single_threaded, torch_pool_grad

CL = {1: None, 2: torch.channels_last, 3: torch.channels_last_3d}
# (dims, spatial size, pool keyword arguments): windows of 2 to 16 taps (the
# direct writes), and of 27 and 49 (rows converted), stepping and adaptive;
# taps at consecutive offsets (1-D without dilation, and 2-D windows as wide
# as their rows) take no table lookup, others do (dilated 1-D)
CASES = [
    (1, (37,), dict(kernel_size=2)),
    (1, (40,), dict(kernel_size=3, stride=2, dilation=2)),
    (2, (7, 2), dict(kernel_size=(3, 2), stride=(2, 1))),
    (1, (41,), dict(kernel_size=4, stride=3, padding=1)),
    (1, (40,), dict(kernel_size=16, stride=5)),
    (2, (13, 11), dict(kernel_size=3, stride=2, padding=1)),
    (2, (12, 12), dict(kernel_size=2)),
    (2, (9, 10), dict(kernel_size=(2, 3), stride=1, dilation=2)),
    (2, (13, 13), dict(kernel_size=4, stride=4, ceil_mode=True)),
    (3, (4, 9, 8), dict(kernel_size=(1, 2, 2))),
    (3, (4, 8, 6), dict(kernel_size=2)),  # tiled 2x2x2: direct on AVX2, converted on AVX-512
    (3, (5, 8, 9), dict(kernel_size=2, stride=2, padding=1)),
    (3, (6, 7, 7), dict(kernel_size=3, stride=2)),
    (1, (50,), dict(output_size=7)),
    (2, (13, 13), dict(output_size=4)),
    (2, (7, 7), dict(output_size=1)),
    (2, (13, 13), dict(output_size=2)),
    (3, (5, 7, 6), dict(output_size=(2, 3, 2))),
]
CHANNELS = [1, 3, 8, 20, 64, 72, 136, 264]  # 136: float32 tiled 2x2 by tap sweeps


def pools(dims, kwargs):
    adaptive = "output_size" in kwargs
    name = f"adaptive_max_pool{dims}d" if adaptive else f"max_pool{dims}d"
    return getattr(F, name), getattr(poolx, name)


def channels_last(dims, n, c, size, dtype):
    """An (N, C, *size) tensor stored with the channels innermost."""
    if dims == 1:  # a sequence model's (N, L, C) activations
        return random_values((n, *size, c), dtype).transpose(1, 2)
    return random_values((n, c, *size), dtype).contiguous(memory_format=CL[dims])


@pytest.mark.parametrize("dims, size, kwargs", CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_channels_last_indices_match_torch(dims, size, kwargs, dtype, stores):
    torch_pool, poolx_pool = pools(dims, kwargs)
    for c in CHANNELS:
        x = channels_last(dims, 2, c, size, dtype)
        what = f"{dims}-D {size} {kwargs} C={c} {dtype}"
        with torch.no_grad():
            values, indices = poolx_pool(x, **kwargs, return_indices=True)
            # from a contiguous copy: torch's channels_last_3d kernel names
            # another slice's tap for a window of -inf alone (test_pool3d.py)
            with single_threaded():
                want_values, want_indices = torch_pool(x.contiguous(), **kwargs,
                                                       return_indices=True)
        assert_identical(values, want_values, f"values of {what}", check_stride=False)
        assert_identical(indices, want_indices, f"indices of {what}", check_stride=False)
        # backward, from the argmax saved beside the indices
        xg = x.detach().requires_grad_()
        grad = torch.randn_like(values)
        poolx_grad, = torch.autograd.grad(poolx_pool(xg, **kwargs, return_indices=True)[0], xg,
                                          grad)
        want_grad = torch_pool_grad(functools.partial(torch_pool, **kwargs), x, (), grad)
        assert_identical(poolx_grad, want_grad, f"gradient of {what}", check_stride=False)


def test_streamed_indices_of_many_pixels(streaming):
    """Rows of whole vectors over many threads' tasks, all streamed."""
    x = channels_last(2, 4, 128, (30, 30), torch.float32)
    values, indices = poolx.max_pool2d(x, 3, 2, return_indices=True)
    want_values, want_indices = F.max_pool2d(x, 3, 2, return_indices=True)
    assert_identical(values, want_values, "values")
    assert_identical(indices, want_indices, "indices")
