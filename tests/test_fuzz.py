"""Property tests of max_pool2d: configurations drawn by hypothesis, valid or
not, give torch's values, indices and gradients bit for bit, or torch's
exception type. (test_fuzz_unpool.py does the same for max_unpool2d; the
profiles are in fuzz_strategies.py.)"""

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import poolx
from fuzz_strategies import any_pool_args, fuzz_settings, leading_dims, tensors
from inputs import FLOAT_DTYPES, INT_DTYPES, Pool, random_values
from reference import (EXACT, assert_identical, assert_pool_matches_torch, empty_windows,
                       raises_like, torch_grad, torch_pool)

# ---- configurations -----------------------------------------------------------------------


@st.composite
def pools(draw):
    """A valid configuration and an input plane (Pool.hw) with at least one output.
    Kernels up to 17 (windows past 256 taps have an int32 argmax); some windows
    may lie wholly in the padding (empty_windows)."""
    kernel = tuple(draw(st.integers(1, 5) | st.integers(15, 17)) for _ in range(2))
    stride = draw(st.none() | st.tuples(st.integers(1, 4), st.integers(1, 4)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    dilation = tuple(draw(st.integers(1, 3)) for _ in range(2))
    # From the smallest plane with an output (the dilated window minus both
    # paddings) to 9 past it, or to 13 for small windows.
    low = [max(1, d * (k - 1) + 1 - 2 * p) for k, d, p in zip(kernel, dilation, padding)]
    hw = tuple(draw(st.integers(m, max(m + 9, 13))) for m in low)
    return Pool("drawn", hw, kernel, stride, padding, dilation, draw(st.booleans()))


@st.composite
def any_pools(draw):
    """Any call: inputs of 2 to 5 dims, any dtype, arguments in any form, valid or not."""
    ndim = draw(st.sampled_from([2, 3, 4, 4, 5]))
    shape = tuple(draw(st.integers(0, 6)) for _ in range(ndim))
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES + (torch.bool, torch.complex64)))
    pool = Pool("any", shape[-2:], *draw(any_pool_args(7, max_len=3)))
    return x, pool


# ---- checks -------------------------------------------------------------------------------


def check_forward(x, pool):
    """poolx's values and indices are torch's; returns torch's indices and whether
    every window holds an input element."""
    expected, expected_indices = torch_pool(x, pool, return_indices=True)
    values, indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
    torch.testing.assert_close(values, expected, **EXACT)
    torch.testing.assert_close(poolx.max_pool2d(x, **pool.kwargs()), expected, **EXACT)
    inside = ~empty_windows(pool, x.shape[-2:]).expand(values.shape)
    # torch's CPU kernel gives out-of-range indices for windows with no input element.
    torch.testing.assert_close(indices[inside], expected_indices[inside], **EXACT)
    plane = x.shape[-2] * x.shape[-1]
    assert bool(((indices >= 0) & (indices < plane)).all())
    return expected_indices, bool(inside.all())


def check_backward(x, pool, expected_indices, torch_is_safe):
    x = x.detach().requires_grad_()
    values = poolx.max_pool2d(x, **pool.kwargs())
    g = torch.Generator().manual_seed(x.numel())
    if torch_is_safe:
        grad_out = torch.randn(values.shape, generator=g).to(x.dtype)
        expected = torch_grad(x, pool, grad_out)
    else:
        # torch's backward would follow its out-of-range indices; integer gradients make
        # a scatter-add reference exact in any order.
        grad_out = torch.randint(-8, 9, values.shape, generator=g).to(x.dtype)
        inside = ~empty_windows(pool, x.shape[-2:]).expand(values.shape)
        kept = torch.where(inside, grad_out.double(), 0.0)
        index = expected_indices.clamp(0, x.shape[-2] * x.shape[-1] - 1).flatten(-2)
        expected = torch.zeros(*x.shape[:-2], x.shape[-2] * x.shape[-1], dtype=torch.float64)
        expected = expected.scatter_add(-1, index, kept.flatten(-2)).view(x.shape).to(x.dtype)
    values.backward(grad_out)
    torch.testing.assert_close(x.grad, expected, **EXACT)


# ---- properties ---------------------------------------------------------------------------


@st.composite
def pooled_tensors(draw):
    """A drawn configuration and an input for it: unbatched or a batch of 0 to 3,
    any dtype, any layout, specials planted."""
    pool = draw(pools())
    x = draw(tensors((*leading_dims(draw, [None, 0, 1, 2, 3]), *pool.hw),
                     FLOAT_DTYPES + INT_DTYPES))
    return x, pool


@fuzz_settings
@given(pooled_tensors())
def test_valid_pool_matches_torch(case):
    x, pool = case
    expected_indices, torch_is_safe = check_forward(x, pool)
    if x.dtype.is_floating_point:
        check_backward(x, pool, expected_indices, torch_is_safe)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(pool=pools(), dtype=st.sampled_from(FLOAT_DTYPES), channels_last=st.booleans())
def test_valid_pool_matches_torch_on_device(pool, dtype, channels_last, device):
    """On every device, with NaN clusters, planes of only -inf and +-0.0 in the
    upstream gradient: identical strides and signs of zero as well."""
    # torch's backward writes out of bounds for empty windows (test_degenerate.py)
    assume(not empty_windows(pool, pool.hw).any())
    x = random_values((2, 3, *pool.hw), dtype, device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    assert_pool_matches_torch(x, pool, f"{pool} | {dtype} | channels_last={channels_last}")


@fuzz_settings
@given(any_pools())
def test_any_pool_call_raises_where_torch_raises(case):
    x, pool = case
    try:
        torch_pool(x, pool, return_indices=True)
    except Exception as error:  # noqa: BLE001  (any exception torch raises, poolx must too)
        raises_like(error, lambda: poolx.max_pool2d(x, **pool.kwargs(), return_indices=True))
        raises_like(error, lambda: poolx.max_pool2d(x, **pool.kwargs()))
        return
    check_forward(x, pool)
