"""What the CUDA tests share: the configurations (one per CUDA path), planted
inputs, bit comparison on the CPU, and runs into poisoned device memory."""

import pytest
import torch

ops = torch.ops.poolx

FLOAT_TYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_TYPES = [torch.uint8, torch.int32, torch.int64]
LAYOUTS = [torch.contiguous_format, torch.channels_last]

# (N, C, H, W), kernel, stride, padding, dilation, ceil_mode; the comment names
# the CUDA path each one takes for float32.
CONFIGS = [
    ((2, 8, 16, 32), (2, 2), (2, 2), (0, 0), (1, 1), False),  # tiled, 16-byte vectors
    ((2, 8, 28, 28), (2, 2), (2, 2), (0, 0), (1, 1), False),  # tiled, 8-byte groups
    ((1, 16, 9, 19), (2, 2), (2, 2), (0, 0), (1, 1), False),  # tiled, dropped last row/col
    ((2, 8, 9, 17), (2, 2), (2, 2), (0, 0), (1, 1), True),  # tiled, partial windows
    ((1, 8, 12, 16), (3, 2), (3, 2), (0, 0), (1, 1), False),  # tiled, 3 kernel rows
    ((2, 8, 12, 12), (3, 3), (3, 3), (0, 0), (1, 1), False),  # tiled 3x3
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),  # tiled, C not a vector
    ((2, 8, 15, 15), (3, 3), (2, 2), (1, 1), (1, 1), False),  # overlapping, padded
    ((1, 4, 11, 13), (3, 3), (1, 1), (1, 1), (2, 2), True),  # dilated
    ((1, 2, 1, 18), (2, 2), (2, 2), (1, 0), (2, 1), False),  # windows with no input
    ((1, 2, 17, 34), (17, 17), (17, 17), (0, 0), (1, 1), False),  # int32 argmax
    ((2, 3, 5, 7), (1, 1), (1, 1), (0, 0), (1, 1), False),  # 1x1 kernel
]
CONFIG_IDS = [f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}-ceil{int(c[5])}" for c in CONFIGS]


def planted_input(shape, dtype, layout):
    """Few distinct values (ties), plus NaN and -inf for floating types."""
    if dtype.is_floating_point:
        x = torch.randint(-3, 4, shape).to(dtype)
        pick = torch.rand(shape)
        x[pick < 0.05] = float("nan")
        x[(pick >= 0.05) & (pick < 0.1)] = float("-inf")
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(max(info.min, -3), min(info.max, 4), shape).to(dtype)
        x[torch.rand(shape) < 0.05] = info.min
    return x.contiguous(memory_format=layout)


def random_grad(shape, dtype, layout):
    """Finite gradients with planted -0.0 (torch's backward turns it into +0.0)."""
    g = torch.randn(shape, dtype=torch.float64).to(dtype)
    g[torch.rand(shape) < 0.1] = -0.0
    return g.contiguous(memory_format=layout)


def assert_same_bits(actual, expected):
    assert actual.device.type == "cuda"
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride(), "memory format differs"
    if not expected.is_floating_point():
        assert torch.equal(actual, expected)
        return
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan), "NaN positions differ"
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[expected.element_size()]
    assert torch.equal(actual[~nan].view(bits), expected[~nan].view(bits)), (
        f"values differ at {(actual[~nan] != expected[~nan]).sum()} elements"
    )


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def merged(ranges):
    """Adjacent [lo, hi) ranges joined (the allocator may coalesce freed blocks)."""
    out = []
    for lo, hi in sorted(ranges):
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def poisoned_run(fn, pattern):
    """fn()'s CUDA outputs, computed into caching-allocator blocks that were
    filled with `pattern` bytes just before; fails if they did not land there.
    Small outputs share the allocator's small pool with fn()'s temporaries,
    so the poisoned blocks are many."""
    # whole allocator blocks (multiples of 512 bytes), so that freed neighbours
    # merge into one poisoned range wherever fn() then carves its outputs
    sizes = [-(-t.untyped_storage().nbytes() // 512) * 512 for t in as_tuple(fn())]
    for blocks_per_size in (4, 32, 256):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        blocks = [
            torch.full((n,), pattern, dtype=torch.uint8, device="cuda")
            for n in sizes
            for _ in range(blocks_per_size)
        ]
        ranges = merged([(b.data_ptr(), b.data_ptr() + b.numel()) for b in blocks])
        del blocks  # back to the allocator's cache, poisoned
        outs = as_tuple(fn())
        spans = [(o.untyped_storage().data_ptr(), o.untyped_storage().nbytes()) for o in outs]
        if all(any(lo <= p and p + n <= hi for lo, hi in ranges) for p, n in spans):
            return outs
    pytest.fail(f"could not place the op's outputs (address, bytes: {spans}) in poisoned "
                f"memory ({len(ranges)} ranges from {ranges[0][0]:#x} to {ranges[-1][1]:#x})")


def assert_parity(cuda_fn, cpu_fn):
    expected = as_tuple(cpu_fn())
    for pattern in (0xFF, 0x55):  # NaN / -1 / 255 / True, and a finite pattern
        for got, want in zip(poisoned_run(cuda_fn, pattern), expected):
            assert_same_bits(got, want)


def cuda_build():
    try:
        ops.max_pool2d_values(torch.zeros(1, 1, 2, 2, device="cuda"), [2, 2], [2, 2], [0, 0],
                              [1, 1], False)
    except RuntimeError as error:
        if "built without CUDA kernels" in str(error):
            return False
        raise
    return True


def pool_args(config):
    _, kernel, stride, padding, dilation, ceil_mode = config
    return list(kernel), list(stride), list(padding), list(dilation), ceil_mode

