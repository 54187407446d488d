"""The 1-D ops in PyTorch's machinery: modules, convert, patch, torch.func,
forward-mode AD, gradcheck, torch.compile and torch.export, against torch."""

import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import poolx
from reference import assert_models_match

EXACT = dict(rtol=0, atol=0, equal_nan=True)


def audio_net(pool):
    """A small 1-D network: conv, overlapping pool, ReLU, tiled pool."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), pool(3, 2, 1), nn.ReLU(), pool(4))


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(2, return_indices=True)
        self.unpool = nn.MaxUnpool1d(2)

    def forward(self, x):
        values, indices = self.pool(x)
        return self.unpool(values.relu(), indices, output_size=x.shape)


def test_convert_swaps_1d_modules_and_keeps_results():
    model = nn.Sequential(audio_net(nn.MaxPool1d), Autoencoder())
    reference = pickle.loads(pickle.dumps(model))
    converted = poolx.convert(model)
    kinds = [type(m) for m in converted.modules()]
    assert poolx.MaxPool1d in kinds and poolx.MaxUnpool1d in kinds
    assert nn.MaxPool1d not in kinds and nn.MaxUnpool1d not in kinds
    assert converted.state_dict().keys() == reference.state_dict().keys()
    assert_models_match(converted, reference, torch.randn(3, 2, 37))
    assert "poolx.MaxPool1d(kernel_size=3, stride=2, padding=1" in repr(converted)


def test_module_save_choice_and_pickle():
    pool = poolx.MaxPool1d(3, 2, save="recompute")
    assert "save=recompute" in repr(pool)
    restored = pickle.loads(pickle.dumps(pool))
    assert restored.save == "recompute" and isinstance(restored, nn.MaxPool1d)
    with pytest.raises(ValueError, match="save='recompute' cannot be combined"):
        poolx.MaxPool1d(2, return_indices=True, save="recompute")


def test_patch_routes_torch_1d_calls_through_poolx(monkeypatch):
    calls = []
    original = poolx.functional_1d.max_pool1d

    def counted(*args, **kwargs):
        calls.append(args[1:])
        return original(*args, **kwargs)

    monkeypatch.setattr(poolx._patch, "_ROUTES",
                        {**poolx._patch._ROUTES, "max_pool1d": counted})
    x = torch.randn(2, 3, 16)
    with poolx.patch():
        pooled = nn.MaxPool1d(2)(x)
        values, indices = F.max_pool1d_with_indices(x, 4)
        unpooled = nn.MaxUnpool1d(4)(values, indices)
    assert F.max_pool1d is not counted
    assert len(calls) == 1
    torch.testing.assert_close(pooled, F.max_pool1d(x, 2), **EXACT)
    torch.testing.assert_close(unpooled, F.max_unpool1d(*F.max_pool1d(x, 4, return_indices=True),
                                                        4), **EXACT)


@pytest.mark.parametrize("save", ["argmax", "recompute"])
def test_gradcheck_and_gradgradcheck(save):
    x = torch.randperm(2 * 3 * 11).view(2, 3, 11).double().requires_grad_()
    fn = lambda t: poolx.max_pool1d(t, 3, 2, 1, save=save)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))
    # windows that do not overlap: each index appears once, so unpooling is linear
    values, indices = poolx.max_pool1d(x.detach(), 2, return_indices=True)
    v = values.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: poolx.max_unpool1d(t, indices, 2), (v,))


def test_torch_func_transforms_match_torch():
    x = torch.randn(2, 3, 19, dtype=torch.float64)
    ours = lambda t: poolx.max_pool1d(t, 3, 2, 1)  # noqa: E731
    ref = lambda t: F.max_pool1d(t, 3, 2, 1)  # noqa: E731
    tangent = torch.randn_like(x)
    for got, want in zip(torch.func.jvp(ours, (x,), (tangent,)),
                         torch.func.jvp(ref, (x,), (tangent,))):
        torch.testing.assert_close(got, want, **EXACT)
    batch = torch.stack([x, -x, x.flip(-1)])
    torch.testing.assert_close(torch.func.vmap(ours)(batch), torch.func.vmap(ref)(batch), **EXACT)
    small = x[:1, :2, :7]
    torch.testing.assert_close(torch.func.jacfwd(ours)(small), torch.func.jacrev(ref)(small),
                               **EXACT)


def test_compile_dynamic_fullgraph_compiles_once():
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    def step(x):
        values, indices = poolx.max_pool1d(x, 3, 2, 1, return_indices=True)
        pooled = poolx.max_pool1d(values.relu(), 2, ceil_mode=True)
        return pooled, poolx.max_unpool1d(values, indices, 3, 2, 1, output_size=x.shape[-1:])

    compiled = torch.compile(step, backend=counter, dynamic=True, fullgraph=True)
    for n, length in [(2, 19), (3, 24), (5, 31)]:
        x = torch.randn(n, 3, length, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, unpooled = compiled(x)
        values, indices = F.max_pool1d(x_ref, 3, 2, 1, return_indices=True)
        expected = F.max_pool1d(values.relu(), 2, ceil_mode=True)
        torch.testing.assert_close(out, expected, **EXACT)
        torch.testing.assert_close(unpooled, F.max_unpool1d(values, indices, 3, 2, 1,
                                                            output_size=(length,)), **EXACT)
        grad = torch.randn_like(out)
        out.backward(grad)
        expected.backward(grad)
        torch.testing.assert_close(x.grad, x_ref.grad, **EXACT)
    assert counter.frame_count == 1


def test_export_round_trip_runs_and_matches():
    model = poolx.convert(audio_net(nn.MaxPool1d))
    reference = audio_net(nn.MaxPool1d)
    x = torch.randn(2, 2, 40)
    dims = {0: torch.export.Dim("n"), 2: torch.export.Dim("length", min=16)}
    program = torch.export.export(model, (x,), dynamic_shapes=(dims,))
    targets = {str(node.target) for node in program.graph.nodes}
    assert any(t.startswith("poolx.") for t in targets), targets
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    for shape in [(2, 2, 40), (5, 2, 77)]:
        x = torch.randn(shape)
        torch.testing.assert_close(loaded.module()(x), reference(x), **EXACT)
