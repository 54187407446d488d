"""The argmax tools for custom training rules: max_pool2d_with_argmax,
max_pool2d_backward, argmax_to_indices, argmax_to_mask (and the unpool ops),
each against torch's results, with and without autograd."""

import pytest
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format

import poolx
from inputs import GRID, SMALL_GRID, Pool, layouts, random_values, upstream_grad
from reference import assert_identical, decode_argmax, torch_pool

ops = torch.ops.poolx


def float_layouts(pool, device):
    return layouts((2, 3, *pool.hw), lambda s: random_values(s, torch.float32, device))


@pytest.mark.parametrize(
    "kernel, dtype",
    [((16, 16), torch.uint8), ((16, 17), torch.int32), ((17, 17), torch.int32)],
)
def test_argmax_dtype_is_the_smallest_that_holds_the_window(kernel, dtype, device):
    x = random_values((2, 3, 20, 21), torch.float32, device)
    values, argmax = poolx.max_pool2d_with_argmax(x, kernel, 2)
    assert argmax.dtype == dtype and argmax.shape == values.shape


def test_largest_int32_window_decodes_to_torch_indices(device):
    """46340x46340 taps is just below 2^31; padding lets it fit a small input."""
    pool = Pool("46340x46340 window", (3, 4), 46340, (1, 23169), 23170)
    x = random_values((1, 2, *pool.hw), torch.float32, device)
    values, indices = torch_pool(x, pool, return_indices=True)
    got_values, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
    assert argmax.dtype == torch.int32
    assert_identical(got_values, values, "values")
    assert_identical(decode_argmax(argmax, x.shape[-2:], pool), indices, "decoded argmax")
    got_indices = poolx.argmax_to_indices(argmax, x.shape, **pool.kwargs())
    assert_identical(got_indices, indices, "indices")


def test_manual_backward_equals_autograd(device):
    for pool in GRID:
        for layout, x in float_layouts(pool, device):
            what = f"{pool} | {layout}"
            leaf = x.detach().requires_grad_()
            y = poolx.max_pool2d(leaf, **pool.kwargs())
            grad_out = upstream_grad(y)
            (expected,) = torch.autograd.grad(y, leaf, grad_out)
            with torch.no_grad():
                values, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
                for input_size in (x.shape, x.shape[-2:], tuple(x.shape[-2:])):
                    grad = poolx.max_pool2d_backward(grad_out, argmax, input_size, **pool.kwargs())
                    assert_identical(grad, expected, f"{what} | input_size={input_size}")
            assert_identical(values, y.detach(), what)


def test_argmax_to_indices_and_mask_match_torch_indices(device):
    for pool in GRID:
        for layout, x in float_layouts(pool, device):
            what = f"{pool} | {layout}"
            values, indices = torch_pool(x, pool, return_indices=True)
            _, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
            for input_size in (x.shape, x.shape[-2:]):
                got = poolx.argmax_to_indices(argmax, input_size, **pool.kwargs())
                assert_identical(got, indices, f"indices of {what} | input_size={input_size}")

            mask = poolx.argmax_to_mask(argmax, x.shape, **pool.kwargs())
            flat_idx = indices.reshape(-1, values.shape[-2] * values.shape[-1])
            plane = x.shape[-2] * x.shape[-1]
            expected = torch.zeros(flat_idx.shape[0], plane, dtype=torch.bool)
            expected.scatter_(1, flat_idx, True)
            # in the layout torch gives the input's gradient
            fmt = suggest_memory_format(x) if x.dim() == 4 else torch.contiguous_format
            expected = expected.reshape(x.shape).contiguous(memory_format=fmt)
            assert_identical(mask, expected, f"mask of {what}")


def test_unpool_ops_match_torch_max_unpool2d(device):
    for pool in SMALL_GRID:
        for layout, x in float_layouts(pool, device):
            what = f"{pool} | {layout}"
            values, indices = torch_pool(x, pool, return_indices=True)
            expected = torch.ops.aten.max_unpool2d(values, indices, x.shape[-2:])
            _, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
            args = poolx._geometry.pool_params(pool.kernel_size, pool.stride, pool.padding,
                                               pool.dilation)
            by_argmax = ops.max_unpool2d_argmax(values.to(device), argmax, x.shape[-2:], *args,
                                                pool.ceil_mode)
            by_indices = ops.max_unpool2d(values.to(device), indices.to(device), x.shape[-2:])
            assert_identical(by_argmax, expected, f"max_unpool2d_argmax of {what}")
            assert_identical(by_indices, expected, f"max_unpool2d of {what}")


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("pool", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                  dict(kernel_size=4, stride=3), dict(kernel_size=(5, 4), stride=2),
                                  dict(kernel_size=2, dilation=2)], ids=str)
def test_indices_of_long_rows_match_torch(pool, channels_last):
    """Rows and channel vectors long enough for the vectorized index rows
    (16 at a time on AVX-512, windows of up to 16 taps) and their tails."""
    x = torch.randn(2, 37, 23, 77)
    x.view(-1)[::7] = 0.5  # ties
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    _, expected = F.max_pool2d(x, **pool, return_indices=True)
    _, argmax = poolx.max_pool2d_with_argmax(x, **pool)
    got = poolx.argmax_to_indices(argmax, x.shape, **pool)
    assert torch.equal(got, expected)
    assert got.stride() == expected.stride()


def argmax_tools(values, argmax):
    """Each argmax-taking function, called with (input_size, kernel_size)."""
    return {
        "max_pool2d_backward": lambda size, k: poolx.max_pool2d_backward(values, argmax, size, k),
        "argmax_to_indices": lambda size, k: poolx.argmax_to_indices(argmax, size, k),
        "argmax_to_mask": lambda size, k: poolx.argmax_to_mask(argmax, size, k),
        "max_unpool2d_argmax": lambda size, k: poolx.max_unpool2d_argmax(values, argmax, size, k),
    }


@pytest.mark.parametrize("size", [None, 8, "88", (8.0, 8.0), (8, None)], ids=repr)
def test_an_input_size_that_is_no_shape_raises_a_type_error_naming_it(size):
    values, argmax = poolx.max_pool2d_with_argmax(torch.randn(1, 2, 8, 8), 2)
    for name, call in argmax_tools(values, argmax).items():
        argument = "output_size" if name == "max_unpool2d_argmax" else "input_size"
        with pytest.raises(TypeError, match=rf"^{name}: {argument} must be .* but got {argument}="):
            call(size, 2)


def test_pooling_argument_errors_name_the_function_called():
    values, argmax = poolx.max_pool2d_with_argmax(torch.randn(1, 2, 8, 8), 2)
    for name, call in argmax_tools(values, argmax).items():
        with pytest.raises(RuntimeError, match=rf"^{name}: kernel_size must"):
            call((8, 8), (2, 2, 2))


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_an_output_of_no_windows_places_nothing(dims, batched, device):
    """An input of width 1 under a kernel of width 2 pools to no window (torch's
    forward refuses it; a user can still hand the tools such an argmax): they
    give zeros and an all-False mask of the input's shape, the backward's
    answer (the mask once divided by zero, the unpool failed an internal
    check)."""
    batch = (5, 3) if batched else (3,)
    input_size = (1,) * dims
    kernel = (1,) * (dims - 1) + (2,)
    pooled = torch.randn(batch + (1,) * (dims - 1) + (0,), device=device)
    argmax = torch.zeros(pooled.shape, dtype=torch.uint8, device=device)
    tool = {name: getattr(poolx, name.replace("Nd", f"{dims}d")) for name in
            ("max_poolNd", "max_poolNd_backward", "max_unpoolNd_argmax", "argmax_to_maskNd",
             "argmax_to_indicesNd")}
    with torch.no_grad():
        assert tool["max_poolNd"](torch.randn(batch + input_size, device=device), (1,) * dims)\
            .shape == batch + input_size  # the geometry is sound where windows exist
    zeros = torch.zeros(batch + input_size, device=device)
    assert_identical(tool["max_poolNd_backward"](pooled, argmax, input_size, kernel), zeros,
                     "backward")
    assert_identical(tool["max_unpoolNd_argmax"](pooled, argmax, input_size, kernel), zeros,
                     "unpool")
    assert_identical(tool["argmax_to_maskNd"](argmax, input_size, kernel), zeros.bool(), "mask")
    indices = tool["argmax_to_indicesNd"](argmax, input_size, kernel)
    assert indices.shape == pooled.shape and indices.dtype == torch.int64
