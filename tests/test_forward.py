"""Forward: values, indices and argmax bit for bit against torch's max_pool2d,
over every kind of configuration, dtype and memory layout."""

import pytest
import torch

import poolx
from poolx import _geometry as geo
from inputs import FLOAT_DTYPES, GRID, INT_DTYPES, layouts, random_values
from reference import assert_identical, decode_argmax, torch_pool


def argmax_dtype(pool):
    kh, kw = (pool.kernel_size,) * 2 if isinstance(pool.kernel_size, int) else pool.kernel_size
    return torch.uint8 if kh * kw <= 256 else torch.int32


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES, ids=str)
def test_matches_torch(dtype, device):
    for pool in GRID:
        make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
        for layout, x in layouts((2, 3, *pool.hw), make):
            what = f"{pool} | {layout} | {dtype} | input strides {x.stride()}"
            values, indices = torch_pool(x, pool, return_indices=True)

            got_values, got_indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
            assert_identical(got_values, values, f"values of {what}")
            assert_identical(got_indices, indices, f"indices of {what}")

            only_values = poolx.max_pool2d(x, **pool.kwargs())
            assert_identical(only_values, values, f"value-only path of {what}")

            fused_values, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
            assert_identical(fused_values, values, f"max_pool2d_with_argmax values of {what}")
            assert argmax.dtype == argmax_dtype(pool), what
            assert argmax.shape == values.shape and argmax.stride() == values.stride(), what
            decoded = decode_argmax(argmax, x.shape[-2:], pool)
            assert_identical(decoded, indices, f"decoded argmax of {what}", check_stride=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_return_indices_op_writes_the_argmax_too(dtype, device, stores):
    """max_pool2d_indices (return_indices, one pass) also writes the argmax that
    backward saves: the same as max_pool2d_argmax's, its indices those that
    argmax_to_indices derives from it."""
    ops = torch.ops.poolx
    for pool in GRID:
        args = [list(a) for a in geo.pool_params(*pool.args()[:4])] + [pool.ceil_mode]
        make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
        for layout, x in layouts((2, 16, *pool.hw), make):
            what = f"{pool} | {layout} | {dtype}"
            values, argmax, indices = ops.max_pool2d_indices(x, *args)
            want_values, want_argmax = ops.max_pool2d_argmax(x, *args)
            assert_identical(values, want_values, f"values of {what}")
            assert_identical(argmax, want_argmax, f"argmax of {what}")
            want_indices = ops.argmax_to_indices(want_argmax, list(x.shape[-2:]), *args)
            assert_identical(indices, want_indices, f"indices of {what}")


def test_module_and_functional_defaults(device):
    """stride=None and stride=() mean stride=kernel_size, as in torch."""
    x = random_values((2, 3, 9, 8), torch.float32, device)
    expected = torch.nn.functional.max_pool2d(x.cpu(), 3)
    for stride in (None, (), []):
        assert_identical(poolx.max_pool2d(x, 3, stride), expected, f"stride={stride!r}")
    assert_identical(poolx.MaxPool2d(3)(x), expected, "poolx.MaxPool2d(3)")
