"""CPU-vs-CUDA parity of every poolx op, bit for bit, where a GPU exists.

The CPU kernels are checked against torch by the rest of the suite; these tests
check that the CUDA kernels (generic, tiled fast paths and their scalar
fallbacks) agree with them on every element. Each CUDA output is computed into
memory poisoned with two different byte patterns, so an element a kernel
forgets to write cannot match the CPU result in both runs."""

import pytest
import torch

ops = torch.ops.poolx
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here"),
]

from cuda_cases import (
    CONFIG_IDS,
    CONFIGS,
    FLOAT_TYPES,
    INT_TYPES,
    LAYOUTS,
    assert_parity,
    planted_input,
    pool_args,
    random_grad,
)


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
