"""Reference results and exact comparisons for the poolx tests."""

import contextlib
import re

import pytest
import torch
import torch.nn.functional as F

import poolx
from inputs import upstream_grad
from poolx import _build_config
from poolx import _geometry as geo

# The emulation build (POOLX_CUDA_EMULATION=1) runs the CUDA kernels on CPU
# tensors, so CPU results there follow torch's CUDA semantics.
CUDA_EMULATION = _build_config.CUDA_EMULATION


def sums_like_cuda(t):
    """Whether poolx sums a float16/bfloat16 gradient for `t` as torch's CUDA
    kernel does (in float32, rounded once) rather than its CPU kernel (rounded
    after every add)."""
    return t.is_cuda or CUDA_EMULATION


def raises_bad_argmax(message):
    """pytest.raises for an argmax value that names no tap of its window: on
    CPU an IndexError with `message`; the CUDA kernels assert on the device, as
    torch's do for bad unpool indices (the emulation build raises that too)."""
    if CUDA_EMULATION:
        return pytest.raises(RuntimeError, match="device-side assert triggered")
    return pytest.raises(IndexError, match=message)


def raises_bad_indices(message):
    """pytest.raises for an unpool index outside its output plane: on CPU
    torch's RuntimeError `message`; the CUDA kernels assert on the device, as
    torch's do (the emulation build raises that too)."""
    if CUDA_EMULATION:
        return pytest.raises(RuntimeError, match="device-side assert triggered.*invalid max index")
    return pytest.raises(RuntimeError, match=re.escape(message))


# assert_close's arguments for equal values, NaN where NaN (strides and the
# sign of zero unchecked; assert_identical checks those too).
EXACT = dict(rtol=0, atol=0, equal_nan=True)


def raises_like(expected, call):
    """call() raises an exception of exactly type(expected), torch's exception."""
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is type(expected), (info.value, expected)


def assert_identical(actual, expected, what, check_stride=True):
    """Same dtype, shape, strides and values: NaN where NaN (payloads are not
    promised), equal bits elsewhere (-0.0 where -0.0); compared on the CPU,
    wherever either was computed."""
    actual, expected = actual.cpu(), expected.cpu()
    torch.testing.assert_close(
        actual,
        expected,
        rtol=0,
        atol=0,
        equal_nan=True,
        check_stride=check_stride,
        msg=lambda m: f"{what}\n{m}",
    )
    if actual.is_floating_point():
        signs = (actual.signbit() != expected.signbit()) & ~expected.isnan()
        assert not signs.any(), f"{what}\nsign bits differ at {signs.nonzero().tolist()[:5]}"


@contextlib.contextmanager
def single_threaded():
    """Runs torch's reference kernels on one thread: on a busy machine their
    tiny parallel regions otherwise wait milliseconds for a second core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def torch_pool(x, pool, return_indices=False):
    """torch's max_pool2d of x on CPU (the reference for every device).

    torch's channels_last kernel rejects 8- and 16-bit integer inputs whose
    C*H*W exceeds the dtype's maximum; for those it runs on int64 (same maxima).
    """
    x = x.detach().cpu()
    with single_threaded():
        try:
            return F.max_pool2d(x, **pool.kwargs(), return_indices=return_indices)
        except RuntimeError:
            if x.dtype not in (torch.uint8, torch.int8, torch.int16):
                raise
        out = F.max_pool2d(x.long(), **pool.kwargs(), return_indices=return_indices)
    return (out[0].to(x.dtype), out[1]) if return_indices else out.to(x.dtype)


def decode_argmax(argmax, in_hw, pool):
    """Flat input index h * W + w of each window's tap kh * kernel_w + kw."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geo.pool_params(
        pool.kernel_size, pool.stride, pool.padding, pool.dilation
    )
    a = argmax.cpu().long()
    oh = torch.arange(a.shape[-2]).view(-1, 1)
    ow = torch.arange(a.shape[-1])
    h = oh * sh - ph + (a // kw) * dh
    w = ow * sw - pw + (a % kw) * dw
    return h * in_hw[1] + w


def empty_windows(pool, hw):
    """Bool of the pooled spatial shape ((out_h, out_w), or (out_d, out_h, out_w)
    for three sizes in hw): True where the window has no tap inside the input."""
    dims = len(hw)
    kernel, stride, padding, dilation = geo.pool_params(
        pool.kernel_size, pool.stride, pool.padding, pool.dilation, dims=dims
    )
    out = geo.pooled_hw(hw, kernel, stride, padding, dilation, pool.ceil_mode)
    empty = torch.zeros(out, dtype=torch.bool)
    for i in range(dims):
        starts = (o * stride[i] - padding[i] for o in range(out[i]))
        taps = ([s + t * dilation[i] for t in range(kernel[i])] for s in starts)
        axis = torch.tensor([all(not 0 <= p < hw[i] for p in ts) for ts in taps], dtype=torch.bool)
        empty = empty | axis.view([-1 if j == i else 1 for j in range(dims)])
    return empty


def routed_grad(grad_out, indices, in_hw, dtype=None):
    """Gradient of the input: each window's gradient added at its index, in
    output row-major order (torch's order), skipping indices outside the plane."""
    dtype = grad_out.dtype if dtype is None else dtype
    summed = dtype
    if sums_like_cuda(grad_out) and dtype in (torch.float16, torch.bfloat16):
        summed = torch.float32  # rounded once at the end
    go = grad_out.detach().cpu().to(dtype).to(summed)
    go = go.reshape(-1, indices.shape[-2] * indices.shape[-1])
    idx = indices.cpu().reshape(go.shape)
    plane = in_hw[0] * in_hw[1]
    out = torch.zeros(go.shape[0], plane, dtype=summed)
    for p in range(go.shape[0]):
        for o in range(go.shape[1]):
            i = int(idx[p, o])
            if 0 <= i < plane:
                out[p, i] += go[p, o]
    return out.to(dtype).reshape(*grad_out.shape[:-2], *in_hw)


def torch_grad(x, pool, grad_out):
    """torch's input gradient for x's device, in torch's layout. torch's CPU
    kernel adds into the float16/bfloat16 gradient (rounding after every add),
    its CUDA kernel sums in float32 and rounds once; poolx does as torch does on
    each, so on CUDA the reference is the float32 gradient rounded once.
    `pool`: a Pool, or max_pool2d's keyword arguments."""
    kwargs = pool if isinstance(pool, dict) else pool.kwargs()
    with single_threaded():
        xr = x.detach().cpu().requires_grad_()
        (g,) = torch.autograd.grad(F.max_pool2d(xr, **kwargs), xr, grad_out.cpu())
        if sums_like_cuda(x) and x.dtype in (torch.float16, torch.bfloat16):
            xw = xr.detach().float().requires_grad_()
            grad_w = grad_out.cpu().float()
            (gw,) = torch.autograd.grad(F.max_pool2d(xw, **kwargs), xw, grad_w)
            g = g.copy_(gw)
    return g


def assert_pool_matches_torch(x, pool, what):
    """poolx.max_pool2d(x) with return_indices: values, indices and the input
    gradient identical to torch's (strides and signs of zero too); returns the
    values, the upstream gradient and the gradient for further checks."""
    values, indices = torch_pool(x, pool, return_indices=True)
    x = x.detach().requires_grad_()
    got_values, got_indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
    assert_identical(got_values, values, f"values of {what}")
    assert_identical(got_indices, indices, f"indices of {what}")
    grad_out = upstream_grad(got_values)
    (grad,) = torch.autograd.grad(got_values, x, grad_out)
    assert_identical(grad, torch_grad(x, pool, grad_out), f"gradient of {what}")
    return got_values.detach(), indices, grad_out, grad


def torch_pool_grad(pool, x, args, grad_out):
    """torch's input gradient of pool(x, *args) (F.max_pool1d, F.max_pool3d),
    summed as poolx sums it on x's device (see torch_grad), from a contiguous
    copy of x: torch's channels_last_3d kernel names another slice's tap for
    a window of -inf only, which poolx does not copy (test_pool3d.py)."""
    dtype = x.dtype
    wide = sums_like_cuda(x) and dtype in (torch.float16, torch.bfloat16)
    xr = x.detach().cpu().contiguous().to(torch.float32 if wide else dtype).requires_grad_()
    with single_threaded():
        (g,) = torch.autograd.grad(pool(xr, *args), xr, grad_out.cpu().to(xr.dtype))
    return g.to(dtype)


def assert_models_match(model, reference, x):
    """model(x), and x's gradient through it, equal reference's bit for bit."""
    x = x.detach().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    out, expected = model(x), reference(x_ref)
    torch.testing.assert_close(out, expected, **EXACT)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, **EXACT)


def assert_call_as_torch(torch_call, poolx_call, return_indices, spatial_numel):
    """poolx_call() fails where torch_call() does, with its exception type, and
    otherwise returns its values, and its indices wherever torch's lie inside
    the input (a window wholly in the padding gets an index outside from torch,
    one inside from poolx)."""
    try:
        with single_threaded():
            expected = torch_call()
    except Exception as error:
        raises_like(error, poolx_call)
        return
    got = poolx_call()
    if not return_indices:
        torch.testing.assert_close(got, expected, **EXACT)
        return
    torch.testing.assert_close(got[0], expected[0], **EXACT)
    inside = (expected[1] >= 0) & (expected[1] < spatial_numel)
    torch.testing.assert_close(got[1][inside], expected[1][inside], **EXACT)
    assert ((got[1] >= 0) & (got[1] < max(1, spatial_numel))).all()

