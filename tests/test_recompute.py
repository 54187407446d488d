"""save="recompute": backward keeps only the input and recomputes the argmax;
gradients are those of save="argmax" (and torch's) bit for bit."""

import pickle
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from unpool_cases import CASES, assert_same_bits, planted

import poolx


def pool_grads(x, pool, grad_out, **kwargs):
    x = x.detach().requires_grad_()
    out = poolx.max_pool2d(x, *pool, **kwargs)
    return out, torch.autograd.grad(out, x, grad_out)[0]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES)
def test_same_gradients_bit_for_bit(device, case, dtype, channels_last):
    pool, hw = CASES[case]
    x = planted((2, 3, *hw), dtype, device, channels_last)
    values, _ = poolx.max_pool2d_with_argmax(x, *pool)
    grad_out = torch.randn(values.shape, device=device).to(dtype)
    grad_out.view(-1)[::7] = -0.0
    out_a, grad_a = pool_grads(x, pool, grad_out, save="argmax")
    out_r, grad_r = pool_grads(x, pool, grad_out, save="recompute")
    assert_same_bits(out_r, out_a.cpu())
    assert_same_bits(grad_r, grad_a.cpu())
    if dtype == torch.float32:
        x_ref = x.detach().cpu().requires_grad_()
        F.max_pool2d(x_ref, *pool).backward(grad_out.cpu())
        assert_same_bits(grad_r, x_ref.grad)


def test_gradgradcheck(device):
    x = torch.randperm(2 * 7 * 8, dtype=torch.float64).view(1, 2, 7, 8).to(device)
    fn = lambda t: poolx.max_pool2d(t, 3, 2, 1, save="recompute")  # noqa: E731
    assert torch.autograd.gradcheck(fn, x.requires_grad_())
    assert torch.autograd.gradgradcheck(fn, x)


def test_checkpoint(device):
    conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(device)
    x = torch.randn(2, 3, 10, 9, device=device)

    def block(t, save):
        return poolx.max_pool2d(torch.relu(conv(t)), 3, 2, 1, save=save)

    grads = []
    for save in ("argmax", "recompute"):
        for checkpointed in (False, True):
            t = x.clone().requires_grad_()
            run = partial(checkpoint, block, use_reentrant=False) if checkpointed else block
            run(t, save).square().sum().backward()
            grads.append([t.grad, conv.weight.grad.clone()])
            conv.zero_grad()
    for other in grads[1:]:
        torch.testing.assert_close(other, grads[0], rtol=0, atol=0)


def saved_bytes(fn, *args):
    """Bytes of the distinct storages autograd saves while running fn."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return sum(storages.values())


def test_recompute_saves_nothing_beyond_relu():
    x = torch.randn(2, 4, 16, 16, requires_grad=True)
    relu_only = saved_bytes(torch.relu, x)
    pooled = 2 * 4 * 8 * 8
    saved = {
        save: saved_bytes(lambda t, s=save: poolx.max_pool2d(torch.relu(t), 2, save=s), x)
        for save in ("argmax", "recompute")
    }
    torch_saved = saved_bytes(lambda t: F.max_pool2d(torch.relu(t), 2), x)
    assert saved == {"argmax": relu_only + pooled, "recompute": relu_only}
    assert torch_saved == relu_only + 8 * pooled


def test_module_option():
    module = poolx.MaxPool2d(3, 2, 1, save="recompute")
    assert repr(module).endswith("ceil_mode=False, save=recompute)")
    assert "save" not in repr(poolx.MaxPool2d(3))
    restored = pickle.loads(pickle.dumps(module))
    assert restored.save == "recompute"
    restored.load_state_dict(module.state_dict())
    x = torch.randn(1, 2, 7, 7, requires_grad=True)
    assert restored(x).grad_fn.name() == module(x).grad_fn.name()
    assert module(x).grad_fn.name() == "torch::autograd::CppNode<poolx::MaxPool2dValues>"


@pytest.mark.parametrize("make", [
    lambda: poolx.MaxPool2d(2, save="indices"),
    lambda: poolx.max_pool2d(torch.ones(1, 1, 4, 4), 2, save="indices"),
])
def test_invalid_save(make):
    message = "save must be 'argmax' or 'recompute', but got save='indices'"
    with pytest.raises(ValueError, match=message):
        make()


def test_recompute_with_indices_is_refused():
    with pytest.raises(ValueError, match="return_indices=True"):
        poolx.MaxPool2d(2, return_indices=True, save="recompute")


def test_compile_fullgraph(device):
    x = planted((2, 3, 9, 8), device=device).nan_to_num().requires_grad_()
    fn = lambda t: poolx.max_pool2d(t, 3, 2, 1, save="recompute")  # noqa: E731
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    out, expected = compiled(x), fn(x)
    assert_same_bits(out, expected.cpu())
    grad_out = torch.randn_like(out)
    (grad,) = torch.autograd.grad(out, x, grad_out)
    assert_same_bits(grad, torch.autograd.grad(expected, x, grad_out)[0].cpu())
