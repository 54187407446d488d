"""Gradients of poolx.max_unpool2d and poolx.max_unpool2d_argmax against
torch's: autograd, forward-mode AD, torch.func, gradcheck, and through
torch.compile and opcheck's registration checks."""

import pytest
import torch
import torch.nn.functional as F
from unpool_cases import (
    CASES,
    assert_same_bits,
    pooled_input,
    torch_unpool,
    unpool_args,
    values_like,
)

import poolx


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("case", CASES)
def test_gradients_match_torch(device, case, channels_last):
    """Gradient = grad_output at each value's index, even for a value a later
    one overwrote (torch's definition), and so for both forms."""
    pool, x, indices = pooled_input(case, device, channels_last=channels_last)
    values = values_like(indices, torch.float64).nan_to_num().requires_grad_()
    grad_out = torch.randn(x.shape, dtype=torch.float64, device=device)
    if channels_last:
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    ref_values = values.detach().cpu().requires_grad_()
    torch_unpool(ref_values, indices, pool, x.shape).backward(grad_out.cpu())

    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    (grad,) = torch.autograd.grad(out, values, grad_out)
    assert_same_bits(grad, ref_values.grad)

    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    out = poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool)
    (grad,) = torch.autograd.grad(out, values, grad_out)
    assert_same_bits(grad, ref_values.grad)


@pytest.mark.parametrize("case", CASES)
def test_forward_ad_and_torch_func_match_torch(device, case):
    """The tangent of an unpool is the unpooled tangent (torch's rule), through
    forward-mode AD and torch.func, for both forms; grad and vmap likewise."""
    from torch.autograd import forward_ad

    pool, x, indices = pooled_input(case, device, channels_last=False)
    values = values_like(indices, torch.float64).nan_to_num()
    tangent = torch.randn_like(values)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    ours = {
        "indices": lambda v: poolx.max_unpool2d(v, indices, *unpool_args(pool), x.shape),
        "argmax": lambda v: poolx.max_unpool2d_argmax(v, argmax, x.shape, *pool),
    }

    def ref(v):
        return torch_unpool(v, indices, pool, x.shape).to(device)

    expected_tangent = ref(tangent)
    expected_grad = torch.func.grad(lambda v: ref(v).square().sum())(values)
    for form, unpool in ours.items():
        with forward_ad.dual_level():
            out = forward_ad.unpack_dual(unpool(forward_ad.make_dual(values, tangent)))
        assert_same_bits(out.tangent, expected_tangent)
        assert_same_bits(torch.func.jvp(unpool, (values,), (tangent,))[1], expected_tangent)
        assert_same_bits(torch.func.grad(lambda v: unpool(v).square().sum())(values),
                         expected_grad)
        batch = torch.stack([values, tangent])
        assert_same_bits(torch.func.vmap(unpool)(batch), torch.stack([ref(values), ref(tangent)]))


@pytest.mark.parametrize("shape", [(0, 3, 4, 5), (0, 4, 5)], ids=["batch 0", "3-D, 0 planes"])
def test_empty_backward_matches_torch(shape):
    values = torch.randn(shape, requires_grad=True)
    indices = torch.zeros(shape, dtype=torch.long)
    out = poolx.max_unpool2d(values, indices, 2)
    out.sum().backward()
    expected = F.max_unpool2d(values.detach(), indices, 2)
    assert out.shape == expected.shape and values.grad.shape == values.shape


def test_gradcheck(device):
    """Tiled windows (no repeated index), so the gradient is the true derivative."""
    pool, x, indices = pooled_input("tiled 2x2, odd size", device, False, batch=(1, 2))
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = torch.randn(indices.shape, dtype=torch.float64, device=device, requires_grad=True)
    for fn in (
        lambda v: poolx.max_unpool2d(v, indices, 2, output_size=x.shape),
        lambda v: poolx.max_unpool2d_argmax(v, argmax, x.shape, *pool),
    ):
        assert torch.autograd.gradcheck(fn, values)
        assert torch.autograd.gradgradcheck(fn, values)


def test_opcheck(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False, batch=(1, 2))
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = values_like(indices, torch.float32).nan_to_num().requires_grad_()
    torch.library.opcheck(torch.ops.poolx.max_unpool2d.default, (values, indices, (6, 7)))
    args = (values, argmax, (6, 7), [3, 3], [1, 1], [1, 1], [1, 1], False)
    torch.library.opcheck(torch.ops.poolx.max_unpool2d_argmax.default, args)


def test_compile_fullgraph(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = values_like(indices, torch.float32).nan_to_num().requires_grad_()

    def both(v):
        return poolx.max_unpool2d(v, indices, 3, 1, 1, x.shape) + poolx.max_unpool2d_argmax(
            v, argmax, x.shape, *pool
        )

    compiled = torch.compile(both, fullgraph=True, backend="aot_eager")
    expected, got = both(values), compiled(values)
    assert_same_bits(got, expected)
    grad_out = torch.randn_like(expected)
    assert_same_bits(
        torch.autograd.grad(got, values, grad_out)[0],
        torch.autograd.grad(expected, values, grad_out)[0].cpu(),
    )
