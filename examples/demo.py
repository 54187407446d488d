"""A two-minute tour: poolx as a drop-in for nn.MaxPool2d, the compact argmax,
and a side-by-side timing against torch on one shape."""

import torch
import torch.nn.functional as F
from torch.utils import benchmark

import poolx


def saved_bytes(fn, x):
    """Bytes of the distinct storages autograd saves for backward of fn(x)."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    return sum(storages.values())


def median_ms(stmt, **env):
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=0.5).median * 1e3


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 32, 112, 112, requires_grad=True)

    # 1. Drop-in: identical values, indices and gradients.
    ref_v, ref_i = F.max_pool2d(x, 2, return_indices=True)
    v, i = poolx.max_pool2d(x, 2, return_indices=True)
    g = torch.randn_like(v)
    (ref_grad,) = torch.autograd.grad(ref_v, x, g)
    (grad,) = torch.autograd.grad(v, x, g)
    print("values, indices, gradients identical to torch:",
          torch.equal(v, ref_v), torch.equal(i, ref_i), torch.equal(grad, ref_grad))

    # 2. The compact argmax: one byte per output, and the manual backward.
    values, argmax = poolx.max_pool2d_with_argmax(x.detach(), 2)
    manual = poolx.max_pool2d_backward(g, argmax, x.shape, 2)
    print(f"argmax dtype {argmax.dtype}; manual backward equals autograd: {torch.equal(manual, grad)}")
    torch_saved = saved_bytes(lambda t: F.max_pool2d(t, 2), x)
    poolx_saved = saved_bytes(lambda t: poolx.max_pool2d(t, 2), x)
    print(f"saved for backward: torch {torch_saved / 2**20:.1f} MiB, poolx {poolx_saved / 2**20:.1f} MiB")

    # 3. Forward + backward, side by side.
    env = dict(F=F, poolx=poolx, x=x, g=g)
    t_torch = median_ms("F.max_pool2d(x, 2).backward(g)", **env)
    t_poolx = median_ms("poolx.max_pool2d(x, 2).backward(g)", **env)
    print(f"forward+backward {tuple(x.shape)} 2x2: torch {t_torch:.1f} ms, poolx {t_poolx:.1f} ms "
          f"({t_torch / t_poolx:.1f}x) on {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
