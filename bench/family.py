"""The pooling family beyond 2-D against torch: each path of the pooling in
a 1-D convolutional network, in 3-D ones (a U-Net level, video) and of the
adaptive pooling in classification heads and spatial pyramids, poolx and
torch.nn.functional timed in turns under one allocator, with the copy floor
measured in the same run.

  python -m bench --family --allocator tcmalloc
"""

import dataclasses
import functools
import math
import statistics

import torch
import torch.nn.functional as F

import poolx
from bench.floor import copy_bandwidths, path_bytes
from bench.timing import measure, warm_up


@dataclasses.dataclass(frozen=True)
class Case:
    """A pooling of (n, c, *size) by windows `kernel` stepping `stride`, or
    adaptive pooling to `output`."""

    name: str
    n: int
    c: int
    size: tuple  # (L,), (H, W) or (D, H, W)
    kernel: tuple = None
    stride: tuple = None
    padding: object = 0  # an int, or one per dimension
    output: tuple = None  # adaptive pooling's output size

    @property
    def dims(self):
        return len(self.size)

    @property
    def functions(self):
        return FUNCTIONS["adaptive" if self.output else "windowed"][self.dims]

    @property
    def modes(self):
        return MODES[:5] if self.output else MODES  # adaptive pooling has no unpool

    @property
    def pool_args(self):
        if self.output:
            return dict(output_size=self.output)
        return dict(kernel_size=self.kernel, stride=self.stride, padding=self.padding)

    @property
    def out_size(self):
        if self.output:
            return self.output
        pad = (self.padding,) * self.dims if isinstance(self.padding, int) else self.padding
        return tuple((s + 2 * p - k) // st + 1
                     for s, k, st, p in zip(self.size, self.kernel, self.stride, pad))


CASES = [
    Case("audio 32x128x8000 k4", 32, 128, (8000,), (4,), (4,)),  # the 1-D audio level
    Case("audio 32x128x8000 k2", 32, 128, (8000,), (2,), (2,)),
    Case("audio 32x128x8000 k3 s2 p1", 32, 128, (8000,), (3,), (2,), (1,)),
    Case("text 64x256x200 k2", 64, 256, (200,), (2,), (2,)),
    # the 3-D U-Net level and video
    Case("3-D U-Net 1x32x128^3 2x2x2", 1, 32, (128, 128, 128), (2, 2, 2), (2, 2, 2)),
    Case("video 8x64x16x112x112 1x2x2", 8, 64, (16, 112, 112), (1, 2, 2), (1, 2, 2)),
    Case("video 8x64x16x112x112 2x2x2", 8, 64, (16, 112, 112), (2, 2, 2), (2, 2, 2)),
    # the adaptive heads: a classifier's global pooling, a spatial
    # pyramid's levels (on SPP-net's 13x13 conv5: 4 and 2 overlap), text
    Case("head 32x512x7x7 -> 1", 32, 512, (7, 7), output=(1, 1)),
    Case("pyramid 32x512x13x13 -> 4", 32, 512, (13, 13), output=(4, 4)),
    Case("pyramid 32x512x13x13 -> 2", 32, 512, (13, 13), output=(2, 2)),
    Case("pyramid 32x512x13x13 -> 1", 32, 512, (13, 13), output=(1, 1)),
    Case("text head 64x256x200 -> 1", 64, 256, (200,), output=(1,)),
]
# 1-D "ncl": contiguous (N, C, L); "nlc": an (N, L, C) tensor viewed as
# (N, C, L), the layout of a sequence model's activations. 3-D: contiguous
# and channels_last_3d.
LAYOUTS = {1: ["ncl", "nlc"], 2: ["nchw", "channels_last"], 3: ["ncdhw", "channels_last_3d"]}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MODES = ["inference", "forward", "backward", "forward+backward", "return_indices", "unpool",
         "unpool_argmax"]
# dims -> torch's pool and unpool, poolx's pool, unpool, pool with argmax and unpool by it
FUNCTIONS = {"windowed": {
    1: (F.max_pool1d, F.max_unpool1d, poolx.max_pool1d, poolx.max_unpool1d,
        poolx.max_pool1d_with_argmax, poolx.max_unpool1d_argmax),
    3: (F.max_pool3d, F.max_unpool3d, poolx.max_pool3d, poolx.max_unpool3d,
        poolx.max_pool3d_with_argmax, poolx.max_unpool3d_argmax),
}, "adaptive": {
    dims: (getattr(F, f"adaptive_max_pool{dims}d"), None,
           getattr(poolx, f"adaptive_max_pool{dims}d"), None, None, None) for dims in (1, 2, 3)
}}


def _tensors(case, layout, dtype, device):
    shape = (case.n, case.c, *case.size)
    if layout == "nlc":
        x = torch.randn(shape[0], shape[2], shape[1], dtype=dtype, device=device).transpose(1, 2)
    else:
        x = torch.randn(shape, dtype=dtype, device=device)
        if layout in ("channels_last", "channels_last_3d"):
            x = x.contiguous(memory_format=getattr(torch, layout))
    torch_pool, _, _, _, with_argmax, _ = case.functions
    values, indices = torch_pool(x, **case.pool_args, return_indices=True)
    argmax = with_argmax(x, **case.pool_args)[1] if with_argmax else None
    return x, values, indices, argmax, torch.randn_like(values)


def _runners(case, x, values, indices, argmax, grad_out):
    """mode -> (torch's call, poolx's call)."""
    torch_pool, torch_unpool, pool_x, unpool_x, _, unpool_argmax = case.functions
    a = case.pool_args
    unpool_args = dict(a, output_size=x.shape[-case.dims:])
    no_grad = torch.no_grad()
    xg = x.detach().requires_grad_()
    peers = {}
    for name, pool, unpool in (("torch", torch_pool, torch_unpool),
                               ("poolx", pool_x, unpool_x)):
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
    if unpool_argmax:
        # torch has no argmax: its unpool by indices is what poolx's replaces
        peers["torch"]["unpool_argmax"] = peers["torch"]["unpool"]
        peers["poolx"]["unpool_argmax"] = no_grad(functools.partial(
            unpool_argmax, values, argmax, x.shape, **a))
    return {mode: (peers["torch"][mode], peers["poolx"][mode]) for mode in case.modes}


def run(cases=CASES, rounds=3, min_run_time=0.3, copy_mb=512, progress=True, device="cpu"):
    """Rows of (case, layout, dtype, mode, torch s, poolx s, floor s)."""
    from tqdm import tqdm

    threads = torch.get_num_threads()
    copy_gbps = copy_bandwidths(device, copy_mb << 20, 0.5)["copy"]
    rows = []
    combos = [(c, layout, d) for c in cases for layout in LAYOUTS[c.dims] for d in DTYPES]
    for case, layout, dtype_name in tqdm(combos, disable=not progress):
        dtype = DTYPES[dtype_name]
        runners = _runners(case, *_tensors(case, layout, dtype, device))
        for mode, pair in runners.items():
            times = ([], [])
            for peer in pair:
                warm_up(peer, min(0.2, min_run_time))
            for _ in range(rounds):
                for i, peer in enumerate(pair):
                    times[i].append(measure(peer, threads, min_run_time))
            torch_s, poolx_s = (statistics.median(t) for t in times)
            planes = case.n * case.c
            moved = path_bytes(planes * math.prod(case.size), planes * math.prod(case.out_size),
                               torch.empty((), dtype=dtype).element_size(), mode)
            floor_s = moved / (copy_gbps * 1e9)
            rows.append((case.name, layout, dtype_name, mode, torch_s, poolx_s, floor_s))
            if not progress:  # each case as it finishes, so a run cut short still tells
                print(f"case {case.name}/{layout}/{dtype_name}/{mode}: torch "
                      f"{torch_s * 1e3:.3f} ms, poolx {poolx_s * 1e3:.3f} ms, "
                      f"x{torch_s / poolx_s:.2f}", flush=True)
    return copy_gbps, rows


def table(copy_gbps, rows, allocator, device="cpu"):
    where = torch.cuda.get_device_name() if device == "cuda" else (
        f"allocator: {allocator}; {torch.get_num_threads()} threads")
    lines = [f"copy bandwidth (read + written): {copy_gbps:.1f} GB/s; {where}",
             "| case | layout | dtype | path | torch ms | poolx ms | speedup "
             "| poolx % of copy floor |", "|---|---|---|---|---:|---:|---:|---:|"]
    for name, layout, dtype, mode, torch_s, poolx_s, floor_s in rows:
        lines.append(f"| {name} | {layout} | {dtype} | {mode} | {torch_s * 1e3:.3f} | "
                     f"{poolx_s * 1e3:.3f} | {torch_s / poolx_s:.2f}x | "
                     f"{100 * poolx_s / floor_s:.0f}% |")
    return "\n".join(lines)


def summary(rows):
    """Speedups only: a row per (case, layout, dtype), a column per path."""
    lines = ["| case | layout | dtype | " + " | ".join(MODES) + " |",
             "|---|---|---|" + "---:|" * len(MODES)]
    by_case = {}
    for name, layout, dtype, mode, torch_s, poolx_s, _ in rows:
        by_case.setdefault((name, layout, dtype), {})[mode] = torch_s / poolx_s
    for (name, layout, dtype), speedups in by_case.items():
        cells = " | ".join(f"{speedups[m]:.2f}x" if m in speedups else "" for m in MODES)
        lines.append(f"| {name} | {layout} | {dtype} | {cells} |")
    return "\n".join(lines)


def main(args, allocator):
    # --quick: batch 1 and small volumes, to see that every path runs
    quick = [dataclasses.replace(c, n=1, size=(8, 16, 16) if c.dims == 3 else c.size)
             for c in CASES]
    copy_gbps, rows = run(quick if args.quick else CASES, args.rounds, args.min_run_time,
                          args.copy_mb, not args.no_progress, args.device)
    print(table(copy_gbps, rows, allocator, args.device))
    print(summary(rows))
    slower = [r for r in rows if r[5] > r[4]]
    print(f"{len(rows)} cases; poolx slower than torch in {len(slower)}")
    return rows
