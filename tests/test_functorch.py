"""torch.func transforms and forward-mode AD, against torch's max_pool2d."""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import forward_ad

import poolx

CONFIGS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, dilation=(1, 2))]
SAVE_MODES = ["argmax", "recompute"]


def torch_pool(config):
    return lambda x: F.max_pool2d(x, **config)


def poolx_pool(config, save):
    return lambda x: poolx.max_pool2d(x, **config, save=save)


def exact(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("save", SAVE_MODES)
@pytest.mark.parametrize("config", CONFIGS, ids=["tiled", "overlapping"])
def test_transforms_match_torch(device, config, save):
    x = torch.randn(2, 3, 9, 10, device=device, dtype=torch.float64)
    tangent = torch.randn_like(x)
    ours, ref = poolx_pool(config, save), torch_pool(config)

    for got, want in zip(torch.func.jvp(ours, (x,), (tangent,)), torch.func.jvp(ref, (x,), (tangent,))):
        exact(got, want)
    exact(torch.func.grad(lambda a: ours(a).square().sum())(x),
          torch.func.grad(lambda a: ref(a).square().sum())(x))
    cotangent = torch.randn_like(ref(x))
    exact(torch.func.vjp(ours, x)[1](cotangent)[0], torch.func.vjp(ref, x)[1](cotangent)[0])
    batch = torch.stack([x, -x, x.flip(-1)])
    exact(torch.func.vmap(ours)(batch), torch.func.vmap(ref)(batch))
    small = x[:1, :1, :5, :6]
    exact(torch.func.jacfwd(ours)(small), torch.func.jacrev(ref)(small))


@pytest.mark.parametrize("save", SAVE_MODES)
def test_forward_mode_ad(device, save):
    x = torch.randn(2, 3, 8, 8, device=device)
    tangent = torch.randn_like(x)
    with forward_ad.dual_level():
        ours = forward_ad.unpack_dual(poolx.max_pool2d(forward_ad.make_dual(x, tangent), 3, 2, 1,
                                                       save=save))
        ref = forward_ad.unpack_dual(F.max_pool2d(forward_ad.make_dual(x, tangent), 3, 2, 1))
    exact(ours.primal, ref.primal)
    exact(ours.tangent, ref.tangent)


def test_with_argmax_jvp_gathers_the_tangent(device):
    x = torch.randn(2, 3, 8, 8, device=device)
    tangent = torch.randn_like(x)
    (values, argmax), (values_dot, argmax_dot) = torch.func.jvp(
        lambda a: poolx.max_pool2d_with_argmax(a, 2), (x,), (tangent,))
    _, indices = F.max_pool2d(x, 2, return_indices=True)
    exact(values_dot, tangent.flatten(2).gather(2, indices.flatten(2)).view_as(values))


def test_ops_called_directly_refuse_a_tangent_rather_than_drop_it():
    """The ops' own autograd (C++) is reverse mode only; poolx's functions carry
    the forward-mode rules. A tangent reaching an op directly is an error, never
    silently treated as zero."""
    x = torch.randn(1, 2, 6, 6)
    args = ([2, 2], [2, 2], [0, 0], [1, 1], False)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.ones_like(x))
        for op in (torch.ops.poolx.max_pool2d_values, torch.ops.poolx.max_pool2d_argmax):
            with pytest.raises(RuntimeError, match="jvp is not implemented"):
                op(dual, *args)
        exact(forward_ad.unpack_dual(poolx.max_pool2d(dual, 2)).tangent, torch.ones(1, 2, 3, 3))
