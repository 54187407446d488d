"""Configurations drawn by hypothesis: values, indices and gradients bit for
bit against torch, beyond the hand-picked grid."""

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import poolx
from poolx import _geometry as geo
from inputs import FLOAT_DTYPES, Pool, random_values, upstream_grad
from reference import assert_identical, empty_windows, torch_grad, torch_pool


@st.composite
def pools(draw):
    ints = lambda lo, hi: draw(st.integers(lo, hi))  # noqa: E731
    kernel = (ints(1, 5), ints(1, 5))
    stride = (ints(1, 4), ints(1, 4))
    padding = (ints(0, kernel[0] // 2), ints(0, kernel[1] // 2))
    dilation = (ints(1, 3), ints(1, 3))
    ceil_mode = draw(st.booleans())
    hw = (ints(1, 13), ints(1, 13))
    out_hw = geo.pooled_hw(hw, kernel, stride, padding, dilation, ceil_mode)
    assume(min(out_hw) >= 1)
    pool = Pool("drawn", hw, kernel, stride, padding, dilation, ceil_mode)
    # torch's backward writes out of bounds for empty windows (test_degenerate.py)
    assume(not empty_windows(pool, hw).any())
    return pool


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(pool=pools(), dtype=st.sampled_from(FLOAT_DTYPES), channels_last=st.booleans())
def test_drawn_configurations_match_torch(pool, dtype, channels_last, device):
    x = random_values((2, 3, *pool.hw), dtype, device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    what = f"{pool} | {dtype} | channels_last={channels_last}"
    values, indices = torch_pool(x, pool, return_indices=True)
    x.requires_grad_()
    got_values, got_indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
    assert_identical(got_values, values, f"values of {what}")
    assert_identical(got_indices, indices, f"indices of {what}")
    grad_out = upstream_grad(got_values)
    (grad,) = torch.autograd.grad(got_values, x, grad_out)
    assert_identical(grad, torch_grad(x, pool, grad_out), f"gradient of {what}")
