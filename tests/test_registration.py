"""Operator registration: torch.library.opcheck on every op (schema, fake
kernel, autograd registration, AOT dispatch) and torch.compile(fullgraph=True)."""

import pytest
import torch
from torch import nn

import poolx
from poolx import _geometry as geo
from inputs import Pool, distinct_values, random_values

ops = torch.ops.poolx

POOLS = (
    Pool("tiled", (6, 8), 2),
    Pool("overlapping padded dilated ceil_mode", (7, 9), 3, (2, 1), 1, (1, 2), ceil_mode=True),
)


def op_calls(x, pool):
    """(op, args) for every poolx op, on input x (3-D or 4-D, any layout)."""
    args = (*geo.pool_params(pool.kernel_size, pool.stride, pool.padding, pool.dilation),
            pool.ceil_mode)
    hw = list(x.shape[-2:])
    values, argmax = ops.max_pool2d_argmax(x.detach(), *args)
    indices = ops.argmax_to_indices(argmax, hw, *args)
    grad_out = torch.randn_like(values).requires_grad_()
    src = torch.randn_like(x).requires_grad_()
    return [
        (ops.max_pool2d_argmax, (x, *args)),
        (ops.max_pool2d_indices, (x, *args)),
        (ops.max_pool2d_values, (x, *args)),
        (ops.max_pool2d_backward, (grad_out, argmax, hw, *args)),
        (ops.gather_by_argmax, (src, argmax, *args)),
        (ops.argmax_to_indices, (argmax, hw, *args)),
        (ops.argmax_to_mask, (argmax, hw, *args)),
        (ops.max_unpool2d_argmax, (values, argmax, hw, *args)),
        (ops.max_unpool2d, (values, indices, hw)),
        (ops.max_unpool2d_backward, (src, indices)),
    ]


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p.name)
@pytest.mark.parametrize("layout", ("nchw", "channels_last", "unbatched"))
def test_opcheck_every_op(pool, layout, device):
    shape = (3, *pool.hw) if layout == "unbatched" else (2, 3, *pool.hw)
    x = distinct_values(shape, torch.float32, device)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    for op, args in op_calls(x.requires_grad_(), pool):
        torch.library.opcheck(op, args)


class PoolingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool1 = poolx.MaxPool2d(2)
        self.pool2 = poolx.MaxPool2d(3, 2, 1, dilation=(1, 2), ceil_mode=True)

    def forward(self, x):
        # exact elementwise math only: a conv or a reduction would let inductor
        # pick another summation order, and the comparison is bit for bit
        return self.pool2(-2.0 * self.pool1(x))


def forward_backward(model, x):
    x = x.detach().requires_grad_()
    y = model(x)
    grad_out = torch.arange(y.numel(), dtype=y.dtype, device=y.device).view_as(y)
    (grad,) = torch.autograd.grad(y, x, grad_out)
    return y, grad


def test_compiled_model_equals_eager(device):
    model = PoolingNet()
    x = random_values((2, 3, 12, 13), torch.float32, device)
    eager = forward_backward(model, x)
    compiled = forward_backward(torch.compile(model, fullgraph=True), x)
    for name, got, expected in zip(("output", "input gradient"), compiled, eager):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True, msg=name)


def test_compiled_functional_equals_eager(device):
    def pool(x):
        values, indices = poolx.max_pool2d(x, 3, 2, 1, return_indices=True)
        values2, argmax = poolx.max_pool2d_with_argmax(x, (2, 3), ceil_mode=True)
        return values, indices, values2, argmax

    x = random_values((2, 3, 11, 10), torch.float32, device)
    compiled = torch.compile(pool, fullgraph=True, dynamic=True)
    for got, expected in zip(compiled(x), pool(x)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
