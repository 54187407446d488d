"""Every op writes every element of its outputs, even into a reused block.

The CPU output cache hands a freed block back as it was: stale data, not the
zeros a fresh mapping had. Each op runs once, its outputs are overwritten
with a byte pattern no op writes (0x55: no NaN, no valid argmax or index,
not a canonical bool) and freed; the second run must get those blocks back
and equal torch bit for bit. Outputs are over 1 MiB, so the cache serves them.
"""

import pytest
import torch
from inputs import Pool
from reference import single_threaded, torch_grad
from test_output_cache import CACHE_ON, MiB
from unpool_cases import planted, values_like

import poolx
from poolx import _geometry as geo

ops = torch.ops.poolx

pytestmark = pytest.mark.skipif(not CACHE_ON, reason="the cache is not at its default here; "
                                "test_output_cache.py::test_with_the_cache_on runs this file")

# (batch and channels, pool): the tiled fast paths (the odd size leaves rows
# and columns no window covers; 2 channels take the narrow channels_last
# kernels), overlapping windows (NCHW forward takes the element loop for the
# dilated width) and windows over 256 taps (int32 argmax: every op's element
# loop). Pooled outputs hold over 2^20 elements.
HW = (363, 365)
CASES = [
    ((2, 16), Pool("tiled 2x2, odd size", HW, 2)),
    ((16, 2), Pool("tiled 2x2, 2 channels", HW, 2)),
    ((2, 16), Pool("overlapping padded dilated", HW, 3, 2, 1, (1, 2))),
    ((2, 16), Pool("289-tap windows", HW, 17, 16)),
]


def fill_garbage(t):
    storage = t.untyped_storage()
    torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),)).fill_(0x55)


def on_stale_blocks(op):
    """op()'s outputs from its second run, in blocks its first run left garbage in."""
    first = op()
    first = first if isinstance(first, tuple) else (first,)
    for t in first:
        fill_garbage(t)
    ptrs = [t.data_ptr() if t.untyped_storage().nbytes() >= MiB else None for t in first]
    del t, first
    hits = poolx.cpu_cache_stats()["hits"]
    second = op()
    second = second if isinstance(second, tuple) else (second,)
    assert [t.data_ptr() if p else None for t, p in zip(second, ptrs)] == ptrs
    assert poolx.cpu_cache_stats()["hits"] == hits + sum(p is not None for p in ptrs)
    return second


def assert_same(actual, expected, what):
    expected = expected.to(actual.dtype)
    if actual.dtype == torch.bool:  # a stale 0x55 byte would read as True
        assert torch.equal(actual.view(torch.uint8), expected.view(torch.uint8)), what
    else:
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True,
                                   check_stride=False, msg=lambda m: f"{what}\n{m}")


def argmax_of(indices, in_w, pool):
    """The window tap kh * kernel_w + kw that holds each of torch's indices."""
    (_, kw), (sh, sw), (ph, pw), (dh, dw) = geo.pool_params(
        pool.kernel_size, pool.stride, pool.padding, pool.dilation)
    h, w = indices // in_w, indices % in_w
    oh = torch.arange(indices.shape[-2]).view(-1, 1)
    ow = torch.arange(indices.shape[-1])
    return (h - oh * sh + ph) // dh * kw + (w - ow * sw + pw) // dw


def by_plane(t):
    return t.contiguous().reshape(t.shape[0] * t.shape[1], -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("batch, pool", CASES, ids=[c[1].name for c in CASES])
def test_every_output_is_written_into_a_stale_block(batch, pool, channels_last, dtype):
    shape, hw = (*batch, *pool.hw), list(pool.hw)
    x = planted(shape, dtype, channels_last=channels_last)
    args = (*geo.pool_params(pool.kernel_size, pool.stride, pool.padding, pool.dilation),
            pool.ceil_mode)
    with single_threaded():
        ref, indices = torch.nn.functional.max_pool2d(x, **pool.kwargs(), return_indices=True)

    values, argmax = on_stale_blocks(lambda: ops.max_pool2d_argmax(x, *args))
    assert_same(values, ref, "max_pool2d_argmax values")
    assert_same(argmax, argmax_of(indices, hw[1], pool), "max_pool2d_argmax argmax")
    (only,) = on_stale_blocks(lambda: ops.max_pool2d_values(x, *args))
    assert_same(only, ref, "max_pool2d_values")

    grad_out = torch.randn(ref.shape).to(dtype)
    grad_out.view(-1)[::3] = -0.0
    grad_out = grad_out.contiguous(memory_format=geo.memory_format(x))
    (grad,) = on_stale_blocks(lambda: ops.max_pool2d_backward(grad_out, argmax, hw, *args))
    assert_same(grad, torch_grad(x, pool, grad_out), "max_pool2d_backward")

    (idx,) = on_stale_blocks(lambda: ops.argmax_to_indices(argmax, hw, *args))
    assert_same(idx, indices, "argmax_to_indices")
    (mask,) = on_stale_blocks(lambda: ops.argmax_to_mask(argmax, hw, *args))
    expected_mask = torch.zeros(by_plane(x).shape, dtype=torch.bool)
    assert_same(mask, expected_mask.scatter_(1, by_plane(indices), True).view(shape), "mask")

    src = torch.randn(shape).to(dtype)
    (gathered,) = on_stale_blocks(lambda: ops.gather_by_argmax(src, argmax, *args))
    assert_same(gathered, by_plane(src).gather(1, by_plane(indices)).view(ref.shape), "gather")

    v = values_like(indices, dtype)
    with single_threaded():  # one thread: the last write to a repeated index wins
        expected = torch.ops.aten.max_unpool2d(v.contiguous(), indices.contiguous(), hw)
    (unpooled,) = on_stale_blocks(lambda: ops.max_unpool2d_argmax(v, argmax, hw, *args))
    assert_same(unpooled, expected, "max_unpool2d_argmax")
    (unpooled,) = on_stale_blocks(lambda: ops.max_unpool2d(v, indices, hw))
    assert_same(unpooled, expected, "max_unpool2d")
