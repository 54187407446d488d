"""Custom training without autograd: route a gradient back through max pooling
by hand with poolx, check it against autograd, and time it.

    python examples/custom_training.py            # timing at N=16384, C=2, 32x32
    python examples/custom_training.py --small    # a quick run

The pipeline is conv -> ReLU -> max pool 2x2. poolx.max_pool2d_with_argmax
returns the pooled values and a 1-byte argmax in one pass; the argmax is all
poolx.max_pool2d_backward needs to route an upstream gradient back, and
poolx.argmax_to_mask turns it into the binary map of the maxima.
"""

import argparse

import torch
import torch.nn.functional as F
from torch.utils import benchmark

import poolx


def manual_vs_autograd(n, c, size):
    """One forward/backward by hand and by autograd; returns the comparison."""
    x = torch.randn(n, 1, size, size)
    weight = torch.randn(c, 1, 3, 3)
    upstream = torch.randn(n, c, size // 2, size // 2)

    # By hand: no autograd anywhere.
    with torch.no_grad():
        pre = F.conv2d(x, weight, padding=1)
        act = torch.relu(pre)
        pooled, argmax = poolx.max_pool2d_with_argmax(act, 2)
        grad_act = poolx.max_pool2d_backward(upstream, argmax, act.shape, 2)
        grad_pre = torch.where(pre > 0, grad_act, 0.0)
        grad_weight = torch.nn.grad.conv2d_weight(x, weight.shape, grad_pre, padding=1)
        mask = poolx.argmax_to_mask(argmax, act.shape, 2)

    # Autograd with torch's own max pooling.
    w = weight.clone().requires_grad_()
    pre_ag = F.conv2d(x, w, padding=1)
    pre_ag.retain_grad()
    pooled_ag = F.max_pool2d(torch.relu(pre_ag), 2)
    pooled_ag.backward(upstream)

    return {
        "pooled_equal": torch.equal(pooled, pooled_ag.detach()),
        "grad_pre_equal": torch.equal(grad_pre, pre_ag.grad),
        "grad_weight_max_abs_diff": (grad_weight - w.grad).abs().max().item(),
        "grad_weight_close": torch.allclose(grad_weight, w.grad, rtol=1e-5, atol=1e-6),
        "mask_true": int(mask.sum()),
        "windows": pooled.numel(),
    }


def median_ms(stmt, min_run_time, **env):
    timer = benchmark.Timer(stmt=stmt, globals={"torch": torch, "F": F, "poolx": poolx, **env})
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def timings(n, c, size, min_run_time=1.0):
    """Median times (ms): pooling forward and backward, max vs average."""
    x = torch.randn(n, c, size, size)
    values, argmax = poolx.max_pool2d_with_argmax(x, 2)
    _, indices = F.max_pool2d(x, 2, return_indices=True)
    grad = torch.randn_like(values)
    env = dict(x=x, argmax=argmax, indices=indices, grad=grad, min_run_time=min_run_time)
    return {
        "forward": {
            "avg_pool2d": median_ms("F.avg_pool2d(x, 2)", **env),
            "poolx with argmax": median_ms("poolx.max_pool2d_with_argmax(x, 2)", **env),
            "torch with indices": median_ms("F.max_pool2d(x, 2, return_indices=True)", **env),
        },
        "backward": {
            "avg_pool2d": median_ms(
                "torch.ops.aten.avg_pool2d_backward("
                "grad, x, [2, 2], [2, 2], [0, 0], False, True, None)",
                **env,
            ),
            "poolx with argmax": median_ms(
                "poolx.max_pool2d_backward(grad, argmax, x.shape, 2)", **env
            ),
            "torch with indices": median_ms(
                "torch.ops.aten.max_pool2d_with_indices_backward("
                "grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)",
                **env,
            ),
        },
    }


def print_timings(times, shape):
    print(f"\nmax pooling 2x2 of a float32 {shape} tensor, {torch.get_num_threads()} threads "
          "(median of torch.utils.benchmark):")
    print("| pass | avg_pool2d | poolx max + argmax | torch max + indices |")
    print("|---|---|---|---|")
    for pass_name, row in times.items():
        avg = row["avg_pool2d"]
        cells = [
            f"{row[k]:.2f} ms ({row[k] / avg:.2f}x avg)"
            for k in ("poolx with argmax", "torch with indices")
        ]
        print(f"| {pass_name} | {avg:.2f} ms | {cells[0]} | {cells[1]} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--c", type=int, default=2)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--small", action="store_true", help="N=64, C=2, 16x16")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="seconds per timing")
    args = parser.parse_args(argv)
    n, c, size = (64, 2, 16) if args.small else (args.n, args.c, args.size)

    check = manual_vs_autograd(min(n, 256), c, size)
    assert check["pooled_equal"] and check["grad_pre_equal"], check
    assert check["grad_weight_close"], check
    assert check["mask_true"] == check["windows"], check
    print("manual backward through poolx == autograd through F.max_pool2d: "
          f"pooled values equal, gradient at the conv output bit-identical; conv weight "
          f"gradient (torch.nn.grad.conv2d_weight) differs by at most "
          f"{check['grad_weight_max_abs_diff']:.2e}")
    print(f"mask of the maxima: {check['mask_true']} True entries, one per window "
          f"({check['windows']} windows)")
    result = {"check": check}
    result["times"] = timings(n, c, size, args.min_run_time)
    print_timings(result["times"], (n, c, size, size))
    return result


if __name__ == "__main__":
    main()
