"""The 3-D functional API: torch.nn.functional's max_pool3d and max_unpool3d,
and the argmax tools, over volumes (N, C, D, H, W).

The ops are the 2-D ones with a depth axis (csrc/include/poolx/geometry.h):
the kernels see a volume as the image (N, C, D * H, W), a view in both
contiguous and channels_last_3d layouts, and only the element functions split
its rows into depth and height. The argmax is the tap (kd * kH + kh) * kW + kw
of the window; the index is torch's (d * H + h) * W + w. Unpool by indices
needs no window at all: the indices are flat in each (D * H, W) plane, so it is
2-D unpool on those views."""

import torch
from torch.nn.modules.utils import _triple

from poolx import _geometry as geo
from poolx import functional as f2d
from poolx._functions import pool_argmax, route_to_input, unpool_by_argmax
from poolx._library import ops


def _params(kernel_size, stride, padding, dilation, op):
    return geo.pool_params(kernel_size, stride, padding, dilation, op, dims=3)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False, *, save="argmax"):
    """Same signature, results and gradients as torch.nn.functional.max_pool3d;
    save as in poolx.max_pool2d."""
    params = _params(kernel_size, stride, padding, dilation, "max_pool3d")
    return f2d.pool(input, (*params, ceil_mode), return_indices, save)


def max_pool3d_with_argmax(input, kernel_size, stride=None, padding=0, dilation=1,
                           ceil_mode=False):
    """(values, argmax) in one pass; argmax[..., od, oh, ow] is the position
    (kd * kernel_h + kh) * kernel_w + kw of the maximum inside its window, as
    torch.uint8 (torch.int32 for windows of more than 256 taps)."""
    params = _params(kernel_size, stride, padding, dilation, "max_pool3d_with_argmax")
    return pool_argmax(input, *params, ceil_mode)


def _sizes(size, like, name, op):
    return tuple(geo.input_hw(size, like, op, name=name, dims=3))


def max_pool3d_backward(grad_output, argmax, input_size, kernel_size, stride=None, padding=0,
                        dilation=1, ceil_mode=False):
    """The input's gradient from grad_output routed through argmax; input_size
    is the input's full shape or its (D, H, W)."""
    params = _params(kernel_size, stride, padding, dilation, "max_pool3d_backward")
    in_dhw = _sizes(input_size, grad_output, "input_size", "max_pool3d_backward")
    return route_to_input(grad_output, argmax, in_dhw, *params, ceil_mode)


def argmax_to_indices3d(argmax, input_size, kernel_size, stride=None, padding=0, dilation=1,
                        ceil_mode=False):
    """The int64 flat indices ((d * H + h) * W + w) that torch's max_pool3d returns."""
    params = _params(kernel_size, stride, padding, dilation, "argmax_to_indices3d")
    in_dhw = _sizes(input_size, argmax, "input_size", "argmax_to_indices3d")
    return ops.argmax_to_indices3d(argmax, in_dhw, *params, ceil_mode)


def argmax_to_mask3d(argmax, input_size, kernel_size, stride=None, padding=0, dilation=1,
                     ceil_mode=False):
    """Boolean map of the input's shape: True at every window's selected maximum."""
    params = _params(kernel_size, stride, padding, dilation, "argmax_to_mask3d")
    in_dhw = _sizes(input_size, argmax, "input_size", "argmax_to_mask3d")
    return ops.argmax_to_mask3d(argmax, in_dhw, *params, ceil_mode)


def max_unpool3d_argmax(input, argmax, output_size, kernel_size, stride=None, padding=0,
                        dilation=1, ceil_mode=False):
    """max_unpool3d fed with max_pool3d_with_argmax's argmax; output_size is
    the pooled tensor's full shape or its (D, H, W). Where windows overlap and
    select the same tap, the last window in memory order of (D, H, W) wins."""
    params = _params(kernel_size, stride, padding, dilation, "max_unpool3d_argmax")
    out_dhw = _sizes(output_size, input, "output_size", "max_unpool3d_argmax")
    return unpool_by_argmax(input, argmax, out_dhw, *params, ceil_mode)


def _check_unpool(input, indices, stride):
    """torch's max_unpooling3d_shape_check, in its order and words."""
    if indices.dtype != torch.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    if input.dim() not in (4, 5):
        raise RuntimeError("Input to max_unpooling3d should be a 4d or 5d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if input.shape != indices.shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor "
            f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    for dim in range(1, input.dim()):  # not an unbatched input's channels either, as torch
        if input.shape[dim] == 0:
            raise RuntimeError(
                "max_unpool3d: Expected input to have non-zero size for non-batch dimensions, "
                f"but got {list(input.shape)} with dimension {dim} being empty.")
    if min(stride) <= 0:
        raise RuntimeError(f"strides should be greater than zero, but got stride: {list(stride)}")


def _unpool_triple(value, name):
    """max_unpool3d's kernel_size, stride or padding as three ints: an int or
    three (NumPy and tensor ints too), refused with torch's error types."""
    sizes = tuple(map(geo.as_index, _triple(geo.as_indices(value))))
    if not all(geo._is_int(n) for n in sizes):
        raise TypeError(f"max_unpool3d(): {name} must be an int or a tuple of three ints, but "
                        f"got {name}={value!r}")
    if len(sizes) != 3:
        raise RuntimeError(f"max_unpool3d(): {name} must be an int or a tuple of three ints, but "
                           f"got {name}={value!r}")
    return sizes


def _unpool_sizes(input, kernel, stride, padding, output_size):
    """torch's F._unpool_output_size, in its words, for sizes that may be
    symbolic: torch's own checks them in a closure torch.compile cannot trace."""
    default = [(input.shape[d - 3] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(3)]
    if output_size is None:
        return default
    size = tuple(output_size)
    if len(size) == 5:
        size = size[2:]
    if len(size) != 3:
        raise ValueError("output_size should be a sequence containing 3 or 5 elements, but it "
                         f"has a length of '{len(size)}'")
    for d in range(3):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f"{low} and {high})")
    return size


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Same signature, results and gradients as torch.nn.functional.max_unpool3d,
    deterministic as poolx.max_unpool2d: where indices repeat, the value that
    comes last in memory order of each (N, C) volume wins. Indices outside the
    output volume raise an error instead of being written."""
    kernel = _unpool_triple(kernel_size, "kernel_size")
    steps = kernel if stride is None else _unpool_triple(stride, "stride")
    _check_unpool(input, indices, steps)
    depth, height, width = _unpool_sizes(input, kernel, steps, _unpool_triple(padding, "padding"),
                                         output_size)
    # the volumes unpool as planes of D * H rows, whose flat index is the volume's
    planes = f2d.unpool_as_planes("max_unpool3d", input.flatten(-3, -2), indices.flatten(-3, -2),
                                  (depth * height, width), (depth, height, width))
    return planes.unflatten(-2, (depth, height))
