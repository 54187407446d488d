// The poolx operators: schemas (the one place they are declared) and the
// backend-independent glue that validates, allocates and calls a backend's
// kernels. TORCH_LIBRARY_IMPL blocks bind the glue to CPU and CUDA kernels.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "cpu/fast_paths.h"
#include "kernels.h"
#include "pool_args.h"
#include "pool_glue.h"
#include "unpool_op.h"

namespace poolx {
namespace {

using at::IntArrayRef;
using at::Tensor;
using namespace op_common;

// The forward after torch's checks of the windowed pooling's arguments.
template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor, Tensor> pool_forward(const Tensor& input, const PoolParams& params,
                                                Pooled what) {
  const char* op = Names<Dims>::pool;
  return op_common::pool_forward<K, Dims>(input, forward_geometry(input, params, op, Dims), op,
                                          what);
}

template <KernelsFn K, int Dims>
Tensor place_at_argmax(PlaceKernel kernel, const Tensor& pooled, const Tensor& argmax,
                       IntArrayRef input_size, const PoolParams& params, const char* op) {
  return op_common::place_at_argmax<K, Dims>(
      kernel, pooled, argmax, argmax_problem(argmax, pooled, input_size, params, op, Dims), op);
}

template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor> pool_argmax(const Tensor& input, IntArrayRef kernel_size,
                                       IntArrayRef stride, IntArrayRef padding,
                                       IntArrayRef dilation, bool ceil_mode) {
  const auto out = pool_forward<K, Dims>(
      input, {kernel_size, stride, padding, dilation, ceil_mode}, Pooled::kArgmax);
  return {std::get<0>(out), std::get<1>(out)};
}

template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor, Tensor> pool_indices(const Tensor& input, IntArrayRef kernel_size,
                                                IntArrayRef stride, IntArrayRef padding,
                                                IntArrayRef dilation, bool ceil_mode) {
  return pool_forward<K, Dims>(input, {kernel_size, stride, padding, dilation, ceil_mode},
                               Pooled::kArgmaxAndIndices);
}

template <KernelsFn K, int Dims>
Tensor pool_values(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(pool_forward<K, Dims>(
      input, {kernel_size, stride, padding, dilation, ceil_mode}, Pooled::kValues));
}

template <KernelsFn K, int Dims>
Tensor pool_backward(const Tensor& grad_output, const Tensor& argmax, IntArrayRef input_size,
                     IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode) {
  check_pool_dtype(grad_output, "grad_output", Names<Dims>::backward, /*allow_integral=*/false);
  return place_at_argmax<K, Dims>(K().backward, grad_output, argmax, input_size,
                                  {kernel_size, stride, padding, dilation, ceil_mode},
                                  Names<Dims>::backward);
}

template <KernelsFn K, int Dims>
Tensor unpool_argmax(const Tensor& values, const Tensor& argmax, IntArrayRef input_size,
                     IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, bool ceil_mode) {
  check_pool_dtype(values, "input", Names<Dims>::unpool_argmax, /*allow_integral=*/true);
  return place_at_argmax<K, Dims>(K().max_unpool2d_argmax, values, argmax, input_size,
                                  {kernel_size, stride, padding, dilation, ceil_mode},
                                  Names<Dims>::unpool_argmax);
}

template <KernelsFn K, int Dims>
Tensor gather_by_argmax(const Tensor& src, const Tensor& argmax, IntArrayRef kernel_size,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                        bool ceil_mode) {
  const char* op = Names<Dims>::gather;
  const ArgmaxProblem p =
      argmax_problem(argmax, Tensor(), gather_source_size<Dims>(src, argmax, op),
                     {kernel_size, stride, padding, dilation, ceil_mode}, op, Dims);
  return gather_at_argmax<K, Dims>(src, argmax, p, op);
}

template <KernelsFn K, int Dims>
Tensor argmax_to_indices(const Tensor& argmax, IntArrayRef input_size, IntArrayRef kernel_size,
                         IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         bool ceil_mode) {
  const char* op = Names<Dims>::indices;
  const ArgmaxProblem p = argmax_problem(
      argmax, Tensor(), input_size, {kernel_size, stride, padding, dilation, ceil_mode}, op, Dims);
  const Tensor indices =
      at::empty(p.argmax.sizes(), layout_of(p.argmax, p.format).dtype(at::kLong));
  if (indices.numel() > 0 &&
      !K().argmax_to_indices(folded(p.argmax), folded(indices), p.g, true)) {
    invalid_argmax<K>(argmax, p, op);
  }
  return unbatch_like(indices, argmax, Dims);
}

template <KernelsFn K, int Dims>
Tensor argmax_to_mask(const Tensor& argmax, IntArrayRef input_size, IntArrayRef kernel_size,
                      IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                      bool ceil_mode) {
  const char* op = Names<Dims>::mask;
  const ArgmaxProblem p = argmax_problem(
      argmax, Tensor(), input_size, {kernel_size, stride, padding, dilation, ceil_mode}, op, Dims);
  const Tensor mask =
      empty_unpooled(p.argmax, p.g, layout_of(p.argmax, p.format).dtype(at::kBool), Dims);
  // no window or no input element: nothing to mark (the kernels need both)
  if (p.argmax.numel() == 0 || mask.numel() == 0) {
    return unbatch_like(mask.zero_(), argmax, Dims);
  }
  const KernelView view = kernel_view(p.g, p.format);
  if (!K().argmax_to_mask(view(p.argmax), view(mask), view.g)) {
    invalid_argmax<K>(argmax, p, op);
  }
  return unbatch_like(mask, argmax, Dims);
}

template <KernelsFn K, int Dims>
void register_pooling(torch::Library& m) {
  const std::string pool = Names<Dims>::pool;
  m.impl((pool + "_argmax").c_str(), &pool_argmax<K, Dims>);
  m.impl((pool + "_indices").c_str(), &pool_indices<K, Dims>);
  m.impl((pool + "_values").c_str(), &pool_values<K, Dims>);
  m.impl(Names<Dims>::backward, &pool_backward<K, Dims>);
  m.impl(Names<Dims>::gather, &gather_by_argmax<K, Dims>);
  m.impl(Names<Dims>::indices, &argmax_to_indices<K, Dims>);
  m.impl(Names<Dims>::mask, &argmax_to_mask<K, Dims>);
  m.impl(Names<Dims>::unpool_argmax, &unpool_argmax<K, Dims>);
}

template <KernelsFn K>
void register_backend(torch::Library& m) {
  register_pooling<K, 2>(m);
  register_pooling<K, 3>(m);
  m.impl("max_unpool2d", &max_unpool2d<K>);
}

}  // namespace
}  // namespace poolx

#define POOL_ARGS "int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode"
#define POOL3D_ARGS \
  "int[3] kernel_size, int[3] stride, int[3] padding, int[3] dilation, bool ceil_mode"

TORCH_LIBRARY(poolx, m) {
  m.def("max_pool2d_argmax(Tensor input, " POOL_ARGS ") -> (Tensor values, Tensor argmax)");
  // return_indices: the argmax (which backward saves) and torch's int64 indices, in one pass
  m.def("max_pool2d_indices(Tensor input, " POOL_ARGS
        ") -> (Tensor values, Tensor argmax, Tensor indices)");
  m.def("max_pool2d_values(Tensor input, " POOL_ARGS ") -> Tensor");
  m.def("max_pool2d_backward(Tensor grad_output, Tensor argmax, SymInt[2] input_size, " POOL_ARGS
        ") -> Tensor");
  m.def("gather_by_argmax(Tensor src, Tensor argmax, " POOL_ARGS ") -> Tensor");
  m.def("argmax_to_indices(Tensor argmax, SymInt[2] input_size, " POOL_ARGS ") -> Tensor");
  m.def("argmax_to_mask(Tensor argmax, SymInt[2] input_size, " POOL_ARGS ") -> Tensor");
  m.def("max_unpool2d_argmax(Tensor values, Tensor argmax, SymInt[2] input_size, " POOL_ARGS
        ") -> Tensor");
  // The same over volumes (N, C, D, H, W).
  m.def("max_pool3d_argmax(Tensor input, " POOL3D_ARGS ") -> (Tensor values, Tensor argmax)");
  m.def("max_pool3d_indices(Tensor input, " POOL3D_ARGS
        ") -> (Tensor values, Tensor argmax, Tensor indices)");
  m.def("max_pool3d_values(Tensor input, " POOL3D_ARGS ") -> Tensor");
  m.def("max_pool3d_backward(Tensor grad_output, Tensor argmax, SymInt[3] input_size, "
        POOL3D_ARGS ") -> Tensor");
  m.def("gather_by_argmax3d(Tensor src, Tensor argmax, " POOL3D_ARGS ") -> Tensor");
  m.def("argmax_to_indices3d(Tensor argmax, SymInt[3] input_size, " POOL3D_ARGS ") -> Tensor");
  m.def("argmax_to_mask3d(Tensor argmax, SymInt[3] input_size, " POOL3D_ARGS ") -> Tensor");
  m.def("max_unpool3d_argmax(Tensor values, Tensor argmax, SymInt[3] input_size, " POOL3D_ARGS
        ") -> Tensor");
  m.def("max_unpool2d(Tensor input, Tensor indices, SymInt[2] output_size) -> Tensor");
  m.def("max_unpool2d_backward(Tensor grad_output, Tensor indices) -> Tensor");
  // Streaming stores from this many bytes moved (csrc/cpu/fast_paths.h); for tests.
  m.def("set_cpu_stream_min_bytes(int bytes) -> int", &poolx::set_stream_min_bytes);
  // The CPU fast paths on or off, returning the previous state; for the benchmark.
  m.def("set_cpu_fast_paths(bool enabled) -> bool", &poolx::set_fast_paths_enabled);
  // The instruction set of the CPU fast paths in use; for show_config().
  m.def("cpu_isa() -> str", []() -> std::string { return poolx::cpu_fast_paths().isa; });
}

#ifdef POOLX_CUDA_EMULATION
// The emulation build runs the CUDA kernels on CPU tensors (csrc/cuda/emulation).
TORCH_LIBRARY_IMPL(poolx, CPU, m) { poolx::register_backend<poolx::cuda_kernels>(m); }
#else
TORCH_LIBRARY_IMPL(poolx, CPU, m) { poolx::register_backend<poolx::cpu_kernels>(m); }
TORCH_LIBRARY_IMPL(poolx, CUDA, m) { poolx::register_backend<poolx::cuda_kernels>(m); }
#endif
