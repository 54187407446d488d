// The element types each backend's kernels are dispatched over, in one place
// for both: pooled tensors (forward, unpool) in every floating and integer
// type torch's max pooling takes; gradients in the floating types; argmax in
// uint8 (windows of up to 256 taps) or int32.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>

#define POOLX_DISPATCH_POOLED_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)
#define POOLX_DISPATCH_GRAD_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)

namespace poolx {

// Calls f with a null pointer of the argmax element type of `dtype`.
template <typename F>
void dispatch_argmax_type(at::ScalarType dtype, F&& f) {
  if (dtype == at::kByte) {
    f(static_cast<uint8_t*>(nullptr));
  } else {
    TORCH_INTERNAL_ASSERT(dtype == at::kInt);
    f(static_cast<int32_t*>(nullptr));
  }
}

}  // namespace poolx
