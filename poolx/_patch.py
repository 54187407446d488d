"""poolx.patch: route torch.nn.functional's max pooling through poolx."""

import contextlib
import threading

import torch.nn.functional as F

from poolx import functional, functional_1d, functional_3d, functional_adaptive as fa

_lock = threading.Lock()
_depth = 0
_saved = {}


def _with_indices(pool):
    """F.max_pool{1,2,3}d_with_indices: `pool` with return_indices=True."""

    def with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                     return_indices=False):
        return pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)

    return with_indices


def _adaptive_with_indices(pool):
    """F.adaptive_max_pool{1,2,3}d_with_indices: `pool` with return_indices=True."""

    def with_indices(input, output_size, return_indices=False):
        return pool(input, output_size, return_indices=True)

    return with_indices


_ROUTES = {
    "max_pool1d": functional_1d.max_pool1d,
    "max_pool1d_with_indices": _with_indices(functional_1d.max_pool1d),
    "max_unpool1d": functional_1d.max_unpool1d,
    "max_pool2d": functional.max_pool2d,
    "max_pool2d_with_indices": _with_indices(functional.max_pool2d),
    "max_unpool2d": functional.max_unpool2d,
    "max_pool3d": functional_3d.max_pool3d,
    "max_pool3d_with_indices": _with_indices(functional_3d.max_pool3d),
    "max_unpool3d": functional_3d.max_unpool3d,
    "adaptive_max_pool1d": fa.adaptive_max_pool1d,
    "adaptive_max_pool1d_with_indices": _adaptive_with_indices(fa.adaptive_max_pool1d),
    "adaptive_max_pool2d": fa.adaptive_max_pool2d,
    "adaptive_max_pool2d_with_indices": _adaptive_with_indices(fa.adaptive_max_pool2d),
    "adaptive_max_pool3d": fa.adaptive_max_pool3d,
    "adaptive_max_pool3d_with_indices": _adaptive_with_indices(fa.adaptive_max_pool3d),
}


@contextlib.contextmanager
def patch():
    """Inside the block, torch.nn.functional's max_pool1d, max_pool2d,
    max_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
    adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d and the
    *_with_indices of the pooling ones are poolx's (also when
    called by torch's modules, which look them up at call time); torch's come back on
    exit, also on an exception. Blocks may nest. The swap is process-wide,
    so other threads see it too while any block is open.

    It cannot reach names bound before the block (``from
    torch.nn.functional import max_pool2d``), torch.max_pool2d,
    torch.nn.functional's internal aliases, or torch.ops.aten calls.
    """
    global _depth
    with _lock:
        if _depth == 0:
            _saved.update({name: getattr(F, name) for name in _ROUTES})
            for name, fn in _ROUTES.items():
                setattr(F, name, fn)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, fn in _saved.items():
                    setattr(F, name, fn)
                _saved.clear()
