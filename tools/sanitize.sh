#!/usr/bin/env bash
# Builds the CPU extension with AddressSanitizer + UndefinedBehaviorSanitizer in
# a temporary copy of the tree, runs the test suite (fuzz tests included) under
# it, and fails on any sanitizer report.
#
#   tools/sanitize.sh [pytest args...]
#   (default: tests -m "not slow" --ignore=tests/test_leaks.py
#    --ignore=tests/test_cuda_compile.py)
#
# Environment: POOLX_CUDA_EMULATION=1 builds the CUDA kernels for the CPU
# instead (csrc/cuda/emulation) and runs the suite through them;
# POOLX_SANITIZE_DIR keeps the build there (reused when present);
# HYPOTHESIS_PROFILE picks the fuzz profile (default ci).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${POOLX_SANITIZE_DIR:-$(mktemp -d -t poolx-sanitize.XXXXXX)}"
mkdir -p "$work"
[ -n "${POOLX_SANITIZE_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
reports="$work/reports"
rm -rf "$reports" && mkdir -p "$reports"

# The tree as git sees it (tracked and untracked, not ignored), without build outputs.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$repo" && xargs -0 cp --parents -t "$work")

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
echo "sanitize: building in $work${POOLX_CUDA_EMULATION:+ (the CUDA kernels, emulated)}"
(cd "$work" && POOLX_CPU_ONLY=1 MAX_JOBS="${MAX_JOBS:-2}" CFLAGS="$flags" CXXFLAGS="$flags" \
  LDFLAGS="-fsanitize=address,undefined" python3 setup.py build_ext --inplace >"$work/build.log" 2>&1) ||
  { tail -30 "$work/build.log"; exit 1; }
symbols="$(nm -D "$work"/poolx/_C*.so)"
grep -q __asan_init <<<"$symbols" && grep -q __ubsan_handle <<<"$symbols" ||
  { echo "sanitize: the build lacks ASan or UBSan"; exit 1; }

# Python and libtorch are not instrumented: preload the runtimes, ignore leaks
# (the interpreter's are noise) and halt on the first report.
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
export PYTHONPATH="$work" HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

# RSS checks mean nothing here: ASan's quarantine holds freed memory on purpose;
# nvcc (the CUDA compile checks run no poolx code) crashes under the preload.
[ "$#" -gt 0 ] || set -- tests -m "not slow" --ignore=tests/test_leaks.py \
  --ignore=tests/test_cuda_compile.py
status=0
(cd "$work" && python3 -m pytest -q -p no:cacheprovider "$@") || status=$?
if compgen -G "$reports/*" >/dev/null; then
  echo "sanitize: sanitizer reports:"
  cat "$reports"/*
  exit 1
fi
[ "$status" -eq 0 ] || { echo "sanitize: tests failed (exit $status)"; exit "$status"; }
echo "sanitize: no ASan/UBSan reports"
