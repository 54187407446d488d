"""Memory: no leak (resident memory stays flat across 10,000 forward+backward
calls), and no op takes temporaries beyond its own output."""

import os

import pytest
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


def status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("pool", [(3, 2, 1), (2, 2, 0)], ids=["overlapping", "tiled"])
def test_backward_takes_no_memory_beyond_its_output(pool, dtype, channels_last):
    """The peak resident memory of a backward rises by its output alone (a 16-bit
    backward over overlapping windows once summed in a float plane per thread: 3x)."""
    shape = (1, 4, 2048, 2048) if channels_last else (1, 1, 4096, 4096)
    x = torch.randn(shape).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    values, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    grad = torch.randn_like(values)
    del x
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM) to the current resident size
    before = status_mib("VmRSS")
    grad_input = poolx.max_pool2d_backward(grad, argmax, shape, *pool)
    rise = status_mib("VmHWM") - before
    output = grad_input.numel() * grad_input.element_size() / 2**20
    assert rise <= output + 8, f"peak rose {rise:.0f} MiB for a {output:.0f} MiB gradient"
