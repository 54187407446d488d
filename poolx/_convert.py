"""poolx.convert: swap torch's pooling modules in a model for poolx's."""

from torch import nn

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

# Exact types only: subclasses (poolx's own included) may change forward.
_REPLACEMENTS = {
    nn.MaxPool1d: MaxPool1d,
    nn.MaxPool2d: MaxPool2d,
    nn.MaxUnpool1d: MaxUnpool1d,
    nn.MaxUnpool2d: MaxUnpool2d,
    nn.MaxPool3d: MaxPool3d,
    nn.MaxUnpool3d: MaxUnpool3d,
    nn.AdaptiveMaxPool1d: AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d: AdaptiveMaxPool2d,
    nn.AdaptiveMaxPool3d: AdaptiveMaxPool3d,
}


def _as_poolx(module):
    """A poolx module carrying `module`'s whole state: arguments, training
    mode, hooks and any attribute set on it (pooling modules own no tensors)."""
    converted = _REPLACEMENTS[type(module)].__new__(_REPLACEMENTS[type(module)])
    converted.__dict__.update(
        {k: v.copy() if isinstance(v, dict) else v for k, v in module.__dict__.items()}
    )
    return converted


def convert(module, _memo=None):
    """Replaces every nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d,
    nn.MaxUnpool1d, nn.MaxUnpool2d, nn.MaxUnpool3d and nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d in `module` (recursively, the
    top module included) with the poolx module of the same arguments.

    Like nn.SyncBatchNorm.convert_sync_batchnorm, containers are updated in
    place and the converted top module is returned: use
    ``model = poolx.convert(model)``. A pooling module shared by several
    parents stays shared. Outputs and gradients are unchanged.
    """
    memo = {} if _memo is None else _memo
    if id(module) in memo:
        return memo[id(module)]
    converted = _as_poolx(module) if type(module) in _REPLACEMENTS else module
    memo[id(module)] = converted
    for name, child in module.named_children():
        new_child = convert(child, memo)
        if new_child is not child:
            setattr(converted, name, new_child)
    return converted
