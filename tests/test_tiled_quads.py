"""NCHW windows 4 wide that tile their rows (1-D pooling by 4, and 2-D and 3-D
windows (.., 4) of stride (.., 4)): the backward and unpool by argmax route
each output to its four taps at once (csrc/cpu/isa/tiled_rows_backward.h),
against torch bit for bit. Rows end vectors early, drop a tail that no
window covers, and hold ties, NaN, -inf and all -inf windows; the upstream
gradient holds -0.0 and NaN."""

import math

import pytest
import torch
import torch.nn.functional as F

import poolx

from fast_path_cases import planted_input
from reference import assert_identical, raises_bad_argmax, torch_pool_grad

DTYPES = [torch.float32, torch.bfloat16, torch.float16]

# (shape, kernel): signals of 1, 2 and 3 vectors of windows and their tails,
# rows of one window and a tail, a plane of many rows, volumes
CASES = [
    ((2, 3, 64), 4), ((2, 3, 4 * 16 + 3), 4), ((1, 5, 4 * 48 + 1), 4), ((3, 2, 4 * 33 + 2), 4),
    ((2, 1, 7), 4), ((4, 64, 2000), 4), ((2, 3, 5, 37), (1, 4)), ((1, 2, 6, 70), (2, 4)),
    ((2, 2, 4, 6, 17), (2, 2, 4)), ((1, 3, 3, 2, 130), (1, 1, 4)),
]

_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}
_WITH_ARGMAX = {1: poolx.max_pool1d_with_argmax, 2: poolx.max_pool2d_with_argmax,
                3: poolx.max_pool3d_with_argmax}
_BACKWARD = {1: poolx.max_pool1d_backward, 2: poolx.max_pool2d_backward,
             3: poolx.max_pool3d_backward}
_UNPOOL_INDICES = {1: poolx.max_unpool1d, 2: poolx.max_unpool2d, 3: poolx.max_unpool3d}
_UNPOOL_ARGMAX = {1: poolx.max_unpool1d_argmax, 2: poolx.max_unpool2d_argmax,
                  3: poolx.max_unpool3d_argmax}


def _input(shape, dtype):
    # planted_input's ties, NaN and -inf over a 4-D view of the signal
    return planted_input((1, 1, math.prod(shape[:-1]), shape[-1]), dtype, False).reshape(shape)


@pytest.mark.parametrize("shape, kernel", CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_and_unpool_match_torch(shape, kernel, dtype, stores):
    dims = len(shape) - 2
    x = _input(shape, dtype)
    values, indices = _POOL[dims](x, kernel, return_indices=True)
    got_values, argmax = _WITH_ARGMAX[dims](x, kernel)
    assert_identical(got_values, values, "values")
    grad_out = torch.randn(values.shape).to(dtype)
    grad_out.view(-1)[::3] = -0.0
    grad_out.view(-1)[1::11] = float("nan")
    expected = torch_pool_grad(_POOL[dims], x, (kernel,), grad_out)
    assert_identical(_BACKWARD[dims](grad_out, argmax, x.shape, kernel), expected, "gradient")
    unpooled = _UNPOOL[dims](values, indices, kernel, output_size=x.shape[-dims:])
    assert_identical(_UNPOOL_ARGMAX[dims](values, argmax, x.shape, kernel), unpooled,
                     "unpool by argmax")
    got = _UNPOOL_INDICES[dims](values, indices, kernel, output_size=x.shape[-dims:])
    assert_identical(got, unpooled, "unpool by indices")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_unpool_keeps_nan_bits(dtype, stores):
    """Unpool copies values: a NaN's payload and sign arrive unchanged."""
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    payloads = ([0x7FC00001, -0x00400001, 0x7F800001] if bits == torch.int32
                else [0x7FC1, -0x3F, 0x7F81])
    x = torch.randn(3, 4, 4 * 40 + 1).to(dtype)
    x.view(bits).view(-1)[5::9] = torch.tensor(payloads, dtype=bits).repeat(1000)[
        : x.view(-1)[5::9].numel()]
    values, argmax = poolx.max_pool1d_with_argmax(x, 4)
    _, indices = F.max_pool1d(x, 4, return_indices=True)
    expected = F.max_unpool1d(values, indices, 4, output_size=x.shape[-1:])
    got = poolx.max_unpool1d_argmax(values, argmax, x.shape, 4)
    assert torch.equal(got.view(bits), expected.view(bits))


@pytest.mark.parametrize("op", ["backward", "unpool"])
@pytest.mark.parametrize("bad", [4, 7, 255])
def test_argmax_past_the_window_raises(op, bad, stores):
    x = torch.randn(2, 3, 4 * 20 + 1)
    values, argmax = poolx.max_pool1d_with_argmax(x, 4)
    argmax = argmax.clone()
    argmax[1, 2, 17] = bad
    call = _BACKWARD[1] if op == "backward" else _UNPOOL_ARGMAX[1]
    with raises_bad_argmax("names no tap"):
        call(values, argmax, x.shape, 4)


def test_unpool_indices_outside_their_windows(stores):
    """Indices that no pooling by 4 made (each anywhere in its plane, repeats
    too) still unpool as torch's: a row that names a tap outside its window
    sends the call back to the scatter."""
    values = torch.randn(2, 3, 50)
    indices = torch.randint(0, 200, values.shape)
    indices[0, 0] = torch.arange(50) * 4 + 3  # one plane as a pooling by 4 would make it
    expected = F.max_unpool1d(values, indices, 4, output_size=(200,))
    assert_identical(poolx.max_unpool1d(values, indices, 4, output_size=(200,)), expected,
                     "unpool by indices")
