"""Argmax passes over channels_last windows (csrc/cpu/isa/forward_kernels.h)
take numbers by a cheaper rule on AVX2 and go again by PyTorch's where the
pass's inputs hold a NaN, or infinities of both signs; a task that meets one
takes its later passes by PyTorch's rule. Values (bits), indices and gradients
against torch, with those planted in some passes of a task and not in others,
on data of many ties and zeros of both signs. test_cpu_fast_paths runs this
module under each narrower instruction set too."""

import pytest
import torch
import torch.nn.functional as F

import poolx

from reference import sums_like_cuda

# 16-vector passes, a channel tail, overlapping adaptive and stepping windows
CASES = [((4, 512, 7, 7), dict(output_size=1)), ((2, 136, 13, 13), dict(output_size=4)),
         ((3, 264, 9, 11), dict(kernel_size=3, stride=2, padding=1))]
PLANTS = {"nan": [(0, 5, 3, 4, "nan"), (2, -1, 0, 0, "nan")],
          "infinities": [(0, 9, 1, 1, "inf"), (0, 10, 2, 2, "-inf"), (1, 300, 4, 4, "-inf")],
          "both": [(0, 9, 1, 1, "inf"), (0, 10, 2, 2, "-inf"), (1, 130, 5, 6, "nan")]}


def pool(module, x, pooling, **kwargs):
    if "output_size" in pooling:
        return module.adaptive_max_pool2d(x, pooling["output_size"], **kwargs)
    return module.max_pool2d(x, **pooling, **kwargs)


@pytest.mark.parametrize("planted", PLANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape, pooling", CASES, ids=str)
def test_planted_passes_match_torch(shape, pooling, dtype, planted):
    x = torch.randn(shape).mul(2).round()  # ties, and -0.0 beside +0.0
    for n, c, h, w, value in PLANTS[planted]:
        x[n % shape[0], c % shape[1], h, w] = float(value)
    x = x.to(dtype).contiguous(memory_format=torch.channels_last).requires_grad_()
    ref = x.detach().clone().requires_grad_()
    values, indices = pool(poolx, x, pooling, return_indices=True)
    expected, expected_indices = pool(F, ref, pooling, return_indices=True)
    torch.testing.assert_close(values, expected, rtol=0, atol=0, equal_nan=True)
    real = ~expected.isnan()
    assert torch.equal(values[real].signbit(), expected[real].signbit())
    assert torch.equal(indices, expected_indices)
    grad = torch.randn_like(expected)
    values.backward(grad)
    expected.backward(grad)
    expected_grad = ref.grad
    if sums_like_cuda(x) and dtype != torch.float32:
        # the CUDA kernels (emulated) sum a 16-bit gradient in float and round
        # once, as torch's CUDA kernel does: that gradient rounded
        wide = x.detach().float().requires_grad_()
        pool(F, wide, pooling).backward(grad.float())
        expected_grad = wide.grad.to(dtype)
    torch.testing.assert_close(x.grad, expected_grad, rtol=0, atol=0, equal_nan=True)
