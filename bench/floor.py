"""The memory-bandwidth floor: minimal bytes per case and the copy bandwidth."""

import torch
from torch.utils import benchmark


def minimal_bytes(case):
    """DESIGN.md's minimal traffic: forward reads the input and writes values
    (plus a 1-byte argmax where the mode needs it); backward reads grad_out and
    the argmax and writes grad_input; forward+backward is the sum."""
    s = case.shape
    elem = torch.empty((), dtype=getattr(torch, case.dtype)).element_size()
    inputs = s.n * s.c * s.h * s.w
    outputs = s.n * s.c * s.out_hw[0] * s.out_hw[1]
    forward = (inputs + outputs) * elem
    backward = outputs * (elem + 1) + inputs * elem
    return {
        "inference": forward,
        "forward": forward + outputs,
        "backward": backward,
        "forward+backward": forward + outputs + backward,
    }[case.mode]


def copy_bandwidth(device, nbytes, min_run_time):
    """GB/s of dst.copy_(src) on a large float32 tensor, bytes read + written."""
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    timer = benchmark.Timer("dst.copy_(src)", globals=dict(dst=dst, src=src))
    median = timer.blocked_autorange(min_run_time=min_run_time).median
    return 2 * src.numel() * 4 / median / 1e9
