"""Where each path spends its time, kernel by kernel, poolx beside eager torch
(torch.profiler): what one short GPU run needs to tell why a path is slow.

    python -m bench.kernel_profile --device cuda [--shapes seed vgg-64@224] [--modes unpool]

For every case and peer: the time per call summed over its kernels (self
time, CUDA kernels and memsets on a GPU, operators on the CPU), then the
kernels that take most of it; on a GPU also the host time of its operators
(launch overhead, allocation, any synchronization).
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from bench.cases import DTYPES, LAYOUTS, MODES, SHAPES
from bench.peers import CaseTensors, make_runner


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.kernel_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["seed", "vgg-64@224"])
    p.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), default=list(LAYOUTS))
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    p.add_argument("--calls", type=int, default=5, help="profiled calls per case and peer")
    p.add_argument("--top", type=int, default=4, help="kernels listed per case and peer")
    return p.parse_args(argv)


def kernel_times(run, device, calls):
    """([(microseconds per call, kernel name)] largest first, host microseconds
    per call of the operators (0 on the CPU, where the kernels are that))."""
    run()  # warm-up, outside the profile
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            run()
        sync()
    events = prof.key_averages()
    field = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    rows = sorted(((getattr(e, field) / calls, e.key) for e in events), reverse=True)
    host = sum(e.self_cpu_time_total for e in events if e.key != "cudaDeviceSynchronize")
    return [r for r in rows if r[0] > 0], host / calls if device == "cuda" else 0.0


def main(argv=None):
    args = parse_args(argv)
    for name in args.shapes:
        shape = SHAPES[name]
        for layout in args.layouts:
            t = CaseTensors(shape, LAYOUTS[layout], DTYPES[args.dtype], args.device)
            for mode in args.modes:
                for peer in ("eager", "poolx"):
                    run = make_runner(peer, mode, t, shape)
                    if run is None:
                        continue
                    rows, host = kernel_times(run, args.device, args.calls)
                    top = "; ".join(f"{us:.1f} {key[:70]}" for us, key in rows[:args.top])
                    on_host = f" (host {host:.1f} us)" if args.device == "cuda" else ""
                    print(f"{name}/{layout}/{args.dtype}/{mode} {peer}: "
                          f"{sum(us for us, _ in rows):.1f} us{on_host} | {top}", flush=True)
            t.release()


if __name__ == "__main__":
    main()
