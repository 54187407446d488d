#!/usr/bin/env bash
# Compiles every C++ source of the CPU build (all but the Python module,
# csrc/module.cpp, which needs Python's headers) for aarch64 with Debian's
# cross compiler (g++-aarch64-linux-gnu), against the
# installed torch's headers: the x86 fast paths must stay behind their guards
# and the portable code must build where at::vec means NEON. Objects only; no
# link (that would need an aarch64 libtorch).
#
#   tools/cross_compile_aarch64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX_AARCH64:-aarch64-linux-gnu-g++}
if ! command -v "$cxx" >/dev/null; then
  echo "cross_compile_aarch64: $cxx not found (Debian: apt-get install g++-aarch64-linux-gnu)" >&2
  exit 1
fi
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
out="$(mktemp -d -t poolx-aarch64.XXXXXX)"
trap 'rm -rf "$out"' EXIT
sources=()
for src in csrc/*.cpp; do [ "$src" = csrc/module.cpp ] || sources+=("$src"); done
sources+=(csrc/cuda/no_cuda.cpp csrc/cpu/*.cpp csrc/cpu/isa/fast_paths_default.cpp)
pids=()
for src in "${sources[@]}"; do
  "$cxx" -std=c++20 -O2 -fopenmp -Wall -Wno-psabi -Wno-unknown-pragmas -Werror=return-type -Icsrc/include \
    -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
    -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C \
    -c "$src" -o "$out/$(echo "$src" | tr / _).o" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
if (( failed )); then
  echo "cross_compile_aarch64: a source failed to compile (above)" >&2
  exit 1
fi
echo "cross_compile_aarch64: ${#sources[@]} sources compiled for aarch64 ($cxx)"
