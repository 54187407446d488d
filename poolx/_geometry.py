"""Pooling arguments in Python: normalization, torch's checks and output shapes.

The C++ ops check the same rules (pool_args.cpp) for direct callers; this copy
serves the functional API and the fake kernels, where sizes may be symbolic.
"""

import math
import operator
from collections.abc import Sequence

import torch

# Largest window whose argmax fits in uint8.
UINT8_WINDOW = 256
# poolx's bound on window extents and sizes, as the C++ checks (pool_args.cpp,
# adaptive_args.cpp): index products then stay far from int64 overflow.
MAX_EXTENT = 2**31


def _is_int(v):
    return isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool)


def as_index(v):
    """v as torch's argument parser reads an int: NumPy integers and integer
    (or bool) tensors of one element become ints; anything else comes back as
    it is, for the caller's checks (a bool, a float: refused)."""
    if type(v) is int or isinstance(v, (bool, torch.SymInt)):
        return v
    if isinstance(v, torch.Tensor):
        if v.numel() == 1 and not (v.is_floating_point() or v.is_complex()):
            return int(v.item())
        return v
    try:
        return operator.index(v)
    except TypeError:
        return v


def as_indices(value):
    """as_index of an int, or of each item of a tuple or list (as a tuple)."""
    if isinstance(value, (tuple, list)):
        return tuple(map(as_index, value))
    return as_index(value)


def _int64(v, name, op, value):
    """v, checked to fit in int64: torch's argument parser raises a ValueError
    for an int beyond it, a TypeError for such an int in a sequence."""
    if isinstance(v, int) and not -(2**63) <= v < 2**63:
        error = ValueError if v is value else TypeError
        raise error(f"{op}: {name} must fit in int64, but got {name}={value!r}")
    return v


_COUNT = {2: "two", 3: "three"}  # torch's words for the lengths


def pair(value, name, op="max_pool2d", dims=2):
    """An int or a sequence of one or `dims` ints, as a tuple of `dims` ints."""
    plain = int_pair(value) if dims == 2 else None  # the common cases, cheaply
    if plain is not None:
        return plain
    value = as_index(value)
    if _is_int(value):
        return (_int64(value, name, op, value),) * dims
    count = _COUNT[dims]
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = tuple(as_index(v) for v in value)
        if not all(_is_int(v) for v in items):
            raise TypeError(f"{op}: {name} must be a tuple of ints, but got {name}={value!r}")
        if len(items) in (1, dims):
            items = tuple(_int64(v, name, op, value) for v in items)
            return items * dims if len(items) == 1 else items
        verb = "must be either" if name == "dilation" else "must either be"  # torch's words
        raise RuntimeError(
            f"{op}: {name} {verb} a single int, or a tuple of {count} ints, but got "
            f"{name}={value!r}"
        )
    raise TypeError(
        f"{op}: {name} must be an int or a tuple of {count} ints, but got {name}={value!r}"
    )


def _plain(v):
    return type(v) is int and -(2**63) <= v < 2**63


def past_bound(*values):
    """Whether a plain int among values reaches MAX_EXTENT (symbolic ones are
    left to the ops' C++ check)."""
    return any(_plain(v) and v >= MAX_EXTENT for v in values)


def int_pair(value):
    """value as (int, int) if it is an int64 or a tuple of two, else None."""
    if _plain(value):
        return (value, value)
    if type(value) is tuple and len(value) == 2 and _plain(value[0]) and _plain(value[1]):
        return value
    return None


def pool_params(kernel_size, stride=None, padding=0, dilation=1, op="max_pool2d", dims=2):
    """(kernel, stride, padding, dilation) as tuples of `dims` ints; stride None
    or () means kernel."""
    if dims == 2 and _plain(kernel_size) and _plain(padding) and _plain(dilation):
        k = (kernel_size, kernel_size)  # the common case, cheaply
        if stride is None:
            return k, k, (padding, padding), (dilation, dilation)
        if _plain(stride):
            return k, (stride, stride), (padding, padding), (dilation, dilation)
    kernel = pair(kernel_size, "kernel_size", op, dims)
    empty_stride = stride is None or (isinstance(stride, Sequence) and len(stride) == 0)
    return (
        kernel,
        kernel if empty_stride else pair(stride, "stride", op, dims),
        pair(padding, "padding", op, dims),
        pair(dilation, "dilation", op, dims),
    )


def _half(n):
    """n / 2 rounded toward zero, as C++ divides."""
    return n // 2 if n >= 0 else -(-n // 2)


def _axes(values, names):
    """ "dT: 1 dH: 2 dW: 2" for 3-D, "dH: 2 dW: 2" for 2-D: torch's words."""
    names = names[-len(values):]
    return " ".join(f"{n}: {v}" for n, v in zip(names, values))


def check_params(kernel, stride, padding, dilation, input=None):
    """torch's checks in torch's order (pooling_output_shape per dimension,
    then pool2d_shape_check or pool3d_shape_check); the input's zero-size
    check, when an input is given, comes where torch's does. pool_args.cpp
    runs the same sequence."""
    dims = len(kernel)
    op = f"max_pool{dims}d"
    for k, st, p, d in zip(kernel, stride, padding, dilation):
        if st == 0:
            raise RuntimeError(
                f"stride should not be zero, but got {_axes(stride, ('dT', 'dH', 'dW'))}"
            )
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > _half((k - 1) * d + 1):
            raise RuntimeError(
                "pad should be at most half of effective kernel size, but got "
                f"pad={p}, kernel_size={k} and dilation={d}"
            )
    if min(kernel) <= 0:
        raise RuntimeError(
            f"kernel size should be greater than zero, but got {_axes(kernel, ('kT', 'kH', 'kW'))}"
        )
    if min(stride) <= 0:
        raise RuntimeError(
            f"stride should be greater than zero, but got {_axes(stride, ('dT', 'dH', 'dW'))}"
        )
    if min(dilation) <= 0:
        names = ("dilationT", "dilationH", "dilationW")
        raise RuntimeError(f"dilation should be greater than zero, but got {_axes(dilation, names)}")
    if input is not None:
        _check_positive_sizes(input, dims)
    (kh, kw), (ph, pw) = kernel[-2:], padding[-2:]
    if dims == 3 and (kernel[0] // 2 < padding[0] or kw // 2 < pw or kh // 2 < ph):
        raise RuntimeError(
            "pad should be smaller than or equal to half of kernel size, but got "
            f"kT: {kernel[0]} kW: {kw} kH: {kh} padT: {padding[0]} padW: {pw} padH: {ph}"
        )
    if kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(
            "pad should be smaller than or equal to half of kernel size, but got "
            f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}"
        )
    if max(*kernel, *stride, *dilation) >= MAX_EXTENT:
        raise RuntimeError(
            f"{op}: kernel_size, stride and dilation must be below 2^31, but got "
            f"kernel_size={list(kernel)}, stride={list(stride)}, dilation={list(dilation)}"
        )
    if math.prod(kernel) >= 2**31:
        # The widest argmax is int32; a larger window would wrap its tap positions.
        raise RuntimeError(
            f"{op}: windows of more than 2^31 - 1 elements are not supported, but got "
            f"kernel_size={list(kernel)}"
        )


def _check_positive_sizes(input, dims):
    if any(s == 0 for s in input.shape[-dims - 1:]):
        if dims == 3:
            raise RuntimeError(
                "max_pool3d: Expected input's non-batch dimensions to have positive length, "
                f"but got input of shape {list(input.shape)}"
            )
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
            f"but got:{list(input.shape)}"
        )


def output_size(size, kernel, stride, pad, dilation, ceil_mode):
    """torch's pooling_output_shape for one axis."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out = out - 1
    return out


def pooled_hw(in_hw, kernel, stride, padding, dilation, ceil_mode):
    """The pooled spatial sizes ((H, W) or (D, H, W)) of an input of in_hw."""
    return tuple(
        output_size(in_hw[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
        for i in range(len(kernel))
    )


def forward_hw(input, kernel, stride, padding, dilation, ceil_mode):
    """Validated output sizes ((H, W) or (D, H, W)) of pooling `input`."""
    dims = len(kernel)
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"non-empty {dims + 1}D or {dims + 2}D (batch mode) tensor expected for input, but "
            f"got input of shape {list(input.shape)}"
        )
    check_params(kernel, stride, padding, dilation, input)
    out = pooled_hw(input.shape[-dims:], kernel, stride, padding, dilation, ceil_mode)
    if any(o < 1 for o in out):  # not min(): comparing the sizes would guard on it
        sizes = "x".join(str(s) for s in input.shape[-dims - 1:])
        c = input.shape[-dims - 1]
        raise RuntimeError(
            f"Given input size: ({sizes}). Calculated output size: "
            f"({'x'.join(str(s) for s in (c, *out))}). Output size is too small"
        )
    return out


def argmax_dtype(kernel):
    return torch.uint8 if math.prod(kernel) <= UINT8_WINDOW else torch.int32


def memory_format(t, dims=2, adaptive=False):
    """The layout poolx gives results derived from `t` (as torch's kernels do):
    a batched t's suggested one; an unbatched t's contiguous, but in windowed
    3-D pooling that of the batch of one torch makes of it (csrc/pool_args.cpp)."""
    if dims == 3 and not adaptive and t.dim() == dims + 1:  # torch's rule for a batch of one
        batch = t.unsqueeze(0)
        if not batch.is_contiguous() and batch.is_contiguous(memory_format=torch.channels_last_3d):
            return torch.channels_last_3d
        return torch.contiguous_format
    if t.dim() == dims + 2:
        return torch._prims_common.suggest_memory_format(t)
    return torch.contiguous_format


def input_hw(input_size, grad_output, op, name="input_size", dims=2):
    """The spatial sizes ((H, W), or (D, H, W) for dims 3) from a full input
    shape or from those sizes, checked against grad_output; errors name op."""
    try:
        size = tuple(input_size)
    except TypeError:
        size = None
    lead = tuple(grad_output.shape[:-dims])
    what = "(D, H, W)" if dims == 3 else "(H, W)"
    if size is not None and len(size) == grad_output.dim() and size[:-dims] == lead:
        size = size[-dims:]
    elif size is not None and len(size) != dims:
        raise RuntimeError(
            f"{op}: {name} must be the input's full shape (with the leading dims "
            f"{list(lead)}) or its {what}, but got {name}={list(size)}"
        )
    if size is not None and all(type(n) is int for n in size):
        return size
    if size is None or not all(isinstance(n, (int, torch.SymInt)) for n in size):
        raise TypeError(f"{op}: {name} must be the input's shape or its {what} as ints, but got "
                        f"{name}={input_size!r}")
    return size
