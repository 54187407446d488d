"""Fake (meta) kernels of the torch.ops.poolx operators."""

import torch

from poolx import _geometry as geo
from poolx import _library  # noqa: F401  (loads the ops registered here)


def _empty_like_layout(like, shape, dtype=None, dims=2):
    """Empty tensor on like's device, in the layout the kernels derive from like."""
    dtype = like.dtype if dtype is None else dtype
    return torch.empty(
        shape, dtype=dtype, device=like.device, memory_format=geo.memory_format(like, dims)
    )


def _pooled(input, kernel, stride, padding, dilation, ceil_mode, dtype=None):
    out = geo.forward_hw(input, kernel, stride, padding, dilation, ceil_mode)
    shape = (*input.shape[:-len(kernel)], *out)
    return _empty_like_layout(input, shape, dtype, len(kernel))


def _pool_argmax_fake(input, kernel, stride, padding, dilation, ceil_mode):
    args = (kernel, stride, padding, dilation, ceil_mode)
    return _pooled(input, *args), _pooled(input, *args, dtype=geo.argmax_dtype(kernel))


def _pool_indices_fake(input, kernel, stride, padding, dilation, ceil_mode):
    args = (kernel, stride, padding, dilation, ceil_mode)
    values, argmax = _pool_argmax_fake(input, *args)
    return values, argmax, _pooled(input, *args, dtype=torch.int64)


def _pool_values_fake(input, kernel, stride, padding, dilation, ceil_mode):
    return _pooled(input, kernel, stride, padding, dilation, ceil_mode)


def _check_pooled(pooled, in_hw, kernel, stride, padding, dilation, ceil_mode):
    geo.check_params(kernel, stride, padding, dilation)
    out = geo.pooled_hw(in_hw, kernel, stride, padding, dilation, ceil_mode)
    if tuple(pooled.shape[-len(kernel):]) != tuple(out):
        raise RuntimeError(
            f"pooling an input of size {list(in_hw)} gives an output of size {list(out)}, "
            f"but the given tensor has size {list(pooled.shape)}"
        )


def _unpooled(like_pooled, argmax, in_hw, args, dtype=None):
    _check_pooled(like_pooled, in_hw, *args)
    if argmax.device != like_pooled.device:
        raise RuntimeError(
            f"argmax must be on the device of the pooled tensor ({like_pooled.device}), "
            f"but got argmax.device={argmax.device}"
        )
    dtype = like_pooled.dtype if dtype is None else dtype
    dims = len(args[0])
    return _empty_like_layout(argmax, (*like_pooled.shape[:-dims], *in_hw), dtype, dims)


def _place_fake(pooled, argmax, input_size, *args):
    return _unpooled(pooled, argmax, input_size, args)


def _argmax_to_mask_fake(argmax, input_size, *args):
    return _unpooled(argmax, argmax, input_size, args, dtype=torch.bool)


def _argmax_to_indices_fake(argmax, input_size, *args):
    _check_pooled(argmax, input_size, *args)
    return _empty_like_layout(argmax, argmax.shape, torch.int64, len(args[0]))


def _gather_by_argmax_fake(src, argmax, *args):
    dims = len(args[0])
    _check_pooled(argmax, src.shape[-dims:], *args)
    return _empty_like_layout(argmax, argmax.shape, src.dtype, dims)


# fake kernel -> the ops it serves, 2-D then 3-D
for _fake, _names in {
    _pool_argmax_fake: ("max_pool2d_argmax", "max_pool3d_argmax"),
    _pool_indices_fake: ("max_pool2d_indices", "max_pool3d_indices"),
    _pool_values_fake: ("max_pool2d_values", "max_pool3d_values"),
    _place_fake: ("max_pool2d_backward", "max_pool3d_backward", "max_unpool2d_argmax",
                  "max_unpool3d_argmax"),
    _argmax_to_mask_fake: ("argmax_to_mask", "argmax_to_mask3d"),
    _argmax_to_indices_fake: ("argmax_to_indices", "argmax_to_indices3d"),
    _gather_by_argmax_fake: ("gather_by_argmax", "gather_by_argmax3d"),
}.items():
    for _name in _names:
        torch.library.register_fake(f"poolx::{_name}", _fake)


@torch.library.register_fake("poolx::max_unpool2d")
def _max_unpool2d_fake(input, indices, output_size):
    # The C++ op's checks that need no data (a meta `indices` lands here).
    if indices.dtype != torch.int64:
        raise RuntimeError(
            f"max_unpool2d: elements in indices should be type int64 but got: {indices.dtype}"
        )
    if indices.shape != input.shape or indices.device != input.device:
        raise RuntimeError(
            f"max_unpool2d: indices must match input's shape {list(input.shape)} and device "
            f"{input.device}, but got indices of shape {list(indices.shape)} on {indices.device}"
        )
    return _empty_like_layout(input, (*input.shape[:-2], *output_size))

# Their autograd is registered in C++ (csrc/autograd.cpp).
