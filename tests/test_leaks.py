"""No memory leak: resident memory stays flat across 10,000 forward+backward calls."""

import os

import torch

import poolx

CALLS = 10_000
WARMUP = 500
# Each call allocates tensors of 32 KiB and more, so leaking any one of them per call
# would grow RSS by at least 320 MB; the bound leaves room for allocator noise.
GROWTH_BOUND = 4 * 2**20


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_call(x, grad_out):
    x = x.detach().requires_grad_()
    values, indices = poolx.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    values.backward(grad_out)
    unpooled = poolx.max_unpool2d(values.detach(), indices, 3, 2, 1, output_size=x.shape[-2:])
    with torch.no_grad():
        poolx.max_pool2d(x, 2)
    return x.grad, unpooled


def test_rss_is_stable_across_many_calls():
    x = torch.randn(2, 4, 32, 32)
    grad_out = torch.randn(2, 4, 16, 16)
    for _ in range(WARMUP):
        one_call(x, grad_out)
    before = resident_bytes()
    for _ in range(CALLS):
        one_call(x, grad_out)
    growth = resident_bytes() - before
    assert growth < GROWTH_BOUND, f"RSS grew by {growth / 2**20:.1f} MiB over {CALLS} calls"
