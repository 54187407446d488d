"""poolx.max_pool2d writes no argmax when no gradient can be asked for
(torch.no_grad, inference_mode, input not requiring grad), and the value-only
op gives the same values as the fused one."""

import contextlib

import pytest
import torch

import poolx
from inputs import SMALL_GRID, random_values
from reference import assert_identical, torch_pool


@pytest.fixture
def op_calls(monkeypatch):
    """Names of the torch.ops.poolx ops that poolx.max_pool2d calls (by either
    road: _C.call or torch.ops)."""
    from poolx import _functions
    calls = []

    def spy(op, *args, _call=_functions._call):
        calls.append(op.name().removeprefix("poolx::"))
        return _call(op, *args)

    monkeypatch.setattr(_functions, "_call", spy)
    return calls


CONTEXTS = {
    "input not requiring grad": (False, contextlib.nullcontext, "max_pool2d_values"),
    "torch.no_grad": (True, torch.no_grad, "max_pool2d_values"),
    "torch.inference_mode": (True, torch.inference_mode, "max_pool2d_values"),
    "input requiring grad": (True, contextlib.nullcontext, "max_pool2d_argmax"),
}


@pytest.mark.parametrize("context", CONTEXTS, ids=str)
def test_value_only_op_when_no_grad_is_needed(context, op_calls, device):
    requires_grad, make_context, expected_op = CONTEXTS[context]
    for pool in SMALL_GRID:
        x = random_values((2, 3, *pool.hw), torch.float32, device).requires_grad_(requires_grad)
        op_calls.clear()
        with make_context():
            y = poolx.max_pool2d(x, **pool.kwargs())
            module_y = poolx.MaxPool2d(**pool.kwargs())(x)
        assert op_calls == [expected_op] * 2, f"{context} | {pool}"
        assert_identical(y.detach(), torch_pool(x, pool), f"{context} | {pool}")
        assert_identical(module_y.detach(), torch_pool(x, pool), f"module | {context} | {pool}")
        assert y.requires_grad == (expected_op == "max_pool2d_argmax")


def test_return_indices_is_one_op_call(op_calls, device):
    """values, argmax and indices in one pass, with or without a gradient."""
    x = random_values((2, 3, 8, 8), torch.float32, device)
    with torch.no_grad():
        poolx.max_pool2d(x, 2, return_indices=True)
    poolx.max_pool2d(x.requires_grad_(), 2, return_indices=True)
    assert op_calls == ["max_pool2d_indices"] * 2


@pytest.fixture
def function_calls(monkeypatch):
    """Names of the autograd.Functions whose apply poolx's eager calls reach."""
    from poolx import _functions
    calls = []
    for name in ("MaxPool2dIndices", "MaxPool2dValues", "MaxPool2dArgmax", "RouteToInput"):
        fn = getattr(_functions, name)
        def spy(*args, _apply=fn.apply, _name=name):
            calls.append(_name)
            return _apply(*args)
        monkeypatch.setattr(fn, "apply", spy)
    return calls


def test_python_functions_only_under_forward_ad_and_torch_func(function_calls):
    """Python's Function.apply costs more than a small pooling: plain calls and
    reverse-mode autograd (the ops' C++ autograd) run no Python Function, while
    forward AD and torch.func transforms, which need their jvp and vmap rules,
    still take them."""
    x = random_values((2, 3, 8, 10), torch.float32)
    with torch.no_grad():
        y = poolx.max_pool2d(x, 2)
        _, argmax = poolx.max_pool2d_with_argmax(x, 2)
        poolx.max_pool2d_backward(y, argmax, x.shape, 2)
    assert function_calls == []
    assert_identical(y, torch.nn.functional.max_pool2d(x, 2), "plain call")

    x_ref = x.clone().requires_grad_()
    g = torch.randn(2, 3, 4, 5, requires_grad=True)  # double backward differentiates g
    y = poolx.max_pool2d(x.requires_grad_(), 2)
    assert y.grad_fn.name() == "torch::autograd::CppNode<poolx::MaxPool2dArgmax>"
    (grad,) = torch.autograd.grad(y, x, g, create_graph=True)
    assert grad.grad_fn.name() == "torch::autograd::CppNode<poolx::RouteToInput>"
    (grad_ref,) = torch.autograd.grad(torch.nn.functional.max_pool2d(x_ref, 2), x_ref, g,
                                      create_graph=True)
    assert_identical(grad, grad_ref, "reverse mode through the C++ autograd")
    assert function_calls == []

    values, indices = poolx.max_pool2d(x, 2, return_indices=True)
    _, argmax = poolx.max_pool2d_with_argmax(x.detach(), 2)
    out = poolx.max_unpool2d(values, indices, 2, output_size=x.shape[-2:])
    assert out.grad_fn.name() == "torch::autograd::CppNode<poolx::UnpoolByIndices>"
    by_argmax = poolx.max_unpool2d_argmax(values, argmax, x.shape, 2)
    assert by_argmax.grad_fn.name() == "torch::autograd::CppNode<poolx::UnpoolByArgmax>"
    (grad,) = torch.autograd.grad((out + by_argmax).sum(), x)
    values_ref, indices_ref = torch.nn.functional.max_pool2d(x_ref, 2, return_indices=True)
    out_ref = torch.nn.functional.max_unpool2d(values_ref, indices_ref, 2)
    (grad_ref,) = torch.autograd.grad((2 * out_ref).sum(), x_ref)
    assert_identical(grad, grad_ref, "unpool's reverse mode through the C++ autograd")
    assert function_calls == []

    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x.detach(), torch.ones_like(x))
        tangent = torch.autograd.forward_ad.unpack_dual(poolx.max_pool2d(dual, 2)).tangent
    assert function_calls == ["MaxPool2dValues"] and torch.equal(tangent, torch.ones(2, 3, 4, 5))
    function_calls.clear()
    torch.func.vmap(lambda t: poolx.max_pool2d(t, 2))(x.detach())
    assert function_calls == ["MaxPool2dValues"]


def test_untracked_calls_still_reach_dispatch_modes():
    """Skipping the autograd layer must not hide a call from what sits below it
    (TorchDispatchModes: FakeTensorMode, profilers, FlopCounterMode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    x = random_values((2, 3, 8, 10), torch.float32)
    with torch.no_grad(), Recorder() as recorder:
        y = poolx.max_pool2d(x, 2)
    assert "poolx.max_pool2d_values" in recorder.ops
    assert_identical(y, torch.nn.functional.max_pool2d(x, 2), "under a dispatch mode")
