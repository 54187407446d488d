"""The vectorized CPU fast paths (csrc/cpu/isa/) against torch, bit for bit.

Shapes are chosen to end vectors early (widths and channel counts that are no
multiple of 8 or 16 lanes, odd sizes, a single plane); the data plants ties,
NaN (several per window), -inf and all -inf windows across lanes, and the
upstream gradient holds -0.0. The whole module, the tiled unpool's tests
(whose taps by indices are found per instruction set), the ordered passes'
(whose rule is AVX2's alone) and the tiled quads' (AVX2 and AVX-512 paths),
also run once per narrower instruction set that torch allows here
(ATEN_CPU_CAPABILITY), in a subprocess.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import poolx

from fast_path_cases import DTYPES, GEOMETRIES, SHAPES, planted_grad, planted_input
from reference import sums_like_cuda, torch_grad


def assert_identical(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    real = ~torch.isnan(expected)
    assert torch.equal(torch.signbit(actual[real]), torch.signbit(expected[real]))




def check_case(shape, dtype, channels_last, geometry, ceil_mode):
    kernel, stride, padding, dilation = geometry
    args = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                ceil_mode=ceil_mode)
    x = planted_input(shape, dtype, channels_last)
    ref, ref_idx = F.max_pool2d(x, return_indices=True, **args)
    g = planted_grad(ref.shape, dtype, x)

    with torch.no_grad():
        assert_identical(poolx.max_pool2d(x, **args), ref)
    values, argmax = poolx.max_pool2d_with_argmax(x, **args)
    assert_identical(values, ref)
    assert values.is_contiguous(memory_format=torch.channels_last) == channels_last or x.size(1) == 1
    indices = poolx.argmax_to_indices(argmax, x.shape, **args)
    torch.testing.assert_close(indices, ref_idx, rtol=0, atol=0)
    values, indices = poolx.max_pool2d(x, return_indices=True, **args)
    assert_identical(values, ref)
    torch.testing.assert_close(indices, ref_idx, rtol=0, atol=0)
    if dilation == (1, 1):  # max_unpool2d takes no dilation
        unpool_args = dict(kernel_size=kernel, stride=stride, padding=padding,
                           output_size=x.shape[-2:])
        assert_identical(poolx.max_unpool2d(ref, ref_idx, **unpool_args),
                         F.max_unpool2d(ref, ref_idx, **unpool_args))
    grad = poolx.max_pool2d_backward(g, argmax, x.shape, **args)
    assert_identical(grad, torch_grad(x, args, g))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_matches_torch(geometry, dtype, channels_last, stores):
    for shape in SHAPES:
        for ceil_mode in (False, True):
            check_case(shape, dtype, channels_last, geometry, ceil_mode)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 8, 10, 16, 20])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channels_last_few_channels(channels, dtype, stores):
    # C of 1 and 2 vectorize along the (W * C) row; up to 16 bfloat16 channels
    # a 2x2 window row is one load; widths end vectors early
    for shape in [(2, channels, 8, 37), (1, channels, 5, 27)]:
        for geometry in GEOMETRIES[:3]:
            for ceil_mode in (False, True):
                check_case(shape, dtype, True, geometry, ceil_mode)


# The int64 indices go in runs of whole pixels of about 1024 elements: rows
# split into several runs (NCHW and few channels), a run of one pixel of more
# than 1024 channels, windows cut by the padding at both ends of a row;
# channels_last rows converted a few pixels at a time, the last group short.
@pytest.mark.parametrize("shape, channels_last", [
    ((1, 2, 3, 2300), False), ((1, 3, 4, 1400), True), ((1, 1030, 3, 5), True),
    ((2, 200, 3, 20), True), ((2, 64, 4, 14), True), ((1, 100, 6, 22), True)], ids=str)
@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[5], GEOMETRIES[8]], ids=str)
def test_indices_in_runs(shape, channels_last, geometry):
    check_case(shape, torch.float32, channels_last, geometry, False)


# Large outputs with streaming (non-temporal) stores: NCHW rows, channels_last
# along C, and the narrow channels_last rows; an odd height drops a row that
# streams zeros; a kernel 3 high; bfloat16 with NaN, whose vectors take the
# ordinary store. Rows of odd lengths stream as one run per task, vectors
# crossing rows, and the row count is no multiple of a task's. NCHW planes
# and channels_last images (of few channels) of overlapping windows above
# 64K elements sum their gradient in place, not in a scratch (float16 too,
# rounded after every add as torch's sum into float16 is).
LARGE = [
    ((1, 15, 906, 902), torch.float32, False, GEOMETRIES[0]),
    ((1, 24, 1001, 958), torch.bfloat16, False, GEOMETRIES[0]),
    ((1, 2, 2049, 2051), torch.float32, True, GEOMETRIES[0]),
    ((1, 1, 4097, 4098), torch.bfloat16, True, GEOMETRIES[0]),
    ((1, 4, 1536, 1536), torch.float32, False, GEOMETRIES[0]),
    ((1, 8, 1537, 1536), torch.bfloat16, False, GEOMETRIES[0]),
    ((1, 6, 1536, 1536), torch.float32, False, GEOMETRIES[1]),
    ((1, 4, 1531, 1530), torch.float32, False, GEOMETRIES[0]),
    ((1, 64, 385, 384), torch.float32, True, GEOMETRIES[0]),
    ((1, 64, 384, 768), torch.bfloat16, True, GEOMETRIES[0]),
    ((1, 2, 2049, 2048), torch.float32, True, GEOMETRIES[0]),
    ((1, 1, 2048, 4096), torch.bfloat16, True, GEOMETRIES[0]),
    ((1, 3, 300, 258), torch.bfloat16, False, GEOMETRIES[5]),
    ((2, 2, 257, 256), torch.float16, False, GEOMETRIES[7]),
    ((1, 2, 256, 256), torch.float32, False, GEOMETRIES[5]),
    ((2, 5, 200, 130), torch.bfloat16, True, GEOMETRIES[5]),
    ((1, 32, 48, 48), torch.float16, True, GEOMETRIES[6]),
]


@pytest.mark.parametrize("shape, dtype, channels_last, geometry", LARGE, ids=str)
def test_large_outputs(shape, dtype, channels_last, geometry, streaming):
    check_case(shape, dtype, channels_last, geometry, False)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_large_unpool(channels_last, streaming):
    """By argmax and by indices, streamed; channels_last of 2 channels routes rows."""
    for shape in [(1, 64, 384, 384), (1, 2, 1024, 1030)] if channels_last else [(1, 4, 1536, 1536)]:
        x = planted_input(shape, torch.float32, channels_last)
        values, argmax = poolx.max_pool2d_with_argmax(x, 2)
        _, indices = F.max_pool2d(x, 2, return_indices=True)
        expected = F.max_unpool2d(values, indices, 2, output_size=shape[-2:])
        assert_identical(poolx.max_unpool2d_argmax(values, argmax, shape[-2:], 2), expected)
        assert_identical(poolx.max_unpool2d(values, indices, 2, output_size=shape[-2:]), expected)


@pytest.mark.parametrize("kernel", [3, 4, 7])
@pytest.mark.parametrize("channels", [32, 40, 64])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tiled_channels_last_streamed(kernel, channels, dtype, streaming):
    """channels_last windows that tile, of many taps, streamed: pixels of
    whole cache lines (32, 64 channels) a line per tap, others (40) vector by
    vector; a row past the last window is zeroed."""
    shape = (2, channels, 2 * kernel + 1, 3 * kernel)
    check_case(shape, dtype, True, ((kernel, kernel), (kernel, kernel), (0, 0), (1, 1)), False)
    x = planted_input(shape, dtype, True)
    values, argmax = poolx.max_pool2d_with_argmax(x, kernel)
    _, indices = F.max_pool2d(x, kernel, return_indices=True)
    assert_identical(poolx.max_unpool2d_argmax(values, argmax, shape[-2:], kernel),
                     F.max_unpool2d(values, indices, kernel, output_size=shape[-2:]))


@pytest.mark.parametrize("shape, kernel", [((2, 64, 7, 7), 7), ((2, 40, 13, 13), 4),
                                           ((2, 16, 16, 16), 4), ((2, 16, 16, 17), 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_small_channels_last_images(shape, kernel, dtype):
    """channels_last images of up to 256 pixels in windows of 16 taps or more
    (heads; scattered on AVX2), and one pixel more (routed)."""
    check_case(shape, dtype, True, ((kernel, kernel), (kernel, kernel), (0, 0), (1, 1)), False)


def test_autograd_through_fast_paths():
    x = planted_input((2, 24, 20, 34), torch.float32, channels_last=True)
    x = torch.where(torch.isnan(x), 1.0, x).requires_grad_(True)  # finite sums
    ref_x = x.detach().clone().requires_grad_(True)
    g = planted_grad((2, 24, 10, 17), torch.float32, x)
    poolx.max_pool2d(x, 2).backward(g)
    F.max_pool2d(ref_x, 2).backward(g)
    assert_identical(x.grad, ref_x.grad)


NARROWER_ISAS = {"AVX512": ["avx2", "default"], "AVX2": ["default"]}.get(
    torch.backends.cpu.get_cpu_capability(), [])


@pytest.mark.skipif(os.environ.get("ATEN_CPU_CAPABILITY") is not None,
                    reason="already running under a chosen instruction set")
@pytest.mark.parametrize("isa", NARROWER_ISAS or [pytest.param("-", marks=pytest.mark.skip(
    reason="no narrower instruction set than torch's here"))])
def test_narrower_instruction_sets(isa):
    env = dict(os.environ, ATEN_CPU_CAPABILITY=isa)
    here = os.path.dirname(__file__)
    others = [os.path.join(here, f"test_{name}.py")
              for name in ("unpool_tiled", "ordered_passes", "tiled_quads", "row_windows",
                           "direct_indices")]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, *others,
           "-k", "not narrower"]  # every dtype: "not float16" would drop bfloat16 too
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


# (shape, channels_last): small and streamed outputs, vectors along the row and
# along C with a channel tail (C = 40: 32 channels per at::vec bfloat16 vector),
# and fewer channels than one vector (C = 10, a pixel per step; mnist's shape
# splits into several tasks).
NAN_CASES = [((2, 3, 9, 37), False), ((1, 8, 1537, 1536), False), ((2, 40, 6, 34), True),
             ((1, 2, 8, 37), True), ((1, 64, 384, 768), True), ((2, 10, 8, 38), True),
             ((8, 10, 28, 28), True)]

# NaNs of every kind by their bits: quiet, signalling, negative, all ones
NAN_KINDS = {
    torch.int16: [0x7FC0, 0x7F81, -0x40, -1, 0x7FFF, 0x7E01, 0x7C01, -0x1FF],
    torch.int32: [0x7FC00001, 0x7F800001, -0x3FFFFF, -1],
    torch.int64: [0x7FF8000000000001, 0x7FF0000000000001, -0x7FFFFFFFFFFFF, -1],
}


def plant_nans(t, where):
    """NaNs of every kind at `where`, planted by their bits (some 16-bit
    patterns are NaN in float16 and finite in bfloat16)."""
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    kinds = torch.tensor(NAN_KINDS[bits], dtype=bits)
    t.view(bits)[where] = kinds[torch.randint(0, len(kinds), (int(where.sum()),))]


@pytest.mark.parametrize("shape, channels_last", NAN_CASES, ids=str)
def test_bfloat16_nan_values_and_gradients_match_torch(shape, channels_last, stores):
    """NaN propagates as torch's does: NaN where torch has NaN (the winning
    element, the summed gradient), equal bits everywhere else. NaN payloads
    are not promised (torch's own NCHW and channels_last kernels differ)."""
    x = planted_input(shape, torch.bfloat16, channels_last)
    # tiled, and overlapping windows (the summing backward kernels)
    for args in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)):
        ref = F.max_pool2d(x, **args)
        g = planted_grad(ref.shape, torch.bfloat16, x)
        where = torch.zeros(g.shape, dtype=torch.bool)
        where[..., 1::3, ::2] = True
        plant_nans(g, where)
        values, argmax = poolx.max_pool2d_with_argmax(x, **args)
        grad = poolx.max_pool2d_backward(g, argmax, x.shape, **args)
        for actual, expected in ((values, ref), (grad, torch_grad(x, args, g))):
            assert torch.isnan(expected).any()
            assert_identical(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_nan_gradients_match_torch(dtype, channels_last):
    """NaN gradients of every kind, routed (tiled windows, which move 16-bit
    types in 16-bit lanes) and summed (overlapping windows, where NaN meets
    NaN and finite values): NaN exactly where torch has NaN."""
    for shape in [(2, 5, 17, 23), (1, 2, 9, 40), (1, 1, 8, 70)]:
        check_nan_gradients(planted_input(shape, dtype, channels_last))


def check_nan_gradients(x):
    for args in (dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=(1, 3), stride=1),
                 dict(kernel_size=2), dict(kernel_size=(3, 2))):
        ref = F.max_pool2d(x, **args)
        g = planted_grad(ref.shape, x.dtype, x)
        plant_nans(g, torch.rand(g.shape) < 0.3)
        expected = torch_grad(x, args, g)  # as torch sums on this build's kernels
        _, argmax = poolx.max_pool2d_with_argmax(x, **args)
        grad = poolx.max_pool2d_backward(g, argmax, x.shape, **args)
        assert torch.isnan(expected).sum() > 5
        assert_identical(grad, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("width", [41, 130], ids=["flat plane", "large plane"])
def test_16bit_sums_round_after_every_add(dtype, channels_last, width):
    """Up to nine overlapping windows add their gradients into one peak: torch's
    CPU kernel rounds to the 16-bit type after every add (a sum can reach inf
    where the exact one would not), and the scatter's float sums must do the
    same, in planes summed as one flat run and in larger ones. (The emulation
    build runs the CUDA kernels, which sum in float and round once, as torch's
    CUDA kernel does and the reference then does too.)"""
    x = torch.randn(2, 3, 40, width)
    x[..., 1::4, 2::4] += 100  # peaks that every window around them selects
    x = x.to(dtype)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    args = dict(kernel_size=3, stride=1, padding=1)
    _, argmax = poolx.max_pool2d_with_argmax(x, **args)
    g = (1000 + torch.rand(argmax.shape) * 30000).to(dtype)
    g = g.contiguous(memory_format=torch.channels_last) if channels_last else g
    expected = torch_grad(x, args, g)
    once = torch_grad(x.float(), args, g.float()).to(dtype)  # rounded once, at the end
    assert torch.equal(expected, once) == sums_like_cuda(x)
    if dtype == torch.float16:
        assert torch.isinf(expected).any()
    assert_identical(poolx.max_pool2d_backward(g, argmax, x.shape, **args), expected)
