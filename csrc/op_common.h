// Helpers of the ops' backend-independent glue (ops.cpp, unpool_op.h):
// batching, allocation in the inputs' layout, dtype checks.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/SmallVector.h>

#include "pool_args.h"
#include "poolx/geometry.h"

namespace poolx {
namespace op_common {

using at::Tensor;

// Without the batch dimension again where `like` came without one.
inline Tensor unbatch_like(const Tensor& t, const Tensor& like, int dims) {
  return like.dim() == dims + 1 && t.defined() ? t.squeeze(0) : t;
}

inline at::TensorOptions layout_of(const Tensor& like, at::MemoryFormat format) {
  return like.options().memory_format(format);
}

// (N, C) of a batched tensor followed by spatial sizes.
inline c10::SmallVector<int64_t, 5> sizes_with(const Tensor& batched, int64_t d, int64_t h, int64_t w,
                                        int dims) {
  c10::SmallVector<int64_t, 5> sizes{batched.size(0), batched.size(1)};
  const auto spatial = per_axis(d, h, w, dims);
  sizes.append(spatial.begin(), spatial.end());
  return sizes;
}

inline Tensor empty_pooled(const Tensor& batched, const Pool2dGeometry& g, at::TensorOptions opts,
                    int dims) {
  return at::empty(sizes_with(batched, g.out_d, g.out_h, g.out_w, dims), opts);
}

inline Tensor empty_unpooled(const Tensor& batched, const Pool2dGeometry& g, at::TensorOptions opts,
                      int dims) {
  return at::empty(sizes_with(batched, g.in_d, g.in_h, g.in_w, dims), opts);
}

inline void check_pool_dtype(const Tensor& t, const char* name, const char* op, bool allow_integral) {
  const bool ok = at::isFloatingType(t.scalar_type()) ||
                  (allow_integral && at::isIntegralType(t.scalar_type(), /*includeBool=*/false));
  // NotImplementedError and the words of torch's dtype dispatch, then ours.
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", op, "\" not implemented for '", t.scalar_type(),
                              "': ", name, " must be a floating point",
                              allow_integral ? " or integer" : "", " tensor, but got ", name,
                              ".dtype=", t.scalar_type());
}

}  // namespace op_common
}  // namespace poolx
