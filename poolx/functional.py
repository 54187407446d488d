"""The functional API: drop-ins for torch.nn.functional plus the argmax tools."""

import torch

from poolx import _geometry as geo
from poolx._library import ops


def _needs_grad(input):
    return torch.is_grad_enabled() and input.requires_grad


def max_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    """Same signature, results and gradients as torch.nn.functional.max_pool2d.

    Saves only a 1-byte argmax per output for backward, and writes no argmax
    at all when no gradient is needed.
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    if return_indices:
        values, argmax = ops.max_pool2d_argmax(input, *params, ceil_mode)
        indices = ops.argmax_to_indices(argmax, tuple(input.shape[-2:]), *params, ceil_mode)
        return values, indices
    if _needs_grad(input):
        return ops.max_pool2d_argmax(input, *params, ceil_mode)[0]
    return ops.max_pool2d_values(input, *params, ceil_mode)


def max_pool2d_with_argmax(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """(values, argmax) in one pass.

    argmax[..., oh, ow] is the position kh * kernel_w + kw of the maximum inside
    its window, as torch.uint8 (torch.int32 for windows of more than 256 taps).
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    return ops.max_pool2d_argmax(input, *params, ceil_mode)


def max_pool2d_backward(
    grad_output,
    argmax,
    input_size,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
):
    """Routes grad_output back through argmax to a gradient of the input's shape.

    input_size is the input's full shape or just its (H, W).
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    in_hw = geo.input_hw(input_size, grad_output)
    return ops.max_pool2d_backward(grad_output, argmax, in_hw, *params, ceil_mode)


def argmax_to_indices(
    argmax, input_size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False
):
    """The int64 flat indices (h * W + w) that torch's max_pool2d returns."""
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    in_hw = geo.input_hw(input_size, argmax)
    return ops.argmax_to_indices(argmax, in_hw, *params, ceil_mode)


def argmax_to_mask(
    argmax, input_size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False
):
    """Boolean map of the input's shape: True at every window's selected maximum."""
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    in_hw = geo.input_hw(input_size, argmax)
    return ops.argmax_to_mask(argmax, in_hw, *params, ceil_mode)
