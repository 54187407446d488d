"""poolx: max pooling for PyTorch that computes the value and a 1-byte argmax
in one pass and moves the fewest bytes a correct kernel can."""

from poolx import _registrations  # noqa: F401  (fake kernels and autograd)
from poolx.functional import (
    argmax_to_indices,
    argmax_to_mask,
    max_pool2d,
    max_pool2d_backward,
    max_pool2d_with_argmax,
)
from poolx.modules import MaxPool2d

__version__ = "0.1.0"

__all__ = [
    "MaxPool2d",
    "argmax_to_indices",
    "argmax_to_mask",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool2d_with_argmax",
]
