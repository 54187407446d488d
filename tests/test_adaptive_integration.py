"""The adaptive ops in PyTorch's machinery: opcheck, gradcheck to second
order, torch.func, forward-mode AD, modules, convert, patch, torch.compile and
torch.export, against torch."""

import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import poolx
from inputs import distinct_values
from reference import assert_models_match

EXACT = dict(rtol=0, atol=0, equal_nan=True)
ops = torch.ops.poolx

# (input shape, output_size): even windows and overlapping ones
CASES = {
    "2d even": ((2, 3, 8, 6), [4, 3]),
    "2d overlapping": ((2, 3, 7, 9), [3, 4]),
    "2d unbatched": ((3, 7, 5), [4, 2]),
    "3d even": ((2, 3, 4, 6, 8), [2, 3, 4]),
    "3d overlapping": ((2, 3, 5, 7, 6), [2, 3, 4]),
}


def op_calls(x, output_size):
    """(op, args) for every adaptive op of x's dimensionality."""
    dims = len(output_size)
    name = f"adaptive_max_pool{dims}d"
    values, argmax = getattr(ops, f"{name}_argmax")(x.detach(), output_size)
    grad_out = torch.randn_like(values).requires_grad_()
    src = torch.randn_like(x).requires_grad_()
    gather = ops.adaptive_gather_by_argmax3d if dims == 3 else ops.adaptive_gather_by_argmax
    return [
        (getattr(ops, f"{name}_argmax"), (x, output_size)),
        (getattr(ops, f"{name}_indices"), (x, output_size)),
        (getattr(ops, f"{name}_values"), (x, output_size)),
        (getattr(ops, f"{name}_backward"), (grad_out, argmax, list(x.shape[-dims:]),
                                            output_size)),
        (gather, (src, argmax, output_size)),
    ]


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", CASES)
def test_opcheck_every_adaptive_op(case, layout, device):
    shape, output_size = CASES[case]
    x = distinct_values(shape, torch.float32, device)
    if layout == "channels_last" and x.dim() >= 4:
        x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4
                         else torch.channels_last_3d)
    for op, args in op_calls(x.requires_grad_(), output_size):
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("case", CASES)
def test_gradcheck_to_second_order_with_forward_ad(case):
    shape, output_size = CASES[case]
    pool = getattr(poolx, f"adaptive_max_pool{len(output_size)}d")
    x = distinct_values(shape).requires_grad_()
    for save in ("argmax", "recompute"):
        fn = lambda t: pool(t, output_size, save=save)  # noqa: E731, B023
        assert torch.autograd.gradcheck(fn, (x,), check_forward_ad=True, check_batched_grad=True)
        assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("save, node", [("argmax", "MaxPool2dArgmax"),
                                        ("recompute", "MaxPool2dValues")])
@pytest.mark.parametrize("case", ["2d overlapping", "3d overlapping"])
def test_reverse_mode_runs_in_cpp_and_compiled_autograd(case, save, node):
    """The adaptive ops' backward is the windowed ops' C++ autograd nodes,
    traceable by compiled autograd, with the gradients of torch."""
    from torch._dynamo import compiled_autograd

    shape, output_size = CASES[case]
    name = f"adaptive_max_pool{len(output_size)}d"
    x = torch.randn(shape).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    out = getattr(poolx, name)(x, output_size, save=save)
    out_ref = getattr(F, name)(x_ref, output_size)
    assert out.grad_fn.name() == f"torch::autograd::CppNode<poolx::{node}>"
    grad = torch.randn_like(out)
    torch._dynamo.reset()
    with compiled_autograd._enable(torch.compile(backend="aot_eager", fullgraph=True)):
        out.backward(grad)
    out_ref.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, **EXACT)


def test_torch_func_transforms_match_torch():
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64)
    ours = lambda t: poolx.adaptive_max_pool2d(t, (3, 4))  # noqa: E731
    ref = lambda t: F.adaptive_max_pool2d(t, (3, 4))  # noqa: E731
    tangent = torch.randn_like(x)
    for got, want in zip(torch.func.jvp(ours, (x,), (tangent,)),
                         torch.func.jvp(ref, (x,), (tangent,))):
        torch.testing.assert_close(got, want, **EXACT)
    batch = torch.stack([x, -x, x.flip(-1)])
    torch.testing.assert_close(torch.func.vmap(ours)(batch), torch.func.vmap(ref)(batch), **EXACT)
    small = x[:1, :2, :5, :5]
    torch.testing.assert_close(torch.func.jacfwd(ours)(small), torch.func.jacrev(ref)(small),
                               **EXACT)
    grad = torch.func.grad(lambda t: ours(t).sum())(x)
    torch.testing.assert_close(grad, torch.func.grad(lambda t: ref(t).sum())(x), **EXACT)


class Head(nn.Module):
    """A classifier head and a spatial pyramid, each adaptive."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3)
        self.pyramid = nn.ModuleList(nn.AdaptiveMaxPool2d(n) for n in (4, 2, 1))
        self.signal = nn.AdaptiveMaxPool1d(5, return_indices=True)
        self.volume = nn.AdaptiveMaxPool3d((None, 2, 3))

    def forward(self, x):
        y = self.conv(x)
        levels = [pool(y).flatten(1) for pool in self.pyramid]
        values, _ = self.signal(y.flatten(2))
        return torch.cat([*levels, values.flatten(1), self.volume(y.unsqueeze(1)).flatten(1)], 1)


def test_convert_swaps_adaptive_modules_and_keeps_results():
    model = Head()
    reference = pickle.loads(pickle.dumps(model))
    converted = poolx.convert(model)
    kinds = {type(m) for m in converted.modules()}
    assert {poolx.AdaptiveMaxPool1d, poolx.AdaptiveMaxPool2d, poolx.AdaptiveMaxPool3d} <= kinds
    assert not kinds & {nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d}
    assert_models_match(converted, reference, torch.randn(2, 3, 15, 13))
    assert "poolx.AdaptiveMaxPool2d(output_size=4)" in repr(converted)


def test_module_save_choice_and_pickle():
    pool = poolx.AdaptiveMaxPool2d((3, None), save="recompute")
    assert "save=recompute" in repr(pool)
    restored = pickle.loads(pickle.dumps(pool))
    assert restored.save == "recompute" and isinstance(restored, nn.AdaptiveMaxPool2d)
    with pytest.raises(ValueError, match="save='recompute' cannot be combined"):
        poolx.AdaptiveMaxPool3d(2, return_indices=True, save="recompute")


def test_patch_routes_torch_adaptive_calls_through_poolx():
    x = torch.randn(2, 3, 7, 9)
    with poolx.patch():
        assert F.adaptive_max_pool2d is poolx.adaptive_max_pool2d
        pooled = nn.AdaptiveMaxPool2d(3)(x)
        values, indices = F.adaptive_max_pool2d_with_indices(x, (3, 4))
        signal = F.adaptive_max_pool1d_with_indices(x[0], 4)
    assert F.adaptive_max_pool2d is not poolx.adaptive_max_pool2d
    torch.testing.assert_close(pooled, F.adaptive_max_pool2d(x, 3), **EXACT)
    for got, want in zip((values, indices, *signal),
                         (*F.adaptive_max_pool2d(x, (3, 4), True),
                          *F.adaptive_max_pool1d(x[0], 4, True))):
        torch.testing.assert_close(got, want, **EXACT)


def test_compile_dynamic_fullgraph_matches_torch():
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    def step(x):
        values, indices = poolx.adaptive_max_pool2d(x, (3, 4), return_indices=True)
        return values.relu() * 2, indices, poolx.adaptive_max_pool3d(x.unsqueeze(1), 2)

    compiled = torch.compile(step, backend=counter, dynamic=True, fullgraph=True)
    for n, hw in [(2, (7, 9)), (3, (8, 10)), (4, (11, 13))]:
        x = torch.randn(n, 3, *hw, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, indices, volume = compiled(x)
        values, expected_indices = F.adaptive_max_pool2d(x_ref, (3, 4), return_indices=True)
        expected_volume = F.adaptive_max_pool3d(x_ref.unsqueeze(1), 2)
        torch.testing.assert_close(out, values.relu() * 2, **EXACT)
        torch.testing.assert_close(indices, expected_indices, **EXACT)
        torch.testing.assert_close(volume, expected_volume, **EXACT)
        (out.sum() + volume.sum()).backward()
        ((values.relu() * 2).sum() + expected_volume.sum()).backward()
        torch.testing.assert_close(x.grad, x_ref.grad, **EXACT)


def test_export_round_trip_runs_and_matches():
    model = poolx.convert(Head())
    reference = Head()
    x = torch.randn(2, 3, 15, 13)
    program = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("n")},))
    targets = {str(node.target) for node in program.graph.nodes}
    assert any(t.startswith("poolx.") for t in targets), targets
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    for n in (2, 5):
        x = torch.randn(n, 3, 15, 13)
        torch.testing.assert_close(loaded.module()(x), reference(x), **EXACT)
