"""Shows that the emulated CUDA suite bites: plants known bugs in the CUDA
kernels one at a time, in a copy of the tree built with POOLX_CUDA_EMULATION=1,
and checks that each makes the test suite fail (and that the unplanted copy
passes it first).

    python tools/plant_cuda_bugs.py [pytest args...]
    (default: tests -x -q -m "not slow" --ignore=tests/test_cuda_compile.py
     --ignore=tests/test_leaks.py)

Environment: POOLX_PLANT_DIR keeps the copy and its build there (reused, so
only what a bug touches recompiles)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TESTS = ["tests", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                 "--ignore=tests/test_cuda_compile.py", "--ignore=tests/test_leaks.py"]

# name: (file, the text as it is, the text with the bug)
BUGS = {
    "a wrong tap in the tiled argmax (kh and kw swapped)": (
        "csrc/cuda/max_pool2d_forward.cu",
        "arg[i] = static_cast<uint8_t>(kh * kW + kw);",
        "arg[i] = static_cast<uint8_t>(kw * kW + kh);"),
    "the alignment check of the channels_last kernels removed": (
        "csrc/cuda/tiled_route.cuh",
        "fits = fits && aligned(p, v * static_cast<int>(sizeof(scalar_t)));",
        "fits = fits && p == p;"),
    "atomicMax replaced by a plain store (unpool by indices)": (
        "csrc/cuda/argmax_ops.cu",
        "atomicMax(keys<I>(scratch) + o, static_cast<Key<I>>(ih * vs.h + iw * vs.w + 1));",
        "keys<I>(scratch)[o] = static_cast<Key<I>>(ih * vs.h + iw * vs.w + 1);"),
    "a window loop one tap too far (tiled channels_last routing)": (
        "csrc/cuda/tiled_route.cuh",
        "for (int64_t kw = cols.begin; kw < cols.end; ++kw) {\n        const int64_t here",
        "for (int64_t kw = cols.begin; kw <= cols.end; ++kw) {\n        const int64_t here"),
    "an index outside its window not reported (tiled unpool by indices)": (
        "csrc/cuda/tiled_route.cuh",
        "if (!all_valid) *outside = 1;",
        "if (!all_valid && false) *outside = 1;"),
    "the argmax check of the channels_last gather skipped": (
        "csrc/cuda/channels_last.cuh",
        "valid &= taps_inside<V>(tap, g, oh, ow);",
        "valid &= tap != nullptr;"),
    "atomicMax replaced by a plain store (the plane scatter)": (
        "csrc/cuda/plane_scatter.cuh",
        "if (claims(s, group, p, &t)) atomicMax(keys + t, static_cast<unsigned>(p) + 1);",
        "if (claims(s, group, p, &t)) keys[t] = static_cast<unsigned>(p) + 1;"),
    "the plane scatter's keys not cleared": (
        "csrc/cuda/plane_scatter.cuh",
        "for (int32_t e = first; e < outputs; e += step) keys[e] = 0;",
        "for (int32_t e = first; e < 0; e += step) keys[e] = 0;"),
    "a grid-stride loop reduced to one iteration (the element kernel)": (
        "csrc/cuda/cuda_common.cuh",
        "i < total; i += static_cast<I>(grid_stride())) {",
        "i < total; i += total) {"),
}


def run(command, cwd, log):
    with open(log, "w") as f:
        return subprocess.run(command, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode


def build(work):
    env_build = ["env", "POOLX_CUDA_EMULATION=1", f"MAX_JOBS={os.environ.get('MAX_JOBS', '2')}",
                 sys.executable, "setup.py", "build_ext", "--inplace"]
    if run(env_build, work, work / "build.log") != 0:
        sys.exit(f"plant: the build failed, see {work / 'build.log'}")


def suite_passes(work, tests, log):
    env = dict(os.environ, PYTHONPATH=str(work))
    with open(log, "w") as f:
        done = subprocess.run([sys.executable, "-m", "pytest", *tests], cwd=work, env=env,
                              stdout=f, stderr=subprocess.STDOUT)
    return done.returncode == 0


def main():
    tests = sys.argv[1:] or DEFAULT_TESTS
    keep = os.environ.get("POOLX_PLANT_DIR")
    work = Path(keep or tempfile.mkdtemp(prefix="poolx-plant."))
    work.mkdir(parents=True, exist_ok=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        (work / name.decode()).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name.decode(), work / name.decode())
    try:
        build(work)
        if not suite_passes(work, tests, work / "clean.log"):
            sys.exit(f"plant: the suite fails without a planted bug, see {work / 'clean.log'}")
        print("plant: without a planted bug the emulated suite passes")
        missed = []
        for i, (bug, (path, original, planted)) in enumerate(BUGS.items()):
            source = work / path
            text = source.read_text()
            if text.count(original) != 1:
                sys.exit(f"plant: {path} no longer holds exactly one {original!r}; update BUGS")
            source.write_text(text.replace(original, planted))
            try:
                start = time.time()
                build(work)
                caught = not suite_passes(work, tests, work / f"bug{i}.log")
            finally:
                source.write_text(text)
            print(f"plant: {'caught' if caught else 'MISSED'} in {time.time() - start:.0f} s: "
                  f"{bug} (log: {work / f'bug{i}.log'})")
            if not caught:
                missed.append(bug)
        if missed:
            sys.exit(f"plant: the emulated suite missed {len(missed)} planted bug(s)")
        print(f"plant: every one of the {len(BUGS)} planted bugs made the emulated suite fail")
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
