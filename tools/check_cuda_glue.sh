#!/usr/bin/env bash
# Compiles the CUDA host glue (csrc/cuda/*_cuda.cpp), which includes c10/cuda
# and ATen/cuda headers, against the headers of a CUDA build of PyTorch, e.g.
# unpacked from its wheel without installing it:
#
#   pip --isolated download --no-deps --only-binary=:all: -d /tmp/w torch==2.13.0
#   unzip -q /tmp/w/torch-*.whl 'torch/include/*' -d /tmp/w
#   tools/check_cuda_glue.sh /tmp/w/torch/include
#
# The kernels themselves (*.cu) need no such build: tests/test_cuda_compile.py
# compiles them against whatever PyTorch is installed.
set -euo pipefail
inc=${1:?usage: tools/check_cuda_glue.sh TORCH_CUDA_INCLUDE_DIR}
[ -f "$inc/c10/cuda/CUDAGuard.h" ] || { echo "$inc has no c10/cuda headers (not a CUDA build)"; exit 2; }
cd "$(dirname "$0")/.."
cuda_home=${CUDA_HOME:-/usr/local/cuda}
py_inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
for src in csrc/cuda/*_cuda.cpp; do
  g++ -std=c++20 -fsyntax-only -Wall -Werror=return-type -DTORCH_API_INCLUDE_EXTENSION_H \
    -DTORCH_EXTENSION_NAME=_C -I csrc/include -I "$inc" -I "$inc/torch/csrc/api/include" \
    -I "$cuda_home/include" -I "$py_inc" "$src"
  echo "ok: $src"
done
