"""The memory-bandwidth floor: minimal bytes per case and the copy bandwidths."""

import torch
from torch.utils import benchmark


def minimal_bytes(case):
    """The least traffic of a 2-D case (path_bytes)."""
    s = case.shape
    elem = torch.empty((), dtype=getattr(torch, case.dtype)).element_size()
    return path_bytes(s.n * s.c * s.h * s.w, s.n * s.c * s.out_hw[0] * s.out_hw[1], elem,
                      case.mode)


def path_bytes(inputs, outputs, elem, mode):
    """DESIGN.md's minimal traffic of `mode` for `inputs` and `outputs` elements
    of `elem` bytes: forward reads the input and writes values (plus a 1-byte
    argmax where the mode needs it); backward reads grad_out and the argmax and
    writes grad_input; forward+backward is the sum. The other paths read and
    write each tensor of their API once (int64 indices: 8 bytes an output, a
    mask: 1 byte an input)."""
    forward = (inputs + outputs) * elem
    backward = outputs * (elem + 1) + inputs * elem
    unpool_indices = outputs * (elem + 8) + inputs * elem  # values, int64 indices in
    return {
        "inference": forward,
        "forward": forward + outputs,
        "backward": backward,
        "forward+backward": forward + outputs + backward,
        "return_indices": forward + 8 * outputs,
        "unpool": unpool_indices,
        "unpool_argmax": outputs * (elem + 1) + inputs * elem,
        # pool with indices, unpool by them; backward: the unpool's gather, the pool's scatter
        "pool+unpool": forward + 8 * outputs + unpool_indices + 2 * backward,
        "argmax_to_mask": outputs + inputs,
    }[mode]


def copy_bandwidths(device, nbytes, min_run_time):
    """GB/s (bytes read + written) of two copies of a large float32 tensor,
    on all of torch's threads, as the cases run: "copy", dst.copy_(src) into
    a warm, preallocated buffer (no page faults), and "clone", src.clone(),
    which allocates its result and so pays the page faults of a fresh output.
    (benchmark.Timer runs on one thread unless told otherwise: a floor taken
    that way is about half the machine's.)"""
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * 4
    out = {}
    for name, stmt in (("copy", "dst.copy_(src)"), ("clone", "src.clone()")):
        timer = benchmark.Timer(stmt, globals=dict(dst=dst, src=src),
                                 num_threads=torch.get_num_threads())
        out[name] = moved / timer.blocked_autorange(min_run_time=min_run_time).median / 1e9
    return out
