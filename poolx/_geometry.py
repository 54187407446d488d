"""Pooling arguments in Python: normalization, torch's checks and output shapes.

The C++ ops check the same rules (pool_args.cpp) for direct callers; this copy
serves the functional API and the fake kernels, where sizes may be symbolic.
"""

from collections.abc import Sequence

import torch

# Largest window whose argmax fits in uint8.
UINT8_WINDOW = 256


def _is_int(v):
    return isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool)


def _int64(v, name, op, value):
    if isinstance(v, int) and not -(2**63) <= v < 2**63:
        raise ValueError(f"{op}: {name} must fit in int64, but got {name}={value!r}")
    return v


def pair(value, name, op="max_pool2d"):
    """An int or a sequence of one or two ints, as a tuple of two ints."""
    plain = int_pair(value)  # the common cases, cheaply
    if plain is not None:
        return plain
    if _is_int(value):
        return (_int64(value, name, op, value),) * 2
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = tuple(value)
        if not all(_is_int(v) for v in items):
            raise TypeError(f"{op}: {name} must be a tuple of ints, but got {name}={value!r}")
        if len(items) in (1, 2):
            items = tuple(_int64(v, name, op, value) for v in items)
            return items * 2 if len(items) == 1 else items
        verb = "must be either" if name == "dilation" else "must either be"  # torch's words
        raise RuntimeError(
            f"{op}: {name} {verb} a single int, or a tuple of two ints, but got {name}={value!r}"
        )
    raise TypeError(f"{op}: {name} must be an int or a tuple of two ints, but got {name}={value!r}")


def _plain(v):
    return type(v) is int and -(2**63) <= v < 2**63


def int_pair(value):
    """value as (int, int) if it is an int64 or a tuple of two, else None."""
    if _plain(value):
        return (value, value)
    if type(value) is tuple and len(value) == 2 and _plain(value[0]) and _plain(value[1]):
        return value
    return None


def pool_params(kernel_size, stride=None, padding=0, dilation=1, op="max_pool2d"):
    """(kernel, stride, padding, dilation) as pairs; stride None or () means kernel."""
    if _plain(kernel_size) and _plain(padding) and _plain(dilation):  # the common case, cheaply
        k = (kernel_size, kernel_size)
        if stride is None:
            return k, k, (padding, padding), (dilation, dilation)
        if _plain(stride):
            return k, (stride, stride), (padding, padding), (dilation, dilation)
    kernel = pair(kernel_size, "kernel_size", op)
    empty_stride = stride is None or (isinstance(stride, Sequence) and len(stride) == 0)
    return (
        kernel,
        kernel if empty_stride else pair(stride, "stride", op),
        pair(padding, "padding", op),
        pair(dilation, "dilation", op),
    )


def _half(n):
    """n / 2 rounded toward zero, as C++ divides."""
    return n // 2 if n >= 0 else -(-n // 2)


def check_params(kernel, stride, padding, dilation, input=None):
    """torch's checks in torch's order (pooling_output_shape per dimension,
    then pool2d_shape_check); the input's zero-size check, when an input is
    given, comes where torch's does. pool_args.cpp runs the same sequence."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    for k, st, p, d in ((kh, sh, ph, dh), (kw, sw, pw, dw)):
        if st == 0:
            raise RuntimeError(f"stride should not be zero, but got dH: {sh} dW: {sw}")
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > _half((k - 1) * d + 1):
            raise RuntimeError(
                "pad should be at most half of effective kernel size, but got "
                f"pad={p}, kernel_size={k} and dilation={d}"
            )
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(
            f"dilation should be greater than zero, but got dilationH: {dh} dilationW: {dw}"
        )
    if input is not None and any(s == 0 for s in input.shape[-3:]):
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
            f"but got:{list(input.shape)}"
        )
    if kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(
            "pad should be smaller than or equal to half of kernel size, but got "
            f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}"
        )
    if max(kh, kw, sh, sw, dh, dw) >= 2**31:
        raise RuntimeError(
            "max_pool2d: kernel_size, stride and dilation must be below 2^31, but got "
            f"kernel_size={list(kernel)}, stride={list(stride)}, dilation={list(dilation)}"
        )
    if kh * kw >= 2**31:
        # The widest argmax is int32; a larger window would wrap its tap positions.
        raise RuntimeError(
            "max_pool2d: windows of more than 2^31 - 1 elements are not supported, but got "
            f"kernel_size={list(kernel)}"
        )


def output_size(size, kernel, stride, pad, dilation, ceil_mode):
    """torch's pooling_output_shape for one axis."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out = out - 1
    return out


def pooled_hw(in_hw, kernel, stride, padding, dilation, ceil_mode):
    return tuple(
        output_size(in_hw[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
        for i in range(2)
    )


def forward_hw(input, kernel, stride, padding, dilation, ceil_mode):
    """Validated output (H, W) of pooling `input`."""
    if input.dim() not in (3, 4):
        raise RuntimeError(
            "non-empty 3D or 4D (batch mode) tensor expected for input, but got input of shape "
            f"{list(input.shape)}"
        )
    check_params(kernel, stride, padding, dilation, input)
    out_h, out_w = pooled_hw(input.shape[-2:], kernel, stride, padding, dilation, ceil_mode)
    if out_h < 1 or out_w < 1:
        c, h, w = input.shape[-3:]
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{out_h}x{out_w}). "
            "Output size is too small"
        )
    return out_h, out_w


def argmax_dtype(kernel):
    return torch.uint8 if kernel[0] * kernel[1] <= UINT8_WINDOW else torch.int32


def memory_format(t):
    """The layout poolx gives results derived from `t` (as torch's kernels do)."""
    if t.dim() == 4:
        return torch._prims_common.suggest_memory_format(t)
    return torch.contiguous_format


def input_hw(input_size, grad_output, name="input_size"):
    """(H, W) from a full input shape or an (H, W) pair, checked against grad_output."""
    try:
        size = tuple(input_size)
    except TypeError:
        size = None
    if size is not None and len(size) == grad_output.dim() and size[:-2] == tuple(
        grad_output.shape[:-2]
    ):
        size = size[-2:]
    elif size is not None and len(size) != 2:
        raise RuntimeError(
            f"{name} must be the input's full shape (with the leading dims "
            f"{list(grad_output.shape[:-2])}) or its (H, W), but got {name}={list(size)}"
        )
    if size is not None and len(size) == 2 and type(size[0]) is int and type(size[1]) is int:
        return size
    if size is None or not all(isinstance(n, (int, torch.SymInt)) for n in size):
        raise TypeError(f"{name} must be the input's shape or its (H, W) as ints, but got "
                        f"{name}={input_size!r}")
    return size