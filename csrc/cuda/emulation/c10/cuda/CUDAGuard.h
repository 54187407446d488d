// The parts of c10/cuda that csrc/cuda/kernels_cuda.cpp uses, for the
// emulation build: tensors live on the CPU, so there is no device to switch
// to and one stream; C10_CUDA_CHECK raises as torch's does.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "../../launch_model.h"

namespace c10 {
namespace cuda {

struct CUDAGuard {
  explicit CUDAGuard(Device) {}
};

struct CUDAStream {
  operator cudaStream_t() const { return nullptr; }
};

inline CUDAStream getCurrentCUDAStream(DeviceIndex = -1) { return {}; }

}  // namespace cuda
}  // namespace c10

#define C10_CUDA_CHECK(EXPR)                                                         \
  do {                                                                               \
    const cudaError_t poolx_emulated_err = (EXPR);                                   \
    TORCH_CHECK(poolx_emulated_err == cudaSuccess, cudaGetErrorString(poolx_emulated_err)); \
  } while (0)
