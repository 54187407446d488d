"""Reverse-mode autograd of the unpool operators, from the autograd.Functions
in _functions.py (the one copy of the formulas; those also carry the
forward-mode and vmap rules). Both backwards are differentiable again."""

import torch

from poolx._functions import UnpoolByArgmax, UnpoolByIndices

for _op, _function in [
    ("poolx::max_unpool2d", UnpoolByIndices),
    ("poolx::max_unpool2d_argmax", UnpoolByArgmax),
]:
    torch.library.register_autograd(
        _op, _function.backward, setup_context=_function.setup_context
    )
