"""The backward of volumes whose windows overlap, pad or dilate: in
channels_last_3d of many channels where an input lies in few windows, each
input pixel gathers its gradient from the windows covering it (the 2-D
channels_last gather over depth-folded rows); otherwise, and in NCDHW, the
2-D plane scatter over depth-folded rows of windows. The argmax is checked
a row of windows at a time, the edge windows tap by tap."""

import pytest
import torch
import torch.nn.functional as F

import poolx

from fast_path_cases import planted_grad, planted_input
from reference import assert_identical, raises_bad_argmax, torch_pool_grad

# (D, H, W), kernel_size, stride, padding, dilation, ceil_mode: I3D's
# 3x3x3 stride 2 and stride 1 (27 windows an input: the plane scatter) and its
# 1x3x3 stride (1, 2, 2) (planes), windows that overlap along one axis
# only, dilation, a window cut by ceil_mode
GEOMETRIES = {
    "3x3x3 s2 p1": ((7, 9, 8), 3, 2, 1, 1, False),
    "3x3x3 s1 p1": ((4, 5, 6), 3, 1, 1, 1, False),
    "1x3x3 s(1,2,2) p(0,1,1)": ((3, 9, 7), (1, 3, 3), (1, 2, 2), (0, 1, 1), 1, False),
    "2x2x2 s1": ((4, 5, 6), 2, 1, 0, 1, False),
    "3x2x2 s(2,2,2) ceil": ((8, 7, 9), (3, 2, 2), 2, 0, 1, True),
    "2x3x2 s(1,2,2) p1 d(2,1,2)": ((6, 5, 9), (2, 3, 2), (1, 2, 2), 1, (2, 1, 2), False),
}
# whole vectors of channels (the fewest that gather), a partial last one,
# and pixels of 64 channels (the plane scatter)
CHANNELS = [128, 136, 64]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def volume(shape, dtype, channels_last=True):
    """Planted ties, NaN and -inf (fast_path_cases), channels_last_3d or NCDHW."""
    x = planted_input(shape, dtype, False)
    return x.contiguous(memory_format=torch.channels_last_3d) if channels_last else x


def check_gradients(x, args, what):
    """poolx's gradient of max_pool3d(x, *args) is torch's, by autograd
    (both save modes) and by the manual backward."""
    values = F.max_pool3d(x, *args)
    grad_out = planted_grad(values.shape, x.dtype, torch.empty(0))  # -0.0 planted
    if not x.is_contiguous():  # channels_last_3d, as autograd would hand it
        grad_out = grad_out.contiguous(memory_format=torch.channels_last_3d)
    expected = torch_pool_grad(F.max_pool3d, x, args, grad_out)
    for save in ("argmax", "recompute"):
        xg = x.detach().requires_grad_()
        (grad,) = torch.autograd.grad(poolx.max_pool3d(xg, *args, save=save), xg, grad_out)
        assert_identical(grad, expected, f"gradient of {what}, {save}", check_stride=False)
    _, argmax = poolx.max_pool3d_with_argmax(x, *args)
    grad = poolx.max_pool3d_backward(grad_out.contiguous(), argmax, x.shape, *args)
    assert_identical(grad, expected, f"manual backward of {what}", check_stride=False)


@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_channels_last_gradients_match_torch(name, dtype, channels):
    dhw, *args = GEOMETRIES[name]
    x = volume((2, channels, *dhw), dtype)
    check_gradients(x, args, f"{name}, {dtype}, C={channels}")


# NCDHW beyond those: planes of over 4096 windows (added row by row, not as
# one flat run)
NCDHW_GEOMETRIES = dict(GEOMETRIES, **{
    "3x3x3 s1 p1, 6400 windows": ((16, 20, 20), 3, 1, 1, 1, False),
})


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize("name", NCDHW_GEOMETRIES)
def test_ncdhw_gradients_match_torch(name, dtype):
    dhw, *args = NCDHW_GEOMETRIES[name]
    check_gradients(volume((2, 3, *dhw), dtype, channels_last=False), args, f"{name}, {dtype}")


# (channels_last, channels): the gather, the plane scatter of pixels, of planes
LAYOUTS = [(True, 128), (True, 64), (False, 128)]
LAYOUT_IDS = ["gather", "channels_last scatter", "ncdhw scatter"]


@pytest.mark.parametrize("channels_last, channels", LAYOUTS, ids=LAYOUT_IDS)
def test_windows_with_no_tap_in_depth_route_nothing(channels_last, channels):
    # 2 slices, padded by 1, kernel 2 dilated by 3: the one window depth has
    # taps at slices -1 and 2, neither inside. torch gives -inf with
    # indices outside the volume, and its backward then aborts.
    x = volume((2, channels, 2, 6, 7), torch.float32, channels_last)
    args = ((2, 3, 3), (1, 2, 2), 1, (3, 1, 1))  # the gather: 18 taps, 4 strides
    assert_identical(poolx.max_pool3d(x, *args), F.max_pool3d(x, *args), "values",
                     check_stride=False)
    values, argmax = poolx.max_pool3d_with_argmax(x, *args)
    grad_out = torch.randn_like(values)
    zero = torch.zeros_like(x)
    assert_identical(poolx.max_pool3d_backward(grad_out, argmax, x.shape, *args), zero,
                     "manual backward", check_stride=False)
    for save in ("argmax", "recompute"):
        xg = x.detach().requires_grad_()
        (grad,) = torch.autograd.grad(poolx.max_pool3d(xg, *args, save=save), xg, grad_out)
        assert_identical(grad, zero, f"gradient, {save}", check_stride=False)


# (where, value): a padded window's tap outside the input along each axis,
# and a value past every window
HOSTILE = [
    ("first slice of a padded depth", (0, 1, 1), 0),
    ("first row of a padded height", (1, 0, 1), 3 * 3 + 0),
    ("first column of a padded width", (1, 1, 0), 3 * 3 + 3),
    ("last window, past the input", (3, 4, 3), 26),
    ("inside, past the taps", (1, 1, 1), 27),
    ("255", (2, 2, 2), 255),
]


@pytest.mark.parametrize("channels_last, channels", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("where, at, value", HOSTILE)
def test_hostile_argmax_raises(where, at, value, channels_last, channels):
    # 7x9x8 pooled 3x3x3 s2 p1: the first window along each axis starts in
    # the padding; window (3, 4, 3) starts at (5, 7, 5), so its tap (2, 2, 2)
    # lies at (7, 9, 7), past the input along D and H
    x = volume((1, channels, 7, 9, 8), torch.float32, channels_last)
    values, argmax = poolx.max_pool3d_with_argmax(x, 3, 2, 1)
    bad = argmax.clone()
    bad[0, 37][at] = value
    index = ", ".join(str(i) for i in (0, 37, *at))
    with raises_bad_argmax(rf"argmax\[{index}\]"):
        poolx.max_pool3d_backward(values, bad, x.shape, 3, 2, 1)
    # the good argmax still passes, its gradient torch's
    grad = poolx.max_pool3d_backward(values, argmax, x.shape, 3, 2, 1)
    assert_identical(grad, torch_pool_grad(F.max_pool3d, x, (3, 2, 1), values),
                     "gradient after the bad argmax", check_stride=False)
