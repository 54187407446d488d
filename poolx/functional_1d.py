"""The 1-D functional API: torch.nn.functional's max_pool1d and max_unpool1d,
and the argmax tools, as 2-D pooling of a unit height.

A signal (N, C, L) is the image (N, C, 1, L): a view, so no byte moves; the
window (k,) is (1, k), whose argmax is the tap along the signal and whose flat
index h * L + l is the index torch's 1-D pooling returns. An (N, L, C) signal
viewed as (N, C, L) pools as a channels_last image. The 1-D checks are
torch's, in torch's order and words, before the 2-D call."""

import re

import torch
import torch.nn.functional as F
from torch.nn.modules.utils import _single

from poolx import _geometry as geo
from poolx import functional as f2d


def _unit_height(t):
    return t.unsqueeze(-2)


def _flat(t):
    return t.squeeze(-2)


def _one(value, name, allow_empty=False):
    """An int (a SymInt too) or a sequence of one int, as an int (None for an
    empty sequence where allowed), with torch's max_pool1d error otherwise."""
    if geo._plain(value):
        return value
    items = tuple(map(geo.as_index, value if isinstance(value, (tuple, list)) else (value,)))
    if not all(geo._is_int(v) for v in items):
        raise TypeError(f"max_pool1d(): argument '{name}' must be an int or a tuple of one int, "
                        f"but got {name}={value!r}")
    items = tuple(geo._int64(v, name, "max_pool1d()", value) for v in items)
    if allow_empty and not items:
        return None
    if len(items) != 1:
        what = "None, an int, list of ints, or" if name == "stride" else "an int, list of ints or"
        raise RuntimeError(f"max_pool1d() {name} must be {what} tuple of ints of size 1 but got "
                           f"size {len(items)}")
    return items[0]


def params_1d(kernel_size, stride, padding, dilation):
    """The 1-D arguments as 2-D ones: ((1, k), (1, s), (0, p), (1, d))."""
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None else _one(stride, "stride", allow_empty=True)
    s = k if s is None else s
    p, d = _one(padding, "padding"), _one(dilation, "dilation")
    return (1, k), (1, s), (0, p), (1, d)


def _check_extents(params, op="max_pool1d()"):
    """poolx's bound on the window's extents (the 2-D check would name
    max_pool2d and the unit height's arguments)."""
    (_, k), (_, s), _, (_, d) = params
    if geo.past_bound(k, s, d):
        raise RuntimeError(f"{op} kernel_size, stride and dilation must be below 2^31, but got "
                           f"kernel_size={k}, stride={s}, dilation={d}")


def _check_signal(input):
    if input.dim() not in (2, 3) or any(n == 0 for n in input.shape[-2:]):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got:{list(input.shape)}")


def _check_windows(params, length, ceil_mode, op="max_pool1d()", fewest=0):
    """torch's check_max_pool1d of the window over a signal of `length`, in
    torch's order and words (with `op` naming the call): the number of windows,
    at least `fewest` (the pooling needs one; the argmax tools take an argmax
    of no windows, as in 2-D)."""
    (_, k), (_, s), (_, p), (_, d) = params
    if k <= 0:
        raise RuntimeError(f"{op} kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"{op} stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"{op} padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"{op} padding should be at most half of kernel size, but got "
                           f"padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"{op} dilation must be greater than zero, but got {d}")
    out = geo.output_size(length, k, s, p, d, ceil_mode)
    if out < fewest:
        raise RuntimeError(f"{op} Invalid computed output size: {out}")
    _check_extents(params, op)
    return out


def _check_1d(input, params, ceil_mode):
    """torch's check_max_pool1d, which its value-only call runs (with or
    without grad); its return_indices call gets the 2-D checks instead."""
    _check_signal(input)
    _check_windows(params, input.shape[-1], ceil_mode, fewest=1)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False, *, save="argmax"):
    """Same signature, results and gradients as torch.nn.functional.max_pool1d;
    save as in poolx.max_pool2d."""
    params = params_1d(kernel_size, stride, padding, dilation)
    if return_indices:
        _check_signal(input)
        _check_extents(params)
        values, indices = f2d.pool(_unit_height(input), (*params, ceil_mode), True, save)
        return _flat(values), _flat(indices)
    _check_1d(input, params, ceil_mode)
    return _flat(f2d.pool(_unit_height(input), (*params, ceil_mode), False, save))


def max_pool1d_with_argmax(input, kernel_size, stride=None, padding=0, dilation=1,
                           ceil_mode=False):
    """(values, argmax) in one pass; argmax[..., l] is the tap (0 to k - 1) of
    the maximum inside its window, as in max_pool2d_with_argmax."""
    params = params_1d(kernel_size, stride, padding, dilation)
    _check_1d(input, params, ceil_mode)
    values, argmax = f2d.max_pool2d_with_argmax(_unit_height(input), *params, ceil_mode)
    return _flat(values), _flat(argmax)


def _length(size, like, name, op):
    """(1, L) from a full shape or (L,), checked against `like` as 2-D does."""
    try:
        given = tuple(size)
    except TypeError:
        given = None
    if given is not None and len(given) == like.dim() and given[:-1] == tuple(like.shape[:-1]):
        given = given[-1:]
    if given is not None and len(given) != 1:
        raise RuntimeError(f"{op}: {name} must be the input's full shape (with the leading dims "
                           f"{list(like.shape[:-1])}) or its (L,), but got {name}={list(given)}")
    length = None if given is None else geo.as_index(given[0])
    if not geo._is_int(length):
        raise TypeError(f"{op}: {name} must be the input's shape or its (L,) as ints, but got "
                        f"{name}={size!r}")
    if length <= 0 or (type(length) is int and length >= 2**63):
        raise RuntimeError(f"{op}: {name} must be positive and fit in int64, but got "
                           f"{name}={size!r}")
    return (1, length)


def _check_pooled(name, pooled, names, params, length, ceil_mode):
    """The pooled signals a tool takes (argmax last), in 1-D terms, before the
    2-D tool sees them with a unit height."""
    windows = _check_windows(params, length, ceil_mode, f"{name}:")
    for t, what in zip(pooled, names):
        if t.dim() not in (2, 3) or t.shape[-1] != windows:
            raise RuntimeError(
                f"{name}: {what} must hold the {windows} windows of a signal of length {length}, "
                f"as (C, {windows}) or (N, C, {windows}), but got {what}.shape={list(t.shape)}")
    argmax, dtype = pooled[-1], geo.argmax_dtype(params[0])
    if argmax.dtype != dtype:
        raise RuntimeError(f"{name}: argmax must have dtype {dtype} for a window of "
                           f"{params[0][1]} taps, but got argmax.dtype={argmax.dtype}")
    if argmax.shape != pooled[0].shape:
        raise RuntimeError(f"{name}: argmax must have the shape {list(pooled[0].shape)} of "
                           f"{names[0]}, but got argmax.shape={list(argmax.shape)}")


def _argmax_tool(name, tool, tensors, names, size, size_name, pool, ceil_mode):
    """The 2-D argmax tool `tool` on signals viewed with height 1: the pooled
    `tensors` (named `names`, argmax last), then the (1, L) of `size`, the
    windows, ceil_mode. A bad argmax raises the 2-D tool's error under the 1-D name."""
    length, params = _length(size, tensors[0], size_name, name), params_1d(*pool)
    _check_pooled(name, tensors, names, params, length[1], ceil_mode)
    views = [_unit_height(t) for t in tensors]
    try:
        return _flat(tool(*views, length, *params, ceil_mode))
    except IndexError as error:
        raise IndexError(f"{name}: {_in_1d_terms(str(error))}") from None


# The 2-D tools' error for an argmax value that names no tap of its window,
# on signals viewed as images of height 1
_BAD_ARGMAX_2D = re.compile(
    r"^\w+: argmax\[((?:\d+, )*)0, (\d+)\] = (-?\d+) names no tap of its 1x(\d+) window "
    r"inside the 1x(\d+) input \(stride 1x(\d+), padding 0x(\d+), dilation 1x(\d+)\)")


def _in_1d_terms(message):
    """A 2-D tool's bad-argmax message about the height-1 views, told of the signals."""
    bad = _BAD_ARGMAX_2D.match(message)
    if bad is None:
        return f"the signals viewed as images of height 1, {message}"
    lead, at, value, kernel, length, stride, padding, dilation = bad.groups()
    return (f"argmax[{lead}{at}] = {value} names no tap of its window of {kernel} inside the "
            f"signal of length {length} (stride {stride}, padding {padding}, dilation "
            f"{dilation}); an argmax must come from max_pool1d_with_argmax with the same "
            "arguments")


def max_pool1d_backward(grad_output, argmax, input_size, kernel_size, stride=None, padding=0,
                        dilation=1, ceil_mode=False):
    """The input's gradient from grad_output routed through argmax; input_size
    is the input's full shape or its (L,)."""
    pool = (kernel_size, stride, padding, dilation)
    return _argmax_tool("max_pool1d_backward", f2d.max_pool2d_backward, (grad_output, argmax),
                        ("grad_output", "argmax"), input_size, "input_size", pool, ceil_mode)


def argmax_to_indices1d(argmax, input_size, kernel_size, stride=None, padding=0, dilation=1,
                        ceil_mode=False):
    """The int64 indices along the signal that torch's max_pool1d returns."""
    pool = (kernel_size, stride, padding, dilation)
    return _argmax_tool("argmax_to_indices1d", f2d.argmax_to_indices, (argmax,), ("argmax",),
                        input_size, "input_size", pool, ceil_mode)


def argmax_to_mask1d(argmax, input_size, kernel_size, stride=None, padding=0, dilation=1,
                     ceil_mode=False):
    """Boolean map of the input's shape: True at every window's selected maximum."""
    pool = (kernel_size, stride, padding, dilation)
    return _argmax_tool("argmax_to_mask1d", f2d.argmax_to_mask, (argmax,), ("argmax",),
                        input_size, "input_size", pool, ceil_mode)


def max_unpool1d_argmax(input, argmax, output_size, kernel_size, stride=None, padding=0,
                        dilation=1, ceil_mode=False):
    """max_unpool1d fed with max_pool1d_with_argmax's argmax; output_size is
    the pooled signal's full shape or its (L,)."""
    pool = (kernel_size, stride, padding, dilation)
    return _argmax_tool("max_unpool1d_argmax", f2d.max_unpool2d_argmax, (input, argmax),
                        ("input", "argmax"), output_size, "output_size", pool, ceil_mode)


def _unpool_length(input, kernel_size, stride, padding, output_size):
    """The unpooled length by torch's rule (F._unpool_output_size), worked out
    here for ints and sizes of one or three ints (symbolic ones included, which
    torch's rule turns into a graph break), else by torch's code, with its errors."""
    plain = [_plain_one(v) for v in (kernel_size, kernel_size if stride is None else stride,
                                     padding)]
    size = None if output_size is None else tuple(output_size)
    if None in plain or input.dim() < 1 or (size is not None and len(size) not in (1, 3)):
        kernel = _single(kernel_size)
        return _int_length(F._unpool_output_size(input, kernel, kernel if stride is None else
                                                 _single(stride), _single(padding),
                                                 output_size)[0])
    k, s, p = plain
    default = (input.shape[-1] - 1) * s + k - 2 * p
    if size is None:
        return default
    if not default - s < size[-1] < default + s:
        raise ValueError(f'invalid output_size "{size[-1:]}" (dim 0 must be between '
                         f"{default - s} and {default + s})")
    return _int_length(size[-1])


def _int_length(n):
    """The unpooled length as an int, or torch's argument parser's error."""
    length = geo.as_index(n)
    if not isinstance(length, (int, torch.SymInt)) or isinstance(length, bool):
        raise TypeError("max_unpool2d(): argument 'output_size' (position 3) must be tuple of "
                        f"ints, but found element of type {type(n).__name__} at pos 0")
    return length


def _plain_one(value):
    """value as an int if it is one or a tuple or list of one, else None."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    value = geo.as_index(value)
    return value if geo._plain(value) else None


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Same signature, results and gradients as torch.nn.functional.max_unpool1d,
    deterministic as poolx.max_unpool2d."""
    length = _unpool_length(input, kernel_size, stride, padding, output_size)
    return _flat(f2d.unpool_as_planes("max_unpool1d", _unit_height(input), _unit_height(indices),
                                      (1, length), (length,)))
