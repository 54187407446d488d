"""The vectorized CPU fast paths (csrc/cpu/isa/) against torch, bit for bit.

Shapes are chosen to end vectors early (widths and channel counts that are no
multiple of 8 or 16 lanes, odd sizes, a single plane); the data plants ties,
NaN (several per window), -inf and all -inf windows across lanes, and the
upstream gradient holds -0.0. The whole module also runs once per narrower
instruction set that torch allows here (ATEN_CPU_CAPABILITY), in a subprocess.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import poolx

# (kernel, stride, padding, dilation): the tiled kernels both fast paths
# specialize, overlapping windows (stride 1 and 2), dilation along H only
# (NCHW still vectorized) and along both (channels_last only), stride 3.
GEOMETRIES = [
    ((2, 2), (2, 2), (0, 0), (1, 1)),
    ((3, 2), (3, 2), (0, 0), (1, 1)),
    ((3, 3), (3, 3), (0, 0), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 2), (1, 1), (0, 0), (1, 1)),
    ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((4, 4), (2, 2), (2, 1), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (2, 1)),
    ((3, 2), (2, 2), (1, 1), (2, 2)),
]
SHAPES = [(2, 3, 9, 37), (1, 1, 33, 70), (1, 19, 6, 7), (2, 40, 5, 34)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def planted_input(shape, dtype, channels_last):
    """Few distinct values (ties), NaN and -inf sprinkled, one all -inf block."""
    x = torch.randint(-3, 4, shape).float()
    u = torch.rand(shape)
    x[u < 0.06] = float("nan")
    x[(u >= 0.06) & (u < 0.12)] = float("-inf")
    x[..., :3, -3:] = float("-inf")
    x = x.to(dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def planted_grad(shape, dtype, like):
    g = torch.randn(shape).to(dtype)
    g.view(-1)[::3] = -0.0
    return g.contiguous(memory_format=torch.channels_last) if not like.is_contiguous() else g


def assert_identical(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    real = ~torch.isnan(expected)
    assert torch.equal(torch.signbit(actual[real]), torch.signbit(expected[real]))


def check_case(shape, dtype, channels_last, geometry, ceil_mode):
    kernel, stride, padding, dilation = geometry
    args = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                ceil_mode=ceil_mode)
    x = planted_input(shape, dtype, channels_last)
    ref_x = x.float().requires_grad_(True)
    ref, ref_idx = F.max_pool2d(ref_x, return_indices=True, **args)
    g = planted_grad(ref.shape, dtype, x)
    ref.backward(g.float())

    with torch.no_grad():
        assert_identical(poolx.max_pool2d(x, **args), ref.to(dtype))
    values, argmax = poolx.max_pool2d_with_argmax(x, **args)
    assert_identical(values, ref.to(dtype))
    assert values.is_contiguous(memory_format=torch.channels_last) == channels_last or x.size(1) == 1
    indices = poolx.argmax_to_indices(argmax, x.shape, **args)
    torch.testing.assert_close(indices, ref_idx, rtol=0, atol=0)
    grad = poolx.max_pool2d_backward(g, argmax, x.shape, **args)
    assert_identical(grad, ref_x.grad.to(dtype))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_matches_torch(geometry, dtype, channels_last):
    for shape in SHAPES:
        for ceil_mode in (False, True):
            check_case(shape, dtype, channels_last, geometry, ceil_mode)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channels_last_few_channels(channels, dtype):
    # C of 1 and 2 vectorize along the (W * C) row; widths end vectors early
    for shape in [(2, channels, 8, 37), (1, channels, 5, 27)]:
        for geometry in GEOMETRIES[:3]:
            for ceil_mode in (False, True):
                check_case(shape, dtype, True, geometry, ceil_mode)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_large_outputs(channels_last):
    # outputs of several MB: blocks from the output cache, streaming stores
    check_case((1, 4, 1536, 1536), torch.float32, channels_last, GEOMETRIES[0], False)


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
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
           "-k", "not narrower and not float16"]  # float16 shares bfloat16's widening code
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
