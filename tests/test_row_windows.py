"""channels_last windows along one row (1-D pooling of (N, L, C) signals, 2-D
windows 1 x k) of 2 to 4 taps, whose forward with argmax has
its own kernel on AVX2 (csrc/cpu/isa/forward_row_windows.h; this file runs
there through test_cpu_fast_paths' narrower instruction sets): values,
return_indices, argmax and gradients against torch bit for bit, with ties,
NaN, -inf, all -inf windows and signed zeros, channel counts of one vector,
of groups of four and a tail, and not of whole vectors (the general kernel),
windows that padding or ceil_mode cuts, default and streaming stores."""

import pytest
import torch
import torch.nn.functional as F

import poolx

from reference import assert_identical, single_threaded, torch_pool_grad

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
CHANNELS = [8, 16, 40, 64, 264, 12]

# (spatial size, kernel, stride, padding, ceil_mode)
CASES_1D = [
    (37, 2, 2, 0, False), (40, 4, 4, 0, False), (23, 3, 1, 0, False), (29, 4, 2, 0, False),
    (30, 4, 2, 0, True),  # ceil_mode, no window cut
    (31, 4, 2, 0, True),  # the last window cut by ceil_mode
    (9, 2, 1, 0, False),
    # padding cuts the first window (and the last where it reaches past the end)
    (40, 3, 2, 1, False), (37, 2, 2, 1, False), (41, 4, 3, 2, False), (30, 4, 2, 1, True),
    (9, 2, 1, 1, False), (5, 4, 1, 2, True),
]
# (spatial size, kernel, stride, padding)
CASES_2D = [((5, 12), (1, 3), (2, 3), (0, 0)), ((4, 9), (1, 2), (1, 2), (0, 0)),
            ((3, 16), (1, 4), (3, 4), (0, 0)), ((4, 11), (1, 3), (1, 2), (0, 1))]


def planted(shape, dtype):
    """Few distinct values (ties), NaN, -inf, signed zeros, and one all -inf
    pixel run, in the given (channels innermost) shape."""
    x = torch.randint(-2, 3, shape).float()
    u = torch.rand(shape)
    x[u < 0.05] = float("nan")
    x[(u >= 0.05) & (u < 0.12)] = float("-inf")
    x[(u >= 0.12) & (u < 0.2)] = -0.0
    x[0, 1:5] = float("-inf")  # whole windows of -inf at the start of image 0
    return x.to(dtype)


def check(torch_pool, poolx_pool, poolx_argmax, x, args, what):
    with torch.no_grad():
        values, indices = poolx_pool(x, *args, return_indices=True)
        with single_threaded():
            want_values, want_indices = torch_pool(x.contiguous(), *args, return_indices=True)
        pooled, argmax = poolx_argmax(x, *args)
    assert_identical(values, want_values, f"values of {what}", check_stride=False)
    assert_identical(indices, want_indices, f"indices of {what}", check_stride=False)
    assert_identical(pooled, want_values, f"values with argmax of {what}", check_stride=False)
    # the argmax is the tap: the index less the window's first column
    kernel, stride, padding = args[0][-1], args[1][-1], args[2][-1]
    first = torch.arange(want_indices.shape[-1]) * stride - padding
    tap = want_indices % x.shape[-1] - first
    assert bool(((tap >= 0) & (tap < kernel)).all()), what
    assert_identical(argmax.long(), tap, f"argmax of {what}", check_stride=False)
    xg = x.detach().requires_grad_()
    grad = torch.randn(values.shape).to(x.dtype)
    grad.view(-1)[::3] = -0.0
    got, = torch.autograd.grad(poolx_pool(xg, *args), xg, grad)
    want = torch_pool_grad(torch_pool, x, args, grad)
    assert_identical(got, want, f"gradient of {what}", check_stride=False)


@pytest.mark.parametrize("case", CASES_1D, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_signals_match_torch(case, dtype, stores):
    length, kernel, stride, padding, ceil_mode = case
    for c in CHANNELS:
        x = planted((2, length, c), dtype).transpose(1, 2)  # (N, C, L), channels innermost
        args = ((kernel,), (stride,), (padding,), (1,), ceil_mode)
        check(F.max_pool1d, poolx.max_pool1d, poolx.max_pool1d_with_argmax, x, args,
              f"(2, {c}, {length}) {case} {dtype}")


@pytest.mark.parametrize("case", CASES_2D, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_images_of_windows_one_row_high_match_torch(case, dtype, stores):
    size, kernel, stride, padding = case
    for c in CHANNELS:
        x = planted((2, *size, c), dtype).permute(0, 3, 1, 2)  # channels_last
        args = (kernel, stride, padding, (1, 1), False)
        check(F.max_pool2d, poolx.max_pool2d, poolx.max_pool2d_with_argmax, x, args,
              f"(2, {c}, {size}) {case} {dtype}")


def test_many_rows_over_threads_tasks(streaming):
    """The text benchmark's layout, over several tasks, streamed."""
    x = planted((16, 200, 256), torch.float32).transpose(1, 2)
    check(F.max_pool1d, poolx.max_pool1d, poolx.max_pool1d_with_argmax, x,
          ((2,), (2,), (0,), (1,), False), "(16, 256, 200) k2")
