#!/usr/bin/env bash
# One command on a GPU machine (NVIDIA GPU, PyTorch with CUDA, nvcc; no network
# needed): builds poolx from this checkout, runs the tests that touch CUDA, the
# benchmark and the converted models on CUDA, and writes log, JSON and plots
# into OUT_DIR. Its last lines are the ratios against the GPU targets.
#
#   bench/gpu_suite.sh OUT_DIR [STEP ...]
#
# STEPs (default: all, in this order): tests profile bench models compile
# (profile: each path's time kernel by kernel, poolx beside torch). The build
# always runs first. BENCH_SHAPES and BENCH_MIN_RUN_TIME set the benchmark
# (default: five shapes, 0.02 s, about 200 s on an H100); TESTS_SECONDS caps
# the tests (default 200). SUITE_SECONDS (default 570) bounds the whole run:
# every step has a time limit, and a step that fails or runs out of time is
# reported and the suite goes on. The CPU tests are CI's; here only tests with
# "cuda" in their id run (test_cuda_compile aside: it needs no GPU).
set -uo pipefail

out_dir=${1:?usage: bench/gpu_suite.sh OUT_DIR [tests profile bench models compile]}
shift
steps=${*:-tests profile bench models compile}
mkdir -p "$out_dir" && out_dir=$(cd "$out_dir" && pwd)
cd "$(dirname "$0")/.."
exec > >(tee "$out_dir/gpu_suite.log") 2>&1

deadline=$((SECONDS + ${SUITE_SECONDS:-570}))
status=()
step() {  # step NAME CAP_SECONDS COMMAND...: runs COMMAND with min(CAP, time left)
  local name=$1 cap=$2
  shift 2
  local left=$((deadline - SECONDS))
  ((left < cap)) && cap=$left
  if ((cap <= 0)); then
    status+=("$name: skipped (out of time)")
    return 1
  fi
  echo "== $(date +%T) $name (limit ${cap}s): $*"
  timeout --kill-after=10 "$cap" "$@"
  local rc=$?
  case $rc in
    0) status+=("$name: ok") ;;
    124 | 137) status+=("$name: timed out after ${cap}s") ;;
    *) status+=("$name: failed (exit $rc)") ;;
  esac
  return $rc
}
wanted() { [[ " $steps " == *" $1 "* ]]; }

no_gpu() {
  echo "gpu_suite: $*; this suite needs an NVIDIA GPU, PyTorch with CUDA and nvcc." >&2
  exit 2
}
python=${PYTHON:-$(command -v python3 || command -v python)} || no_gpu "no python3 found"
command -v nvidia-smi >/dev/null || no_gpu "nvidia-smi not found"
timeout 30 nvidia-smi -L || no_gpu "nvidia-smi finds no GPU"
timeout 120 "$python" -c "
import sys, torch
if torch.version.cuda is None or not torch.cuda.is_available():
    sys.exit(f'PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA GPU')
print(f'PyTorch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}')
" || no_gpu "PyTorch sees no CUDA GPU"
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[[ -x $nvcc ]] || nvcc=$(command -v nvcc) || no_gpu "nvcc not found (set CUDA_HOME)"
"$nvcc" --version | tail -1

# Build for this GPU only (fast); no downloads: the checkout is built in place.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$("$python" -c \
  "import torch; print('%d.%d' % torch.cuda.get_device_capability())")}
export MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
unset POOLX_CPU_ONLY
# The system's GCC, whose C++ runtime is the one torch loads: built with the
# GPU image's CC/CXX (a GCC under /opt/gcc), every error the extension raised
# killed the process with a segfault; the system GCC's build passed every
# test. POOLX_KEEP_CXX=1 keeps CC/CXX as they are.
if [[ -z ${POOLX_KEEP_CXX-} && -x /usr/bin/gcc && -x /usr/bin/g++ ]]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++
fi
step build 240 "$python" setup.py build_ext --inplace || {
  printf '%s\n' "${status[@]}"
  exit 1
}
step cuda-kernels-loaded 60 "$python" -c "
import torch, poolx
poolx.show_config()
v, a = poolx.max_pool2d_with_argmax(torch.randn(1, 1, 4, 4, device='cuda'), 2)
print('poolx runs on', v.device)
try:
    torch.ops.poolx.max_pool2d_values(v, [0, 0], [1, 1], [0, 0], [1, 1], False)
except RuntimeError as e:
    print('its errors reach Python:', str(e).splitlines()[0])"

if wanted tests; then
  workers=()
  "$python" -c "import xdist" 2>/dev/null && workers=(-n 8)
  # PyTorch's OpInfo samples (CPU only) import torch's test helpers, which need
  # expecttest; the GPU image lacks it, and that module holds no CUDA test.
  "$python" -c "import expecttest" 2>/dev/null || workers+=(--ignore=tests/test_torch_opinfo.py)
  step tests "${TESTS_SECONDS:-200}" "$python" -m pytest -q -p no:cacheprovider tests "${workers[@]}" \
    -k "cuda and not test_cuda_compile" -rfE --junitxml="$out_dir/tests.xml"
fi

if wanted profile; then
  step profile 60 "$python" -m bench.kernel_profile --device cuda --shapes seed vgg-64@224
fi
# Every layout, mode and path of the CPU benchmark, against eager torch; each
# case is printed as it finishes, so a run cut short still tells.
if wanted bench; then
  # shellcheck disable=SC2086  # BENCH_SHAPES is a list
  step bench 240 "$python" -m bench --device cuda --dtypes float32 bfloat16 \
    --shapes ${BENCH_SHAPES:-seed mnist vgg-64@224 resnet-stem segnet} \
    --peers eager avg_pool2d poolx --min-run-time "${BENCH_MIN_RUN_TIME:-0.02}" \
    --no-progress --no-side-by-side \
    --json "$out_dir/bench.json" --plot "$out_dir/bench.png"
fi
if wanted models; then
  step models 90 "$python" -m bench --models --device cuda --json "$out_dir/models.json"
fi
# torch.compile (one compilation per case) only where a target names it.
if wanted compile; then
  step bench-compile 120 "$python" -m bench --device cuda --shapes seed vgg resnet-stem \
    --dtypes float32 bfloat16 --modes forward+backward --peers eager compile poolx \
    --min-run-time 0.05 --no-progress --no-side-by-side \
    --json "$out_dir/bench_compile.json" --plot "$out_dir/bench_compile.png"
fi

echo "== $(date +%T) done in ${SECONDS}s; results in $out_dir"
printf '%s\n' "${status[@]}"
"$python" bench/gpu_targets.py "$out_dir"/bench*.json
