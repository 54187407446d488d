"""Unpool (by indices and by argmax) of NCHW planes at the edges of the CUDA
plane scatter (csrc/cuda/plane_scatter.cuh), and the mask of the same
pooling: planes grouped per block with a partial last group, output planes
of exactly its 16384 keys and just over them (where the general kernels
run), overlapping windows whose indices repeat, and bad indices. Every
result against torch's; on the CPU build these check the CPU kernels, in the
emulated CUDA build the plane scatter and the kernels beside it."""

import pytest
import torch
import torch.nn.functional as F
from test_mask import scattered
from unpool_cases import (
    assert_same_bits,
    planted,
    torch_indices,
    torch_unpool,
    unpool_args,
    values_like,
)

import poolx

POOLS = {
    "overlap 3x3 s2 p1": (3, 2, 1, 1, False),
    "overlap 3x3 s1 p1": (3, 1, 1, 1, False),
    "tiled 2x2": (2, 2, 0, 1, False),
    "dilated, ceil_mode": (3, 2, 1, 2, True),
}
# (planes, output plane): 7 planes leave a partial last group; 128x128 fills
# the keys exactly, 129x128 and 128x129 exceed them.
SHAPES = [((1, 7), (5, 9)), ((3, 5), (28, 28)), ((1, 2), (128, 128)), ((2, 1), (129, 128)),
          ((1, 1), (128, 129))]
SHAPE_IDS = [f"{b[0] * b[1]}x{h}x{w}" for b, (h, w) in SHAPES]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("pool", POOLS.values(), ids=POOLS.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_unpool_and_mask_match_torch(device, shape, pool, dtype):
    batch, hw = shape
    x = planted((*batch, *hw), device=device)
    indices = torch_indices(x, pool)
    values = values_like(indices, dtype)
    expected = torch_unpool(values, indices, pool, hw)
    by_indices = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=hw)
    assert_same_bits(by_indices, expected)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)
    mask = poolx.argmax_to_mask(argmax, x.shape, *pool)
    assert torch.equal(mask.cpu(), scattered(indices, x.shape))


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_scattered_indices_match_torch(device, shape):
    """Indices anywhere in the output plane, repeated within a plane and
    jumping back: the last in row-major order wins."""
    batch, hw = shape
    pooled = (max(1, hw[0] // 2), max(1, hw[1] // 2))
    indices = torch.randint(0, hw[0] * hw[1], (*batch, *pooled))
    indices[..., -1, :] = indices[..., 0, :]
    values = values_like(indices, torch.float32)
    expected = torch_unpool(values, indices, (2, 2, 0, 1, False), hw)
    actual = poolx.max_unpool2d(values.to(device), indices.to(device), 2, 2, output_size=hw)
    assert_same_bits(actual, expected)


@pytest.mark.parametrize("bad", [-1, 28 * 28, 2**40], ids=["negative", "plane size", "huge"])
def test_bad_index_raises(bad):
    values = torch.randn(2, 3, 14, 14)
    indices = F.max_pool2d(torch.randn(2, 3, 28, 28), 2, return_indices=True)[1]
    indices[1, 2, 13, 0] = bad
    with pytest.raises(RuntimeError, match="invalid max index|Found an invalid"):
        poolx.max_unpool2d(values, indices, 2, 2, output_size=(28, 28))
