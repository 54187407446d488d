"""Bad arguments: poolx raises where torch raises, with the same exception
type, through the Python API and through torch.ops.poolx directly (the C++
checks), and the message names the offending argument and its value."""

import re

import pytest
import torch
import torch.nn.functional as F

import poolx
from inputs import random_values

ops = torch.ops.poolx
BIG = 2**40

# (input shape, input dtype, max_pool2d arguments, what the message must say)
REJECTED_BY_TORCH = [
    ((8, 8), torch.float32, dict(kernel_size=2), r"input of shape \[8, 8\]"),
    ((1, 2, 3, 8, 8), torch.float32, dict(kernel_size=2), r"input of shape \[1, 2, 3, 8, 8\]"),
    ((2, 0, 8, 8), torch.float32, dict(kernel_size=2), r"\[2, 0, 8, 8\]"),
    ((2, 3, 0, 8), torch.float32, dict(kernel_size=2), r"\[2, 3, 0, 8\]"),
    ((0, 8, 8), torch.float32, dict(kernel_size=2), r"\[0, 8, 8\]"),
    ((2, 3, 8, 8), torch.bool, dict(kernel_size=2), r"input\.dtype=Bool"),
    ((2, 3, 8, 8), torch.complex64, dict(kernel_size=2), r"input\.dtype=ComplexFloat"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=0), r"stride should not be zero.*dH: 0"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=(2, -1)), r"kernel size.*kW: -1"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=0), r"stride should not.*dH: 0"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=(-2, 1)), r"stride.*dH: -2"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, dilation=(1, 0)), r"dilationW: 0"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, padding=-1), r"pad.*-1"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=3, padding=2), r"pad=2, kernel_size=3 and"),
    # torch limits padding by the dilated kernel, then by the kernel itself
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=3, padding=(0, 2), dilation=2), r"padW = 2"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=9), r"output size: \(3x0x0\)"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=(3, 9), stride=1), r"output size: \(3x6x0\)"),
    ((3, 8, 8), torch.float32, dict(kernel_size=4, stride=1, dilation=(1, 3)), r"\(3x5x-1\)"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=(2, 2, 2)), r"kernel_size=.2, 2, 2."),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=()), r"kernel_size=.."),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=(1, 1, 1)), r"stride=.1, 1, 1."),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, padding=(0, 0, 0)), r"padding=.0, 0, 0."),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, dilation=(1, 1, 1)), r"dilation=.1, 1, 1."),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2.0), r"kernel_size=2\.0"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=(2.0, 2)), r"kernel_size=\(2\.0, 2\)"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=1.5), r"stride=1\.5"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size="2"), r"kernel_size='2'"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=None), r"kernel_size=None"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=True), r"kernel_size=True"),
    # sizes that would overflow index arithmetic
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2**31), r"kernel_size=.2147483648"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=BIG), rf"stride=.{BIG}"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, dilation=BIG), rf"dilation=.{BIG}"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=BIG, padding=BIG // 2), rf"kernel_size=.{BIG}"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2**64), r"kernel_size=18446744073709551616"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=(2, 2**64)), r"kernel_size=.2, 1844674"),
    ((2, 3, 8, 8), torch.float32, dict(kernel_size=2, stride=(-(2**63) - 1, 1)), r"stride=.-9223"),
]


def case_id(case):
    shape, dtype, kwargs, _ = case
    return f"{list(shape)}-{str(dtype)[6:]}-" + ",".join(f"{k}={v!r}" for k, v in kwargs.items())


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def as_op_args(kwargs):
    """max_pool2d's arguments as the ops take them (int lists; stride [] = kernel)."""
    def ints(v):
        return [] if v is None else ([v] if isinstance(v, int) else list(v))

    get = kwargs.get
    return (ints(get("kernel_size")), ints(get("stride")), ints(get("padding", 0)),
            ints(get("dilation", 1)), get("ceil_mode", False))


def plain_ints(kwargs):
    def ok(v):
        items = v if isinstance(v, tuple) else (v,)
        return all(type(i) is int and -(2**63) <= i < 2**63 for i in items)

    return all(ok(v) for v in kwargs.values())


@pytest.mark.parametrize("case", REJECTED_BY_TORCH, ids=case_id)
def test_rejects_what_torch_rejects(case, device):
    shape, dtype, kwargs, says = case
    x = torch.ones(shape, dtype=dtype, device=device)
    expected = raised(lambda: F.max_pool2d(x.cpu(), **kwargs))
    calls = {
        "poolx.max_pool2d": lambda: poolx.max_pool2d(x, **kwargs),
        "return_indices=True": lambda: poolx.max_pool2d(x, **kwargs, return_indices=True),
        "poolx.MaxPool2d": lambda: poolx.MaxPool2d(**kwargs)(x),
    }
    if plain_ints(kwargs):
        calls["ops.max_pool2d_argmax"] = lambda: ops.max_pool2d_argmax(x, *as_op_args(kwargs))
        calls["ops.max_pool2d_values"] = lambda: ops.max_pool2d_values(x, *as_op_args(kwargs))
    for name, call in calls.items():
        error = raised(call)
        assert type(error) is type(expected), f"{name}: {error!r}, torch: {expected!r}"
        assert re.search(says, str(error)), f"{name}: message {str(error)!r} lacks {says!r}"


def test_rejects_windows_whose_argmax_would_wrap(device):
    """torch accepts a 65536x65536 window (padding makes it fit a 3x3 input);
    its tap positions exceed int32, so poolx refuses instead of wrapping."""
    x = random_values((1, 1, 3, 3), torch.float32, device)
    calls = (
        lambda: poolx.max_pool2d(x, 65536, 1, 32768),
        lambda: ops.max_pool2d_argmax(x, [65536], [1], [32768], [1], False),
    )
    for call in calls:
        with pytest.raises(RuntimeError, match=r"more than 2\^31 - 1 elements.*65536"):
            call()


def test_argmax_tools_reject_mismatched_arguments(device):
    x = random_values((2, 3, 8, 8), torch.float32, device)
    values, argmax = poolx.max_pool2d_with_argmax(x, 2)
    g = torch.randn_like(values)
    backward, to_indices, to_mask = (
        poolx.max_pool2d_backward, poolx.argmax_to_indices, poolx.argmax_to_mask
    )
    cases = [
        (lambda: backward(g, argmax.long(), x.shape, 2), RuntimeError,
         r"argmax must have dtype Byte.*argmax\.dtype=Long"),
        (lambda: backward(g, argmax, x.shape, 17, 2, 8), RuntimeError,
         r"argmax must have dtype Int for a 17x17 window"),
        (lambda: backward(g, argmax[:, :2], x.shape, 2), RuntimeError,
         r"argmax\.shape=\[2, 2, 4, 4\]"),
        (lambda: backward(g.long(), argmax, x.shape, 2), NotImplementedError,
         r"grad_output\.dtype=Long"),
        (lambda: backward(g, argmax, (11, 8), 2), RuntimeError, r"\[11, 8\]"),
        (lambda: backward(g, argmax, (3, 3, 8, 8), 2), RuntimeError,
         r"input_size=\[3, 3, 8, 8\]"),
        (lambda: backward(g, argmax, (8,), 2), RuntimeError, r"input_size=\[8\]"),
        (lambda: backward(g, argmax, x.shape, 2, padding=2), RuntimeError, r"pad=2, kernel_size=2"),
        (lambda: to_indices(argmax.int(), x.shape, 2), RuntimeError, r"argmax\.dtype=Int"),
        (lambda: to_indices(argmax, (5, 5), 2), RuntimeError, r"\[5, 5\]"),
        (lambda: to_mask(argmax, x.shape, 2, stride=1), RuntimeError, r"output of size \(7, 7\)"),
        (lambda: ops.max_pool2d_backward(g, argmax, [8, 8, 8], [2], [], [0], [1], False),
         RuntimeError, r"input_size.*\[8, 8, 8\]"),
        (lambda: ops.argmax_to_mask(argmax, [0, 8], [2], [], [0], [1], False), RuntimeError,
         r"input_size must be positive.*\[0, 8\]"),
        (lambda: ops.gather_by_argmax(x[0], argmax, [2], [], [0], [1], False), RuntimeError,
         r"src\.shape=\[3, 8, 8\]"),
        (lambda: ops.gather_by_argmax(x[:1], argmax, [2], [], [0], [1], False), RuntimeError,
         r"src\.shape=\[1, 3, 8, 8\]"),
    ]
    for i, (call, kind, says) in enumerate(cases):
        error = raised(call)
        assert type(error) is kind, f"case {i}: {error!r}"
        assert re.search(says, str(error)), f"case {i}: message {str(error)!r} lacks {says!r}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_rejects_tensors_on_different_devices():
    x = random_values((2, 3, 8, 8), torch.float32, "cuda")
    values, argmax = poolx.max_pool2d_with_argmax(x, 2)
    for call in (
        lambda: poolx.max_pool2d_backward(values, argmax.cpu(), x.shape, 2),
        lambda: poolx.max_pool2d_backward(values.cpu(), argmax, x.shape, 2),
    ):
        with pytest.raises(RuntimeError, match=r"argmax.device=|device"):
            call()


INT64 = [0, 1, 2, 3, -1, -2, -3, 2**62, 2**62 + 1, -(2**62), 3037000500, -3037000500,
         2**63 - 1, -(2**63)]


def test_padding_limit_is_exact_for_any_int64_factors():
    """The op's "at most half of effective kernel size" check computes
    ((kernel - 1) * dilation + 1) / 2 without overflow for every int64 kernel
    and dilation (neither is checked before it, as in torch): compared with
    Python's exact integers, halved toward zero as C++ divides."""
    rng = torch.Generator().manual_seed(0)
    drawn = torch.randint(-(2**63), 2**63 - 1, (12,), generator=rng, dtype=torch.int64).tolist()
    x = random_values((1, 1, 4, 4), torch.float32)
    for kernel in INT64 + drawn:
        for dilation in INT64 + drawn:
            effective = (kernel - 1) * dilation + 1
            half = abs(effective) // 2 * (1 if effective >= 0 else -1)
            for pad in {0, 1, 2, 3, 2**62, 2**63 - 1, min(max(half, 0), 2**63 - 1),
                        min(max(half + 1, 0), 2**63 - 1)}:
                try:
                    ops.max_pool2d_values(x, [kernel, 3], [1, 1], [pad, 0], [dilation, 1], False)
                    passed = True
                except RuntimeError as e:
                    passed = "effective kernel size" not in str(e)
                assert passed == (pad <= half), (kernel, dilation, pad)
