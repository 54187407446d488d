// Unpool by int64 flat indices on the CPU (Pool2dKernels::max_unpool2d_indices):
// values placed at their indices in each (N, C) plane, the last in input order
// winning, zeros elsewhere; an index outside the plane raises torch's error.
#pragma once

#include <ATen/core/Tensor.h>

namespace poolx {

void max_unpool2d_indices_cpu(const at::Tensor& values, const at::Tensor& indices,
                              const at::Tensor& out);

}  // namespace poolx
