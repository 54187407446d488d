"""Property tests of the 1-D ops: drawn configurations give torch's values,
indices and gradients bit for bit (max_pool1d, max_unpool1d), and any call,
valid or not, succeeds where torch's does or raises torch's exception type.
Profiles: fuzz_strategies.py."""

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import poolx
from fuzz_strategies import any_pool_args, fuzz_settings, leading_dims, tensors
from inputs import FLOAT_DTYPES, INT_DTYPES, Pool
from reference import EXACT, assert_call_as_torch, empty_windows, single_threaded


@st.composite
def signals(draw):
    """A valid 1-D configuration, its signal and the pooling arguments."""
    kernel = draw(st.integers(1, 6) | st.integers(255, 258))
    stride = draw(st.none() | st.integers(1, 5))
    padding = draw(st.integers(0, kernel // 2))
    dilation = draw(st.integers(1, 3))
    low = max(1, dilation * (kernel - 1) + 1 - 2 * padding)
    length = draw(st.integers(low, low + 40))
    shape = (*leading_dims(draw, [None, 0, 1, 3]), length)
    x = draw(tensors(shape, FLOAT_DTYPES))
    return x, (kernel, stride, padding, dilation, draw(st.booleans()))


@fuzz_settings
@given(signals())
def test_drawn_signals_pool_and_unpool_as_torch(case):
    x, args = case
    with single_threaded():
        values, indices = F.max_pool1d(x, *args, return_indices=True)
    got_values, got_indices = poolx.max_pool1d(x, *args, return_indices=True)
    torch.testing.assert_close(got_values, values, **EXACT)
    torch.testing.assert_close(poolx.max_pool1d(x, *args), values, **EXACT)
    _, argmax = poolx.max_pool1d_with_argmax(x, *args)
    # A window wholly in the padding: torch's index (and its backward's write)
    # falls outside the signal, poolx's stays inside (README, Limits).
    kernel, stride, padding, dilation, ceil_mode = args
    empty = empty_windows(Pool("1-D", (1, x.shape[-1]), (1, kernel), (1, stride or kernel),
                               (0, padding), (1, dilation), ceil_mode), (1, x.shape[-1]))[0]
    for got in (got_indices, poolx.argmax_to_indices1d(argmax, x.shape, *args)):
        torch.testing.assert_close(got[..., ~empty], indices[..., ~empty], **EXACT)
    assert ((got_indices[..., empty] >= 0) & (got_indices[..., empty] < x.shape[-1])).all()
    if empty.any():
        return
    if x.dtype in (torch.float32, torch.float64) and x.numel():
        xg = x.detach().requires_grad_()
        grad_out = torch.randn_like(values)
        (grad,) = torch.autograd.grad(poolx.max_pool1d(xg, *args), xg, grad_out)
        with single_threaded():
            (expected,) = torch.autograd.grad(F.max_pool1d(xg, *args), xg, grad_out)
        torch.testing.assert_close(grad, expected, **EXACT)
    if dilation == 1 and not ceil_mode and values.numel():
        with single_threaded():
            unpooled = F.max_unpool1d(values, indices, kernel, stride, padding,
                                      output_size=x.shape[-1:])
        got = poolx.max_unpool1d(values, indices, kernel, stride, padding,
                                 output_size=x.shape[-1:])
        torch.testing.assert_close(got, unpooled, **EXACT)


@st.composite
def any_calls(draw):
    """Any call: inputs of 1 to 4 dims, any dtype, arguments in any form, valid or not."""
    shape = tuple(draw(st.integers(0, 6)) for _ in range(draw(st.integers(1, 4))))
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES))
    args = draw(any_pool_args(7, max_len=2))
    return x, args, draw(st.booleans()), draw(st.booleans())


@fuzz_settings
@given(any_calls())
def test_any_call_succeeds_or_raises_as_torch(call):
    x, args, return_indices, requires_grad = call
    if requires_grad and x.is_floating_point():
        x = x.detach().requires_grad_()
    if not x.is_floating_point() and not return_indices:
        # torch's value-only max_pool1d has no integer kernel; poolx's values
        # are those of torch's return_indices call, which has one
        return_indices = True
    assert_call_as_torch(lambda: F.max_pool1d(x, *args, return_indices=return_indices),
                         lambda: poolx.max_pool1d(x, *args, return_indices=return_indices),
                         return_indices, x.shape[-1])
