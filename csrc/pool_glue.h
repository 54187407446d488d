// The backend-independent glue shared by the windowed ops (ops.cpp) and the
// adaptive ones (adaptive_ops.cpp), once their arguments became a geometry:
// batching, allocation in the input's layout, the kernel call, and the error
// for an argmax a kernel rejects.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

#include "argmax_problem.h"
#include "op_common.h"
#include "pool_args.h"

namespace poolx {
namespace op_common {

// The op names of each dimensionality.
template <int Dims>
struct Names;
template <>
struct Names<2> {
  static constexpr const char* pool = "max_pool2d";
  static constexpr const char* backward = "max_pool2d_backward";
  static constexpr const char* unpool_argmax = "max_unpool2d_argmax";
  static constexpr const char* gather = "gather_by_argmax";
  static constexpr const char* indices = "argmax_to_indices";
  static constexpr const char* mask = "argmax_to_mask";
  static constexpr const char* adaptive_pool = "adaptive_max_pool2d";
  static constexpr const char* adaptive_backward = "adaptive_max_pool2d_backward";
  static constexpr const char* adaptive_gather = "adaptive_gather_by_argmax";
};
template <>
struct Names<3> {
  static constexpr const char* pool = "max_pool3d";
  static constexpr const char* backward = "max_pool3d_backward";
  static constexpr const char* unpool_argmax = "max_unpool3d_argmax";
  static constexpr const char* gather = "gather_by_argmax3d";
  static constexpr const char* indices = "argmax_to_indices3d";
  static constexpr const char* mask = "argmax_to_mask3d";
  static constexpr const char* adaptive_pool = "adaptive_max_pool3d";
  static constexpr const char* adaptive_backward = "adaptive_max_pool3d_backward";
  static constexpr const char* adaptive_gather = "adaptive_gather_by_argmax3d";
};

// What a forward writes beside the values.
enum class Pooled { kValues, kArgmax, kArgmaxAndIndices };

// The forward of a checked geometry g: (values, argmax, indices), the last
// two undefined where not asked for.
template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor, Tensor> pool_forward(const Tensor& input, const Pool2dGeometry& g,
                                                const char* op, Pooled what) {
  check_pool_dtype(input, "input", op, /*allow_integral=*/true);
  const at::MemoryFormat format = pool_memory_format(input, Dims, g.adaptive());
  const Tensor in = as_batched(input, format, Dims);
  const at::TensorOptions opts = layout_of(in, format);
  const Tensor values = empty_pooled(in, g, opts, Dims);
  Tensor argmax, indices;
  if (what != Pooled::kValues) argmax = empty_pooled(in, g, opts.dtype(argmax_dtype(g)), Dims);
  if (what == Pooled::kArgmaxAndIndices) {
    indices = empty_pooled(in, g, opts.dtype(at::kLong), Dims);
  }
  if (values.numel() > 0) {
    // Indices number the volume's elements, which a slice pooled as a plane
    // does not know: with indices the volume pools as one, in one pass.
    const KernelView view =
        indices.defined() ? KernelView{g, format, false} : kernel_view(g, format);
    K().forward(view(in), view(values), view(argmax), view(indices), view.g);
  }
  return {unbatch_like(values, input, Dims), unbatch_like(argmax, input, Dims),
          unbatch_like(indices, input, Dims)};
}

// A kernel that places pooled-shape values at the argmax's taps of an input:
// the backward and unpool by argmax.
using PlaceKernel = bool (*)(const Tensor&, const Tensor&, const Tensor&, const Pool2dGeometry&);

template <KernelsFn K, int Dims>
Tensor place_at_argmax(PlaceKernel kernel, const Tensor& pooled, const Tensor& argmax,
                       const ArgmaxProblem& p, const char* op) {
  const Tensor out = empty_unpooled(p.companion, p.g, layout_of(p.companion, p.format), Dims);
  // no window or no output element: nothing to place (the kernels need both)
  if (p.argmax.numel() == 0 || out.numel() == 0) {
    return unbatch_like(out.zero_(), pooled, Dims);
  }
  const KernelView view = kernel_view(p.g, p.format);
  if (!kernel(view(p.companion), view(p.argmax), view(out), view.g)) {
    invalid_argmax<K>(argmax, p, op);
  }
  return unbatch_like(out, pooled, Dims);
}

// Checks that src, an input-shaped tensor, goes with argmax; the spatial
// sizes of src, for the geometry.
template <int Dims>
at::IntArrayRef gather_source_size(const Tensor& src, const Tensor& argmax, const char* op) {
  TORCH_CHECK(src.dim() == argmax.dim(), op, ": src must have argmax's number of dims (",
              argmax.dim(), "), but got src.shape=", src.sizes());
  TORCH_CHECK(src.dim() >= Dims, op, ": src must have at least ", Dims, " dims, but got ",
              "src.shape=", src.sizes());
  return src.sizes().slice(src.dim() - Dims);
}

// Each window's selected element of src, for the argmax problem p.
template <KernelsFn K, int Dims>
Tensor gather_at_argmax(const Tensor& src, const Tensor& argmax, const ArgmaxProblem& p,
                        const char* op) {
  TORCH_CHECK(src.sizes().slice(0, src.dim() - Dims) ==
                      argmax.sizes().slice(0, argmax.dim() - Dims) &&
                  src.device() == argmax.device(),
              op, ": src and argmax must share batch, channels and device, but got src.shape=",
              src.sizes(), " on ", src.device(), " and argmax.shape=", argmax.sizes(), " on ",
              argmax.device());
  const Tensor src_b = as_batched(src, p.format, Dims);
  const Tensor out = empty_pooled(src_b, p.g, layout_of(src_b, p.format), Dims);
  const KernelView view = kernel_view(p.g, p.format);
  if (out.numel() > 0 && !K().gather_by_argmax(view(src_b), view(p.argmax), view(out), view.g)) {
    invalid_argmax<K>(argmax, p, op);
  }
  return unbatch_like(out, argmax, Dims);
}

}  // namespace op_common
}  // namespace poolx
