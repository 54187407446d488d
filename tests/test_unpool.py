"""poolx.max_unpool2d (torch's int64 indices) and poolx.max_unpool2d_argmax
(the compact argmax): results against torch.nn.functional.max_unpool2d on CPU.
Gradients: test_unpool_autograd.py; output sizes, the module and bad
arguments: test_unpool_arguments.py; tiled windows: test_unpool_tiled.py."""

import pytest
import torch
import torch.nn.functional as F
from unpool_cases import (
    CASES,
    BITS,
    assert_same_bits,
    layout,
    planted,
    pooled_input,
    torch_indices,
    torch_unpool,
    unpool_args,
    values_like,
)

import poolx

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(device, case, dtype, channels_last):
    pool, x, indices = pooled_input(case, device, channels_last)
    values = values_like(indices, dtype)
    expected = torch_unpool(values, indices, pool, x.shape)

    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    assert_same_bits(out, expected)
    assert out.is_contiguous(memory_format=torch.channels_last) == channels_last

    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)


@pytest.mark.parametrize("channels", [1, 2, 3, 20])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_tiled_argmax_unpool_copies_bits(device, channels, channels_last):
    """Tiled float32 unpool by argmax runs the tiled backward's kernels with the
    value copied: wide rows (several vectors, a partial one), floor-mode
    leftovers, NaN payloads and -0.0 kept, every channel-count path."""
    pool = (2, 2, 0, 1, False)
    x = planted((2, channels, 9, 45), device=device, channels_last=channels_last)
    indices = torch_indices(x, pool)
    values = values_like(indices, torch.float32)
    values.view(torch.int32)[..., 0, 0] = 0x7FC00001  # a NaN with a payload
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    expected = torch_unpool(values, indices, pool, x.shape)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8], ids=str)
def test_integer_values(dtype):
    """torch has no integer unpool on CPU; poolx places integers exactly."""
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", "cpu", False)
    values = torch.randint(0, 100, indices.shape, dtype=dtype)
    expected = torch_unpool(values.double(), indices, pool, x.shape).to(dtype)
    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), x.shape[-2:])
    assert torch.equal(out, expected)


def test_unbatched(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False, batch=(3,))
    values = values_like(indices, torch.float32)
    expected = torch_unpool(values, indices, pool, x.shape[-2:])
    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), x.shape[-2:])
    assert_same_bits(out, expected)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape[-2:], *pool), expected)


def test_allowed_under_deterministic_algorithms():
    """torch refuses its unpool here (its kernels race on repeated indices)."""
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", "cpu", False)
    values = values_like(indices, torch.float32)
    expected = torch_unpool(values, indices, pool, x.shape)
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
            F.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
        out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    finally:
        torch.use_deterministic_algorithms(False)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("batch", [(1, 70), (1, 3), (3, 5), (5, 33)], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_scattered_indices_match_torch(batch, channels_last, dtype):
    """Indices anywhere in the plane, repeated, and jumping back behind the
    ones before: the CPU kernel zeroes its output only ahead of the furthest
    index so far, and splits channels_last images into channel blocks."""
    gen = torch.Generator().manual_seed(sum(batch))
    out_hw = (40, 41)
    indices = torch.randint(0, out_hw[0] * out_hw[1], (*batch, 20, 20), generator=gen)
    indices[..., 5, :] = indices[..., 4, :]  # repeats within each plane
    indices[..., -1, -1] = out_hw[0] * out_hw[1] - 1  # the plane's last pixel
    values = values_like(indices, dtype)
    if channels_last:
        indices = indices.contiguous(memory_format=torch.channels_last)
        values = values.contiguous(memory_format=torch.channels_last)
    expected = torch_unpool(values, indices, (2, 2, 0, 1, False), out_hw)
    actual = poolx.max_unpool2d(values, indices, 2, 2, output_size=out_hw)
    assert actual.is_contiguous(memory_format=layout(values))
    assert_same_bits(actual.contiguous(), expected)


@pytest.mark.parametrize("channels", [3, 20, 64, 72])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("pool", [(3, 2, 1, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 2, True)],
                         ids=str)
def test_overlapping_channels_last_argmax_unpool_copies_bits(channels, dtype, pool, stores):
    """channels_last unpool by argmax where windows overlap (the backward's
    gather with the value copied): the last window that selects an element
    gives it its value, in whole groups of vectors and partial ones; NaN
    payloads (signaling ones too) and -0.0 keep their bits."""
    x = planted((2, channels, 11, 13), channels_last=True)
    indices = torch_indices(x, pool)
    values = values_like(indices, dtype)
    bits = values.view(BITS[dtype])
    nan_bits = 0x7FA00001 if dtype == torch.float32 else 0x7F81 if dtype == torch.bfloat16 else 0x7D01
    bits[..., 0, :] = nan_bits  # signaling NaNs with payloads
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    expected = torch_unpool(values, indices, pool, x.shape)
    actual = poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool)
    assert actual.is_contiguous(memory_format=torch.channels_last)
    assert_same_bits(actual.contiguous(), expected)


# (planes, plane): few windows (one flat run), planes of whole cache lines
# (streamed under the streaming fixture), over 4,096 windows (row by row),
# a float32 plane over the 256 KiB scratch (stored in place)
NCHW_PLANES = [((2, 3), (11, 13)), ((1, 2), (128, 96)), ((1, 2), (150, 131)), ((1, 1), (300, 260))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int16, torch.int64], ids=str)
@pytest.mark.parametrize("pool", [(3, 2, 1, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 2, True),
                                  (2, 1, 0, 1, False)], ids=str)
@pytest.mark.parametrize("shape", NCHW_PLANES, ids=str)
def test_overlapping_nchw_argmax_unpool_copies_bits(shape, dtype, pool, stores):
    """NCHW unpool by argmax where windows overlap, pad or dilate (the
    backward's plane scatter storing each value): the last window that
    selects an element gives it its value, through the scratch and in place,
    streamed or not; NaN payloads (signaling ones too) and -0.0 keep their
    bits, integers their values."""
    batch, hw = shape
    x = planted((*batch, *hw))
    indices = torch_indices(x, pool)
    if dtype.is_floating_point:
        values = values_like(indices, dtype)
        nan_bits = {torch.float32: 0x7FA00001, torch.bfloat16: 0x7F81, torch.float16: 0x7D01,
                    torch.float64: 0x7FF4000000000001}[dtype]
        values.view(BITS[dtype])[..., 0, :] = nan_bits  # signaling NaNs with payloads
    else:  # torch has no integer unpool on CPU: its float64 result, exact here
        values = torch.randint(-1000, 1000, indices.shape, dtype=dtype)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    exact = values if dtype.is_floating_point else values.double()
    expected = torch_unpool(exact, indices, pool, hw).to(dtype)
    actual = poolx.max_unpool2d_argmax(values, argmax, hw, *pool)
    assert actual.is_contiguous()
    assert_same_bits(actual, expected)
