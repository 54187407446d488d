"""poolx.convert and poolx.patch: a model keeps its outputs and gradients."""

import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import poolx


class EncoderDecoder(nn.Module):
    """Pooling with indices, unpooling, a pool shared by two paths."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(3, 2, 1, return_indices=True)
        self.unpool = nn.MaxUnpool2d(3, 2, 1)
        self.tail = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True), nn.Flatten())
        self.head = nn.Sequential(self.tail[1], nn.Flatten())

    def forward(self, x):
        y = torch.relu(self.conv(x))
        pooled, indices = self.pool(y)
        back = self.unpool(pooled, indices, output_size=y.shape)
        return self.tail(back).sum(1) + self.head(y).sum(1)


def outputs_and_grads(model, x):
    x = x.clone().requires_grad_()
    out = model(x)
    out.backward(torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out))
    return out, x.grad, [p.grad for p in model.parameters()]


def test_convert_keeps_outputs_and_gradients(device):
    torch.manual_seed(0)
    model = EncoderDecoder().to(device)
    converted = poolx.convert(pickle.loads(pickle.dumps(model)))
    assert type(converted.pool) is poolx.MaxPool2d and type(converted.unpool) is poolx.MaxUnpool2d
    assert type(converted.tail[1]) is poolx.MaxPool2d
    assert converted.head[0] is converted.tail[1], "a shared module stays shared"
    # torch's repr but for the names of the swapped modules
    assert repr(converted) == repr(model).replace("MaxPool2d(", "poolx.MaxPool2d(").replace(
        "MaxUnpool2d(", "poolx.MaxUnpool2d(")
    assert converted.state_dict().keys() == model.state_dict().keys()
    x = torch.randn(3, 2, 11, 10, device=device)
    for ours, theirs in zip(outputs_and_grads(converted, x), outputs_and_grads(model, x)):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_convert_top_module_mode_and_hooks():
    calls = []
    pool = nn.MaxPool2d(2, return_indices=True).eval()
    pool.register_forward_hook(lambda *args: calls.append("hook"))
    converted = poolx.convert(pool)
    assert type(converted) is poolx.MaxPool2d and not converted.training
    assert type(pool) is nn.MaxPool2d, "the original module is left as it was"
    x = torch.randn(1, 1, 4, 4)
    torch.testing.assert_close(converted(x), pool(x), rtol=0, atol=0)
    assert calls == ["hook", "hook"]
    assert type(poolx.convert(nn.MaxUnpool2d(2))) is poolx.MaxUnpool2d


def test_convert_leaves_subclasses_and_other_modules():
    class MyPool(nn.MaxPool2d):
        pass

    model = nn.Sequential(MyPool(2), poolx.MaxPool2d(2, save="recompute"), nn.ReLU())
    converted = poolx.convert(model)
    assert converted is model
    assert [type(m) for m in converted] == [MyPool, poolx.MaxPool2d, nn.ReLU]
    assert converted[1].save == "recompute"


class CallsFunctional(nn.Module):
    def forward(self, x):
        values, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        y = F.max_unpool2d(values, indices, 3, 2, 1, output_size=x.shape)
        z = F.max_pool2d_with_indices(y, 2)[0]
        return F.max_pool2d(z, 2, ceil_mode=True)


def graph_ops(out):
    """Names of the backward nodes of out's autograd graph."""
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return {node.name() for node in seen}


# Backward nodes of poolx's C++ autograd Functions, by the op they serve.
FUNCTION_NODES = {
    "torch::autograd::CppNode<poolx::MaxPool2dArgmax>": "max_pool2d_argmax",
    "torch::autograd::CppNode<poolx::MaxPool2dValues>": "max_pool2d_values",
    "torch::autograd::CppNode<poolx::UnpoolByIndices>": "max_unpool2d",
    "torch::autograd::CppNode<poolx::UnpoolByArgmax>": "max_unpool2d_argmax",
}


def poolx_ops(out):
    """The poolx ops in out's autograd graph (registered-op nodes are named
    poolx_<op>_default)."""
    names = graph_ops(out)
    ops = {n.split("poolx_")[1].split("_default")[0] for n in names if "poolx_" in n}
    return sorted(ops | {FUNCTION_NODES[n] for n in names if n in FUNCTION_NODES})


def test_patch_routes_and_restores():
    originals = (F.max_pool2d, F.max_pool2d_with_indices, F.max_unpool2d)
    x = torch.randn(2, 3, 9, 10, requires_grad=True)
    expected = CallsFunctional()(x)
    assert poolx_ops(expected) == []
    with poolx.patch():
        with poolx.patch():
            pass
        assert F.max_pool2d is poolx.max_pool2d, "leaving a nested block keeps the patch"
        out = CallsFunctional()(x)
        assert poolx_ops(out) == ["max_pool2d_argmax", "max_unpool2d"]
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        assert poolx_ops(nn.MaxPool2d(3, 2)(x)) == ["max_pool2d_argmax"]
        assert poolx_ops(nn.MaxUnpool2d(2)(*F.max_pool2d(x, 2, return_indices=True))) == [
            "max_pool2d_argmax",
            "max_unpool2d",
        ]
    assert (F.max_pool2d, F.max_pool2d_with_indices, F.max_unpool2d) == originals
    assert poolx_ops(CallsFunctional()(x)) == []

    with pytest.raises(KeyError):
        with poolx.patch():
            raise KeyError("boom")
    assert (F.max_pool2d, F.max_pool2d_with_indices, F.max_unpool2d) == originals
