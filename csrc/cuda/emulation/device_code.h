// Included ahead of each csrc/cuda/*.cu in the emulation build (setup.py
// compiles a one-line wrapper per source): c10's headers first, as the host
// sees them, then device compilation as nvcc's device pass sees it, so the
// kernels take their __CUDA_ARCH__ branches.
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "launch_model.h"

#undef CUDA_KERNEL_ASSERT
#define CUDA_KERNEL_ASSERT(cond) \
  ((cond) ? void(0) : ::poolx::cuda_emulation::device_assert_failed(#cond, __FILE__, __LINE__))

#define __CUDA_ARCH__ 800
