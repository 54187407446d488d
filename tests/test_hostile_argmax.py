"""Every op that takes an argmax checks its values first: a value must name a
tap of its window that lies inside the input (any tap for a window with none
inside). Otherwise it raises IndexError naming the op, the position and the
value, on every path: tiled and general, both layouts, every dtype, both argmax
widths. A hostile value never reaches memory (tools/sanitize.sh runs these
under ASan), and any valid argmax, not only the forward's, is accepted."""

import random
import re

import pytest
import torch
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

import poolx
from poolx import _geometry as geo

from reference import CUDA_EMULATION, decode_argmax, raises_bad_argmax, routed_grad

# name: (shape, kernel_size, stride, padding, dilation, ceil_mode)
GEOMETRIES = {
    "tiled 2x2, 16 channels": ((2, 16, 8, 10), 2, 2, 0, 1, False),
    "tiled 2x2, 2 channels": ((2, 2, 8, 34), 2, 2, 0, 1, False),
    "tiled 2x2, ceil mode": ((2, 3, 9, 11), 2, 2, 0, 1, True),
    # the CUDA kernels' vector routes: NCHW rows of 8 windows, channels_last
    # 16 channels in partial (ceil mode) windows
    "tiled 2x2, rows of 8 windows": ((2, 3, 6, 16), 2, 2, 0, 1, False),
    "tiled 2x2, ceil mode, 16 channels": ((2, 16, 9, 11), 2, 2, 0, 1, True),
    "overlap 3/2/1 (resnet stem)": ((2, 3, 11, 12), 3, 2, 1, 1, False),
    # the CUDA channels_last gathers of any geometry: 16 channels per vector, or 2
    "overlap 3/2/1, 16 channels": ((2, 16, 11, 12), 3, 2, 1, 1, False),
    "dilated 3/1/1/2, 16 channels": ((1, 16, 9, 10), 3, 1, 1, 2, False),
    "overlap 2/1/1": ((2, 2, 5, 17), 2, 1, 1, 1, False),
    "dilated 3/1/1/2": ((2, 3, 9, 10), 3, 1, 1, 2, False),
    "empty windows": ((1, 2, 2, 5), 2, 1, 1, 3, False),
    "5x7 window, padding 2x3, ceil mode": ((2, 18, 13, 17), (5, 7), (2, 3), (2, 3), 1, True),
    "int32 argmax (17x16 window)": ((1, 2, 20, 19), (17, 16), 1, 0, 1, False),
    # a 1x1 input reads as NCHW in either format, its pooled 2x1 output as channels_last
    "1x1 input, 2x1 output": ((1, 3, 1, 1), (2, 1), 1, (1, 0), 1, False),
}
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def pooled(name, dtype, channels_last):
    shape, *pool = GEOMETRIES[name]
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    values, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    return x, pool, values, argmax


def tap_inside(pool, in_hw, out_hw):
    """Bool (out_h, out_w, taps): whether each tap of each window lies inside
    the input, computed from the pooling arithmetic alone."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geo.pool_params(*pool[:4])
    t = torch.arange(kh * kw)
    h = torch.arange(out_hw[0]).view(-1, 1, 1) * sh - ph + (t // kw) * dh
    w = torch.arange(out_hw[1]).view(1, -1, 1) * sw - pw + (t % kw) * dw
    return (h >= 0) & (h < in_hw[0]) & (w >= 0) & (w < in_hw[1])


def invalid_values(argmax, inside_taps):
    """Values no window may hold, and those this window may not (a tap in the padding)."""
    taps = inside_taps.numel()
    outside = [t for t in range(taps) if not inside_taps[t]] if inside_taps.any() else []
    wide = [-1, 2**31 - 1] if argmax.dtype == torch.int32 else [255]
    return [taps] + outside[:2] + [v for v in wide if v >= taps or v < 0]


def every_op(x, pool, values, argmax):
    grad = torch.ones_like(values) if values.is_floating_point() else None
    return {
        "max_pool2d_backward": lambda: poolx.max_pool2d_backward(grad, argmax, x.shape, *pool),
        "max_unpool2d_argmax": lambda: poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool),
        "argmax_to_mask": lambda: poolx.argmax_to_mask(argmax, x.shape, *pool),
        "argmax_to_indices": lambda: poolx.argmax_to_indices(argmax, x.shape, *pool),
        "gather_by_argmax": lambda: torch.ops.poolx.gather_by_argmax(x, argmax, *geo_args(pool)),
    }


def geo_args(pool):
    kernel, stride, padding, dilation = geo.pool_params(*pool[:4])
    return list(kernel), list(stride), list(padding), list(dilation), pool[4]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_a_hostile_argmax_raises_in_every_op(name, dtype, channels_last):
    x, pool, values, argmax = pooled(name, dtype, channels_last)
    inside = tap_inside(pool, x.shape[-2:], argmax.shape[-2:])
    rng = random.Random()
    for _ in range(3):
        pos = [rng.randrange(s) for s in argmax.shape]
        for bad in invalid_values(argmax, inside[pos[2], pos[3]]):
            hostile = argmax.clone()
            hostile[tuple(pos)] = bad
            where = f"argmax[{', '.join(map(str, pos))}] = {bad} names no tap"
            for op, call in every_op(x, pool, values, hostile).items():
                with raises_bad_argmax(re.escape(f"{op}: {where}")):
                    call()


@pytest.mark.skipif(CUDA_EMULATION, reason="the CUDA kernels assert on the device, naming no "
                    "position (the emulation build runs them)")
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_an_unbatched_argmax_names_its_own_position(channels_last):
    x, pool, values, argmax = pooled("tiled 2x2, 16 channels", torch.float32, channels_last)
    hostile = argmax[1].clone()
    hostile[5, 3, 4] = 7
    with pytest.raises(IndexError, match=re.escape("argmax[5, 3, 4] = 7 names no tap")):
        poolx.max_pool2d_backward(torch.ones_like(values[1]), hostile, x.shape[-2:], *pool)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", GEOMETRIES)
def test_any_valid_argmax_is_accepted(name, dtype, channels_last):
    """A random valid tap in every window (not the forward's): indices and the
    gradient follow it exactly, as decoded and summed by the reference."""
    x, pool, values, argmax = pooled(name, dtype, channels_last)
    inside = tap_inside(pool, x.shape[-2:], argmax.shape[-2:])
    weights = torch.where(inside.any(-1, keepdim=True), inside, True).double()
    weights = weights.expand(*argmax.shape, weights.shape[-1]).reshape(-1, weights.shape[-1])
    valid = torch.multinomial(weights, 1).view(argmax.shape).to(argmax.dtype)
    valid = valid.contiguous(memory_format=torch.channels_last) if channels_last else valid
    kernel, stride, padding, dilation, ceil_mode = pool
    module = poolx.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    indices = torch.where(inside.any(-1), decode_argmax(valid, x.shape[-2:], module), -1)
    if not (indices < 0).any():
        assert torch.equal(poolx.argmax_to_indices(valid, x.shape, *pool), indices)
    grad = torch.randn(values.shape, dtype=torch.float64).to(dtype)
    expected = routed_grad(grad, indices, x.shape[-2:])
    got = poolx.max_pool2d_backward(grad, valid, x.shape, *pool)
    torch.testing.assert_close(got, expected, rtol=0, atol=0, check_stride=False)
    # random values, so that where windows share a tap the last one must win
    mask, unpooled = unpooled_last_wins(grad, indices, x.shape)
    assert torch.equal(poolx.argmax_to_mask(valid, x.shape, *pool), mask)
    assert torch.equal(poolx.max_unpool2d_argmax(grad, valid, x.shape, *pool), unpooled)


def unpooled_last_wins(values, indices, shape):
    """Mask and unpool of each window's value at its index (-1: none), the last
    window in output row-major order winning an index that several select."""
    v = values.reshape(-1, values.shape[-2] * values.shape[-1])
    idx = indices.reshape(v.shape)
    plane = shape[-2] * shape[-1]
    window = torch.arange(v.shape[1]).expand_as(idx)
    inside = idx >= 0
    last = torch.full((v.shape[0], plane + 1), -1).scatter_reduce(
        1, torch.where(inside, idx, plane), torch.where(inside, window, -1), "amax")[:, :plane]
    unpooled = torch.where(last >= 0, v.gather(1, last.clamp(min=0)), 0).to(values.dtype)
    return (last >= 0).reshape(shape), unpooled.reshape(shape)


@st.composite
def any_argmax(draw):
    """A random valid geometry, layout and dtype, and argmax values drawn near and past
    the taps, so that some calls hold only valid values and others a few invalid ones."""
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ceil_mode = draw(st.booleans())
    h, w = draw(st.integers(1, 12)), draw(st.integers(1, 40))
    pool = ((kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode)
    try:
        out_hw = geo.pooled_hw((h, w), *pool)
    except (RuntimeError, ValueError):
        out_hw = (0, 0)
    assume(min(out_hw) > 0)
    channels = draw(st.sampled_from([1, 2, 3, 16, 17]))
    shape = (draw(st.integers(1, 2)), channels, h, w)
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, pool, out_hw, draw(st.booleans()), draw(st.booleans()), seed


@settings(deadline=None, derandomize=True, max_examples=1000)
@given(any_argmax())
def test_any_argmax_is_accepted_exactly_when_valid(case):
    """Random argmax values, most of them valid: every op raises exactly when one is not
    (per the pooling arithmetic), and otherwise gives the reference indices."""
    shape, pool, out_hw, channels_last, bfloat16, seed = case
    taps = pool[0][0] * pool[0][1]
    inside = tap_inside(pool, shape[-2:], out_hw)
    gen = torch.Generator().manual_seed(seed)
    # a valid tap per window, then a few values past the taps or in the padding
    weights = torch.where(inside.any(-1, keepdim=True), inside, True).double()
    weights = weights.expand(*shape[:2], *out_hw, taps).reshape(-1, taps)
    argmax = torch.multinomial(weights, 1, generator=gen).view(*shape[:2], *out_hw)
    spoiled = torch.rand(argmax.shape, generator=gen) < 0.01
    argmax = torch.where(spoiled, torch.randint(0, taps + 3, argmax.shape, generator=gen), argmax)
    argmax = argmax.to(torch.uint8)
    ok = inside.expand(*argmax.shape, taps).gather(-1, argmax.long().clamp(max=taps - 1)[..., None])
    valid = bool(((argmax.long() < taps) & (ok[..., 0] | ~inside.any(-1))).all())
    event("valid" if valid else "invalid")
    if channels_last:
        argmax = argmax.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(argmax.shape, generator=gen).to(torch.bfloat16 if bfloat16 else torch.float32)
    calls = {
        "backward": lambda: poolx.max_pool2d_backward(grad, argmax, shape, *pool),
        "unpool": lambda: poolx.max_unpool2d_argmax(grad, argmax, shape, *pool),
        "mask": lambda: poolx.argmax_to_mask(argmax, shape, *pool),
        "indices": lambda: poolx.argmax_to_indices(argmax, shape, *pool),
    }
    for name, call in calls.items():
        if valid:
            call()
        else:
            with raises_bad_argmax("names no tap"):
                call()
    if valid and inside.any(-1).all():
        kernel, stride, padding, dilation, ceil_mode = pool
        module = poolx.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
        expected = decode_argmax(argmax, shape[-2:], module)
        assert torch.equal(calls["indices"](), expected)
