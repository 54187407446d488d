"""Builds poolx._C: the CPU kernels always, the CUDA kernels where PyTorch has CUDA.

Environment: POOLX_CPU_ONLY=1 skips CUDA; FORCE_CUDA=1 builds CUDA kernels even
without a visible GPU; TORCH_CUDA_ARCH_LIST picks the architectures; DEBUG=1
builds without optimization and with debug info.
"""

import glob
import os
import sys

from setuptools import setup

try:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
except ImportError:
    sys.exit(
        "poolx needs PyTorch at build time. Install torch first, then build without "
        "isolation so the build sees it: pip install --no-build-isolation ."
    )

ROOT = os.path.dirname(os.path.abspath(__file__))


def env_flag(name):
    return os.environ.get(name, "0").lower() in ("1", "true", "yes", "on")


def want_cuda():
    if env_flag("POOLX_CPU_ONLY"):
        return False, "POOLX_CPU_ONLY=1"
    if torch.version.cuda is None:
        return False, "this PyTorch has no CUDA"
    if CUDA_HOME is None:
        return False, "nvcc not found (set CUDA_HOME)"
    if not (torch.cuda.is_available() or env_flag("FORCE_CUDA")):
        return False, "no GPU visible (set FORCE_CUDA=1 to build anyway)"
    return True, f"CUDA {torch.version.cuda} from {CUDA_HOME}"


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def extension():
    debug = env_flag("DEBUG")
    with_cuda, why = want_cuda()
    opt = ["-O0", "-g"] if debug else ["-O3"]
    cxx = list(opt)
    common = sources("csrc/*.cpp") + sources("csrc/cpu/*.cpp")
    kwargs = dict(
        name="poolx._C",
        include_dirs=[os.path.join(ROOT, "csrc", "include")],
        py_limited_api=False,
    )
    if with_cuda:
        nvcc = opt + [
            "-lineinfo",
            "--expt-relaxed-constexpr",
            "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__",
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__",
        ]
        srcs = common + sources("csrc/cuda/*.cu") + sources("csrc/cuda/*_cuda.cpp")
        ext = CUDAExtension(sources=srcs, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kwargs)
    else:
        srcs = common + ["csrc/cuda/no_cuda.cpp"]
        ext = CppExtension(sources=srcs, extra_compile_args={"cxx": cxx}, **kwargs)
    mode = "debug" if debug else "release"
    print(f"poolx: building CPU kernels{' + CUDA kernels' if with_cuda else ''} ({mode}); "
          f"CUDA: {'yes' if with_cuda else 'no'} ({why})")
    for s in ext.sources:
        print(f"poolx:   {s}")
    return ext


setup(
    name="poolx",
    version="0.1.0",
    description="Fused max pooling for PyTorch: values and a 1-byte argmax in one pass",
    packages=["poolx"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    python_requires=">=3.9",
    install_requires=[],
)
