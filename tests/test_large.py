"""Tensors with more than 2^31 elements, and sizes whose element counts overflow int64."""

import pytest
import torch
import torch.nn.functional as F

import poolx

# 65536 x 32800 bfloat16 = 2^31 + 2^21 elements (4.3 GB) in one plane, so that
# offsets inside a plane need 64 bits.
HEIGHT, WIDTH = 65536, 32800
CHUNK_ROWS = 1024  # output rows per torch reference slice


def random_small_integers(shape, dtype):
    """Integers in [-16, 16]: sums of up to four are exact in bfloat16, so any
    summation order agrees. Filled in place, without temporaries."""
    g = torch.Generator().manual_seed(0)
    return torch.empty(shape, dtype=dtype).random_(-16, 17, generator=g)


def available_gib():
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    return int(fields["MemAvailable"].split()[0]) / 2**20


@pytest.mark.slow
@pytest.mark.skipif(available_gib() < 14, reason="needs ~12 GiB of free memory (peak 10.3 GiB)")
def test_more_than_2_31_elements_forward_and_backward():
    # Overlapping windows with padding: the general forward and gather backward.
    kernel, stride, pad = 3, 2, 1
    x = random_small_integers((1, 1, HEIGHT, WIDTH), torch.bfloat16)
    assert x.numel() > 2**31
    values, argmax = poolx.max_pool2d_with_argmax(x, kernel, stride, pad)
    with torch.no_grad():
        assert torch.equal(poolx.max_pool2d(x, kernel, stride, pad), values)
    # values doubles as the upstream gradient, to save memory.
    grad_in = poolx.max_pool2d_backward(values, argmax, x.shape, kernel, stride, pad)
    del argmax

    out_h = values.shape[-2]
    carry = None  # reference gradient of the input row shared with the previous slice
    for r0 in range(0, out_h, CHUNK_ROWS):
        r1 = min(r0 + CHUNK_ROWS, out_h)
        # Windows r0..r1-1 cover input rows 2*r0-1 .. 2*r1-1; the top padding is explicit.
        rows = x[0, 0, max(2 * r0 - 1, 0) : 2 * r1].float()
        if r0 == 0:
            rows = torch.cat([torch.full((1, WIDTH), float("-inf")), rows])
        rows.requires_grad_()
        expected = F.max_pool2d(rows[None, None], kernel, stride, (0, pad))
        assert torch.equal(values[0, 0, r0:r1], expected[0, 0].bfloat16())
        expected.backward(expected.detach())
        grad = rows.grad
        if carry is not None:
            grad[0] += carry
        # The slice's last row also lies in the next slice's first window.
        last = r1 == out_h
        assert torch.equal(grad_in[0, 0, max(2 * r0 - 1, 0) : 2 * r1 - (0 if last else 1)],
                           grad[(1 if r0 == 0 else 0) : len(grad) - (0 if last else 1)].bfloat16())
        carry = grad[-1]
    assert 2 * out_h == HEIGHT


# Windows of 2^30 rows keep the pooled tensors of huge inputs small.
KERNEL, STRIDE = (2**30, 1), (2**30, 2**30)
POOL = (list(KERNEL), list(STRIDE), [0, 0], [1, 1], False)
OPS = {
    "max_pool2d_backward": lambda g, am, size: torch.ops.poolx.max_pool2d_backward(
        g, am, size, *POOL),
    "argmax_to_mask": lambda g, am, size: torch.ops.poolx.argmax_to_mask(am, size, *POOL),
    "argmax_to_indices": lambda g, am, size: torch.ops.poolx.argmax_to_indices(am, size, *POOL),
    "max_unpool2d_argmax": lambda g, am, size: torch.ops.poolx.max_unpool2d_argmax(
        g, am, size, *POOL),
}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size", [[2**40, 2**40], [2**62, 4], [2**63 - 1, 1]])
def test_input_sizes_that_overflow_are_rejected(op, size):
    pooled = [(s - k) // st + 1 for s, k, st in zip(size, KERNEL, STRIDE)]
    # Tensors of the pooled shape without storage to speak of (stride 0).
    grad = torch.zeros(1).expand(3, 5, *pooled)
    argmax = torch.zeros(1, dtype=torch.int32).expand(3, 5, *pooled)
    with pytest.raises(RuntimeError, match=rf"{op}: .*(is too large|at most 2\^62)"):
        OPS[op](grad, argmax, size)


@pytest.mark.parametrize("size", [[2**40, 2**40], [2**62, 4], [2**32, 2**31]])
def test_unpool_output_sizes_that_overflow_are_rejected(size):
    x = torch.zeros(2, 3, 1, 1)
    indices = torch.zeros(2, 3, 1, 1, dtype=torch.long)
    with pytest.raises(RuntimeError, match=r"max_unpool2d: output_size=.* is too large"):
        torch.ops.poolx.max_unpool2d(x, indices, size)

