"""poolx.argmax_to_mask: True exactly where torch's indices point (its tie
and NaN rules), in the input's shape and layout."""

import pytest
import torch
from unpool_cases import CASES, planted, torch_indices

import poolx


def scattered(indices, in_shape):
    """The mask built from torch's indices: True at every index."""
    mask = torch.zeros(in_shape, dtype=torch.bool).flatten(-2)
    return mask.scatter_(-1, indices.cpu().flatten(-2), True).view(in_shape)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
@pytest.mark.parametrize("case", CASES)
def test_mask_is_scatter_of_torch_indices(device, case, dtype, channels_last):
    pool, hw = CASES[case]
    x = planted((2, 3, *hw), device=device, channels_last=channels_last)
    if not dtype.is_floating_point:
        x = x.nan_to_num(0, 1, -1).mul(2).to(dtype)  # ties, and -1 for -inf
    x = x.to(dtype)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    mask = poolx.argmax_to_mask(argmax, x.shape, *pool)
    assert mask.dtype == torch.bool and mask.device == x.device
    assert mask.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert torch.equal(mask.cpu(), scattered(torch_indices(x, pool), x.shape))


def test_mask_unbatched_and_hw_size(device):
    pool, hw = CASES["overlap 3/1 (indices repeat)"]
    x = planted((3, *hw), device=device)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    expected = scattered(torch_indices(x, pool), x.shape)
    assert torch.equal(poolx.argmax_to_mask(argmax, x.shape, *pool).cpu(), expected)
    assert torch.equal(poolx.argmax_to_mask(argmax, hw, *pool).cpu(), expected)


def test_mask_errors():
    pool, hw = CASES["overlap 3/1 (indices repeat)"]
    _, argmax = poolx.max_pool2d_with_argmax(planted((1, 2, *hw)), *pool)
    with pytest.raises(RuntimeError, match="gives an output of size"):
        poolx.argmax_to_mask(argmax, (9, 9), *pool)
    with pytest.raises(RuntimeError, match="argmax must have dtype Byte"):
        poolx.argmax_to_mask(argmax.int(), hw, *pool)
    with pytest.raises(RuntimeError,
                       match="argmax_to_mask: input_size must be the input.s full shape"):
        poolx.argmax_to_mask(argmax, (2, 2, *hw), *pool)


def test_mask_opcheck_and_compile(device):
    pool, hw = CASES["dilated, ceil_mode"]
    _, argmax = poolx.max_pool2d_with_argmax(planted((1, 2, *hw), device=device), *pool)
    args = (argmax, hw, [3, 3], [2, 2], [1, 1], [2, 2], True)
    torch.library.opcheck(torch.ops.poolx.argmax_to_mask.default, args)
    compiled = torch.compile(poolx.argmax_to_mask, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(argmax, hw, *pool), poolx.argmax_to_mask(argmax, hw, *pool))
