"""3-D pooling and unpooling against torch's max_pool3d and max_unpool3d:
values, indices, gradients and errors in every layout of a volume, and the
3-D argmax tools against the indices torch returns."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.modules.utils import _triple

import poolx

from inputs import FLOAT_DTYPES, INT_DTYPES, random_values, upstream_grad
from reference import (
    assert_identical,
    raises_bad_argmax,
    raises_bad_indices,
    raises_like,
    single_threaded,
    torch_pool_grad,
)

# (D, H, W), kernel_size, stride, padding, dilation, ceil_mode
GEOMETRIES = {
    "2x2x2 tiled (3-D U-Net)": ((6, 8, 10), 2, None, 0, 1, False),
    "2x2x2 odd sizes": ((5, 7, 9), 2, None, 0, 1, False),
    "2x1x4 tiled (width 4)": ((5, 3, 17), (2, 1, 4), None, 0, 1, False),
    "1x2x2 (video)": ((4, 8, 6), (1, 2, 2), (1, 2, 2), 0, 1, False),
    "1x2x2 depth stride 2": ((5, 6, 6), (1, 2, 2), (2, 2, 2), 0, 1, False),
    # one slice deep, which return_indices pools as a volume where a fast path
    # takes it whole, else (stride 3 along W in NCDHW, float64) as planes
    "1x2x3 s(1,2,3)": ((4, 8, 9), (1, 2, 3), (1, 2, 3), 0, 1, False),
    "3x3x3 s2 p1": ((7, 9, 8), 3, 2, 1, 1, False),
    "3x3x3 s2 p1 ceil": ((8, 9, 10), 3, 2, 1, 1, True),
    "2x3x3 s1 p(1,1,1) d(2,1,2)": ((7, 6, 9), (2, 3, 3), 1, (1, 1, 1), (2, 1, 2), False),
    "3x1x2 s(2,1,3) ceil": ((9, 5, 11), (3, 1, 2), (2, 1, 3), 0, 1, True),
    "1x1x1": ((3, 4, 5), 1, 1, 0, 1, False),
    "kernel = input": ((3, 4, 5), (3, 4, 5), None, 0, 1, False),
    "7x7x7 (343 taps, int32 argmax)": ((9, 8, 10), 7, 2, 3, 1, False),
}


def layouts(n, c, dhw, make):
    """(name, volume): every layout a (N, C, D, H, W) tensor comes in."""
    d, h, w = dhw
    cl = torch.channels_last_3d
    yield "contiguous", make((n, c, d, h, w))
    yield "channels_last_3d", make((n, c, d, h, w)).contiguous(memory_format=cl)
    yield "strided view", make((n, c, d, 2 * h, w))[:, :, :, ::2]
    yield "transposed view", make((n, c, w, h, d)).transpose(2, 4)
    yield "unbatched (C, D, H, W)", make((c, d, h, w))
    yield "batch 0", make((0, c, d, h, w))


def torch_grad(x, args, grad_out):
    return torch_pool_grad(F.max_pool3d, x, args, grad_out)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_pool3d_matches_torch(device, name, dtype):
    dhw, *args = GEOMETRIES[name]
    make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
    for layout, x in layouts(2, 3, dhw, make):
        what = f"{name}, {dtype}, {layout}"
        with single_threaded():  # contiguous: see test_all_lowest_windows_name_their_first_tap
            values, indices = F.max_pool3d(x.cpu().contiguous(), *args, return_indices=True)
        got_values, got_indices = poolx.max_pool3d(x, *args, return_indices=True)
        assert_identical(got_values, values, f"values of {what}", check_stride=False)
        assert_identical(got_indices, indices, f"indices of {what}", check_stride=False)
        assert_identical(poolx.max_pool3d(x, *args), values, f"inference of {what}",
                         check_stride=False)
        grad_out = upstream_grad(values).to(device)
        expected_grad = torch_grad(x, args, grad_out)
        for save in ("argmax", "recompute"):
            xg = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(poolx.max_pool3d(xg, *args, save=save), xg, grad_out)
            assert_identical(grad, expected_grad, f"gradient of {what}, save={save}",
                             check_stride=False)


def test_all_lowest_windows_name_their_first_tap():
    """A window of -inf only selects its first tap, as torch's contiguous
    kernel does; torch's channels_last_3d CPU kernel names the tap of its
    first depth slice there instead (an index into the wrong slice), which
    poolx does not copy: the result does not depend on the layout."""
    x = torch.full((1, 2, 3, 2, 4), float("-inf"))
    _, expected = F.max_pool3d(x, 2, 1, return_indices=True)
    assert expected[0, 0, 1, 0].tolist() == [8, 9, 10]
    for layout in (torch.contiguous_format, torch.channels_last_3d):
        _, indices = poolx.max_pool3d(x.contiguous(memory_format=layout), 2, 1,
                                      return_indices=True)
        assert_identical(indices, expected, f"indices in {layout}", check_stride=False)
    _, torch_cl = F.max_pool3d(x.contiguous(memory_format=torch.channels_last_3d), 2, 1,
                               return_indices=True)
    assert torch_cl[0, 0, 1, 0].tolist() == [0, 1, 2]  # torch's, which poolx does not copy


@pytest.mark.parametrize("layout", ["contiguous", "channels_last_3d", "unbatched",
                                    "unbatched channels_last_3d", "unbatched strided"])
@pytest.mark.parametrize("kernel", [2, (5, 2, 3)])
def test_results_keep_the_layout_of_torch(layout, kernel):
    """torch lays an unbatched (C, D, H, W) volume that only channels_last_3d
    fits as a batch of one (and other unbatched ones contiguous)."""
    x = torch.randn(1 if "unbatched" in layout else 2, 16, 6, 6, 7)
    if "channels_last_3d" in layout or "strided" in layout:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    if "unbatched" in layout:
        x = x[0, ::2] if "strided" in layout else x[0]
    values, indices = F.max_pool3d(x, kernel, return_indices=True)
    got_values, got_indices = poolx.max_pool3d(x, kernel, return_indices=True)
    assert got_values.stride() == values.stride() and got_indices.stride() == indices.stride()
    assert torch.equal(got_values, values) and torch.equal(got_indices, indices)
    assert poolx.max_pool3d(x, kernel).stride() == values.stride()
    xg = x.detach().requires_grad_()
    poolx.max_pool3d(xg, kernel).sum().backward()
    xt = x.detach().requires_grad_()
    F.max_pool3d(xt, kernel).sum().backward()
    assert xg.grad.stride() == xt.grad.stride()


@pytest.mark.parametrize("channels", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_channels_last_3d_of_few_channels(device, channels, dtype):
    """Pixels of one or two channels go along rows, as NCDHW planes do."""
    x = random_values((2, channels, 6, 8, 18), dtype, device)
    x = x.contiguous(memory_format=torch.channels_last_3d)
    for args in ((2,), ((2, 1, 2),), ((1, 2, 2),), (3, 2, 1)):
        with single_threaded():
            values, indices = F.max_pool3d(x.cpu().contiguous(), *args, return_indices=True)
        got_values, got_indices = poolx.max_pool3d(x, *args, return_indices=True)
        assert_identical(got_values, values, f"values {args}", check_stride=False)
        assert_identical(got_indices, indices, f"indices {args}", check_stride=False)
        grad_out = upstream_grad(values).to(device)
        xg = x.detach().requires_grad_()
        (grad,) = torch.autograd.grad(poolx.max_pool3d(xg, *args), xg, grad_out)
        assert_identical(grad, torch_grad(x, args, grad_out), f"gradient {args}",
                         check_stride=False)
        if len(args) == 1:  # tiled: torch's unpool by indices is the reference
            _, argmax = poolx.max_pool3d_with_argmax(x, *args)
            expected = F.max_unpool3d(values, indices, args[0], output_size=x.shape[-3:])
            assert_identical(poolx.max_unpool3d_argmax(got_values, argmax, x.shape, *args),
                             expected, f"unpool by argmax {args}", check_stride=False)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_volumes(device, dtype):
    x = random_values((2, 3, 5, 6, 7), dtype, device)
    if dtype != torch.uint8:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    with single_threaded():
        values, indices = F.max_pool3d(x.cpu().contiguous(), 2, 1, 1, return_indices=True)
    got_values, got_indices = poolx.max_pool3d(x, 2, 1, 1, return_indices=True)
    assert_identical(got_values, values, f"{dtype} values", check_stride=False)
    assert_identical(got_indices, indices, f"{dtype} indices", check_stride=False)


@pytest.mark.parametrize("name", GEOMETRIES)
def test_argmax_tools_agree_with_torch_indices(device, name):
    dhw, *args = GEOMETRIES[name]
    x = random_values((2, 3, *dhw), torch.float32, device)
    with single_threaded():
        _, indices = F.max_pool3d(x.cpu(), *args, return_indices=True)
    values, argmax = poolx.max_pool3d_with_argmax(x, *args)
    taps = torch.tensor(args[0]).prod() if isinstance(args[0], tuple) else args[0] ** 3
    assert argmax.dtype == (torch.uint8 if taps <= 256 else torch.int32)
    for size in (dhw, x.shape):
        assert_identical(poolx.argmax_to_indices3d(argmax, size, *args).cpu(), indices,
                         f"indices of {name}")
    mask = torch.zeros(x.numel() // dhw[0] // dhw[1] // dhw[2], dhw[0] * dhw[1] * dhw[2],
                       dtype=torch.bool)
    mask.scatter_(1, indices.flatten(2).flatten(0, 1), True)
    assert_identical(poolx.argmax_to_mask3d(argmax, dhw, *args).cpu(), mask.view(x.shape),
                     f"mask of {name}")
    # unpool by argmax: the last window in memory order wins, as in torch's
    # single-threaded unpool by the same indices, where torch's output size
    # rule (no dilation) takes the input size
    got = poolx.max_unpool3d_argmax(values, argmax, dhw, *args)
    try:
        kernel = _triple(args[0])
        stride = kernel if args[1] is None else _triple(args[1])
        F._unpool_output_size(values, kernel, stride, _triple(args[2]), dhw)
    except ValueError:
        return
    with single_threaded():
        expected = F.max_unpool3d(values.cpu(), indices, args[0], args[1], args[2],
                                  output_size=dhw)
    assert_identical(got.cpu(), expected, f"unpool by argmax of {name}")
    by_indices = poolx.max_unpool3d(values, indices.to(device), args[0], args[1], args[2],
                                    output_size=dhw)
    assert_identical(by_indices, got, f"unpool by indices of {name}")


@pytest.mark.parametrize("layout", ["contiguous", "channels_last_3d", "unbatched"])
def test_unpool3d_matches_torch(device, layout):
    x = random_values((2, 4, 6, 8, 10), torch.float32, device)
    if layout == "channels_last_3d":
        x = x.contiguous(memory_format=torch.channels_last_3d)
    if layout == "unbatched":
        x = x[0]
    values, indices = F.max_pool3d(x.cpu(), 2, return_indices=True)
    for output_size in (None, x.shape[-3:], x.shape):
        unpool = lambda: poolx.max_unpool3d(  # noqa: E731
            values.to(device), indices.to(device), 2, output_size=output_size)
        try:
            expected = F.max_unpool3d(values, indices, 2, output_size=output_size)
        except ValueError as error:  # a full shape of an unbatched tensor
            raises_like(error, unpool)
            continue
        assert_identical(unpool().cpu(), expected, f"unpool {layout} to {output_size}",
                         check_stride=False)
    vg = values.to(device).requires_grad_()
    grad_out = upstream_grad(x)
    (grad,) = torch.autograd.grad(poolx.max_unpool3d(vg, indices.to(device), 2), vg, grad_out)
    vr = values.clone().requires_grad_()
    (expected_grad,) = torch.autograd.grad(F.max_unpool3d(vr, indices, 2), vr, grad_out.cpu())
    assert_identical(grad.cpu(), expected_grad, f"unpool gradient {layout}", check_stride=False)


def test_gradcheck_and_double_backward():
    x = torch.randperm(2 * 2 * 5 * 6 * 5, dtype=torch.float64).reshape(2, 2, 5, 6, 5)
    x.requires_grad_()
    args = ((2, 3, 2), (1, 2, 2), (1, 1, 0), 1, True)
    assert torch.autograd.gradcheck(lambda t: poolx.max_pool3d(t, *args), (x,))
    assert torch.autograd.gradgradcheck(lambda t: poolx.max_pool3d(t, *args), (x,))
    values, argmax = poolx.max_pool3d_with_argmax(x, *args)
    g = torch.randn_like(values, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: poolx.max_pool3d_backward(t, argmax, x.shape, *args), (g,))


HOSTILE = [
    ("past the window", 8),
    ("255", 255),
]


@pytest.mark.parametrize("what, value", HOSTILE)
def test_bad_argmax_raises(device, what, value):
    x = torch.randn(1, 2, 4, 4, 4, device=device)
    values, argmax = poolx.max_pool3d_with_argmax(x, 2)
    bad = argmax.clone()
    bad[0, 1, 1, 0, 1] = value
    message = r"max_pool3d_backward: argmax\[0, 1, 1, 0, 1\] = .* 2x2x2 window"
    with raises_bad_argmax(message):
        poolx.max_pool3d_backward(values, bad, x.shape, 2)
    for tool in (poolx.argmax_to_indices3d, poolx.argmax_to_mask3d):
        with raises_bad_argmax(r"argmax\[0, 1, 1, 0, 1\]"):
            tool(bad, x.shape, 2)
    with raises_bad_argmax(r"argmax\[0, 1, 1, 0, 1\]"):
        poolx.max_unpool3d_argmax(values, bad, x.shape, 2)


def test_bad_sizes_raise_naming_the_tool():
    values, argmax = poolx.max_pool3d_with_argmax(torch.randn(1, 2, 4, 4, 4), 2)
    tools = {
        "max_pool3d_backward": lambda size: poolx.max_pool3d_backward(values, argmax, size, 2),
        "argmax_to_indices3d": lambda size: poolx.argmax_to_indices3d(argmax, size, 2),
        "argmax_to_mask3d": lambda size: poolx.argmax_to_mask3d(argmax, size, 2),
        "max_unpool3d_argmax": lambda size: poolx.max_unpool3d_argmax(values, argmax, size, 2),
    }
    for name, call in tools.items():
        argument = "output_size" if name == "max_unpool3d_argmax" else "input_size"
        with pytest.raises(RuntimeError, match=rf"^{name}: {argument} must be the input's full "
                                               rf"shape .* or its \(D, H, W\), but got "):
            call((4, 4))
        with pytest.raises(TypeError, match=rf"^{name}: {argument} must be .* as ints"):
            call((4.0, 4, 4))


def test_bad_indices_raise(device):
    x = torch.randn(1, 2, 4, 4, 4, device=device)
    values, indices = F.max_pool3d(x.cpu(), 2, return_indices=True)
    indices[0, 1, 1, 1, 0] = 64
    with raises_bad_indices("max_unpool3d: Found an invalid max index: 64 (output volumes are "
                            "of size 4x4x4)"):
        poolx.max_unpool3d(values.to(device), indices.to(device), 2)


BAD_CALLS = {
    "two-int kernel": ((2, 3, 4, 5, 6), dict(kernel_size=(2, 2))),
    "two-int stride": ((2, 3, 4, 5, 6), dict(kernel_size=2, stride=(1, 2))),
    "two-int padding": ((2, 3, 4, 5, 6), dict(kernel_size=2, padding=(1, 1))),
    "two-int dilation": ((2, 3, 4, 5, 6), dict(kernel_size=2, dilation=(1, 1))),
    "zero kernel": ((2, 3, 4, 5, 6), dict(kernel_size=0)),
    "negative kernel": ((2, 3, 4, 5, 6), dict(kernel_size=(2, -1, 2))),
    "zero stride": ((2, 3, 4, 5, 6), dict(kernel_size=2, stride=0)),
    "negative stride": ((2, 3, 4, 5, 6), dict(kernel_size=2, stride=(1, -1, 1))),
    "zero dilation": ((2, 3, 4, 5, 6), dict(kernel_size=2, dilation=0)),
    "padding over half": ((2, 3, 4, 5, 6), dict(kernel_size=(3, 3, 2), padding=(2, 1, 1))),
    "negative padding": ((2, 3, 4, 5, 6), dict(kernel_size=2, padding=-1)),
    "output too small": ((2, 3, 4, 5, 6), dict(kernel_size=7)),
    "3-D input": ((3, 4, 5), dict(kernel_size=2)),
    "6-D input": ((1, 2, 3, 4, 5, 6), dict(kernel_size=2)),
    "zero channels": ((2, 0, 4, 5, 6), dict(kernel_size=2)),
    "zero depth": ((2, 3, 0, 5, 6), dict(kernel_size=2)),
    "kernel beyond int64": ((2, 3, 4, 5, 6), dict(kernel_size=2**64)),
    "stride beyond int64 in a tuple": ((2, 3, 4, 5, 6), dict(kernel_size=2, stride=(1, 2**63, 1))),
}


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_calls_raise_as_torch(name):
    shape, kwargs = BAD_CALLS[name]
    x = torch.randn(shape)
    with pytest.raises(Exception) as expected:
        F.max_pool3d(x, **kwargs)
    for return_indices in (False, True):
        raises_like(expected.value,
                    lambda: poolx.max_pool3d(x, **kwargs, return_indices=return_indices))
    raises_like(expected.value, lambda: poolx.max_pool3d_with_argmax(x, **kwargs))
    raises_like(expected.value, lambda: poolx.max_pool3d(x.requires_grad_(), **kwargs))


def test_batch_zero_is_allowed_as_in_torch():
    x = torch.randn(0, 3, 4, 4, 4)
    assert poolx.max_pool3d(x, 2).shape == F.max_pool3d(x, 2).shape == (0, 3, 2, 2, 2)
