"""Adaptive max pooling: torch.nn.functional's adaptive_max_pool1d, 2d and 3d.

Window o of an axis pooled from `in` to `out` elements spans
[floor(o * in / out), ceil((o + 1) * in / out)), as in torch. Where `out`
divides `in` these are the windows of max pooling with kernel = stride =
in / out, and the kernels take max pooling's fast paths; elsewhere they place
each window on its own. Values, indices and gradients are torch's, bit for
bit; backward keeps a 1-byte argmax per output (or, with save="recompute",
only the input), where torch keeps the input and int64 indices.

1-D pooling is 2-D pooling of a unit height, as for max_pool1d."""

import torch

from poolx import _geometry as geo
from poolx import functional as f2d

_COUNTS = {1: "one int", 2: "two ints", 3: "three ints"}


def _output_size(input, output_size, dims, op):
    """output_size as a tuple of `dims` sizes, torch's way: an int for every
    axis, and None (2-D and 3-D) for an axis that keeps the input's size."""
    if dims == 1:  # torch's parser reads NumPy and tensor ints here (2-D, 3-D: Python's rule)
        output_size = geo.as_index(output_size)
    if isinstance(output_size, (int, torch.SymInt)) and not isinstance(output_size, bool):
        _check_ints((output_size,), output_size, op)
        return (output_size,) * dims
    if not isinstance(output_size, (tuple, list, torch.Size)):
        raise TypeError(f"{op}(): argument 'output_size' must be an int or a tuple of "
                        f"{_COUNTS[dims]}, but got output_size={output_size!r}")
    sizes = tuple(map(geo.as_index, output_size))
    if dims == 1:  # torch's argument parser: the types, then the length
        _check_ints(sizes, output_size, op)
        if len(sizes) != 1:
            raise RuntimeError(f"{op}() argument 'output_size' should contain one int "
                               f"(got {len(sizes)})")
    if dims > 1:  # torch's _list_with_default
        if input.dim() <= len(sizes):
            raise ValueError(f"Input dimension should be at least {len(sizes) + 1}")
        sizes = tuple(input.shape[-len(sizes) + i] if s is None else s
                      for i, s in enumerate(sizes))
    if len(sizes) != dims:
        raise RuntimeError(f"{op}(): internal error: output_size.size() must be {dims}")
    _check_ints(sizes, output_size, op)
    return sizes


def _check_ints(sizes, output_size, op):
    for s in sizes:
        if not isinstance(s, (int, torch.SymInt)) or isinstance(s, bool):
            raise TypeError(f"{op}(): argument 'output_size' must be a tuple of ints, but got "
                            f"output_size={output_size!r}")
        geo._int64(s, "output_size", f"{op}()", output_size)


def check_nonempty(input, op, name="input"):
    """torch's check that every dimension but the first (batch, or an
    unbatched input's channels) has elements."""
    for i in range(1, input.dim()):
        if input.shape[i] == 0:
            raise RuntimeError(f"{op}(): Expected {name} to have non-zero size for non-batch "
                               f"dimensions, but {name} has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")


def adaptive_max_pool2d(input, output_size, return_indices=False, *, save="argmax"):
    """Same signature, results and gradients as
    torch.nn.functional.adaptive_max_pool2d; `save` as for poolx.max_pool2d."""
    sizes = _output_size(input, output_size, 2, "adaptive_max_pool2d")
    return f2d.pool(input, (sizes,), return_indices, save)


def adaptive_max_pool3d(input, output_size, return_indices=False, *, save="argmax"):
    """Same signature, results and gradients as
    torch.nn.functional.adaptive_max_pool3d; `save` as for poolx.max_pool2d."""
    sizes = _output_size(input, output_size, 3, "adaptive_max_pool3d")
    out = f2d.pool(input, (sizes,), return_indices, save)
    # torch's results are contiguous in every layout (the kernels keep a
    # channels_last_3d input's, which a view of them as (N, -1) would refuse)
    if return_indices:
        return out[0].contiguous(), out[1].contiguous()
    return out.contiguous()


def adaptive_max_pool1d(input, output_size, return_indices=False, *, save="argmax"):
    """Same signature, results and gradients as
    torch.nn.functional.adaptive_max_pool1d; `save` as for poolx.max_pool2d."""
    op = "adaptive_max_pool1d"
    (length,) = _output_size(input, output_size, 1, op)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for {op})")
    check_nonempty(input, op)
    # the 2-D check would name adaptive_max_pool2d and the unit height
    if geo.past_bound(input.shape[-1], length):
        raise RuntimeError(f"{op}(): input and output sizes must be below 2^31, but got input "
                           f"size {input.shape[-1]} and output_size={length}")
    rows = input.unsqueeze(-2)
    out = f2d.pool(rows, ((1, length),), return_indices, save)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)

