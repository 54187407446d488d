"""torch.func transforms and forward-mode AD, against torch's max_pool2d."""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import forward_ad
from torch.utils._python_dispatch import TorchDispatchMode

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


@pytest.mark.parametrize("config", CONFIGS, ids=["tiled", "overlapping"])
def test_return_indices_under_transforms_matches_torch(device, config):
    x = torch.randn(2, 3, 9, 10, device=device, dtype=torch.float64)
    tangent = torch.randn_like(x)
    ours = lambda a: poolx.max_pool2d(a, **config, return_indices=True)  # noqa: E731
    ref = lambda a: F.max_pool2d(a, **config, return_indices=True)  # noqa: E731
    (primal, dot), (ref_primal, ref_dot) = (torch.func.jvp(f, (x,), (tangent,)) for f in (ours, ref))
    for got, want in zip((*primal, dot[0]), (*ref_primal, ref_dot[0])):
        exact(got, want)
    exact(torch.func.grad(lambda a: ours(a)[0].square().sum())(x),
          torch.func.grad(lambda a: ref(a)[0].square().sum())(x))
    batch = torch.stack([x, -x, x.flip(-1)])
    for got, want in zip(torch.func.vmap(ours)(batch), torch.func.vmap(ref)(batch)):
        exact(got, want)
    with forward_ad.dual_level():
        got = forward_ad.unpack_dual(ours(forward_ad.make_dual(x, tangent))[0])
        want = forward_ad.unpack_dual(ref(forward_ad.make_dual(x, tangent))[0])
    exact(got.tangent, want.tangent)


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
        for op in (torch.ops.poolx.max_pool2d_values, torch.ops.poolx.max_pool2d_argmax,
                   torch.ops.poolx.max_pool2d_indices):
            with pytest.raises(RuntimeError, match="jvp is not implemented"):
                op(dual, *args)
        exact(forward_ad.unpack_dual(poolx.max_pool2d(dual, 2)).tangent, torch.ones(1, 2, 3, 3))


def vmap_cases(device):
    """(name, fn, args, in_dims): every op, per-sample (C, H, W) and (N, C, H, W)
    tensors, vmapped at dim 0 or 1, channels_last samples, an unbatched argument."""
    ops = torch.ops.poolx
    pool = ([3, 3], [2, 2], [1, 1], [1, 1], True)
    x = torch.randn(4, 2, 3, 9, 10, device=device)
    x_cl = x.flatten(0, 1).contiguous(memory_format=torch.channels_last).unflatten(0, (4, 2))
    values, argmax = ops.max_pool2d_argmax(x.flatten(0, 1), *pool)
    values, argmax = values.unflatten(0, (4, 2)), argmax.unflatten(0, (4, 2))
    indices = ops.argmax_to_indices(argmax[0], [9, 10], *pool)
    return [
        ("argmax, (N,C,H,W) samples", lambda t: ops.max_pool2d_argmax(t, *pool), (x,), 0),
        ("argmax, channels_last", lambda t: ops.max_pool2d_argmax(t, *pool), (x_cl,), 0),
        ("return_indices", lambda t: ops.max_pool2d_indices(t, *pool), (x_cl,), 0),
        ("values, (C,H,W) samples at dim 1", lambda t: ops.max_pool2d_values(t, *pool),
         (x[0],), 1),
        ("backward", lambda g, a: ops.max_pool2d_backward(g, a, [9, 10], *pool),
         (values, argmax), 0),
        ("backward, argmax unbatched", lambda g, a: ops.max_pool2d_backward(g, a, [9, 10], *pool),
         (values, argmax[0]), (0, None)),
        ("gather", lambda s, a: ops.gather_by_argmax(s, a, *pool), (x, argmax), (0, 0)),
        ("indices", lambda a: ops.argmax_to_indices(a, [9, 10], *pool), (argmax,), 0),
        ("mask", lambda a: ops.argmax_to_mask(a, [9, 10], *pool), (argmax[:, 0],), 0),
        ("unpool by argmax", lambda v, a: ops.max_unpool2d_argmax(v, a, [9, 10], *pool),
         (values, argmax), 0),
        ("unpool by indices", lambda v, i: ops.max_unpool2d(v, i, [9, 10]),
         (values, indices), (0, None)),
    ]


class CountPoolxCalls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += func.namespace == "poolx"
        return func(*args, **(kwargs or {}))


def test_vmap_rules_equal_per_sample_calls(device):
    for name, fn, args, in_dims in vmap_cases(device):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        with CountPoolxCalls() as counter:
            got = torch.func.vmap(fn, in_dims=in_dims)(*args)
        assert counter.calls == 1, f"{name}: {counter.calls} kernel calls (per-sample fallback)"
        samples = [fn(*(a if d is None else a.select(d, i) for a, d in zip(args, dims)))
                   for i in range(size)]
        if isinstance(got, tuple):
            for j, part in enumerate(got):
                exact(part, torch.stack([s[j] for s in samples]))
        else:
            exact(got, torch.stack(samples))


def test_vmap_keeps_the_ops_rank_errors():
    with pytest.raises(RuntimeError, match="3D or 4D"):
        torch.func.vmap(lambda t: poolx.max_pool2d(t, 2))(torch.randn(4, 8, 8))
