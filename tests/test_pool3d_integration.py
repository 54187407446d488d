"""The 3-D ops in PyTorch's machinery: opcheck, modules, convert, patch,
torch.func, forward-mode AD, torch.compile and torch.export, against torch."""

import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import poolx
from poolx import _geometry as geo
from inputs import distinct_values
from reference import assert_models_match

EXACT = dict(rtol=0, atol=0, equal_nan=True)
ops = torch.ops.poolx

# kernel_size, stride, padding, dilation, ceil_mode
POOLS = {
    "tiled 2x2x2": (2, None, 0, 1, False),
    "overlapping padded dilated ceil_mode": ((3, 2, 3), (2, 1, 2), 1, (1, 2, 1), True),
}


def op_calls(x, pool):
    """(op, args) for every 3-D op, on input x (4-D or 5-D, any layout)."""
    args = (*geo.pool_params(*pool[:4], dims=3), pool[4])
    dhw = list(x.shape[-3:])
    values, argmax = ops.max_pool3d_argmax(x.detach(), *args)
    grad_out = torch.randn_like(values).requires_grad_()
    src = torch.randn_like(x).requires_grad_()
    return [
        (ops.max_pool3d_argmax, (x, *args)),
        (ops.max_pool3d_indices, (x, *args)),
        (ops.max_pool3d_values, (x, *args)),
        (ops.max_pool3d_backward, (grad_out, argmax, dhw, *args)),
        (ops.gather_by_argmax3d, (src, argmax, *args)),
        (ops.argmax_to_indices3d, (argmax, dhw, *args)),
        (ops.argmax_to_mask3d, (argmax, dhw, *args)),
        (ops.max_unpool3d_argmax, (values, argmax, dhw, *args)),
    ]


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("layout", ("ncdhw", "channels_last_3d", "unbatched",
                                    "unbatched channels_last_3d"))
def test_opcheck_every_3d_op(pool, layout, device):
    x = distinct_values((1 if "unbatched" in layout else 2, 3, 5, 6, 7), torch.float32, device)
    if "channels_last_3d" in layout:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    if "unbatched" in layout:  # (C, D, H, W); torch lays a channels_last_3d one out as a batch
        x = x[0]
    for op, args in op_calls(x.requires_grad_(), POOLS[pool]):
        torch.library.opcheck(op, args)


def unet_block(pool):
    """A 3-D U-Net level: conv, 2x2x2 pool with indices, unpool back."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), pool(2))


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d((1, 2, 2), return_indices=True)
        self.unpool = nn.MaxUnpool3d((1, 2, 2))

    def forward(self, x):
        values, indices = self.pool(x)
        return self.unpool(values.relu(), indices, output_size=x.shape)


def test_convert_swaps_3d_modules_and_keeps_results():
    model = nn.Sequential(unet_block(nn.MaxPool3d), Autoencoder())
    reference = pickle.loads(pickle.dumps(model))
    converted = poolx.convert(model)
    kinds = [type(m) for m in converted.modules()]
    assert poolx.MaxPool3d in kinds and poolx.MaxUnpool3d in kinds
    assert nn.MaxPool3d not in kinds and nn.MaxUnpool3d not in kinds
    assert_models_match(converted, reference, torch.randn(2, 2, 6, 8, 10))
    assert "poolx.MaxPool3d(kernel_size=2" in repr(converted)


def test_module_save_choice_and_pickle():
    pool = poolx.MaxPool3d(3, 2, save="recompute")
    assert "save=recompute" in repr(pool)
    restored = pickle.loads(pickle.dumps(pool))
    assert restored.save == "recompute" and isinstance(restored, nn.MaxPool3d)
    with pytest.raises(ValueError, match="save='recompute' cannot be combined"):
        poolx.MaxPool3d(2, return_indices=True, save="recompute")


def test_patch_routes_torch_3d_calls_through_poolx():
    x = torch.randn(2, 3, 4, 6, 8)
    with poolx.patch():
        assert F.max_pool3d is poolx.max_pool3d and F.max_unpool3d is poolx.max_unpool3d
        pooled = nn.MaxPool3d(2)(x)
        values, indices = F.max_pool3d_with_indices(x, 2)
        unpooled = nn.MaxUnpool3d(2)(values, indices)
    assert F.max_pool3d is not poolx.max_pool3d
    torch.testing.assert_close(pooled, F.max_pool3d(x, 2), **EXACT)
    expected_values, expected_indices = F.max_pool3d(x, 2, return_indices=True)
    torch.testing.assert_close(indices, expected_indices, **EXACT)
    torch.testing.assert_close(unpooled, F.max_unpool3d(expected_values, expected_indices, 2),
                               **EXACT)


def test_torch_func_transforms_match_torch():
    x = torch.randn(2, 3, 5, 6, 7, dtype=torch.float64)
    ours = lambda t: poolx.max_pool3d(t, 3, 2, 1)  # noqa: E731
    ref = lambda t: F.max_pool3d(t, 3, 2, 1)  # noqa: E731
    tangent = torch.randn_like(x)
    for got, want in zip(torch.func.jvp(ours, (x,), (tangent,)),
                         torch.func.jvp(ref, (x,), (tangent,))):
        torch.testing.assert_close(got, want, **EXACT)
    batch = torch.stack([x, -x, x.flip(-1)])
    torch.testing.assert_close(torch.func.vmap(ours)(batch), torch.func.vmap(ref)(batch), **EXACT)
    unbatched = torch.stack([x[0], -x[1]])
    torch.testing.assert_close(torch.func.vmap(ours)(unbatched), torch.func.vmap(ref)(unbatched),
                               **EXACT)
    small = x[:1, :2, :3, :4, :4]
    torch.testing.assert_close(torch.func.jacfwd(ours)(small), torch.func.jacrev(ref)(small),
                               **EXACT)


def test_compile_dynamic_fullgraph_compiles_once():
    """Unpool after overlapping windows is left out: torch's own max_pool3d and
    max_unpool3d fail there in inductor (ValueRangeError) with dynamic shapes."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    def step(x):
        values, indices = poolx.max_pool3d(x, 2, return_indices=True)
        pooled = poolx.max_pool3d(values.relu(), 3, 2, 1, ceil_mode=True)
        return pooled, poolx.max_unpool3d(values, indices, 2, output_size=x.shape[-3:])

    compiled = torch.compile(step, backend=counter, dynamic=True, fullgraph=True)
    for n, dhw in [(2, (5, 6, 7)), (3, (6, 8, 9)), (4, (7, 9, 11))]:
        x = torch.randn(n, 3, *dhw, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, unpooled = compiled(x)
        values, indices = F.max_pool3d(x_ref, 2, return_indices=True)
        expected = F.max_pool3d(values.relu(), 3, 2, 1, ceil_mode=True)
        torch.testing.assert_close(out, expected, **EXACT)
        torch.testing.assert_close(unpooled, F.max_unpool3d(values, indices, 2, output_size=dhw),
                                   **EXACT)
        (out.sum() + unpooled.sum()).backward()
        (expected.sum() + F.max_unpool3d(values, indices, 2, output_size=dhw).sum()).backward()
        torch.testing.assert_close(x.grad, x_ref.grad, **EXACT)
    assert counter.frame_count == 1


def test_export_round_trip_runs_and_matches():
    model = poolx.convert(unet_block(nn.MaxPool3d))
    reference = unet_block(nn.MaxPool3d)
    x = torch.randn(2, 2, 6, 8, 10)
    dims = {0: torch.export.Dim("n"), 4: torch.export.Dim("width", min=4, max=64)}
    program = torch.export.export(model, (x,), dynamic_shapes=(dims,))
    targets = {str(node.target) for node in program.graph.nodes}
    assert any(t.startswith("poolx.") for t in targets), targets
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    for shape in [(2, 2, 6, 8, 10), (3, 2, 6, 8, 13)]:
        x = torch.randn(shape)
        torch.testing.assert_close(loaded.module()(x), reference(x), **EXACT)
