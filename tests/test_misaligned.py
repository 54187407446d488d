"""Tensors whose data starts at an odd address (a view one element into its
storage, as slicing a batch gives) take the same results as aligned copies,
on every op that has a vectorized path: a GPU faults on a misaligned vector
access where x86 does not, and the emulated CUDA build checks every one."""

import pytest
import torch

import poolx

# Shapes the tiled fast paths of both backends take when aligned: NCHW rows
# of whole vectors, channels_last with whole vectors of channels.
SHAPES = [(2, 3, 8, 32), (2, 16, 6, 10)]
POOLS = [dict(kernel_size=2), dict(kernel_size=(3, 2), stride=(3, 2)),
         dict(kernel_size=3, stride=2, padding=1)]


def offset_view(t):
    """t's values and strides in a storage that starts one element earlier."""
    buffer = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buffer[1:].as_strided(t.shape, t.stride())
    view.copy_(t)
    assert view.storage_offset() == 1
    return view


def every_op(x, grad, pool, place):
    """Each op's result, every tensor argument passed through `place` first."""
    values, argmax = poolx.max_pool2d_with_argmax(place(x), **pool)
    indices = poolx.argmax_to_indices(place(argmax), x.shape, **pool)
    argmax, grad = place(argmax), place(grad)
    return {
        "values": poolx.max_pool2d(place(x), **pool),
        "values with argmax": values,
        "argmax": argmax,
        "backward": poolx.max_pool2d_backward(grad, argmax, x.shape, **pool),
        "indices": indices,
        "mask": poolx.argmax_to_mask(argmax, x.shape, **pool),
        "unpool by argmax": poolx.max_unpool2d_argmax(grad, argmax, x.shape, **pool),
        "unpool by indices": poolx.max_unpool2d(grad, place(indices), pool["kernel_size"],
                                                pool.get("stride"), pool.get("padding", 0),
                                                output_size=x.shape[-2:]),
    }


@pytest.mark.parametrize("pool", POOLS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_misaligned_tensors_match_aligned_ones(device, channels_last, dtype, shape, pool):
    x = torch.randn(shape, device=device).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    grad = torch.randn(poolx.max_pool2d(x, **pool).shape, device=device).to(dtype)
    grad = grad.contiguous(memory_format=torch.channels_last) if channels_last else grad
    expected = every_op(x, grad, pool, lambda t: t)
    got = every_op(x, grad, pool, offset_view)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0, msg=name)
