"""Unpool where the windows tile the output (kernel == stride): the one-pass
gather of channels_last (csrc/cpu/isa/unpool_tiled.h), the routing along C
(channels_last, csrc/cpu/isa/backward_kernels.h) and the routing of rows of
pixels (NCHW, channels_last with 2 channels; csrc/cpu/isa/tiled_rows.h), by
argmax and by indices, against torch, on inputs that take them and inputs that
must leave them (an index outside its window or outside the plane)."""


import pytest
import torch
import torch.nn.functional as F
from reference import raises_bad_indices
from unpool_cases import assert_same_bits, planted, torch_indices, torch_unpool, values_like

import poolx

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.uint8, torch.int8, torch.int32, torch.int64]

@pytest.fixture(autouse=True)
def _both_sizes(stores):
    """Every test at the default sizes (small outputs: the scatter, the
    gather) and with streaming at every size (NCHW and 2 channels: the rows)."""


# (kernel, input plane, output_size beyond the covered windows or None)
GEOMETRIES = {
    "2x2": ((2, 2), (8, 10), None),
    "2x2, floor drops a row and column": ((2, 2), (9, 11), None),
    "3x3": ((3, 3), (9, 12), None),
    "2x3, output larger than the windows": ((2, 3), (6, 9), (7, 10)),
}
# channels_last: 2 channels take the rows; by indices, 8 and 16 (whole vectors of 8
# indices) route along C on AVX-512, and 21 (a partial vector) and 300 (crossing a
# block of 256 channels) take the gather; by argmax, 3 channels (and 8 in 3x3
# windows) take the scatter per image.
CHANNELS = [2, 3, 8, 16, 21, 300]


def pooled(kernel, hw, channels, channels_last, dtype=torch.float32):
    x = planted((2, channels, *hw), channels_last=channels_last)
    pool = (kernel, kernel, 0, 1, False)
    indices = torch_indices(x, pool)
    return x, pool, indices


def unpool_expected(values, indices, kernel, out_hw):
    """torch's CPU unpool; integer dtypes (which torch's CPU unpool lacks)
    through float64, exact for every value they hold here."""
    if values.dtype.is_floating_point:
        return torch_unpool(values, indices, (kernel, kernel, 0, 1, False), out_hw)
    wide = torch_unpool(values.double(), indices, (kernel, kernel, 0, 1, False), out_hw)
    return wide.to(values.dtype)


def values_of(indices, dtype):
    if dtype.is_floating_point:
        return values_like(indices, dtype)
    low = -100 if dtype.is_signed else 0
    v = torch.randint(low, 100, indices.shape, dtype=dtype)
    return v.contiguous(memory_format=torch.channels_last if not indices.is_contiguous()
                        else torch.contiguous_format)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS, ids=str)
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_unpool_by_indices_and_argmax_match_torch(geometry, dtype, channels, channels_last):
    kernel, hw, out_hw = GEOMETRIES[geometry]
    out_hw = out_hw or hw
    x, pool, indices = pooled(kernel, hw, channels, channels_last)
    values = values_of(indices, dtype)
    expected = unpool_expected(values, indices, kernel, out_hw)

    out = poolx.max_unpool2d(values, indices, kernel, output_size=out_hw)
    assert out.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert_same_bits(out, expected)

    if out_hw == hw:  # by argmax: the output is the pooled input's shape
        _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
        assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)
        mask = poolx.argmax_to_mask(argmax, x.shape, *pool)
        ones = torch.ones(indices.shape).contiguous(memory_format=torch.channels_last
                                                    if channels_last else torch.contiguous_format)
        assert torch.equal(mask, unpool_expected(ones, indices, kernel, hw) == 1)


@pytest.mark.parametrize("channels", [2, 16])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("where", ["first element", "last element", "middle"])
def test_an_index_outside_its_window_gives_torchs_result(where, channels_last, channels):
    """Indices need not come from a tiled pooling: one that names another
    window's element (inside the plane) leaves the gather or the rows for the
    scatter, and the result is torch's (the later of two writes wins)."""
    x, pool, indices = pooled((2, 2), (8, 10), channels, channels_last)
    position = {"first element": (0, 0, 0, 0), "last element": (1, channels - 1, 3, 4),
                "middle": (1, channels // 2, 2, 2)}[where]
    indices[position] = 79 - indices[position]  # another window's element
    values = values_like(indices, torch.float32)
    expected = unpool_expected(values, indices, (2, 2), (8, 10))
    assert_same_bits(poolx.max_unpool2d(values, indices, 2, output_size=(8, 10)), expected)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("bad", [-1, 80, 2**40, -(2**63), 2**63 - 1])
def test_an_index_outside_the_plane_raises(bad, channels_last):
    _, _, indices = pooled((2, 2), (8, 10), 16, channels_last)
    indices[1, 9, 3, 2] = bad
    values = values_like(indices, torch.bfloat16)
    message = f"Found an invalid max index: {bad} (output volumes are of size 8x10)"
    with raises_bad_indices(message):
        poolx.max_unpool2d(values, indices, 2, output_size=(8, 10))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_16bit_nan_payloads_and_negative_zero_are_copied(dtype):
    """Unpool moves bits: a NaN payload and -0.0 come out as they went in."""
    for channels_last in (False, True):
        x, pool, indices = pooled((2, 2), (8, 34), 16, channels_last)
        values = values_like(indices, dtype)
        values.view(torch.int16)[..., 0, 0] = 0x7F81 if dtype == torch.bfloat16 else 0x7C01
        values[..., 1, 1] = -0.0
        expected = unpool_expected(values, indices, (2, 2), (8, 34))
        assert_same_bits(poolx.max_unpool2d(values, indices, 2, output_size=(8, 34)), expected)
        _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
        assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)


@pytest.mark.parametrize("channels_last,channels", [(False, 2), (True, 2), (True, 16)],
                         ids=["nchw", "channels_last", "channels_last-16"])
@pytest.mark.parametrize("row", [0, 1, 137, 199])
def test_an_index_outside_its_window_in_a_large_plane(row, channels_last, channels):
    """The rows are split between threads, some starting in the second row of a
    window; one index in the row below (above) or beside its window, in any
    row of windows, still gives torch's result."""
    x, pool, indices = pooled((2, 2), (400, 402), channels, channels_last)
    values = values_like(indices, torch.float32)
    for shift in (402 if row < 199 else -402, 1, -1):  # the element below (above), beside, before
        moved = indices.clone()
        moved[1, channels - 1, row, 100] += shift
        expected = unpool_expected(values, moved, (2, 2), (400, 402))
        assert_same_bits(poolx.max_unpool2d(values, moved, 2, output_size=(400, 402)), expected)


def test_many_threads_agree_with_one():
    """Window rows are split between threads; the result does not depend on it."""
    x, pool, indices = pooled((2, 2), (64, 40), 24, True)
    values = values_like(indices, torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = poolx.max_unpool2d(values, indices, 2, output_size=(64, 40))
        torch.set_num_threads(max(2, threads))
        many = poolx.max_unpool2d(values, indices, 2, output_size=(64, 40))
    finally:
        torch.set_num_threads(threads)
    assert_same_bits(many, one)
    assert_same_bits(many, F.max_unpool2d(values.contiguous(), indices.contiguous(), 2,
                                          output_size=(64, 40)))
