// The CUDA kernel table: for each entry, a device guard on the tensors'
// device, that device's current stream, dtype dispatch, and a checked call of
// the launcher (launchers.h). Built only where PyTorch has CUDA.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "../kernels.h"
#include "../dispatch.h"
#include "../tensor_layout.h"
#include "launchers.h"

namespace poolx {
namespace {

using at::Tensor;

// The launchers run on the current device; this makes it `t`'s device and
// names that device's current stream.
struct OnDeviceOf {
  explicit OnDeviceOf(const Tensor& t)
      : guard(t.device()), stream(c10::cuda::getCurrentCUDAStream(t.device().index())) {}
  c10::cuda::CUDAGuard guard;
  cudaStream_t stream;
};

void forward(const Tensor& input, const Tensor& values, const Tensor& argmax,
             const Tensor& indices, const Pool2dGeometry& g) {
  const OnDeviceOf on(input);
  const Layout4d in_l = layout_of(input), out_l = layout_of(values);
  const at::ScalarType am_type = argmax.defined() ? argmax.scalar_type() : at::kByte;
  POOLX_DISPATCH_POOLED_TYPES(input.scalar_type(), "poolx_max_pool2d_cuda", [&] {
    dispatch_argmax_type(am_type, [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      argmax_t* am = argmax.defined() ? argmax.mutable_data_ptr<argmax_t>() : nullptr;
      int64_t* idx = indices.defined() ? indices.mutable_data_ptr<int64_t>() : nullptr;
      C10_CUDA_CHECK(cuda_launch::max_pool2d_forward(input.const_data_ptr<scalar_t>(),
                                                     values.mutable_data_ptr<scalar_t>(), am,
                                                     idx, in_l, out_l, g, on.stream));
    });
  });
}

// Launches the device-side assert on bad argmax values ahead of a kernel
// that reads argmax.
void check_argmax(const Tensor& argmax, const Pool2dGeometry& g, cudaStream_t stream) {
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    C10_CUDA_CHECK(
        cuda_launch::check_argmax(argmax.const_data_ptr<argmax_t>(), layout_of(argmax), g, stream));
  });
}

bool backward(const Tensor& grad_output, const Tensor& argmax, const Tensor& grad_input,
              const Pool2dGeometry& g) {
  const OnDeviceOf on(grad_output);  // the launcher checks the argmax
  const Layout4d out_l = layout_of(grad_output), in_l = layout_of(grad_input);
  POOLX_DISPATCH_GRAD_TYPES(grad_output.scalar_type(), "poolx_max_pool2d_backward_cuda", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      C10_CUDA_CHECK(cuda_launch::max_pool2d_backward(
          grad_output.const_data_ptr<scalar_t>(), argmax.const_data_ptr<argmax_t>(),
          grad_input.mutable_data_ptr<scalar_t>(), out_l, in_l, g, on.stream));
    });
  });
  return true;
}

bool argmax_to_indices(const Tensor& argmax, const Tensor& indices, const Pool2dGeometry& g,
                       bool check) {
  const OnDeviceOf on(argmax);
  if (check) check_argmax(argmax, g, on.stream);
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    C10_CUDA_CHECK(cuda_launch::argmax_to_indices(argmax.const_data_ptr<argmax_t>(),
                                                  indices.mutable_data_ptr<int64_t>(),
                                                  layout_of(argmax), g, on.stream));
  });
  return true;
}

bool gather_by_argmax(const Tensor& src, const Tensor& argmax, const Tensor& out,
                      const Pool2dGeometry& g) {
  const OnDeviceOf on(src);
  check_argmax(argmax, g, on.stream);
  POOLX_DISPATCH_GRAD_TYPES(src.scalar_type(), "poolx_gather_by_argmax_cuda", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      C10_CUDA_CHECK(cuda_launch::gather_by_argmax(
          src.const_data_ptr<scalar_t>(), argmax.const_data_ptr<argmax_t>(),
          out.mutable_data_ptr<scalar_t>(), layout_of(src), layout_of(out), g, on.stream));
    });
  });
  return true;
}

bool argmax_to_mask(const Tensor& argmax, const Tensor& mask, const Pool2dGeometry& g) {
  const OnDeviceOf on(argmax);  // the launcher checks the argmax
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    C10_CUDA_CHECK(cuda_launch::argmax_to_mask(argmax.const_data_ptr<argmax_t>(),
                                               mask.mutable_data_ptr<bool>(), layout_of(argmax),
                                               layout_of(mask), g, on.stream));
  });
  return true;
}

bool max_unpool2d_argmax(const Tensor& values, const Tensor& argmax, const Tensor& out,
                         const Pool2dGeometry& g) {
  const OnDeviceOf on(values);  // the launcher checks the argmax
  POOLX_DISPATCH_POOLED_TYPES(values.scalar_type(), "poolx_max_unpool2d_argmax_cuda", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      C10_CUDA_CHECK(cuda_launch::max_unpool2d_argmax(
          values.const_data_ptr<scalar_t>(), argmax.const_data_ptr<argmax_t>(),
          out.mutable_data_ptr<scalar_t>(), layout_of(values), layout_of(out), g, on.stream));
    });
  });
  return true;
}

// Bad values assert on the device (see check_argmax), so none is left to find.
int64_t first_invalid_argmax(const Tensor&, const Pool2dGeometry&) { return -1; }

void max_unpool2d_indices(const Tensor& values, const Tensor& indices, const Tensor& out) {
  const OnDeviceOf on(values);
  // Per output element, the winning input, and a flag (see launchers.h);
  // freed by the caching allocator once the stream is done with it.
  const Tensor scratch = at::empty(
      {cuda_launch::max_unpool2d_indices_scratch_bytes(layout_of(values), layout_of(out))},
      out.options().dtype(at::kByte));
  POOLX_DISPATCH_POOLED_TYPES(values.scalar_type(), "poolx_max_unpool2d_cuda", [&] {
    C10_CUDA_CHECK(cuda_launch::max_unpool2d_indices(
        values.const_data_ptr<scalar_t>(), indices.const_data_ptr<int64_t>(),
        out.mutable_data_ptr<scalar_t>(), scratch.mutable_data_ptr(), layout_of(values),
        layout_of(out), on.stream));
  });
}

}  // namespace

const Pool2dKernels& cuda_kernels() {
  static const Pool2dKernels kernels{forward,          backward,       argmax_to_indices,
                                     gather_by_argmax, argmax_to_mask, max_unpool2d_argmax,
                                     max_unpool2d_indices, first_invalid_argmax};
  return kernels;
}

}  // namespace poolx
