"""CPU-vs-CUDA parity of every poolx op, bit for bit, where a GPU exists.

The CPU kernels are checked against torch by the rest of the suite; these tests
check that the CUDA kernels (generic, tiled fast paths and their scalar
fallbacks) agree with them on every element. Each CUDA output is computed into
memory poisoned with two different byte patterns, so an element a kernel
forgets to write cannot match the CPU result in both runs."""

import subprocess
import sys

import pytest
import torch

ops = torch.ops.poolx
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here"),
]

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


@pytest.fixture(scope="module")
def with_cuda_kernels():
    if not cuda_build():
        pytest.skip("poolx was built without CUDA kernels")


def pool_args(config):
    _, kernel, stride, padding, dilation, ceil_mode = config
    return list(kernel), list(stride), list(padding), list(dilation), ceil_mode


@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", FLOAT_TYPES + INT_TYPES, ids=str)
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_forward_matches_cpu(with_cuda_kernels, config, dtype, layout):
    x = planted_input(config[0], dtype, layout)
    args = pool_args(config)
    xc = x.cuda()
    assert_parity(lambda: ops.max_pool2d_argmax(xc, *args), lambda: ops.max_pool2d_argmax(x, *args))
    assert_parity(lambda: ops.max_pool2d_values(xc, *args), lambda: ops.max_pool2d_values(x, *args))


def backward_summing_as_on(device, grad, argmax, in_hw, args):
    """poolx's backward sums as torch does on each device: on CPU a 16-bit sum
    rounds after every add, on CUDA it is summed in float32 and rounded once,
    so the CPU reference for CUDA runs in float32 and rounds at the end."""
    if device == "cuda" or grad.dtype not in (torch.float16, torch.bfloat16):
        return ops.max_pool2d_backward(grad, argmax, in_hw, *args)
    return ops.max_pool2d_backward(grad.float(), argmax, in_hw, *args).to(grad.dtype)


def run_argmax_ops(x, grad, src, colliding, args, device):
    """Every op that consumes an argmax, on `device`, from CPU inputs."""
    x, grad, src, colliding = (t.to(device) for t in (x, grad, src, colliding))
    values, argmax = ops.max_pool2d_argmax(x, *args)
    in_hw = list(x.shape[-2:])
    indices = ops.argmax_to_indices(argmax, in_hw, *args)
    return {
        "backward": lambda: backward_summing_as_on(device, grad, argmax, in_hw, args),
        "indices": lambda: ops.argmax_to_indices(argmax, in_hw, *args),
        "mask": lambda: ops.argmax_to_mask(argmax, in_hw, *args),
        "gather": lambda: ops.gather_by_argmax(src, argmax, *args),
        "unpool_argmax": lambda: ops.max_unpool2d_argmax(values, argmax, in_hw, *args),
        "unpool_indices": lambda: ops.max_unpool2d(values, indices, in_hw),
        "unpool_colliding": lambda: ops.max_unpool2d(values, colliding, in_hw),
    }


@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_argmax_ops_match_cpu(with_cuda_kernels, config, dtype, layout):
    x = planted_input(config[0], dtype, layout)
    args = pool_args(config)
    values = ops.max_pool2d_values(x, *args)
    grad = random_grad(values.shape, dtype, layout)
    src = random_grad(x.shape, dtype, layout)
    # few targets, so torch's last-write-wins rule decides most of them
    colliding = torch.randint(0, 3, values.shape).contiguous(memory_format=layout)
    on_cpu = run_argmax_ops(x, grad, src, colliding, args, "cpu")
    on_cuda = run_argmax_ops(x, grad, src, colliding, args, "cuda")
    for name in on_cpu:
        try:
            assert_parity(on_cuda[name], on_cpu[name])
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from error


def offset_view(t):
    """A copy of t whose storage starts one element earlier: same values and
    strides, data pointer misaligned for vector access."""
    buffer = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buffer[1:].as_strided(t.shape, t.stride())
    view.copy_(t)
    return view


@pytest.mark.parametrize("layout", LAYOUTS, ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_misaligned_tensors_take_the_scalar_fallback_correctly(with_cuda_kernels, dtype, layout):
    config = CONFIGS[0]  # tiled: the vectorized path when aligned
    x = planted_input(config[0], dtype, layout)
    args = pool_args(config)
    values, argmax = ops.max_pool2d_argmax(x, *args)
    grad = random_grad(values.shape, dtype, layout)
    xc, gc, ac = (offset_view(t.cuda()) for t in (x, grad, argmax))
    assert xc.storage_offset() == 1 and xc.stride() == x.stride()
    in_hw = list(x.shape[-2:])
    assert_parity(lambda: ops.max_pool2d_argmax(xc, *args), lambda: ops.max_pool2d_argmax(x, *args))
    assert_parity(lambda: ops.max_pool2d_backward(gc, ac, in_hw, *args),
                  lambda: ops.max_pool2d_backward(grad, argmax, in_hw, *args))


def test_kernels_run_on_the_current_stream(with_cuda_kernels):
    """The input is written on a side stream after a delay; an op launched on
    any other stream would read it before it is ready (NaN)."""
    x = planted_input((4, 16, 64, 64), torch.float32, torch.contiguous_format)
    args = pool_args(CONFIGS[0])
    expected_values, expected_argmax = ops.max_pool2d_argmax(x, *args)
    grad = random_grad(expected_values.shape, torch.float32, torch.contiguous_format)
    expected_grad = ops.max_pool2d_backward(grad, expected_argmax, [64, 64], *args)
    x_gpu, grad_gpu = x.cuda(), grad.cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        late_x = torch.full_like(x_gpu, float("nan"))
        late_grad = torch.full_like(grad_gpu, float("nan"))
        torch.cuda._sleep(50_000_000)
        late_x.copy_(x_gpu)
        late_grad.copy_(grad_gpu)
        values, argmax = ops.max_pool2d_argmax(late_x, *args)
        grad_input = ops.max_pool2d_backward(late_grad, argmax, [64, 64], *args)
    side.synchronize()
    assert_same_bits(values, expected_values)
    assert_same_bits(argmax, expected_argmax)
    assert_same_bits(grad_input, expected_grad)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_tensors_on_a_second_device(with_cuda_kernels):
    x = planted_input((2, 8, 16, 32), torch.float32, torch.channels_last)
    args = pool_args(CONFIGS[0])
    with torch.cuda.device(0):
        values, argmax = ops.max_pool2d_argmax(x.to("cuda:1"), *args)
        torch.cuda.synchronize(1)
    assert values.device == torch.device("cuda:1")
    for got, want in zip((values, argmax), ops.max_pool2d_argmax(x, *args)):
        assert_same_bits(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [(2, 2), (2, 3)], ids=["tiled-vector", "generic"])
def test_more_than_2_31_elements(with_cuda_kernels, kernel):
    # 2^31 + 1.6M elements (4.3 GB in half); out_w = 16392 suits 16-byte vectors
    height, width = 2**16 + 16, 2**15 + 16
    free, _ = torch.cuda.mem_get_info()
    if free < 16 * 2**30:
        pytest.skip(f"needs 16 GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    x = torch.randn(1, 1, height, width, dtype=torch.float16, device="cuda")
    args = [list(kernel), list(kernel), [0, 0], [1, 1], False]
    values, argmax = ops.max_pool2d_argmax(x, *args)
    grad_input = ops.max_pool2d_backward(values, argmax, [height, width], *args)
    rows = 6 * kernel[0]  # windows never straddle these slices: stride == kernel
    for start in (0, height - rows):
        part = x[..., start:start + rows, :].cpu()
        want_v, want_a = ops.max_pool2d_argmax(part, *args)
        out = slice(start // kernel[0], (start + rows) // kernel[0])
        assert_same_bits(values[..., out, :].contiguous(), want_v)
        assert_same_bits(argmax[..., out, :].contiguous(), want_a)
        want_g = ops.max_pool2d_backward(want_v, want_a, [rows, width], *args)
        assert_same_bits(grad_input[..., start:start + rows, :].contiguous(), want_g)


def test_cuda_tensors_with_a_cpu_argmax_are_rejected():
    x = torch.randn(1, 2, 8, 8)
    values, argmax = ops.max_pool2d_argmax(x, *pool_args(CONFIGS[0]))
    with pytest.raises(RuntimeError, match="argmax must be on the device"):
        ops.max_pool2d_backward(values.cuda(), argmax, [8, 8], *pool_args(CONFIGS[0]))
    with pytest.raises(RuntimeError, match="argmax must be on the device"):
        ops.max_pool2d_backward(values, argmax.cuda(), [8, 8], *pool_args(CONFIGS[0]))


def test_cpu_only_build_names_the_missing_cuda_kernels():
    if cuda_build():
        pytest.skip("poolx was built with CUDA kernels")
    with pytest.raises(RuntimeError, match="built without CUDA kernels"):
        ops.max_pool2d_argmax(torch.randn(1, 1, 4, 4, device="cuda"), *pool_args(CONFIGS[0]))


@pytest.mark.parametrize("bad", [-1, 6 * 7], ids=["negative", "one past the plane"])
def test_an_index_outside_the_plane_asserts_on_the_device(with_cuda_kernels, bad):
    """As torch's CUDA unpool: no host sync to inspect the indices, a device-side
    assert instead, which ends the process's CUDA context (so: a fresh process)."""
    code = (
        "import torch, poolx\n"
        "indices = torch.zeros(1, 2, 3, 3, dtype=torch.long, device='cuda')\n"
        f"indices[0, 1, 2, 2] = {bad}\n"
        "try:\n"
        "    poolx.max_unpool2d(torch.ones(1, 2, 3, 3, device='cuda'), indices, 2, output_size=(6, 7))\n"
        "    torch.cuda.synchronize()\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "device-side assert triggered" in done.stdout + done.stderr, done.stdout + done.stderr
