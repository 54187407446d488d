// The argmax arguments of the ops that take one: checked against the pooling
// they claim to come from, and the error that locates a value naming no tap
// of its window (a user's argmax may hold anything).
#pragma once

#include <ATen/core/Tensor.h>

#include <sstream>

#include "kernels.h"
#include "pool_args.h"
#include "tensor_layout.h"

namespace poolx {

using KernelsFn = const Pool2dKernels& (*)();

// Validated geometry plus 4-D argmax and companion tensor in argmax's layout.
struct ArgmaxProblem {
  Pool2dGeometry g;
  at::MemoryFormat format;
  at::Tensor argmax;     // 4-D
  at::Tensor companion;  // 4-D, pooled shape (grad_output, values) or undefined
};

// Where a kernel found an argmax value that names no tap of its window inside
// the input (a user's argmax may hold anything): the error, naming the op,
// the position and the value.
template <KernelsFn K>
[[noreturn]] C10_NOINLINE void invalid_argmax(const at::Tensor& user_argmax,
                                              const at::Tensor& argmax4, const Pool2dGeometry& g,
                                              const char* op) {
  const int64_t bad = K().first_invalid_argmax(argmax4, g);
  TORCH_INTERNAL_ASSERT(bad >= 0, op, ": a kernel rejected an argmax that holds no invalid value");
  const Layout4d::Coord at = poolx::layout_of(argmax4).coord(bad);
  std::ostringstream where;
  where << "argmax[" << (user_argmax.dim() == 4 ? std::to_string(at.n) + ", " : "") << at.c
        << ", " << at.h << ", " << at.w << "] = " << argmax4[at.n][at.c][at.h][at.w].item<int64_t>();
  TORCH_CHECK_INDEX(false, op, ": ", where.str(), " names no tap of its ", g.kernel_h, "x",
                    g.kernel_w, " window inside the ", g.in_h, "x", g.in_w, " input (stride ",
                    g.stride_h, "x", g.stride_w, ", padding ", g.pad_h, "x", g.pad_w,
                    ", dilation ", g.dilation_h, "x", g.dilation_w,
                    "); an argmax must come from max_pool2d_with_argmax with the same arguments");
}

inline ArgmaxProblem argmax_problem(const at::Tensor& argmax, const at::Tensor& companion,
                                    at::IntArrayRef input_hw, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding,
                                    at::IntArrayRef dilation, bool ceil_mode, const char* op) {
  const at::Tensor& shaped = companion.defined() ? companion : argmax;
  const Pool2dGeometry g = output_geometry(
      shaped, input_hw, {kernel_size, stride, padding, dilation, ceil_mode}, op);
  check_argmax(argmax, shaped, g, op);
  const at::MemoryFormat format = pool_memory_format(argmax);
  return {g, format, as_batched(argmax, format),
          companion.defined() ? as_batched(companion, format) : at::Tensor()};
}

}  // namespace poolx
