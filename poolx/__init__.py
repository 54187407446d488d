"""poolx: max pooling for PyTorch that computes the value and a 1-byte argmax
in one pass and moves the fewest bytes a correct kernel can."""

# fake kernels, vmap rules
from poolx import _registrations, _vmap  # noqa: F401
from poolx._config import show_config
from poolx._convert import convert
from poolx.functional import (
    argmax_to_indices,
    argmax_to_indices2d,
    argmax_to_mask,
    argmax_to_mask2d,
    max_pool2d,
    max_pool2d_backward,
    max_pool2d_with_argmax,
    max_unpool2d,
    max_unpool2d_argmax,
)
from poolx.functional_1d import (
    argmax_to_indices1d,
    argmax_to_mask1d,
    max_pool1d,
    max_pool1d_backward,
    max_pool1d_with_argmax,
    max_unpool1d,
    max_unpool1d_argmax,
)
from poolx.functional_3d import (
    argmax_to_indices3d,
    argmax_to_mask3d,
    max_pool3d,
    max_pool3d_backward,
    max_pool3d_with_argmax,
    max_unpool3d,
    max_unpool3d_argmax,
)
from poolx.functional_adaptive import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
)
from poolx.modules import (
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from poolx._patch import patch

__version__ = "0.1.0"

__all__ = [
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "argmax_to_indices",
    "argmax_to_indices1d",
    "argmax_to_indices2d",
    "argmax_to_indices3d",
    "argmax_to_mask",
    "argmax_to_mask1d",
    "argmax_to_mask2d",
    "argmax_to_mask3d",
    "convert",
    "max_pool1d",
    "max_pool1d_backward",
    "max_pool1d_with_argmax",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool2d_with_argmax",
    "max_pool3d",
    "max_pool3d_backward",
    "max_pool3d_with_argmax",
    "max_unpool1d",
    "max_unpool1d_argmax",
    "max_unpool2d",
    "max_unpool2d_argmax",
    "max_unpool3d",
    "max_unpool3d_argmax",
    "patch",
    "show_config",
]
