"""python -m bench: poolx against torch.nn.functional and the copy-bandwidth floor.

Every peer runs in this one process under one allocator, named in the table,
the JSON and the plot; --allocator re-executes the run with a caching malloc
preloaded (PyTorch's CPU performance advice).

Examples:
  python -m bench --quick                      # a few small cases, about a minute
  python -m bench --allocator tcmalloc         # every CPU case and path
  python -m bench --shapes seed vgg --dtypes float32 --modes forward+backward unpool
  python -m bench --models --allocator tcmalloc  # whole models, stock against convert()
  python -m bench --family --allocator tcmalloc  # 1-D and 3-D pooling against torch
  python -m bench --device cuda --json gpu.json --plot gpu.png
"""

import argparse
import gc
import itertools
import os
import statistics
import sys

from bench.allocator import NAMES as ALLOCATORS

MODEL_NAMES = ["vgg11", "resnet18", "segnet", "mnist"]

ALL_SHAPES = ["seed", "mnist", "vgg", "resnet-stem", "unet", "segnet"]
LAYOUT_NAMES = ["nchw", "channels_last"]
DTYPE_NAMES = ["float32", "bfloat16", "float16"]
MODE_NAMES = ["inference", "forward", "backward", "forward+backward", "return_indices", "unpool",
              "unpool_argmax", "pool+unpool", "argmax_to_mask"]
PEER_NAMES = ["eager", "compile", "avg_pool2d", "generic", "poolx"]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--allocator", choices=ALLOCATORS, default=None,
                   help="run every peer under this malloc: system, or tcmalloc/jemalloc "
                        "preloaded for the whole process (default: the one this process has)")
    p.add_argument("--models", nargs="*", choices=MODEL_NAMES, default=None, metavar="MODEL",
                   help="instead of the cases: one training step of VGG-11, ResNet-18, a "
                        "SegNet-style encoder-decoder and an MNIST CNN (or the ones named: "
                        f"{', '.join(MODEL_NAMES)}), stock against poolx.convert, both layouts")
    p.add_argument("--family", action="store_true",
                   help="instead of the cases: 1-D and 3-D pooling (bench/family.py), every "
                        "path against torch.nn.functional's")
    p.add_argument("--shapes", nargs="+", default=ALL_SHAPES, metavar="SHAPE",
                   help="seed, mnist, vgg (all four blocks) or vgg-64@224, vgg-128@112, "
                        "vgg-256@56, vgg-512@28, resnet-stem, unet (default: all)")
    p.add_argument("--layouts", nargs="+", choices=LAYOUT_NAMES, default=LAYOUT_NAMES)
    p.add_argument("--dtypes", nargs="+", choices=DTYPE_NAMES, default=None,
                   help="default: float32 bfloat16 (+ float16 on cuda)")
    p.add_argument("--modes", nargs="+", choices=MODE_NAMES, default=MODE_NAMES)
    p.add_argument("--peers", nargs="+", choices=PEER_NAMES, default=None,
                   help="default: all but generic (poolx with its CPU fast paths off, the "
                        "element kernels each fast path is measured against); with --quick all "
                        "but compile too, whose compile time "
                        "would dominate (poolx is always measured)")
    p.add_argument("--quick", action="store_true",
                   help="small cases: mnist and resnet-stem (batch 2), float32 and bfloat16, "
                        "every layout and mode, in well under a minute")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every peer of a case this many times, in turns, and report "
                        "the median: slow drifts of a shared machine then hit all peers alike")
    p.add_argument("--min-run-time", type=float, default=None,
                   help="seconds per measurement (default 0.3, 0.05 with --quick)")
    p.add_argument("--copy-mb", type=int, default=None,
                   help="size of the copy that measures bandwidth (default 512, 64 with --quick)")
    p.add_argument("--thp", action="store_true",
                   help="THP_MEM_ALLOC_ENABLE=1: torch's allocator asks for huge pages, so "
                        "fresh outputs cost fewer page faults (all peers alike)")
    p.add_argument("--prefault-gb", type=float, default=None, metavar="GB",
                   help="write and free this much memory first, so that a virtual machine's "
                        "first-touch cost stays out of the timings (default 12, 0 with --quick)")
    p.add_argument("--json", default="bench/results/{device}.json", metavar="PATH")
    p.add_argument("--plot", default="bench/results/{device}.png", metavar="PATH")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-side-by-side", dest="side_by_side", action="store_false",
                   help="skip poolx's own comparisons (bfloat16 against float32, inference "
                        "against forward), each pair timed in the same rounds")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, but got --rounds={args.rounds}")
    args.min_run_time = args.min_run_time or (0.05 if args.quick else 0.3)
    args.copy_mb = args.copy_mb or (64 if args.quick else 512)
    if args.prefault_gb is None:
        args.prefault_gb = 0 if args.quick else 12
    if args.peers is None:
        args.peers = [p for p in PEER_NAMES
                      if p != "generic" and not (args.quick and p == "compile")]
    if "poolx" not in args.peers:
        args.peers = [*args.peers, "poolx"]
    return args


def unique(items):
    return list(dict.fromkeys(items))


def run_cases(args, cases, floors):
    import torch
    from tqdm import tqdm

    from bench import report
    from bench.cases import DTYPES, LAYOUTS
    from bench.floor import minimal_bytes
    from bench.timing import measure, warm_up
    from bench.peers import CaseTensors, make_runner
    from bench.saved_bytes import saved_bytes_per_output

    import poolx
    import torch.nn.functional as F

    threads = torch.get_num_threads()
    records = []
    bar = tqdm(total=len(cases) * len(args.peers) * args.rounds, disable=args.no_progress,
               unit="run")
    group_key = lambda c: (c.shape, c.layout, c.dtype)  # noqa: E731
    for (shape, layout, dtype), group in itertools.groupby(cases, key=group_key):
        t = CaseTensors(shape, LAYOUTS[layout], DTYPES[dtype], args.device)
        n_out = t.grad_out.numel()
        saved = {
            "eager": saved_bytes_per_output(lambda x: F.max_pool2d(x, **t.args), t.x, n_out),
            "avg_pool2d": saved_bytes_per_output(lambda x: F.avg_pool2d(x, **t.args), t.x, n_out),
            "poolx": saved_bytes_per_output(lambda x: poolx.max_pool2d(x, **t.args), t.x, n_out),
        }
        for case in group:
            bar.set_description(case.key)
            runs = {peer: make_runner(peer, case.mode, t, shape) for peer in args.peers}
            runs = {peer: run for peer, run in runs.items() if run is not None}
            rounds = {peer: [] for peer in runs}
            for i in range(args.rounds):
                for peer, run in runs.items():
                    if i == 0:
                        warm_up(run, args.min_run_time)
                    rounds[peer].append(measure(run, threads, args.min_run_time))
                    bar.update()
            times = {peer: statistics.median(r) for peer, r in rounds.items()}
            nbytes = minimal_bytes(case)
            gbps = {p: nbytes / s / 1e9 for p, s in times.items()}
            records.append({
                "key": case.key, "shape": shape.name, "layout": layout, "dtype": dtype,
                "mode": case.mode, "size": [shape.n, shape.c, shape.h, shape.w],
                "median_s_by_round": rounds,
                "kernel": shape.kernel, "stride": shape.stride, "padding": shape.padding,
                "minimal_bytes": nbytes, "median_s": times, "gbps": gbps,
                "fraction_of_copy": {p: g / floors["copy"] for p, g in gbps.items()},
                "fraction_of_clone": {p: g / floors["clone"] for p, g in gbps.items()},
                "speedup": {p: s / times["poolx"] for p, s in times.items() if p != "poolx"},
                "saved_bytes_per_output": saved,
            })
            if args.no_progress:  # one line per case, so a run cut short still tells
                print(report.case_line(records[-1]), flush=True)
        t.release()
        gc.collect()
    bar.close()
    return records


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    from bench import allocator

    if args.allocator:
        allocator.ensure(args.allocator, argv)
    if args.models is not None:
        from bench.models import main as models_main

        return models_main(args, allocator.current())
    if args.family:
        from bench.family import main as family_main

        return family_main(args, allocator.current())
    if args.thp:
        os.environ["THP_MEM_ALLOC_ENABLE"] = "1"  # read at torch's first allocation
    import torch

    from bench import report
    from bench.cases import QUICK, default_dtypes, select_cases
    from bench.floor import copy_bandwidths
    from bench.machine import machine_info
    from bench.prefault import prefault
    from bench.side_by_side import side_by_side
    from bench.side_by_side import table as side_by_side_table

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    if args.device == "cuda" and "generic" in args.peers:
        raise SystemExit("--peers generic: the fast paths it turns off are the CPU's")
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes, dtypes = args.shapes, args.dtypes or default_dtypes(args.device)
    if args.quick:
        shapes = QUICK["shapes"] if args.shapes == ALL_SHAPES else shapes
        dtypes = args.dtypes or QUICK["dtypes"]
    cases = select_cases(shapes, args.layouts, dtypes, args.modes, quick=args.quick)
    prefaulted = prefault(args.prefault_gb) if args.device == "cpu" else 0
    floors = copy_bandwidths(args.device, args.copy_mb << 20, max(0.5, args.min_run_time))
    results = {
        "command": "python -m bench " + " ".join(argv),
        "allocator": allocator.current(),
        "machine": machine_info(args.device),
        "copy_gbps": floors["copy"],
        "clone_gbps": floors["clone"],
        "copy_bytes": 2 * (args.copy_mb << 20),
        "settings": {"min_run_time_s": args.min_run_time, "quick": args.quick,
                     "prefaulted_bytes": prefaulted, "rounds": args.rounds,
                     "peers": args.peers,
                     "statistic": "median over rounds of blocked_autorange's median"},
        "cases": run_cases(args, cases, floors),
    }
    if args.side_by_side:
        results["poolx_side_by_side"] = side_by_side(
            unique(c.shape for c in cases), args.layouts, dtypes, args.modes, args.rounds,
            args.min_run_time, args.device, progress=not args.no_progress)
    print(f"copy bandwidth (read + written): {floors['copy']:.1f} GB/s into a warm buffer "
          f"(dst.copy_(src), the %copy floor), {floors['clone']:.1f} GB/s allocating "
          f"(src.clone(), the %clone floor); "
          f"{results['machine']['cpu_model']}, {results['machine']['threads']} threads, "
          f"allocator: {results['allocator']}")
    print(report.table(results))
    if results.get("poolx_side_by_side"):
        print(side_by_side_table(results["poolx_side_by_side"]))
    for path, write in ((args.json, report.write_json), (args.plot, report.plot)):
        if path:
            path = path.format(device=args.device)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            write(results, path)
            print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
