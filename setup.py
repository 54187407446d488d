"""Builds poolx._C: the CPU kernels always, the CUDA kernels where PyTorch has CUDA.

Environment: POOLX_CPU_ONLY=1 skips CUDA; FORCE_CUDA=1 builds CUDA kernels even
without a visible GPU; TORCH_CUDA_ARCH_LIST picks the architectures; DEBUG=1
builds without optimization and with debug info (release builds carry none);
POOLX_CUDA_EMULATION=1 builds the CUDA kernels with the host compiler and runs
them on CPU tensors instead of the CPU kernels
(csrc/cuda/emulation/launch_model.h), for testing them without a GPU.
"""

import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

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

if sys.platform == "win32":
    # The kernels use GCC/Clang attributes and builtins (per-function ISA
    # targets, prefetch) that MSVC lacks.
    sys.exit("poolx builds with GCC or Clang (Linux, macOS); Windows/MSVC is not supported.")


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


# The vectorized fast paths (csrc/cpu/isa/fast_paths_<isa>.cpp) are compiled
# once per instruction set with ATen's flags for it; the library picks one at
# run time, so the build runs on any CPU of its architecture.
ISA_FLAGS = {"default": ["-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT"]}
if platform.machine().lower() in ("x86_64", "amd64"):
    ISA_FLAGS["avx2"] = ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY=AVX2",
                         "-DCPU_CAPABILITY_AVX2"]
    ISA_FLAGS["avx512"] = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma",
                           "-mf16c", "-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512"]
ISA_DEPENDS = sorted(glob.glob(os.path.join("csrc", "cpu", "*.h")) +
                     glob.glob(os.path.join("csrc", "cpu", "isa", "*.h")))


class BuildExtensionWithIsaKernels(BuildExtension.with_options(use_ninja=True)):
    """Compiles each ISA's fast paths with its own flags, then the extension."""

    def finalize_options(self):
        super().finalize_options()
        # One object folder per Python and torch for every build of this
        # checkout (pip's editable and wheel builds use a fresh temporary one),
        # so ninja recompiles only what changed since the last build.
        tag = f"{sys.implementation.cache_tag}-torch{torch.__version__}"
        self.build_temp = os.path.join(ROOT, "build", f"temp-{tag}")

    def build_extension(self, ext):
        args = ext.extra_compile_args
        cxx = list(args["cxx"] if isinstance(args, dict) else args)

        # ATen's vec headers carry unknown pragmas; GCC's AVX-512 intrinsic
        # headers set off -Wmaybe-uninitialized by the thousand (their
        # deliberately undefined __Y operands), which would bury real warnings
        isa_warning_flags = ["-Wno-unknown-pragmas"]
        if compiles(["-Werror", "-Wno-maybe-uninitialized"]):  # GCC; Clang has no such warning
            isa_warning_flags.append("-Wno-maybe-uninitialized")

        def compile_isa(isa):
            return self.compiler.compile(
                [f"csrc/cpu/isa/fast_paths_{isa}.cpp"],
                output_dir=os.path.join(self.build_temp, f"isa_{isa}"),  # one ninja file each
                include_dirs=ext.include_dirs,
                extra_postargs=cxx + ISA_FLAGS[isa] + isa_warning_flags,
                depends=ISA_DEPENDS,
            )

        # side by side: each is one large source, so one after another would
        # leave all cores but one idle
        workers = max(1, min(len(ISA_FLAGS), int(os.environ.get("MAX_JOBS", os.cpu_count() or 1))))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            objects = [o for objs in pool.map(compile_isa, ISA_FLAGS) for o in objs]
        ext.extra_objects = list(ext.extra_objects or []) + objects
        super().build_extension(ext)


def compiles(flags, program="int main() { return 0; }\n"):
    """Whether the C++ compiler builds and links `program` with `flags`."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler.split()[0]) is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cpp")
        with open(src, "w") as f:
            f.write(program)
        cmd = compiler.split() + flags + [src, "-o", os.path.join(tmp, "probe")]
        return subprocess.run(cmd, capture_output=True).returncode == 0


def openmp_flags():
    """Compile/link flags for OpenMP, through which at::parallel_for's inline
    code runs poolx's kernels on torch's threads: GCC's and Clang's
    -fopenmp, or Apple Clang's -Xpreprocessor form with libomp. Without
    any, poolx builds and runs single-threaded, and says so."""
    if not torch.backends.openmp.is_available():
        return [], []  # torch's own thread pool: nothing to compile in
    for compile_flags, link_flags in ((["-fopenmp"], ["-fopenmp"]),
                                      (["-Xpreprocessor", "-fopenmp"], ["-lomp"])):
        if compiles(compile_flags + link_flags,
                    "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"):
            return compile_flags, link_flags
    print("poolx: WARNING: the compiler has no OpenMP (-fopenmp); the kernels will run "
          "on one thread")
    return [], []


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def emulated_cuda_sources():
    """One wrapper per csrc/cuda/*.cu that compiles it, unmodified, with the host
    compiler against the emulated launch model."""
    folder = os.path.join("build", "cuda_emulation")
    os.makedirs(os.path.join(ROOT, folder), exist_ok=True)
    wrappers = []
    for cu in sources("csrc/cuda/*.cu"):
        wrapper = os.path.join(folder, os.path.basename(cu)[: -len(".cu")] + "_emulated.cpp")
        text = (f"// Written by setup.py: {cu} for the emulation build.\n"
                f'#include "device_code.h"\n#include "{os.path.join(ROOT, cu)}"\n')
        path = os.path.join(ROOT, wrapper)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
        wrappers.append(wrapper)
    return wrappers


def write_build_config(with_cuda, why, mode, emulation=False):
    """poolx/_build_config.py: what this build compiled, for poolx.show_config()."""
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "torch's default") if with_cuda else ""
    with open(os.path.join(ROOT, "poolx", "_build_config.py"), "w") as f:
        f.write('"""Written by setup.py at build time."""\n\n')
        f.write(f"CUDA_KERNELS = {with_cuda!r}\nCUDA_REASON = {why!r}\n")
        f.write(f"CUDA_ARCHS = {archs!r}\nCUDA_EMULATION = {emulation!r}\nBUILD_MODE = {mode!r}\n")
        f.write(f"BUILT_WITH_TORCH = {torch.__version__!r}\n")


def extension():
    debug = env_flag("DEBUG")
    with_cuda, why = want_cuda()
    opt = ["-O0", "-g"] if debug else ["-O3"]
    omp_compile, omp_link = openmp_flags()
    # Python's build flags carry -g; debug info (DEBUG=1 has it) would take a
    # third of the compile time and most of the library's size
    cxx = opt + ([] if debug else ["-g0"]) + omp_compile
    common = sources("csrc/*.cpp") + sources("csrc/cpu/*.cpp")
    kwargs = dict(
        name="poolx._C",
        include_dirs=[os.path.join(ROOT, "csrc", "include")],
        extra_link_args=omp_link,
        py_limited_api=False,
    )
    emulation = env_flag("POOLX_CUDA_EMULATION")
    if emulation:
        with_cuda, why = False, "POOLX_CUDA_EMULATION=1: the CUDA kernels run on CPU tensors"
        kwargs["include_dirs"].insert(0, os.path.join(ROOT, "csrc", "cuda", "emulation"))
        cxx += ["-DPOOLX_CUDA_EMULATION", "-Wno-unknown-pragmas"]  # the kernels' #pragma unroll
        srcs = common + ["csrc/cuda/kernels_cuda.cpp"] + emulated_cuda_sources()
        ext = CppExtension(sources=srcs, extra_compile_args={"cxx": cxx}, **kwargs)
    elif with_cuda:
        nvcc = opt + [
            "-lineinfo",
            "--expt-relaxed-constexpr",
            "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__",
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__",
        ]
        srcs = common + sources("csrc/cuda/*.cu") + ["csrc/cuda/kernels_cuda.cpp"]
        ext = CUDAExtension(sources=srcs, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kwargs)
    else:
        srcs = common + ["csrc/cuda/no_cuda.cpp"]
        ext = CppExtension(sources=srcs, extra_compile_args={"cxx": cxx}, **kwargs)
    mode = "debug" if debug else "release"
    write_build_config(with_cuda, why, mode, emulation)
    kernels = "CPU kernels" + (" + CUDA kernels" if with_cuda else "")
    if emulation:
        kernels = "CUDA kernels emulated on the CPU"
    print(f"poolx: building {kernels} ({mode}); CUDA: {'yes' if with_cuda else 'no'} ({why})")
    for s in ext.sources:
        print(f"poolx:   {s}")
    return ext


setup(
    name="poolx",
    version="0.1.0",
    description="Fused max pooling for PyTorch: values and a 1-byte argmax in one pass",
    packages=["poolx"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtensionWithIsaKernels},
    python_requires=">=3.9",
    install_requires=[],
)
