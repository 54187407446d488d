"""Backward of windows that share no input, which the plane scatter writes in
place onto a zeroed gradient (csrc/cpu/isa/backward_scatter.h), 16-bit ones
included, and adaptive windows where the output size divides the input's:
gradients identical to torch's, with ties, NaN, -inf and a -0.0 upstream
(which torch's add onto zero makes +0.0), in both layouts, beside windows
that overlap and still sum in a scratch."""

import pytest
import torch
import torch.nn.functional as F

import poolx
from inputs import random_values, upstream_grad
from reference import assert_identical, torch_pool_grad

ops = torch.ops.poolx
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LAYOUTS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}

# name: (input shape, kernel_size, stride)
WINDOWED = {
    "global 7x7 of 64 channels": ((2, 64, 7, 7), 7, 7),
    "3x3 tiled, 3 channels": ((2, 3, 12, 12), 3, 3),
    "2x2 tiled, 3 channels": ((2, 3, 14, 10), 2, 2),
    "3x3 s3 on 28x28 planes": ((2, 8, 28, 28), 3, 3),
    # more windows than one flat run of the NCHW scatter takes (4096)
    "3x3 s3 on 200x200 planes": ((1, 2, 200, 200), 3, 3),
    "overlapping 3x3 s2, 3 channels": ((2, 3, 13, 13), 3, 2),
}

# name: (input shape, output_size)
ADAPTIVE = {
    "head 7x7 -> 1": ((2, 64, 7, 7), [1, 1]),
    "even 8x12 -> 4x3": ((2, 16, 8, 12), [4, 3]),
    "text head 1x200 -> 1": ((2, 32, 1, 200), [1, 1]),
    "overlapping 13x13 -> 4": ((2, 16, 13, 13), [4, 4]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", WINDOWED)
def test_windowed_gradient_matches_torch(name, dtype, layout):
    shape, kernel, stride = WINDOWED[name]
    x = random_values(shape, dtype).contiguous(memory_format=LAYOUTS[layout])
    xg = x.detach().requires_grad_()
    y = poolx.max_pool2d(xg, kernel, stride)
    grad_out = upstream_grad(y)
    (grad,) = torch.autograd.grad(y, xg, grad_out)
    expected = torch_pool_grad(F.max_pool2d, x, (kernel, stride), grad_out)
    assert_identical(grad, expected, f"{name}, {dtype}, {layout}", check_stride=False)
    assert not grad.signbit().logical_and(grad == 0).any(), "-0.0 in the gradient"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ADAPTIVE)
def test_adaptive_backward_op_matches_torch(name, dtype, layout):
    """The adaptive backward op itself, called directly."""
    shape, output_size = ADAPTIVE[name]
    x = random_values(shape, dtype).contiguous(memory_format=LAYOUTS[layout])
    values, argmax = ops.adaptive_max_pool2d_argmax(x, output_size)
    grad_out = upstream_grad(values)
    grad = ops.adaptive_max_pool2d_backward(grad_out, argmax, list(shape[-2:]), output_size)
    expected = torch_pool_grad(F.adaptive_max_pool2d, x, (output_size,), grad_out)
    assert_identical(grad, expected, f"{name}, {dtype}, {layout}", check_stride=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_windowed_volume_gradient_matches_torch(dtype):
    for layout in (torch.contiguous_format, torch.channels_last_3d):
        x = random_values((2, 3, 4, 6, 9), dtype).contiguous(memory_format=layout)
        for kernel in ((2, 2, 2), (1, 3, 3), (2, 3, 3)):
            xg = x.detach().requires_grad_()
            y = poolx.max_pool3d(xg, kernel)
            grad_out = upstream_grad(y)
            (grad,) = torch.autograd.grad(y, xg, grad_out)
            expected = torch_pool_grad(F.max_pool3d, x, (kernel,), grad_out)
            assert_identical(grad, expected, f"{kernel}, {dtype}, {layout}", check_stride=False)
            assert not grad.signbit().logical_and(grad == 0).any(), "-0.0 in the gradient"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_adaptive_volume_backward_op_matches_torch(dtype):
    for layout in (torch.contiguous_format, torch.channels_last_3d):
        x = random_values((2, 8, 4, 6, 8), dtype).contiguous(memory_format=layout)
        for output_size in ([2, 3, 4], [1, 1, 1], [3, 4, 5]):
            values, argmax = ops.adaptive_max_pool3d_argmax(x, output_size)
            grad_out = upstream_grad(values)
            grad = ops.adaptive_max_pool3d_backward(grad_out, argmax, [4, 6, 8], output_size)
            expected = torch_pool_grad(F.adaptive_max_pool3d, x, (output_size,), grad_out)
            assert_identical(grad, expected, f"{output_size}, {dtype}, {layout}",
                             check_stride=False)
