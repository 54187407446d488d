"""Pooling cases, planted inputs and torch's unpool, shared by the unpool and
mask tests."""

import torch
import torch.nn.functional as F
from reference import single_threaded
from torch import nn

# (kernel_size, stride, padding, dilation, ceil_mode) and the input plane.
CASES = {
    "tiled 2x2, odd size": ((2, 2, 0, 1, False), (7, 9)),
    "overlap 3/1 (indices repeat)": ((3, 1, 1, 1, False), (6, 7)),
    "non-square, ceil_mode": (((3, 2), (2, 1), (1, 0), 1, True), (7, 8)),
    "dilated, ceil_mode": ((3, 2, 1, 2, True), (9, 10)),
}

BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def planted(shape, dtype=torch.float32, device="cpu", channels_last=False):
    """Few distinct values (ties), NaN (alone and in clusters), -inf, -0.0."""
    x = (torch.randint(-4, 5, shape) / 2).to(dtype)
    flat = x.view(-1)
    r = torch.rand(flat.shape)
    flat[r < 0.04] = float("nan")
    flat[(r > 0.04) & (r < 0.09)] = float("-inf")
    flat[r > 0.95] = -0.0
    x.view(-1, *shape[-2:])[-1, 1:4, 1:4] = float("nan")
    x = x.to(device)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def pooled_input(case, device, channels_last, batch=(2, 3)):
    """(pool, x, torch's indices) for CASES[case], x planted with `batch` leading dims."""
    pool, hw = CASES[case]
    x = planted((*batch, *hw), device=device, channels_last=channels_last)
    return pool, x, torch_indices(x, pool)


def unpool_args(pool):
    """kernel_size, stride, padding for unpooling after `pool`: unpool has no
    dilation, so a dilated window counts with its span (for the size check)."""
    kernel, stride, padding, dilation = (nn.modules.utils._pair(a) for a in pool[:4])
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    return span, stride, padding


def torch_unpool(values, indices, pool, output_size):
    """The reference: torch's CPU result on one thread. With more threads its
    kernel splits a plane between them and a repeated index may keep either
    write; on one thread the last write in row-major input order wins."""
    contiguous = [t.cpu().contiguous() for t in (values, indices)]
    with single_threaded():
        return F.max_unpool2d(*contiguous, *unpool_args(pool), output_size=output_size)


def torch_indices(x, pool):
    """torch's max_pool2d indices of x, computed on CPU, in x's layout."""
    _, indices = F.max_pool2d(x.cpu(), *pool, return_indices=True)
    return indices.to(x.device)


def values_like(indices, dtype):
    """Distinct random values to unpool (so the winner of a repeated index
    shows), with NaN and -0.0 planted; in the layout of indices."""
    v = torch.randn(indices.shape).to(dtype)
    r = torch.rand(v.shape)
    v[r < 0.05] = float("nan")
    v[r > 0.95] = -0.0
    return v.to(indices.device).contiguous(memory_format=layout(indices))


def layout(t):
    if t.dim() == 4 and not t.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


def assert_same_bits(actual, expected):
    """Equal including NaN payloads and the sign of zero (compared on the CPU,
    wherever either was computed)."""
    actual, expected = actual.cpu(), expected.cpu()
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if actual.dtype in BITS:
        actual, expected = actual.view(BITS[actual.dtype]), expected.view(BITS[expected.dtype])
    assert torch.equal(actual, expected)
