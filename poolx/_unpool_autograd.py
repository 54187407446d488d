"""Autograd of the unpool operators: the gradient of each pooled value is the
output gradient at the position it was placed, as torch defines it (also for a
value that a later one overwrote). Both backwards are differentiable again."""

import torch

from poolx._library import ops


def _setup_unpool(ctx, inputs, output):
    _input, indices, _output_size = inputs
    ctx.save_for_backward(indices)


def _backward_unpool(ctx, grad_output):
    (indices,) = ctx.saved_tensors
    # torch.gather on the flattened planes (torch's max_pool_double_backward).
    planes = grad_output.reshape(*grad_output.shape[:-2], -1)
    flat_indices = indices.reshape(*indices.shape[:-2], -1)
    return planes.gather(-1, flat_indices).reshape(indices.shape), None, None


def _setup_unpool_argmax(ctx, inputs, output):
    _values, argmax, _output_size, *ctx.pool_args = inputs
    ctx.save_for_backward(argmax)


def _backward_unpool_argmax(ctx, grad_output):
    (argmax,) = ctx.saved_tensors
    grad = ops.gather_by_argmax(grad_output, argmax, *ctx.pool_args)
    return grad, None, None, None, None, None, None, None


torch.library.register_autograd(
    "poolx::max_unpool2d", _backward_unpool, setup_context=_setup_unpool
)
torch.library.register_autograd(
    "poolx::max_unpool2d_argmax", _backward_unpool_argmax, setup_context=_setup_unpool_argmax
)
