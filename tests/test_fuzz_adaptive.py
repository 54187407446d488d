"""Property tests of adaptive max pooling: drawn sizes give torch's values,
indices and gradients bit for bit in 1-D, 2-D and 3-D, and any call, valid
or not, succeeds where torch's does or raises torch's exception type.
Profiles: fuzz_strategies.py."""

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import poolx
from fuzz_strategies import fuzz_settings, leading_dims, tensors
from inputs import FLOAT_DTYPES, INT_DTYPES
from reference import EXACT, assert_call_as_torch, single_threaded


@st.composite
def adaptive_cases(draw):
    """A valid call: input sizes, output sizes from 0 to beyond the input's
    (None, for 2-D and 3-D, keeps one), and a tensor in any layout."""
    dims = draw(st.sampled_from([1, 2, 3]))
    sizes = [draw(st.integers(1, 12)) for _ in range(dims)]
    output = [draw(st.none() | st.integers(0, s + 3)) if dims > 1
              else draw(st.integers(0, s + 3)) for s in sizes]
    x = draw(tensors((*leading_dims(draw, [None, 0, 1, 2]), *sizes), FLOAT_DTYPES))
    size = output[0] if dims == 1 or (len(set(output)) == 1 and output[0] is not None
                                       and draw(st.booleans())) else tuple(output)
    return dims, x, size


@fuzz_settings
@given(adaptive_cases())
def test_drawn_sizes_pool_as_torch(case):
    dims, x, size = case
    torch_pool = getattr(F, f"adaptive_max_pool{dims}d")
    ours = getattr(poolx, f"adaptive_max_pool{dims}d")
    with single_threaded():
        values, indices = torch_pool(x.contiguous(), size, return_indices=True)
    got_values, got_indices = ours(x, size, return_indices=True)
    torch.testing.assert_close(got_values, values, **EXACT)
    torch.testing.assert_close(got_indices, indices, **EXACT)
    torch.testing.assert_close(ours(x, size), values, **EXACT)
    if x.dtype in (torch.float32, torch.float64) and values.numel():
        grad_out = torch.randn_like(values)
        xr = x.detach().contiguous().requires_grad_()
        with single_threaded():
            (expected,) = torch.autograd.grad(torch_pool(xr, size), xr, grad_out)
        for save in ("argmax", "recompute"):
            xg = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(ours(xg, size, save=save), xg, grad_out)
            torch.testing.assert_close(grad, expected, **EXACT)


def size_args():
    """output_size forms torch accepts or rejects: int, (), (a,), (a, None), ..."""
    item = st.none() | st.integers(-2, 6)
    return st.integers(-2, 6) | st.lists(item, max_size=4).map(tuple)


@st.composite
def any_calls(draw):
    """Any call: inputs of 1 to 6 dims, any dtype, output sizes in any form."""
    shape = tuple(draw(st.integers(0, 5)) for _ in range(draw(st.integers(1, 6))))
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES))
    return draw(st.sampled_from([1, 2, 3])), x, draw(size_args()), draw(st.booleans())


@fuzz_settings
@given(any_calls())
def test_any_call_succeeds_or_raises_as_torch(call):
    dims, x, size, return_indices = call
    torch_pool = getattr(F, f"adaptive_max_pool{dims}d")
    ours = getattr(poolx, f"adaptive_max_pool{dims}d")
    assert_call_as_torch(
        lambda: torch_pool(x.contiguous(), size, return_indices=return_indices),
        lambda: ours(x, size, return_indices=return_indices),
        return_indices, x.shape[-dims:].numel() if x.dim() >= dims else 0)
