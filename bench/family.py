"""The pooling family beyond 2-D against torch: each path of a 1-D
convolutional network's pooling, poolx and torch.nn.functional timed in turns
under one allocator, with the copy floor measured in the same run.

  python -m bench --family --allocator tcmalloc
"""

import dataclasses
import functools
import statistics

import torch
import torch.nn.functional as F

import poolx
from bench.floor import copy_bandwidths, path_bytes
from bench.timing import measure, warm_up


@dataclasses.dataclass(frozen=True)
class Signal:
    name: str
    n: int
    c: int
    length: int
    kernel: int
    stride: int
    padding: int = 0

    @property
    def pool_args(self):
        return dict(kernel_size=self.kernel, stride=self.stride, padding=self.padding)

    @property
    def out_length(self):
        return (self.length + 2 * self.padding - self.kernel) // self.stride + 1


SIGNALS = [
    Signal("audio 32x128x8000 k4", 32, 128, 8000, 4, 4),  # the 1-D audio level
    Signal("audio 32x128x8000 k2", 32, 128, 8000, 2, 2),
    Signal("audio 32x128x8000 k3 s2 p1", 32, 128, 8000, 3, 2, 1),
    Signal("text 64x256x200 k2", 64, 256, 200, 2, 2),
]
# "ncl": contiguous (N, C, L); "nlc": an (N, L, C) tensor viewed as (N, C, L),
# the layout of a sequence model's activations
LAYOUTS = ["ncl", "nlc"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MODES = ["inference", "forward", "backward", "forward+backward", "return_indices", "unpool",
         "unpool_argmax"]


def _tensors(signal, layout, dtype, device):
    shape = (signal.n, signal.c, signal.length)
    if layout == "nlc":
        x = torch.randn(shape[0], shape[2], shape[1], dtype=dtype, device=device).transpose(1, 2)
    else:
        x = torch.randn(shape, dtype=dtype, device=device)
    values, indices = F.max_pool1d(x, **signal.pool_args, return_indices=True)
    _, argmax = poolx.max_pool1d_with_argmax(x, **signal.pool_args)
    return x, values, indices, argmax, torch.randn_like(values)


def _runners(signal, x, values, indices, argmax, grad_out):
    """mode -> (torch's call, poolx's call)."""
    a, unpool_args = signal.pool_args, dict(kernel_size=signal.kernel, stride=signal.stride,
                                            padding=signal.padding, output_size=x.shape[-1:])
    no_grad = torch.no_grad()
    xg = x.detach().requires_grad_()
    peers = {}
    for name, pool, unpool in (("torch", F.max_pool1d, F.max_unpool1d),
                               ("poolx", poolx.max_pool1d, poolx.max_unpool1d)):
        pooled = pool(xg, **a)

        def backward(pooled=pooled):
            return torch.autograd.grad(pooled, xg, grad_out, retain_graph=True)

        def forward_backward(pool=pool):
            return torch.autograd.grad(pool(xg, **a), xg, grad_out)

        peers[name] = {
            "inference": no_grad(lambda pool=pool: pool(x, **a)),
            "forward": lambda pool=pool: pool(xg, **a),
            "backward": backward,
            "forward+backward": forward_backward,
            "return_indices": no_grad(lambda pool=pool: pool(x, **a, return_indices=True)),
            "unpool": no_grad(lambda unpool=unpool: unpool(values, indices, **unpool_args)),
        }
    # torch has no argmax: its unpool by indices is what poolx's replaces
    peers["torch"]["unpool_argmax"] = peers["torch"]["unpool"]
    peers["poolx"]["unpool_argmax"] = no_grad(functools.partial(
        poolx.max_unpool1d_argmax, values, argmax, x.shape, **a))
    return {mode: (peers["torch"][mode], peers["poolx"][mode]) for mode in MODES}


def run(signals=SIGNALS, rounds=3, min_run_time=0.3, copy_mb=512, progress=True,
        device="cpu"):
    """Rows of (signal, layout, dtype, mode, torch s, poolx s, floor s)."""
    from tqdm import tqdm

    threads = torch.get_num_threads()
    copy_gbps = copy_bandwidths(device, copy_mb << 20, 0.5)["copy"]
    rows = []
    combos = [(s, layout, d) for s in signals for layout in LAYOUTS for d in DTYPES]
    for signal, layout, dtype_name in tqdm(combos, disable=not progress):
        dtype = DTYPES[dtype_name]
        runners = _runners(signal, *_tensors(signal, layout, dtype, device))
        for mode, pair in runners.items():
            times = ([], [])
            for peer in pair:
                warm_up(peer, min(0.2, min_run_time))
            for _ in range(rounds):
                for i, peer in enumerate(pair):
                    times[i].append(measure(peer, threads, min_run_time))
            torch_s, poolx_s = (statistics.median(t) for t in times)
            moved = path_bytes(signal.n * signal.c * signal.length,
                               signal.n * signal.c * signal.out_length,
                               torch.empty((), dtype=dtype).element_size(), mode)
            floor_s = moved / (copy_gbps * 1e9)
            rows.append((signal.name, layout, dtype_name, mode, torch_s, poolx_s, floor_s))
            if not progress:  # each case as it finishes, so a run cut short still tells
                print(f"case {signal.name}/{layout}/{dtype_name}/{mode}: torch "
                      f"{torch_s * 1e3:.3f} ms, poolx {poolx_s * 1e3:.3f} ms, "
                      f"x{torch_s / poolx_s:.2f}", flush=True)
    return copy_gbps, rows


def table(copy_gbps, rows, allocator, device="cpu"):
    where = torch.cuda.get_device_name() if device == "cuda" else (
        f"allocator: {allocator}; {torch.get_num_threads()} threads")
    lines = [f"copy bandwidth (read + written): {copy_gbps:.1f} GB/s; {where}",
             "| signal | layout | dtype | path | torch ms | poolx ms | speedup "
             "| poolx % of copy floor |", "|---|---|---|---|---:|---:|---:|---:|"]
    for name, layout, dtype, mode, torch_s, poolx_s, floor_s in rows:
        lines.append(f"| {name} | {layout} | {dtype} | {mode} | {torch_s * 1e3:.3f} | "
                     f"{poolx_s * 1e3:.3f} | {torch_s / poolx_s:.2f}x | "
                     f"{100 * poolx_s / floor_s:.0f}% |")
    return "\n".join(lines)


def summary(rows):
    """Speedups only: a row per (signal, layout, dtype), a column per path."""
    lines = ["| signal | layout | dtype | " + " | ".join(MODES) + " |",
             "|---|---|---|" + "---:|" * len(MODES)]
    by_case = {}
    for name, layout, dtype, mode, torch_s, poolx_s, _ in rows:
        by_case.setdefault((name, layout, dtype), {})[mode] = torch_s / poolx_s
    for (name, layout, dtype), speedups in by_case.items():
        cells = " | ".join(f"{speedups[m]:.2f}x" if m in speedups else "" for m in MODES)
        lines.append(f"| {name} | {layout} | {dtype} | {cells} |")
    return "\n".join(lines)


def main(args, allocator):
    # --quick: batch 1, to see that every path runs
    signals = [dataclasses.replace(s, n=1) for s in SIGNALS] if args.quick else SIGNALS
    copy_gbps, rows = run(signals, args.rounds, args.min_run_time, args.copy_mb,
                          not args.no_progress, args.device)
    print(table(copy_gbps, rows, allocator, args.device))
    print(summary(rows))
    slower = [r for r in rows if r[5] > r[4]]
    print(f"{len(rows)} cases; poolx slower than torch in {len(slower)}")
    return rows
