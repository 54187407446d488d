"""Adaptive max pooling against torch's adaptive_max_pool1d, 2d and 3d:
values, indices, gradients and errors in every layout, windows that tile
evenly (max pooling's fast paths) and windows that overlap or vary, and
hostile argmax values handed to the adaptive backward."""

import re

import pytest
import torch
import torch.nn.functional as F

import poolx
from inputs import FLOAT_DTYPES, INT_DTYPES, layouts, random_values, upstream_grad
from reference import (
    assert_identical,
    raises_bad_argmax,
    raises_like,
    single_threaded,
    torch_pool_grad,
)
from test_pool3d import layouts as volume_layouts

ops = torch.ops.poolx

# input (H, W), output_size
SIZES_2D = {
    "classification head 7x7 -> 1": ((7, 7), 1),
    "even 8x12 -> 4x3": ((8, 12), (4, 3)),
    "pyramid 13x13 -> 4 (overlapping)": ((13, 13), 4),
    "pyramid 13x13 -> 2 (overlapping)": ((13, 13), 2),
    "7x7 -> 3x5 (mixed window sizes)": ((7, 7), (3, 5)),
    "even rows, adaptive columns": ((8, 7), (4, 3)),
    "upsampling 3x5 -> 5x7": ((3, 5), (5, 7)),
    "None keeps the width": ((9, 6), (4, None)),
    "1x17 -> 1x5": ((1, 17), (1, 5)),
    "20x20 -> 1 (400 taps, int32 argmax)": ((20, 20), 1),
    "zero outputs": ((5, 6), (0, 3)),
}

# input (D, H, W), output_size
SIZES_3D = {
    "even 4x6x8 -> 2x3x4": ((4, 6, 8), (2, 3, 4)),
    "video head 5x7x7 -> 1": ((5, 7, 7), 1),
    "uneven 5x7x6 -> 2x3x4": ((5, 7, 6), (2, 3, 4)),
    "depth kept, planes adaptive": ((3, 7, 9), (None, 3, 4)),
    "upsampling depth 2x4x4 -> 3x2x2": ((2, 4, 4), (3, 2, 2)),
}

# input L, output_size
SIZES_1D = {"text head 200 -> 1": (200, 1), "even 16 -> 4": (16, 4), "uneven 13 -> 5": (13, 5),
            "upsampling 5 -> 8": (5, 8)}


def check_against_torch(torch_pool, poolx_pool, x, output_size, what):
    """Values, indices, inference and both save modes' gradients as torch's
    (whose reference runs on a contiguous copy, on one thread)."""
    with single_threaded():
        values, indices = torch_pool(x.cpu().contiguous(), output_size, return_indices=True)
    got_values, got_indices = poolx_pool(x, output_size, return_indices=True)
    assert_identical(got_values, values, f"values of {what}", check_stride=False)
    assert_identical(got_indices, indices, f"indices of {what}", check_stride=False)
    assert_identical(poolx_pool(x, output_size), values, f"inference of {what}",
                     check_stride=False)
    grad_out = upstream_grad(values).to(x.device)
    try:
        expected = torch_pool_grad(torch_pool, x, (output_size,), grad_out)
    except RuntimeError as error:  # an empty output: torch's backward refuses it
        expected = error
    for save in ("argmax", "recompute"):
        xg = x.detach().requires_grad_()
        out = poolx_pool(xg, output_size, save=save)
        if isinstance(expected, RuntimeError):
            with pytest.raises(RuntimeError, match=re.escape(str(expected))):
                torch.autograd.grad(out, xg, grad_out)
            continue
        (grad,) = torch.autograd.grad(out, xg, grad_out)
        assert_identical(grad, expected, f"gradient of {what}, save={save}", check_stride=False)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", SIZES_2D)
def test_adaptive_2d_matches_torch(device, name, dtype):
    hw, output_size = SIZES_2D[name]
    make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
    for layout, x in layouts((2, 3, *hw), make):
        check_against_torch(F.adaptive_max_pool2d, poolx.adaptive_max_pool2d, x, output_size,
                            f"{name}, {dtype}, {layout}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", SIZES_3D)
def test_adaptive_3d_matches_torch(device, name, dtype):
    dhw, output_size = SIZES_3D[name]
    make = lambda shape: random_values(shape, dtype, device)  # noqa: E731
    for layout, x in volume_layouts(2, 3, dhw, make):
        check_against_torch(F.adaptive_max_pool3d, poolx.adaptive_max_pool3d, x, output_size,
                            f"{name}, {dtype}, {layout}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", SIZES_1D)
def test_adaptive_1d_matches_torch(device, name, dtype):
    length, output_size = SIZES_1D[name]
    signals = {"ncl": random_values((2, 3, length), dtype, device),
               "unbatched": random_values((3, length), dtype, device),
               "nlc viewed as ncl": random_values((2, length, 3), dtype, device).transpose(1, 2)}
    for layout, x in signals.items():
        check_against_torch(F.adaptive_max_pool1d, poolx.adaptive_max_pool1d, x, output_size,
                            f"{name}, {dtype}, {layout}")


def layout_of(t):
    """Which of the dense layouts t is in (strides of size-1 axes aside)."""
    formats = {4: [torch.channels_last], 5: [torch.channels_last_3d]}.get(t.dim(), [])
    return tuple(t.is_contiguous(memory_format=f) for f in [torch.contiguous_format, *formats])


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_results_have_the_layout_of_torchs(dims):
    # torch's 3-D results are contiguous whatever the input's layout; its 2-D
    # ones keep channels_last. A head viewing them as (N, -1) relies on that.
    make = lambda shape: random_values(shape, torch.float32, "cpu")  # noqa: E731
    sizes = {1: SIZES_1D, 2: SIZES_2D, 3: SIZES_3D}[dims]
    for size, output_size in sizes.values():
        inputs = {1: lambda: [("ncl", make((2, 3, size))),
                              ("nlc", make((2, size, 3)).transpose(1, 2))],
                  2: lambda: layouts((2, 3, *size), make),
                  3: lambda: volume_layouts(2, 3, size, make)}[dims]()
        for layout, x in inputs:
            torch_pool = getattr(F, f"adaptive_max_pool{dims}d")
            poolx_pool = getattr(poolx, f"adaptive_max_pool{dims}d")
            if x.numel() == 0 or 0 in torch_pool(x, output_size).shape:
                continue
            expected = torch_pool(x, output_size, return_indices=True)
            got = poolx_pool(x, output_size, return_indices=True)
            for what, g, e in zip(("values", "indices"), got, expected):
                assert layout_of(g) == layout_of(e), f"{what} of {size} -> {output_size}, {layout}"
            assert layout_of(poolx_pool(x, output_size)) == layout_of(expected[0])


def test_fast_paths_and_element_kernels_agree_on_even_windows():
    """Even windows run max pooling's fast paths; with them off, the element
    kernels must give the same (and torch's) results."""
    x = random_values((4, 16, 14, 14), torch.float32).contiguous(memory_format=torch.channels_last)
    fast = poolx.adaptive_max_pool2d(x, 7, return_indices=True)
    previous = ops.set_cpu_fast_paths(False)
    try:
        generic = poolx.adaptive_max_pool2d(x, 7, return_indices=True)
    finally:
        ops.set_cpu_fast_paths(previous)
    for a, b in zip(fast, generic):
        assert_identical(a, b, "fast vs element kernels")


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_even_heads_are_max_pooling(dims):
    """A head whose sizes divide pools the windows of torch's max pooling
    with kernel = stride = in / out (values, indices, gradient), through the
    adaptive op's C++ autograd node."""
    size, out = (12, 10, 6)[:dims], (4, 1, 3)[:dims]
    kernel = tuple(s // o for s, o in zip(size, out))
    x = random_values((2, 5, *size), torch.float32).requires_grad_()
    y, indices = getattr(poolx, f"adaptive_max_pool{dims}d")(x, out, return_indices=True)
    node = y.grad_fn if dims > 1 else y.grad_fn.next_functions[0][0]  # 1-D: past the squeeze
    assert node.name().startswith("torch::autograd::CppNode<poolx::"), node.name()
    x_ref = x.detach().requires_grad_()
    y_ref, indices_ref = getattr(F, f"max_pool{dims}d")(x_ref, kernel, return_indices=True)
    assert_identical(y, y_ref, "values")
    assert_identical(indices, indices_ref, "indices")
    grad_out = upstream_grad(y)
    (grad,) = torch.autograd.grad(y, x, grad_out)
    (grad_ref,) = torch.autograd.grad(y_ref, x_ref, grad_out)
    assert_identical(grad, grad_ref, "gradient")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_inputs_raise_as_torch(dtype):
    x = torch.zeros(1, 2, 4, 4, dtype=dtype)
    for pool, ours in ((F.adaptive_max_pool2d, poolx.adaptive_max_pool2d),
                       (F.adaptive_max_pool1d, poolx.adaptive_max_pool1d)):
        t = x if pool is F.adaptive_max_pool2d else x[0]
        with pytest.raises(NotImplementedError) as expected:
            pool(t, 2)
        raises_like(expected.value, lambda: ours(t, 2))  # noqa: B023


BAD_CALLS = [
    ("2d", (4, 4), 2), ("2d", (2, 0, 4), 2), ("2d", (2, 3, 0, 4), 2), ("2d", (1, 2, 4, 4), -1),
    ("2d", (1, 2, 4, 4), (2, 2, 2)), ("2d", (1, 2, 4, 4), (2,)), ("2d", (4,), (None, 2)),
    ("2d", (1, 2, 4, 4), 2.0), ("2d", (1, 2, 4, 4), "2"), ("3d", (2, 4, 4), 2),
    ("3d", (1, 2, 0, 4, 4), 2), ("3d", (1, 2, 3, 4, 4), (1, 2)), ("3d", (1, 1, 2, 2, 2), -3),
    ("1d", (4,), 2), ("1d", (2, 0, 4), 2), ("1d", (2, 3, 4), (1, 2)), ("1d", (2, 3, 4), -2),
    ("2d", (1, 2, 4, 4), 2**64), ("2d", (1, 2, 4, 4), (1, -(2**63) - 1)),
    ("3d", (1, 2, 3, 4, 4), (1, 1, 2**64)), ("1d", (2, 3, 4), (2**63,)),
]


@pytest.mark.parametrize("dims, shape, output_size", BAD_CALLS)
def test_invalid_calls_raise_as_torch(dims, shape, output_size):
    torch_pool = getattr(F, f"adaptive_max_pool{dims}")
    ours = getattr(poolx, f"adaptive_max_pool{dims}")
    x = torch.randn(shape)
    with pytest.raises(Exception) as expected:
        torch_pool(x, output_size)
    raises_like(expected.value, lambda: ours(x, output_size))


@pytest.mark.parametrize("dims, shape, output_size", [
    ("1d", (1, 64), 0), ("1d", (2, 64, 5), 0), ("2d", (1, 64, 10, 9), 0),
    ("2d", (64, 10, 9), (2, 0)), ("3d", (1, 4, 5, 6, 3), (0, 2, 2)), ("3d", (4, 5, 6, 3), 0),
])
def test_backward_of_an_empty_output_raises_as_torch(dims, shape, output_size):
    """torch's forward pools to nothing; its backward refuses the empty grad_output."""
    messages = []
    name = f"adaptive_max_pool{dims}"
    for pool in (getattr(F, name), getattr(poolx, name)):
        x = torch.randn(shape, requires_grad=True)
        out = pool(x, output_size)
        assert out.numel() == 0
        with pytest.raises(RuntimeError) as error:
            out.sum().backward()
        messages.append(str(error.value))
    assert "Expected grad_output to have non-zero size" in messages[0]
    assert messages[1] == messages[0]


def test_edge_sizes_match_torch():
    """Unbatched input with no channels, an empty batch, and output_size 0."""
    for shape, size in [((0, 7, 7), 3), ((0, 3, 7, 7), (2, 3)), ((2, 3, 5, 5), 0)]:
        x = torch.randn(shape)
        for got, want in zip(poolx.adaptive_max_pool2d(x, size, True),
                             F.adaptive_max_pool2d(x, size, True)):
            assert_identical(got, want, f"{shape} -> {size}")


def test_hostile_argmax_in_the_backward_is_an_error():
    x = torch.randn(2, 3, 7, 7)
    values, argmax = ops.adaptive_max_pool2d_argmax(x, [3, 3])
    assert argmax.dtype == torch.uint8
    # 7 -> 3: windows of 3 taps a side, numbered within a bound of
    # ceil(7 / 3) + 1 = 4 a side, so a tap in row or column 3 (or beyond the
    # 16 taps) lies outside every window
    for bad in (15, 12, 255):
        hostile = argmax.clone()
        hostile[1, 2, 2, 1] = bad
        with raises_bad_argmax(rf"argmax\[1, 2, 2, 1\] = {bad} names no tap of its window"):
            ops.adaptive_max_pool2d_backward(torch.ones_like(values), hostile, [7, 7], [3, 3])
        with raises_bad_argmax("names no tap"):
            ops.adaptive_gather_by_argmax(x, hostile, [3, 3])
    with pytest.raises(RuntimeError, match="must be the pooled tensor's"):
        ops.adaptive_max_pool2d_backward(values, argmax, [7, 7], [3, 2])
    with pytest.raises(RuntimeError, match="argmax must have dtype"):
        ops.adaptive_max_pool2d_backward(values, argmax.int(), [7, 7], [3, 3])


def test_windows_as_torch_defines_them():
    """Each window's maximum of distinct values is at the flat index torch
    places it, computed here from torch's formula."""
    h, w, oh, ow = 11, 7, 4, 5
    x = torch.randperm(h * w).reshape(1, 1, h, w).float()
    values, indices = poolx.adaptive_max_pool2d(x, (oh, ow), return_indices=True)
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * h // oh, -(-(i + 1) * h // oh))
            cols = slice(j * w // ow, -(-(j + 1) * w // ow))
            window = x[0, 0, rows, cols]
            assert values[0, 0, i, j] == window.max()
            assert x.view(-1)[indices[0, 0, i, j]] == window.max()


@pytest.mark.parametrize("output_size", [(4, 4), (1, 1), (3, 5)])
def test_nan_payloads_of_the_value_only_path_are_torchs(output_size):
    """A window holding NaNs gives its last NaN, bits and all, as torch's
    rule does, in the value-only (inference) path as with the argmax."""
    x = torch.randn(3, 4, 13, 17)
    payloads = torch.tensor([0x7FC00001, 0x7FC00002, -0x3FFFFD], dtype=torch.int32)
    at = torch.randperm(x.numel())[:40]
    x.view(-1)[at] = payloads[torch.randint(0, 3, (40,))].view(torch.float32)
    with torch.no_grad():
        expected = F.adaptive_max_pool2d(x, output_size)
        got = poolx.adaptive_max_pool2d(x, output_size)
        got_argmax_path = poolx.adaptive_max_pool2d(x, output_size, return_indices=True)[0]
    assert expected.isnan().any()
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))
    assert torch.equal(got_argmax_path.view(torch.int32), expected.view(torch.int32))
