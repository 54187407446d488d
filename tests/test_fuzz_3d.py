"""Property tests of the 3-D ops: drawn configurations give torch's values,
indices and gradients bit for bit (max_pool3d, max_unpool3d), and any call,
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
def volumes(draw):
    """A valid 3-D configuration, its volume and the pooling arguments."""
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(3))
    stride = draw(st.none() | st.tuples(*[st.integers(1, 3)] * 3))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(3))
    sizes = []
    for k, p, d in zip(kernel, padding, dilation):
        low = max(1, d * (k - 1) + 1 - 2 * p)
        sizes.append(draw(st.integers(low, low + 5)))
    shape = (*leading_dims(draw, [None, 0, 1, 2]), *sizes)
    x = draw(tensors(shape, FLOAT_DTYPES))
    return x, (kernel, stride, padding, dilation, draw(st.booleans()))


@fuzz_settings
@given(volumes())
def test_drawn_volumes_pool_and_unpool_as_torch(case):
    x, args = case
    # torch's channels_last_3d kernel names another slice's tap for a window
    # of -inf only (test_pool3d.py); its contiguous kernel is the reference
    with single_threaded():
        values, indices = F.max_pool3d(x.contiguous(), *args, return_indices=True)
    got_values, got_indices = poolx.max_pool3d(x, *args, return_indices=True)
    torch.testing.assert_close(got_values, values, **EXACT)
    torch.testing.assert_close(poolx.max_pool3d(x, *args), values, **EXACT)
    _, argmax = poolx.max_pool3d_with_argmax(x, *args)
    dhw = tuple(x.shape[-3:])
    # a window wholly in the padding: torch's index lies outside the input
    empty = empty_windows(Pool("3-D", dhw, *args), dhw)
    for got in (got_indices, poolx.argmax_to_indices3d(argmax, dhw, *args)):
        torch.testing.assert_close(got[..., ~empty], indices[..., ~empty], **EXACT)
    assert ((got_indices >= 0) & (got_indices < x.shape[-3:].numel())).all()
    if empty.any():
        return
    if x.dtype in (torch.float32, torch.float64) and x.numel():
        xg = x.detach().requires_grad_()
        grad_out = torch.randn_like(values)
        (grad,) = torch.autograd.grad(poolx.max_pool3d(xg, *args), xg, grad_out)
        xr = x.detach().contiguous().requires_grad_()
        with single_threaded():
            (expected,) = torch.autograd.grad(F.max_pool3d(xr, *args), xr, grad_out)
        torch.testing.assert_close(grad, expected, **EXACT)
    kernel, stride, padding, dilation, ceil_mode = args
    if dilation == (1, 1, 1) and not ceil_mode and values.numel():
        with single_threaded():
            unpooled = F.max_unpool3d(values, indices, kernel, stride, padding, output_size=dhw)
        got = poolx.max_unpool3d(values, indices, kernel, stride, padding, output_size=dhw)
        torch.testing.assert_close(got, unpooled, **EXACT)
        by_argmax = poolx.max_unpool3d_argmax(values, argmax, dhw, *args)
        torch.testing.assert_close(by_argmax, unpooled, **EXACT)


@st.composite
def any_calls(draw):
    """Any call: inputs of 2 to 6 dims, any dtype, arguments in any form, valid or not."""
    shape = tuple(draw(st.integers(0, 5)) for _ in range(draw(st.integers(2, 6))))
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES))
    args = draw(any_pool_args(6, max_len=4))
    return x, args, draw(st.booleans()), draw(st.booleans())


@fuzz_settings
@given(any_calls())
def test_any_call_succeeds_or_raises_as_torch(call):
    x, args, return_indices, requires_grad = call
    if requires_grad and x.is_floating_point():
        x = x.detach().requires_grad_()
    assert_call_as_torch(
        lambda: F.max_pool3d(x.contiguous(), *args, return_indices=return_indices),
        lambda: poolx.max_pool3d(x, *args, return_indices=return_indices),
        return_indices, x.shape[-3:].numel())
