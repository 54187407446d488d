"""The implementations compared, as one zero-argument callable per (case, peer).

Modes: inference (values only) and forward (values and the argmax or indices
that backward needs), both under torch.no_grad so that they differ only in what
they write; backward (from saved state); forward+backward (autograd, as
training runs it); and the other paths a model takes (PATH_MODES): int64
indices, unpool by indices and by argmax, pool + unpool forward and backward,
the mask of the maxima. Wrappers are built once, not per timed call.
"""

import functools

import torch
import torch.nn.functional as F

import poolx

PEERS = ["eager", "compile", "avg_pool2d", "generic", "poolx"]
aten = torch.ops.aten


def _raise_compile_limits():
    # one compiled graph per shape/layout/dtype/mode; without this dynamo would
    # silently fall back to eager after 8 of them
    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 4096)


def _compiled(fn):
    _raise_compile_limits()
    return torch.compile(fn, dynamic=False)


class CaseTensors:
    """Tensors of one (shape, layout, dtype), shared by its modes and peers."""

    def __init__(self, shape, layout, dtype, device, seed=0):
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(shape.n, shape.c, shape.h, shape.w, generator=gen, dtype=dtype)
        self.x = x.to(device=device, memory_format=layout)
        self.args = shape.pool_args
        self.grad_out = torch.randn(
            shape.n, shape.c, *shape.out_hw, generator=gen, dtype=dtype
        ).to(device=device, memory_format=layout)
        with torch.no_grad():
            self.values, self.indices = F.max_pool2d(self.x, **self.args, return_indices=True)
            self.argmax = poolx.max_pool2d_with_argmax(self.x, **self.args)[1]
        self.x_grad = self.x.detach().clone().requires_grad_(True)
        # the gradient of an unpool's output (input-shaped)
        self.grad_in = torch.randn(x.shape, generator=gen, dtype=dtype).to(
            device=device, memory_format=layout)

    def release(self):
        self.__dict__.clear()


def _no_grad(fn):
    @functools.wraps(fn)
    def run(*a, **kw):
        with torch.no_grad():
            return fn(*a, **kw)

    return run


def _fwd_bwd(pool, t):
    def run():
        t.x_grad.grad = None
        pool(t.x_grad).backward(t.grad_out)

    return run


def _pool_unpool(pool, unpool, t, hw):
    """SegNet's pattern, as training runs it: pool with indices, unpool by
    them, backward through both."""
    def run():
        t.x_grad.grad = None
        values, indices = pool(t.x_grad)
        unpool(values, indices, output_size=hw).backward(t.grad_in)

    return run


def _torch_mask(indices, shape):
    """torch's way to the map of the maxima: scatter True at the indices."""
    mask = torch.zeros(shape, dtype=torch.bool, device=indices.device).flatten(2)
    return mask.scatter_(2, indices.flatten(2), True).view(shape)


def _paths(peer, t, hw):
    """The paths beyond pooling and its backward, for torch and for poolx:
    int64 indices, unpool by indices and by argmax, pool + unpool, the mask."""
    a = t.args
    unpool_args = dict(kernel_size=a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if peer == "poolx":
        pool = functools.partial(poolx.max_pool2d, **a, return_indices=True)
        unpool = functools.partial(poolx.max_unpool2d, **unpool_args)
        pool_no_grad, unpool_no_grad = _no_grad(pool), _no_grad(unpool)
        unpool_argmax = _no_grad(functools.partial(poolx.max_unpool2d_argmax, **a))
        mask = _no_grad(functools.partial(poolx.argmax_to_mask, **a))
        return {
            "return_indices": lambda: pool_no_grad(t.x),
            "unpool": lambda: unpool_no_grad(t.values, t.indices, output_size=hw),
            "unpool_argmax": lambda: unpool_argmax(t.values, t.argmax, hw),
            "pool+unpool": _pool_unpool(pool, unpool, t, hw),
            "argmax_to_mask": lambda: mask(t.argmax, t.x.shape),
        }
    wrap = _compiled if peer == "compile" else (lambda f: f)
    pool = wrap(functools.partial(F.max_pool2d, **a, return_indices=True))
    unpool = wrap(functools.partial(F.max_unpool2d, **unpool_args))
    pool_no_grad, by_indices = _no_grad(pool), _no_grad(unpool)
    mask = _no_grad(wrap(_torch_mask))
    return {
        "return_indices": lambda: pool_no_grad(t.x),
        "unpool": lambda: by_indices(t.values, t.indices, output_size=hw),
        # torch has no argmax: its unpool by indices is what poolx's replaces
        "unpool_argmax": lambda: by_indices(t.values, t.indices, output_size=hw),
        "pool+unpool": _pool_unpool(pool, unpool, t, hw),
        "argmax_to_mask": lambda: mask(t.indices, t.x.shape),
    }


def _without_fast_paths(run):
    """poolx with its CPU fast paths off: the element kernels every fast path
    must beat to earn its place."""
    def generic():
        before = torch.ops.poolx.set_cpu_fast_paths(False)
        try:
            return run()
        finally:
            torch.ops.poolx.set_cpu_fast_paths(before)

    return generic


PATH_MODES = ["return_indices", "unpool", "unpool_argmax", "pool+unpool", "argmax_to_mask"]


def make_runner(peer, mode, t, shape):
    """A callable that runs `peer` in `mode` on the tensors `t`, or None where
    the peer has no such path (average pooling has no indices)."""
    if peer == "generic":
        return _without_fast_paths(make_runner("poolx", mode, t, shape))
    a = t.args
    hw = [shape.h, shape.w]
    k, s, p = [shape.kernel] * 2, [shape.stride] * 2, [shape.padding] * 2
    if mode in PATH_MODES:
        return None if peer == "avg_pool2d" else _paths(peer, t, hw)[mode]
    if peer == "poolx":
        values = functools.partial(poolx.max_pool2d, **a)
        with_argmax = functools.partial(poolx.max_pool2d_with_argmax, **a)
        backward = functools.partial(poolx.max_pool2d_backward, input_size=hw, **a)
        infer, forward = _no_grad(values), _no_grad(with_argmax)
        table = {
            "inference": lambda: infer(t.x),
            "forward": lambda: forward(t.x),
            "backward": lambda: backward(t.grad_out, t.argmax),
            "forward+backward": _fwd_bwd(values, t),
        }
        return table[mode]
    if peer == "avg_pool2d":
        avg = functools.partial(F.avg_pool2d, **a)
        avg_no_grad = _no_grad(avg)
        table = {
            "inference": lambda: avg_no_grad(t.x),
            "forward": lambda: avg_no_grad(t.x),
            "backward": lambda: aten.avg_pool2d_backward(t.grad_out, t.x, k, s, p, False, True,
                                                        None),
            "forward+backward": _fwd_bwd(avg, t),
        }
        return table[mode]

    def with_indices(x):
        return F.max_pool2d(x, **a, return_indices=True)

    def values(x):
        return F.max_pool2d(x, **a)

    def backward(g, x, idx):
        return aten.max_pool2d_with_indices_backward(g, x, k, s, p, [1, 1], False, idx)

    wrap = _compiled if peer == "compile" else (lambda f: f)
    if mode == "inference":
        f = _no_grad(wrap(values))
        return lambda: f(t.x)
    if mode == "forward":
        f = _no_grad(wrap(with_indices))
        return lambda: f(t.x)
    if mode == "backward":
        f = wrap(backward)
        return lambda: f(t.grad_out, t.x, t.indices)
    return _fwd_bwd(wrap(values), t)
