"""poolx.show_config() and python -m poolx: what this installation runs."""

import torch

import poolx
from poolx._library import ops


def config():
    """The facts show_config() prints, as a dict."""
    try:
        from poolx import _build_config as build
    except ImportError:  # a build from before setup.py wrote the file
        build = None
    return {
        "poolx": poolx.__version__,
        "torch": torch.__version__,
        "built with torch": getattr(build, "BUILT_WITH_TORCH", "unknown"),
        "build": getattr(build, "BUILD_MODE", "unknown"),
        "CPU instruction set": ops.cpu_isa(),
        "threads": torch.get_num_threads(),
        "CUDA kernels": (f"yes ({build.CUDA_REASON}; architectures: {build.CUDA_ARCHS})"
                         if getattr(build, "CUDA_KERNELS", False)
                         else f"no ({getattr(build, 'CUDA_REASON', 'unknown')})"),
        "CUDA emulation build": "yes" if getattr(build, "CUDA_EMULATION", False) else "no",
        "GPU visible": torch.cuda.is_available(),
    }


def show_config():
    """Prints the poolx and torch versions, the CPU instruction set of the fast
    paths, the thread count, and whether CUDA kernels were built (and for
    which architectures)."""
    facts = config()
    width = max(map(len, facts))
    for key, value in facts.items():
        print(f"{key + ':':<{width + 1}} {value}")
