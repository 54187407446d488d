"""1-D pooling and unpooling against torch's max_pool1d and max_unpool1d:
values, indices, gradients and errors, in every layout of a signal, and the
1-D argmax tools against the indices torch returns."""

import pytest
import torch
import torch.nn.functional as F

import poolx

from inputs import FLOAT_DTYPES, random_values, upstream_grad
from reference import (
    assert_identical,
    raises_bad_argmax,
    raises_bad_indices,
    raises_like,
    single_threaded,
    torch_pool_grad,
)

# (length, kernel_size, stride, padding, dilation, ceil_mode)
GEOMETRIES = {
    "k2 tiled": (16, 2, None, 0, 1, False),
    "k2 odd length": (15, 2, None, 0, 1, False),
    "k4 tiled (audio)": (40, 4, None, 0, 1, False),
    "k3 s1 p1": (17, 3, 1, 1, 1, False),
    "k3 s2 p1 ceil": (18, 3, 2, 1, 1, True),
    "k5 s2 p2 d2": (23, 5, 2, 2, 2, False),
    "k2 s3 ceil": (20, (2,), (3,), (0,), (1,), True),
    "k1": (7, 1, 1, 0, 1, False),
    "kernel = length": (9, 9, None, 0, 1, False),
    "300-tap window (int32 argmax)": (610, 300, 7, 0, 1, False),
}


def layouts(n, c, length, make):
    """(name, signal): every layout a (N, C, L) signal comes in."""
    yield "contiguous", make((n, c, length))
    yield "(N, L, C) transposed", make((n, length, c)).transpose(1, 2)
    yield "strided view", make((n, c, 2 * length))[..., ::2]
    yield "unbatched (C, L)", make((c, length))
    yield "batch 0", make((0, c, length))


def pool_args(geometry):
    return geometry[1:]


def torch_grad(x, args, grad_out):
    return torch_pool_grad(F.max_pool1d, x, args, grad_out)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_pool1d_matches_torch(device, name, dtype):
    length, *args = GEOMETRIES[name]
    make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
    for layout, x in layouts(2, 5, length, make):
        what = f"{name}, {dtype}, {layout}"
        with single_threaded():
            values, indices = F.max_pool1d(x.cpu(), *args, return_indices=True)
        got_values, got_indices = poolx.max_pool1d(x, *args, return_indices=True)
        assert_identical(got_values, values, f"values of {what}", check_stride=False)
        assert_identical(got_indices, indices, f"indices of {what}", check_stride=False)
        assert_identical(poolx.max_pool1d(x, *args), values, f"inference of {what}",
                         check_stride=False)
        grad_out = upstream_grad(values).to(device)
        expected_grad = torch_grad(x, args, grad_out)
        for save in ("argmax", "recompute"):
            xg = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(poolx.max_pool1d(xg, *args, save=save), xg, grad_out)
            assert_identical(grad, expected_grad, f"gradient of {what}, save={save}",
                             check_stride=False)


# (N, L, C) signals of 64-256 channels past 1 MiB: passes over whole pixels
# without prefetches (csrc/cpu/isa/pass_vectors.h), and 200 channels' tail
WIDE_NLC = [(1024, 4, None, 0, 1, False), (1025, 3, 2, 1, 1, True), (1027, 5, 2, 2, 2, False)]


@pytest.mark.parametrize("channels", [64, 128, 200, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_wide_nlc_signals_match_torch(channels, dtype):
    for special in (False, True):
        for length, *args in WIDE_NLC:
            x = random_values((2, length, channels), dtype, special=special).transpose(1, 2)
            what = f"{channels} channels, {dtype}, NaN: {special}, {length} {args}"
            with single_threaded():
                values, indices = F.max_pool1d(x, *args, return_indices=True)
            assert_identical(poolx.max_pool1d(x, *args), values, f"inference of {what}",
                             check_stride=False)
            got_values, got_indices = poolx.max_pool1d(x, *args, return_indices=True)
            assert_identical(got_values, values, f"values of {what}", check_stride=False)
            assert_identical(got_indices, indices, f"indices of {what}", check_stride=False)
            got_values, argmax = poolx.max_pool1d_with_argmax(x, *args)
            assert_identical(got_values, values, f"values with argmax of {what}",
                             check_stride=False)
            assert_identical(poolx.argmax_to_indices1d(argmax, x.shape, *args), indices,
                             f"argmax of {what}", check_stride=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_argmax_tools_agree_with_torch_indices(device, name, dtype):
    length, *args = GEOMETRIES[name]
    for layout, x in layouts(2, 3, length, lambda s: random_values(s, dtype, device)):
        what = f"{name}, {dtype}, {layout}"
        with single_threaded():
            values, indices = F.max_pool1d(x.cpu(), *args, return_indices=True)
        got_values, argmax = poolx.max_pool1d_with_argmax(x, *args)
        assert_identical(got_values, values, f"values of {what}", check_stride=False)
        assert argmax.dtype == (torch.uint8 if GEOMETRIES[name][1] != 300 else torch.int32)
        assert_identical(poolx.argmax_to_indices1d(argmax, x.shape, *args), indices,
                         f"indices of {what}", check_stride=False)
        mask = torch.zeros(x.shape, dtype=torch.bool).scatter_(-1, indices, True)
        assert_identical(poolx.argmax_to_mask1d(argmax, x.shape[-1:], *args), mask,
                         f"mask of {what}", check_stride=False)
        grad_out = upstream_grad(values).to(device)
        assert_identical(poolx.max_pool1d_backward(grad_out, argmax, x.shape, *args),
                         torch_grad(x, args, grad_out), f"backward of {what}",
                         check_stride=False)
        # the last window to select a position writes it, as max_unpool1d does
        unpooled = torch.zeros(x.shape, dtype=dtype)
        for o in range(values.shape[-1]):
            unpooled.scatter_(-1, indices[..., o:o + 1], values[..., o:o + 1])
        assert_identical(poolx.max_unpool1d_argmax(got_values, argmax, x.shape, *args),
                         unpooled, f"unpool by argmax of {what}", check_stride=False)


@pytest.mark.parametrize("output_size", [None, "full shape", "largest"])
@pytest.mark.parametrize("name", ["k2 tiled", "k2 odd length", "k3 s1 p1", "k3 s2 p1 ceil"])
def test_unpool1d_matches_torch(device, name, output_size):
    length, kernel, stride, padding, dilation, ceil_mode = GEOMETRIES[name]
    x = torch.randn(3, 4, length, dtype=torch.float64, device=device)
    values, indices = F.max_pool1d(x.cpu(), kernel, stride, padding, dilation, ceil_mode,
                                   return_indices=True)
    step = stride or kernel
    largest = ((values.shape[-1] - 1) * step - 2 * padding + kernel + step - 1,)
    size = {None: None, "full shape": x.shape, "largest": largest}[output_size]
    values = values.to(device).requires_grad_()
    with single_threaded():
        expected = F.max_unpool1d(values.cpu(), indices, kernel, stride, padding, size)
    got = poolx.max_unpool1d(values, indices.to(device), kernel, stride, padding, size)
    assert_identical(got, expected, f"unpool of {name}, output_size={output_size}")
    grad_out = torch.randn_like(expected)
    (grad,) = torch.autograd.grad(got, values, grad_out.to(device))
    assert_identical(grad, grad_out.gather(-1, indices), f"unpool gradient of {name}")


@pytest.mark.parametrize("bad", [8, -1])
def test_unpool1d_rejects_an_index_outside_the_signal(bad):
    values, indices = F.max_pool1d(torch.randn(2, 3, 8), 2, return_indices=True)
    indices[1, 2, 3] = bad
    with pytest.raises(RuntimeError):
        F.max_unpool1d(values, indices, 2)
    with raises_bad_indices(f"max_unpool1d: Found an invalid max index: {bad} (output volumes "
                            "are of size 8)"):
        poolx.max_unpool1d(values, indices, 2)


@pytest.mark.parametrize("bad", [3, 200, 255])
def test_a_hostile_argmax_raises_in_every_1d_tool(bad):
    x = torch.randn(2, 3, 12)
    values, argmax = poolx.max_pool1d_with_argmax(x, 3, 2, 1)
    argmax[1, 2, 4] = bad
    calls = [
        lambda: poolx.max_pool1d_backward(torch.ones_like(values), argmax, x.shape, 3, 2, 1),
        lambda: poolx.max_unpool1d_argmax(values, argmax, x.shape, 3, 2, 1),
        lambda: poolx.argmax_to_indices1d(argmax, x.shape, 3, 2, 1),
        lambda: poolx.argmax_to_mask1d(argmax, (12,), 3, 2, 1),
    ]
    for call, name in zip(calls, ["max_pool1d_backward", "max_unpool1d_argmax",
                                  "argmax_to_indices1d", "argmax_to_mask1d"]):
        with raises_bad_argmax(f"^{name}: argmax\\[1, 2, 4\\] = {bad} names no tap of its "
                               r"window of 3 inside the signal of length 12 \(stride 2, padding "
                               r"1, dilation 1\); an argmax must come from max_pool1d_with_argmax"):
            call()


def test_1d_tools_reject_bad_arguments_in_1d_terms():
    x = torch.randn(2, 3, 12)
    values, argmax = poolx.max_pool1d_with_argmax(x, 3, 2, 1)
    grad = torch.ones_like(values)
    tools = {
        "max_pool1d_backward": lambda g, a, *w: poolx.max_pool1d_backward(g, a, x.shape, *w),
        "max_unpool1d_argmax": lambda g, a, *w: poolx.max_unpool1d_argmax(g, a, (12,), *w),
        "argmax_to_indices1d": lambda g, a, *w: poolx.argmax_to_indices1d(a, x.shape, *w),
        "argmax_to_mask1d": lambda g, a, *w: poolx.argmax_to_mask1d(a, (12,), *w),
    }
    bad_calls = {  # (grad or values, argmax, window): the message after the tool's name
        "argmax must hold the 6 windows of a signal of length 12, as \\(C, 6\\) or "
        "\\(N, C, 6\\), but got argmax.shape=\\[2, 3, 5\\]": (grad, argmax[..., 1:], (3, 2, 1)),
        "argmax must have dtype torch.uint8 for a window of 3 taps, but got "
        "argmax.dtype=torch.int64": (grad, argmax.long(), (3, 2, 1)),
        "kernel_size must be greater than zero, but got 0": (grad, argmax, (0,)),
        "stride must be greater than zero, but got 0": (grad, argmax, (3, 0)),
        "padding should be at most half of kernel size, but got padding=2 and kernel_size=3":
            (grad, argmax, (3, 2, 2)),
        "Invalid computed output size: -1": (grad, argmax, (14, 1)),
    }
    for name, tool in tools.items():
        for message, (g, a, window) in bad_calls.items():
            with pytest.raises(RuntimeError, match=f"^{name}:? {message}"):
                tool(g, a, *window)
    for name in ("max_pool1d_backward", "max_unpool1d_argmax"):
        pooled = "grad_output" if name == "max_pool1d_backward" else "input"
        with pytest.raises(RuntimeError, match=f"^{name}: argmax must have the shape "
                                               f"\\[2, 3, 6\\] of {pooled}, but got "
                                               f"argmax.shape=\\[1, 3, 6\\]"):
            tools[name](grad, argmax[:1], 3, 2, 1)
        with pytest.raises(RuntimeError, match=f"^{name}: {pooled} must hold the 6 windows .* "
                                               f"but got {pooled}.shape=\\[2, 3, 7\\]"):
            tools[name](torch.ones(2, 3, 7), argmax, 3, 2, 1)


@pytest.mark.parametrize("size, error", [((0,), RuntimeError), ((2, 3, -3), RuntimeError),
                                         ((2**70,), RuntimeError), ((12.5,), TypeError),
                                         (("a",), TypeError), (12, TypeError),
                                         ([2, 2, 12], RuntimeError)], ids=str)
def test_1d_tools_reject_bad_sizes_naming_them(size, error):
    x = torch.randn(2, 3, 12)
    values, argmax = poolx.max_pool1d_with_argmax(x, 2)
    with pytest.raises(error, match="^max_pool1d_backward: input_size must"):
        poolx.max_pool1d_backward(torch.ones_like(values), argmax, size, 2)
    with pytest.raises(error, match="^max_unpool1d_argmax: output_size must"):
        poolx.max_unpool1d_argmax(values, argmax, size, 2)

INVALID_CALLS = {
    "kernel of two ints": ((2, 3, 10), dict(kernel_size=(2, 2))),
    "kernel 0": ((2, 3, 10), dict(kernel_size=0)),
    "stride 0": ((2, 3, 10), dict(kernel_size=2, stride=0)),
    "padding above half the kernel": ((2, 3, 10), dict(kernel_size=3, padding=2)),
    "negative padding": ((2, 3, 10), dict(kernel_size=3, padding=-1)),
    "dilation 0": ((2, 3, 10), dict(kernel_size=3, dilation=0)),
    "window longer than the signal": ((2, 3, 10), dict(kernel_size=11)),
    "empty signal": ((3, 0), dict(kernel_size=1)),
    "no channels": ((2, 0, 4), dict(kernel_size=1)),
    "1-D input": ((5,), dict(kernel_size=1)),
    "4-D input": ((1, 2, 3, 4), dict(kernel_size=1)),
    "float kernel": ((2, 3, 10), dict(kernel_size=2.0)),
    "kernel beyond int64": ((2, 3, 10), dict(kernel_size=(2**70,))),
    "stride beyond int64": ((2, 3, 10), dict(kernel_size=2, stride=[2**64])),
    "padding beyond int64": ((2, 3, 10), dict(kernel_size=2, padding=(-(2**63) - 1,))),
    "dilation beyond int64": ((2, 3, 10), dict(kernel_size=2, dilation=2**63)),
}


@pytest.mark.parametrize("return_indices", [False, True])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", INVALID_CALLS)
def test_invalid_calls_raise_as_torch(name, requires_grad, return_indices):
    shape, kwargs = INVALID_CALLS[name]
    x = torch.randn(shape, requires_grad=requires_grad)
    with pytest.raises(Exception) as expected:
        F.max_pool1d(x, **kwargs, return_indices=return_indices)
    raises_like(expected.value,
                lambda: poolx.max_pool1d(x, **kwargs, return_indices=return_indices))


def test_empty_batch_pools_to_an_empty_batch():
    x = torch.randn(0, 3, 9, requires_grad=True)
    values, indices = poolx.max_pool1d(x, 3, 2, return_indices=True)
    assert values.shape == indices.shape == (0, 3, 4)
    values.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("output_size", [(3,), (30,), (2, 16), [2, 3, 5], (2, 3, 16.0)])
def test_unpool1d_rejects_output_sizes_as_torch(output_size):
    values, indices = F.max_pool1d(torch.randn(2, 3, 16), 2, return_indices=True)
    with pytest.raises(Exception) as expected:
        F.max_unpool1d(values, indices, 2, output_size=output_size)
    raises_like(expected.value,
                lambda: poolx.max_unpool1d(values, indices, 2, output_size=output_size))


@pytest.mark.parametrize("window", [dict(kernel_size=2**31, ceil_mode=True),
                                    dict(kernel_size=1, stride=[2**31]),
                                    dict(kernel_size=2, stride=2**62, return_indices=True),
                                    dict(kernel_size=1, dilation=(2**31,))], ids=str)
def test_windows_beyond_poolx_bound_raise_in_1d_terms(window):
    """Windows that torch may pool but poolx bounds (README: limits) raise
    naming the 1-D call and its arguments, not the 2-D view it pools."""
    x = torch.randn(3, 3, 2)
    k, s, d = (window.get(n) for n in ("kernel_size", "stride", "dilation"))
    s = k if s is None else (s if isinstance(s, int) else s[0])
    d = 1 if d is None else d[0]
    with pytest.raises(RuntimeError, match=f"^max_pool1d\\(\\) kernel_size, stride and dilation "
                                           f"must be below 2\\^31, but got kernel_size={k}, "
                                           f"stride={s}, dilation={d}$"):
        poolx.max_pool1d(x, **window)


@pytest.mark.parametrize("shape, output_size", [((1, 1), 2**31), ((0, 2, 3), (2**62,))], ids=str)
def test_adaptive_sizes_beyond_poolx_bound_raise_in_1d_terms(shape, output_size):
    length = output_size if isinstance(output_size, int) else output_size[0]
    with pytest.raises(RuntimeError, match=f"^adaptive_max_pool1d\\(\\): input and output sizes "
                                           f"must be below 2\\^31, but got input size "
                                           f"{shape[-1]} and output_size={length}$"):
        poolx.adaptive_max_pool1d(torch.randn(shape), output_size, return_indices=True)
