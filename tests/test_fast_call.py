"""poolx._C.call, the short road from Python into the ops (csrc/module.cpp):
the same results, gradients and errors as torch.ops, and torch.ops itself
wherever an argument or a torch function mode needs it."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

import poolx
from poolx import _C
from inputs import random_values
from test_registration import POOLS, op_calls

ops = torch.ops.poolx


def number_of(op):
    return _C.find_op(op.default.name())


def grads(outputs, inputs):
    tensors = [o for o in (outputs if isinstance(outputs, tuple) else (outputs,))
               if o.is_floating_point()]
    if not any(t.requires_grad for t in tensors):
        return []
    torch.manual_seed(0)
    seeds = [torch.randn_like(t) for t in tensors]
    return torch.autograd.grad(tensors, [i for i in inputs if i.requires_grad], seeds,
                               allow_unused=True)


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p.name)
@pytest.mark.parametrize("channels_last", [False, True])
def test_every_op_matches_torch_ops(pool, channels_last):
    x = random_values((2, 3, *pool.hw), torch.float32)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    for op, args in op_calls(x, pool):
        expected = op.default(*args)
        got = _C.call(number_of(op), *args)
        assert got is not NotImplemented, op
        pairs = zip(got, expected) if isinstance(expected, tuple) else [(got, expected)]
        for g, e in pairs:
            assert g.dtype == e.dtype and g.stride() == e.stride(), op
            torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
            assert (g.grad_fn is None) == (e.grad_fn is None), op
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        for g, e in zip(grads(got, tensors), grads(expected, tensors)):
            assert (g is None) == (e is None), op
            if g is not None:
                torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)


class Tagged(torch.Tensor):
    """A subclass whose calls are seen by __torch_function__."""

    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_arguments_it_does_not_take_are_left_to_torch_ops():
    x = random_values((1, 2, 6, 6), torch.float32)
    values = number_of(ops.max_pool2d_values)
    pairs = ((2, 2), (2, 2), (0, 0), (1, 1))
    assert isinstance(_C.call(values, x, *pairs, False), torch.Tensor)
    refused = [
        (values, x.as_subclass(Tagged), *pairs, False),  # a tensor subclass
        (values, x, (2, 2.0), *pairs[1:], False),  # a float in an int list
        (values, x, [2, torch.tensor(2)], *pairs[1:], False),  # a tensor in an int list
        (values, x, 2, *pairs[1:], False),  # an int for an int list (torch.ops takes it)
        (values, x, (2, 2**70), *pairs[1:], False),  # beyond int64
        (values, x, *pairs, 0),  # an int for a bool
        (values, x, *pairs),  # an argument missing
        (values, x, *pairs, False, False),  # one too many
        (10**6, x, *pairs, False),  # no such op
        (2**70, x, *pairs, False),
        (-1, x, *pairs, False),
        ("max_pool2d_values", x, *pairs, False),
    ]
    for args in refused:
        assert _C.call(*args) is NotImplemented, args
    with pytest.raises(RuntimeError, match="poolx::no_such_op"):
        _C.find_op("poolx::no_such_op")
    with pytest.raises(RuntimeError, match="returns only tensors"):
        _C.find_op("poolx::cpu_isa")


def test_subclasses_and_function_modes_still_see_the_call():
    x = random_values((1, 2, 6, 6), torch.float32)
    expected = torch.nn.functional.max_pool2d(x, 2)
    Tagged.seen.clear()
    y = poolx.max_pool2d(x.as_subclass(Tagged), 2)
    assert ops.max_pool2d_values.default in Tagged.seen
    torch.testing.assert_close(y.as_subclass(torch.Tensor), expected, rtol=0, atol=0,
                               equal_nan=True)

    class Recorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(func)
            return func(*args, **(kwargs or {}))

    with Recorder() as recorder:
        y = poolx.max_pool2d(x, 2)
        v, a = poolx.max_pool2d_with_argmax(x, 2)
    assert ops.max_pool2d_values.default in recorder.funcs
    assert ops.max_pool2d_argmax.default in recorder.funcs
    torch.testing.assert_close(y, expected, rtol=0, atol=0, equal_nan=True)


def test_errors_are_torch_ops_errors():
    x = random_values((1, 2, 6, 6), torch.float32)
    v, a = poolx.max_pool2d_with_argmax(x, 2)
    bad = a.clone()
    bad[0, 1, 2, 0] = 7  # no tap of a 2x2 window
    calls = [
        (ops.max_pool2d_values, (x, (2, 2), (2, 2), (5, 5), (1, 1), False)),
        (ops.max_pool2d_values, (x[0, 0, 0], (2, 2), (2, 2), (0, 0), (1, 1), False)),
        (ops.max_unpool2d_argmax, (v, bad, (6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False)),
        (ops.max_pool2d_backward, (v, bad, (6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False)),
        (ops.max_unpool2d, (v, torch.full(v.shape, 99), (6, 6))),
    ]
    for op, args in calls:
        with pytest.raises(Exception) as expected:
            op.default(*args)
        with pytest.raises(type(expected.value)) as got:
            _C.call(number_of(op), *args)
        assert str(got.value) == str(expected.value), op


def test_threads_share_the_road(monkeypatch):
    """Threads call the ops at once, each op's number looked up by several of
    them first (the GIL is released inside each call)."""
    from concurrent.futures import ThreadPoolExecutor

    from poolx import _functions

    monkeypatch.setattr(_functions, "_fast_ops", {})
    inputs = [random_values((2, 4, 12, 10), torch.float32) for _ in range(8)]

    def work(x):
        for _ in range(20):
            values, argmax = poolx.max_pool2d_with_argmax(x, 3, 2, 1)
            expected = torch.nn.functional.max_pool2d(x, 3, 2, 1)
            torch.testing.assert_close(values, expected, rtol=0, atol=0, equal_nan=True)
            mask = poolx.argmax_to_mask(argmax, x.shape[-2:], 3, 2, 1)
            assert torch.equal(mask, poolx.max_unpool2d_argmax(
                torch.ones_like(values), argmax, x.shape[-2:], 3, 2, 1).bool())
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(work, inputs))
