"""Loads the compiled operators (torch.ops.poolx) with a helpful error."""

import torch  # noqa: F401  (libtorch must be loaded before the extension)

try:
    from poolx import _C  # noqa: F401  (registers torch.ops.poolx.*)
except ImportError as error:
    raise ImportError(
        f"poolx's compiled library poolx._C could not be loaded ({error}). Build it from the "
        "poolx checkout with: pip install --no-build-isolation -e ."
    ) from error

ops = torch.ops.poolx
