"""The CUDA ops on devices and streams: the current stream, a second GPU,
more than 2^31 elements, tensors on the wrong device, a CPU-only build, and
the device-side assert of a bad unpool index."""

import subprocess
import sys

import pytest
import torch

from cuda_cases import (
    CONFIGS,
    assert_same_bits,
    cuda_build,
    planted_input,
    pool_args,
    random_grad,
)

ops = torch.ops.poolx
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here"),
]


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
