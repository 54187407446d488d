"""The functional API: drop-ins for torch.nn.functional plus the argmax tools."""

import re

import torch
import torch.nn.functional as F
from torch.nn.modules.utils import _pair

from poolx import _geometry as geo
from poolx._functions import (
    pool_argmax,
    pool_indices,
    pool_values,
    route_to_input,
    unpool_by_argmax,
    unpool_by_indices,
)
from poolx._library import ops


def _needs_grad(input):
    return torch.is_grad_enabled() and input.requires_grad


SAVE_MODES = ("argmax", "recompute")


def check_save(save, return_indices=False):
    if save not in SAVE_MODES:
        raise ValueError(f"save must be 'argmax' or 'recompute', but got save={save!r}")
    # The argmax exists anyway to build the indices; recomputing it would cost
    # a second pass to free 1 byte per output while the caller holds 8.
    if save == "recompute" and return_indices:
        raise ValueError("save='recompute' cannot be combined with return_indices=True")


def max_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
    *,
    save="argmax",
):
    """Same signature, results and gradients as torch.nn.functional.max_pool2d.

    save chooses what backward keeps: "argmax" (default) a 1-byte argmax per
    output; "recompute" only the input, whose argmax backward recomputes (the
    layer before usually keeps that input alive anyway). Gradients are the same
    bit for bit. No argmax is written at all when no gradient is needed.
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation)
    return pool(input, (*params, ceil_mode), return_indices, save)


def pool(input, pool_args, return_indices, save):
    """Max pooling after the arguments were normalized: windowed, pool_args
    (kernel, stride, padding, dilation, ceil_mode), or adaptive,
    (output_size,); 2-D or 3-D by the length of the first."""
    check_save(save, return_indices)
    if return_indices:
        values, _, indices = pool_indices(input, *pool_args)
        return values, indices
    if _needs_grad(input) and save == "argmax":
        return pool_argmax(input, *pool_args)[0]
    return pool_values(input, *pool_args)


def max_pool2d_with_argmax(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """(values, argmax) in one pass.

    argmax[..., oh, ow] is the position kh * kernel_w + kw of the maximum inside
    its window, as torch.uint8 (torch.int32 for windows of more than 256 taps).
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation, "max_pool2d_with_argmax")
    return pool_argmax(input, *params, ceil_mode)


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
    params = geo.pool_params(kernel_size, stride, padding, dilation, "max_pool2d_backward")
    in_hw = geo.input_hw(input_size, grad_output, "max_pool2d_backward")
    return route_to_input(grad_output, argmax, tuple(in_hw), *params, ceil_mode)


def argmax_to_indices(
    argmax, input_size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False
):
    """The int64 flat indices (h * W + w) that torch's max_pool2d returns."""
    params = geo.pool_params(kernel_size, stride, padding, dilation, "argmax_to_indices")
    in_hw = geo.input_hw(input_size, argmax, "argmax_to_indices")
    return ops.argmax_to_indices(argmax, in_hw, *params, ceil_mode)


def argmax_to_mask(
    argmax, input_size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False
):
    """Boolean map of the input's shape: True at every window's selected maximum."""
    params = geo.pool_params(kernel_size, stride, padding, dilation, "argmax_to_mask")
    in_hw = geo.input_hw(input_size, argmax, "argmax_to_mask")
    return ops.argmax_to_mask(argmax, in_hw, *params, ceil_mode)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Same signature, results and gradients as torch.nn.functional.max_unpool2d.

    Deterministic even where indices repeat (overlapping windows): within each
    (N, C) plane the value that comes last in row-major order of `input` wins,
    torch's CPU result on one thread (torch's multi-threaded CPU kernel and its
    CUDA kernel may keep either write). Indices outside the output plane raise
    an error instead of being written.
    """
    return unpool_by_indices(input, indices,
                             _unpool_hw(input, kernel_size, stride, padding, output_size))


def _unpool_hw(input, kernel_size, stride, padding, output_size):
    """The unpooled (H, W) by torch's rule (F._unpool_output_size): worked out
    directly for plain ints (a small unpool's kernel costs less than torch's
    general rule), else by torch's code, with its errors."""
    kernel = geo.int_pair(kernel_size)
    steps = kernel if stride is None else geo.int_pair(stride)
    pads = geo.int_pair(padding)
    if kernel is None or steps is None or pads is None or input.dim() < 2:
        return _torch_unpool_hw(input, kernel_size, stride, padding, output_size)
    (kh, kw), (sh, sw), (ph, pw) = kernel, steps, pads
    h, w = input.shape[-2:]
    dh, dw = (h - 1) * sh - 2 * ph + kh, (w - 1) * sw - 2 * pw + kw
    if output_size is None:
        return dh, dw
    if isinstance(output_size, (tuple, list)) and len(output_size) in (2, 4):
        oh, ow = output_size[-2:]
        if type(oh) is int and type(ow) is int and dh - sh < oh < dh + sh and dw - sw < ow < dw + sw:
            return oh, ow
    return _torch_unpool_hw(input, kernel_size, stride, padding, output_size)


def _torch_unpool_hw(input, kernel_size, stride, padding, output_size):
    # NumPy and tensor ints as ints: torch's rule fails on NumPy's bools
    kernel_size, stride, padding = map(geo.as_indices, (kernel_size, stride, padding))
    kernel = _pair(kernel_size)
    stride = kernel if stride is None else _pair(stride)
    hw = tuple(map(geo.as_index, F._unpool_output_size(input, kernel, stride, _pair(padding),
                                                        output_size)))
    for pos, size in enumerate(hw):
        if not isinstance(size, (int, torch.SymInt)):  # torch's argument parser's error
            raise TypeError(f"max_unpool2d(): argument 'output_size' (position 3) must be tuple "
                            f"of ints, but found element of type {type(size).__name__} at pos {pos}")
    return hw


def unpool_as_planes(op, input, indices, output_hw, sizes):
    """unpool_by_indices of signals or volumes viewed as planes of output_hw,
    whose flat indices are theirs: an index outside them raises torch's error
    naming op and their sizes instead of the planes'."""
    try:
        return unpool_by_indices(input, indices, output_hw)
    except RuntimeError as error:
        bad = re.search(r"Found an invalid max index: (-?\d+)", str(error))
        if bad is None:
            raise
        raise RuntimeError(f"{op}: Found an invalid max index: {bad.group(1)} (output volumes "
                           f"are of size {'x'.join(map(str, sizes))})") from None


def max_unpool2d_argmax(
    input, argmax, output_size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False
):
    """max_unpool2d fed with max_pool2d_with_argmax's compact argmax.

    Places each pooled value at its window's selected tap, zeros elsewhere,
    without building int64 indices. The pooling arguments are those of the
    max_pool2d_with_argmax call; output_size is the pooled tensor's full shape
    or its (H, W). Where windows overlap and select the same tap, the last
    window in row-major order wins, as in max_unpool2d.
    """
    params = geo.pool_params(kernel_size, stride, padding, dilation, "max_unpool2d_argmax")
    out_hw = geo.input_hw(output_size, input, "max_unpool2d_argmax", name="output_size")
    return unpool_by_argmax(input, argmax, tuple(out_hw), *params, ceil_mode)


# The names of the 2-D tools in the scheme of the 1-D ones (argmax_to_indices1d).
argmax_to_indices2d = argmax_to_indices
argmax_to_mask2d = argmax_to_mask
