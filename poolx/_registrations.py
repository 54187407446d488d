"""Fake (meta) kernels of the torch.ops.poolx operators. (Their reverse-mode
autograd is registered in C++: csrc/autograd.cpp.)"""

import torch

from poolx import _geometry as geo
from poolx import _library  # noqa: F401  (loads the ops registered here)
from poolx.functional_adaptive import check_nonempty


def _empty_like_layout(like, shape, dtype=None, dims=2, adaptive=False):
    """Empty tensor on like's device, in the layout the kernels derive from like."""
    dtype = like.dtype if dtype is None else dtype
    unbatched = len(shape) == dims + 1  # laid out as a batch of one (geo.memory_format)
    out = torch.empty((1, *shape) if unbatched else shape, dtype=dtype, device=like.device,
                      memory_format=geo.memory_format(like, dims, adaptive))
    return out.squeeze(0) if unbatched else out


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


# Adaptive pooling (csrc/adaptive_ops.cpp, adaptive_args.cpp).


def _adaptive_kernel(size, out):
    """The widest window of an axis pooled from `size` to `out` (geometry.h)."""
    if out == 0:
        return 1
    if size % out == 0:
        return max(size // out, 1)
    return (size + out - 1) // out + 1


def _check_adaptive_input(input, output_size, op):
    dims = len(output_size)
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"{op}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    check_nonempty(input, op)
    for s in output_size:
        if s < 0:  # torch's words, from allocating the output
            shape = [*input.shape[:-dims], *output_size]
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {shape}")


def _adaptive_pooled(input, output_size, dtype=None):
    dims = len(output_size)
    return _empty_like_layout(input, (*input.shape[:-dims], *output_size), dtype, dims,
                              adaptive=True)


def _adaptive_argmax_dtype(in_sizes, output_size):
    taps = 1
    for size, out in zip(in_sizes, output_size):
        taps *= _adaptive_kernel(size, out)
    return torch.uint8 if taps <= geo.UINT8_WINDOW else torch.int32


def _adaptive_values_fake(input, output_size):
    _check_adaptive_input(input, output_size, f"adaptive_max_pool{len(output_size)}d")
    return _adaptive_pooled(input, output_size)


def _adaptive_argmax_fake(input, output_size):
    values = _adaptive_values_fake(input, output_size)
    dtype = _adaptive_argmax_dtype(input.shape[-len(output_size):], output_size)
    return values, _adaptive_pooled(input, output_size, dtype)


def _adaptive_indices_fake(input, output_size):
    values, argmax = _adaptive_argmax_fake(input, output_size)
    return values, argmax, _adaptive_pooled(input, output_size, torch.int64)


def _check_adaptive_pooled(pooled, in_sizes, output_size):
    if tuple(pooled.shape[-len(output_size):]) != tuple(output_size):
        raise RuntimeError(f"output_size={list(output_size)} must be the pooled tensor's, but "
                           f"the given tensor has size {list(pooled.shape)}")
    if any(s <= 0 for s in in_sizes):
        raise RuntimeError(f"input_size must be positive, but got {list(in_sizes)}")


def _adaptive_backward_fake(grad_output, argmax, input_size, output_size):
    dims = len(output_size)
    check_nonempty(grad_output, f"adaptive_max_pool{dims}d_backward", "grad_output")
    _check_adaptive_pooled(grad_output, input_size, output_size)
    return _empty_like_layout(argmax, (*grad_output.shape[:-dims], *input_size),
                              grad_output.dtype, dims, adaptive=True)


def _adaptive_gather_fake(src, argmax, output_size):
    dims = len(output_size)
    _check_adaptive_pooled(argmax, src.shape[-dims:], output_size)
    return _empty_like_layout(argmax, argmax.shape, src.dtype, dims, adaptive=True)


for _fake, _names in {
    _adaptive_argmax_fake: ("adaptive_max_pool2d_argmax", "adaptive_max_pool3d_argmax"),
    _adaptive_indices_fake: ("adaptive_max_pool2d_indices", "adaptive_max_pool3d_indices"),
    _adaptive_values_fake: ("adaptive_max_pool2d_values", "adaptive_max_pool3d_values"),
    _adaptive_backward_fake: ("adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward"),
    _adaptive_gather_fake: ("adaptive_gather_by_argmax", "adaptive_gather_by_argmax3d"),
}.items():
    for _name in _names:
        torch.library.register_fake(f"poolx::{_name}", _fake)
