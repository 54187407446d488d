"""Backward through autograd: input gradients bit for bit against torch (the
summation order is fixed: output row-major), double backward, gradcheck."""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck

import poolx
from inputs import FLOAT_DTYPES, GRID, SMALL_GRID, Pool, distinct_values, layouts, random_values
from inputs import upstream_grad
from reference import assert_identical, torch_grad


def requiring_grad(dtype, device):
    return lambda shape: random_values(shape, dtype, device).requires_grad_()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_gradient_matches_torch(dtype, device):
    for pool in GRID:
        for layout, x in layouts((2, 3, *pool.hw), requiring_grad(dtype, device)):
            what = f"{pool} | {layout} | {dtype} | input strides {x.stride()}"
            y = poolx.max_pool2d(x, **pool.kwargs())
            grad_out = upstream_grad(y)
            (grad,) = torch.autograd.grad(y, x, grad_out)
            assert_identical(grad, torch_grad(x, pool, grad_out), f"input gradient of {what}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_negative_zero_gradient_gives_positive_zero(dtype, device):
    """torch adds into a zero-filled gradient, so -0.0 upstream becomes +0.0."""
    for pool in (GRID[0], GRID[5], GRID[9]):
        x = random_values((2, 3, *pool.hw), dtype, device).requires_grad_()
        y = poolx.max_pool2d(x, **pool.kwargs())
        (grad,) = torch.autograd.grad(y, x, torch.full_like(y, -0.0))
        assert not grad.signbit().any(), f"-0.0 in the gradient of {pool} | {dtype}"
        assert_identical(grad, torch_grad(x, pool, torch.full_like(y, -0.0)), str(pool))


def test_values_op_recomputes_the_same_gradient(device):
    """max_pool2d_values keeps no argmax; its backward recomputes it."""
    for pool in SMALL_GRID:
        x = random_values((2, 3, *pool.hw), torch.float32, device).requires_grad_()
        kernel, stride, padding, dilation = poolx._geometry.pool_params(
            pool.kernel_size, pool.stride, pool.padding, pool.dilation
        )
        y = torch.ops.poolx.max_pool2d_values(x, kernel, stride, padding, dilation, pool.ceil_mode)
        grad_out = upstream_grad(y)
        (grad,) = torch.autograd.grad(y, x, grad_out)
        assert_identical(grad, torch_grad(x, pool, grad_out), f"values op gradient of {pool}")


def grad_of_grad_output(pool_fn, pool, x, grad_out, grad_grad):
    """d(input gradient)/d(grad_output) applied to grad_grad: a gather by argmax."""
    x = x.detach().requires_grad_()
    grad_out = grad_out.detach().requires_grad_()
    (grad,) = torch.autograd.grad(pool_fn(x, **pool.kwargs()), x, grad_out, create_graph=True)
    return torch.autograd.grad(grad, grad_out, grad_grad)[0]


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_double_backward_matches_torch(dtype, device):
    for pool in SMALL_GRID:
        x = random_values((2, 3, *pool.hw), dtype, device)
        grad_out = upstream_grad(poolx.max_pool2d(x, **pool.kwargs()))
        grad_grad = torch.randn_like(x)
        got = grad_of_grad_output(poolx.max_pool2d, pool, x, grad_out, grad_grad)
        expected = grad_of_grad_output(
            torch.nn.functional.max_pool2d, pool, x.cpu(), grad_out.cpu(), grad_grad.cpu()
        )
        assert_identical(got, expected, f"gradient of grad_output for {pool} | {dtype}")


GRADCHECK_POOLS = (
    Pool("tiled", (4, 6), 2),
    Pool("overlapping padded dilated ceil_mode", (6, 7), 3, 2, 1, 2, ceil_mode=True),
    Pool("non-square", (5, 7), (2, 3), (1, 2), (1, 1)),
)


@pytest.mark.parametrize("pool", GRADCHECK_POOLS, ids=lambda p: p.name)
def test_gradcheck_and_gradgradcheck(pool, device):
    for shape in ((2, 2, *pool.hw), (2, *pool.hw)):
        x = distinct_values(shape, device=device).requires_grad_()
        x_cl = x.detach().contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
        for inp in (x, x_cl.requires_grad_()):
            fn = lambda t: poolx.max_pool2d(t, **pool.kwargs())  # noqa: E731
            assert gradcheck(fn, (inp,)), f"{pool} | {shape}"
            assert gradgradcheck(fn, (inp,)), f"{pool} | {shape}"

        _, argmax = poolx.max_pool2d_with_argmax(x.detach(), **pool.kwargs())
        grad_out = torch.randn(argmax.shape, dtype=torch.float64, device=device)
        manual = lambda g: poolx.max_pool2d_backward(g, argmax, x.shape, **pool.kwargs())  # noqa
        assert gradcheck(manual, (grad_out.requires_grad_(),)), f"manual backward of {pool}"
        assert gradgradcheck(manual, (grad_out,)), f"manual backward of {pool}"


def test_grad_output_in_any_layout(device):
    """Upstream gradients in another layout than the output, or expanded
    (as y.sum() gives), still yield torch's gradient in torch's layout."""
    for pool in SMALL_GRID:
        for layout, x in layouts((2, 3, *pool.hw), requiring_grad(torch.float32, device)):
            y = poolx.max_pool2d(x, **pool.kwargs())
            g = upstream_grad(y)
            g_cl = g.contiguous(memory_format=torch.channels_last) if g.dim() == 4 else g
            for name, grad_out in (
                ("channels_last", g_cl),
                ("contiguous", g.contiguous()),
                ("transposed", g.transpose(-1, -2).contiguous().transpose(-1, -2)),
                ("expanded", torch.full((1,), -1.5, device=device).expand_as(y)),
            ):
                (grad,) = torch.autograd.grad(y, x, grad_out, retain_graph=True)
                expected = torch_grad(x, pool, grad_out)
                assert_identical(grad, expected, f"{pool} | {layout} | grad_output {name}")


@pytest.mark.parametrize("save", ["argmax", "recompute"])
def test_backward_runs_only_the_routing_kernel(save):
    """One pass and no fill: autograd must not materialize a zero gradient for
    the non-differentiable argmax output (a fill of its size per backward)."""
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    y = poolx.max_pool2d(x, 2, save=save)
    g = torch.randn_like(y)
    with torch.profiler.profile() as prof:
        y.backward(g)
    names = {e.name for e in prof.events()}
    assert "poolx::max_pool2d_backward" in names
    filled = sorted(n for n in names if n in ("aten::zeros", "aten::zeros_like", "aten::fill_",
                                                "aten::zero_"))
    assert not filled, f"backward filled a tensor: {filled}"


IN_PLACE_CASES = {  # torch's pool, poolx's, input shape, pooling arguments
    "1-D": (F.max_pool1d, poolx.max_pool1d, (2, 3, 8), (2,)),
    "2-D": (F.max_pool2d, poolx.max_pool2d, (2, 3, 6, 8), (3, 2, 1)),
    "3-D": (F.max_pool3d, poolx.max_pool3d, (2, 3, 4, 6, 8), (2,)),
    "adaptive 2-D": (F.adaptive_max_pool2d, poolx.adaptive_max_pool2d, (2, 3, 7, 7), (3,)),
    "adaptive head": (F.adaptive_max_pool2d, poolx.adaptive_max_pool2d, (2, 3, 7, 7), (1,)),
}


@pytest.mark.parametrize("modified", ["indices", "input", "nothing"])
@pytest.mark.parametrize("case", IN_PLACE_CASES)
def test_backward_refuses_what_torch_refuses_modified_in_place(case, modified):
    """torch's backward reads the input and the indices, and refuses them
    changed in place; poolx keeps neither, yet refuses the same."""
    torch_pool, poolx_pool, shape, args = IN_PLACE_CASES[case]
    leaf = torch.randn(shape, requires_grad=True)
    raised = []
    for pool in (torch_pool, poolx_pool):
        x = leaf * 1
        values, indices = pool(x, *args, return_indices=True)
        if modified != "nothing":
            (indices if modified == "indices" else x).add_(1)
        try:
            values.sum().backward()
            raised.append(None)
        except RuntimeError as error:
            assert "modified by an inplace operation" in str(error)
            raised.append(type(error))
    assert raised[1] == raised[0] == (None if modified == "nothing" else RuntimeError)
