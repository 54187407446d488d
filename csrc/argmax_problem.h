// The argmax arguments of the ops that take one: checked against the pooling
// they claim to come from, and the error that locates a value naming no tap
// of its window (a user's argmax may hold anything).
#pragma once

#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>

#include "kernels.h"
#include "pool_args.h"
#include "tensor_layout.h"

namespace poolx {

using KernelsFn = const Pool2dKernels& (*)();

// Validated geometry plus batched argmax and companion tensor in argmax's
// layout, and the dims of the pooling.
struct ArgmaxProblem {
  Pool2dGeometry g;
  at::MemoryFormat format;
  at::Tensor argmax;     // batched
  at::Tensor companion;  // batched, pooled shape (grad_output, values) or undefined
  int dims;
};

// Where a kernel found an argmax value that names no tap of its window inside
// the input (a user's argmax may hold anything): the error, naming the op,
// the position and the value.
template <KernelsFn K>
[[noreturn]] C10_NOINLINE void invalid_argmax(const at::Tensor& user_argmax,
                                              const ArgmaxProblem& p, const char* op) {
  const Pool2dGeometry& g = p.g;
  const at::Tensor argmax4 = folded(p.argmax);
  const int64_t bad = K().first_invalid_argmax(argmax4, g);
  TORCH_INTERNAL_ASSERT(bad >= 0, op, ": a kernel rejected an argmax that holds no invalid value");
  const Layout4d::Coord at = poolx::layout_of(argmax4).coord(bad);
  std::ostringstream where;
  where << "argmax[";
  if (user_argmax.dim() == p.dims + 2) where << at.n << ", ";
  where << at.c << ", ";
  if (p.dims == 3) where << at.h / g.out_h << ", " << at.h % g.out_h << ", ";
  else where << at.h << ", ";
  where << at.w << "] = " << argmax4[at.n][at.c][at.h][at.w].item<int64_t>();
  const auto axes = [&](int64_t d, int64_t h, int64_t w) {
    return joined(per_axis(d, h, w, p.dims));
  };
  if (std::string(op).rfind("adaptive", 0) == 0) {
    TORCH_CHECK_INDEX(false, op, ": ", where.str(), " names no tap of its window when the ",
                      axes(g.in_d, g.in_h, g.in_w), " input is pooled to ",
                      axes(g.out_d, g.out_h, g.out_w), "; an argmax must come from "
                      "adaptive_max_pool", p.dims, "d of the same sizes");
  }
  TORCH_CHECK_INDEX(false, op, ": ", where.str(), " names no tap of its ", window_name(g),
                    " window inside the ", axes(g.in_d, g.in_h, g.in_w), " input (stride ",
                    axes(g.stride_d, g.stride_h, g.stride_w), ", padding ",
                    axes(g.pad_d, g.pad_h, g.pad_w), ", dilation ",
                    axes(g.dilation_d, g.dilation_h, g.dilation_w),
                    "); an argmax must come from max_pool", p.dims,
                    "d_with_argmax with the same arguments");
}

// The problem of an argmax for geometry g (which `companion`, else the argmax,
// was checked to have the pooled size of).
inline ArgmaxProblem argmax_problem(const at::Tensor& argmax, const at::Tensor& companion,
                                    const Pool2dGeometry& g, const char* op, int dims) {
  check_argmax(argmax, companion.defined() ? companion : argmax, g, op);
  const at::MemoryFormat format = pool_memory_format(argmax, dims, g.adaptive());
  return {g, format, as_batched(argmax, format, dims),
          companion.defined() ? as_batched(companion, format, dims) : at::Tensor(), dims};
}

inline ArgmaxProblem argmax_problem(const at::Tensor& argmax, const at::Tensor& companion,
                                    at::IntArrayRef input_size, const PoolParams& params,
                                    const char* op, int dims) {
  const at::Tensor& shaped = companion.defined() ? companion : argmax;
  return argmax_problem(argmax, companion,
                        output_geometry(shaped, input_size, params, op, dims), op, dims);
}

}  // namespace poolx
