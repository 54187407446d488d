// The poolx operators: schemas (the one place they are declared) and the
// backend-independent glue that validates, allocates and calls a backend's
// kernels. TORCH_LIBRARY_IMPL blocks bind the glue to CPU and CUDA kernels.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "argmax_problem.h"
#include "cpu/fast_paths.h"
#include "kernels.h"
#include "pool_args.h"
#include "tensor_layout.h"

namespace poolx {
namespace {

using at::IntArrayRef;
using at::Tensor;

Tensor unbatch_like(const Tensor& t, const Tensor& like) {
  return like.dim() == 3 && t.defined() ? t.squeeze(0) : t;
}

at::TensorOptions layout_of(const Tensor& like, at::MemoryFormat format) {
  return like.options().memory_format(format);
}

Tensor empty_pooled(const Tensor& batched, const Pool2dGeometry& g, at::TensorOptions opts) {
  return at::empty({batched.size(0), batched.size(1), g.out_h, g.out_w}, opts);
}

Tensor empty_unpooled(const Tensor& batched, const Pool2dGeometry& g, at::TensorOptions opts) {
  return at::empty({batched.size(0), batched.size(1), g.in_h, g.in_w}, opts);
}

void check_pool_dtype(const Tensor& t, const char* name, const char* op, bool allow_integral) {
  const bool ok = at::isFloatingType(t.scalar_type()) ||
                  (allow_integral && at::isIntegralType(t.scalar_type(), /*includeBool=*/false));
  // NotImplementedError and the words of torch's dtype dispatch, then ours.
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", op, "\" not implemented for '", t.scalar_type(),
                              "': ", name, " must be a floating point",
                              allow_integral ? " or integer" : "", " tensor, but got ", name,
                              ".dtype=", t.scalar_type());
}

// What a forward writes beside the values.
enum class Pooled { kValues, kArgmax, kArgmaxAndIndices };

template <KernelsFn K>
std::tuple<Tensor, Tensor, Tensor> pool_forward(const Tensor& input, IntArrayRef kernel_size,
                                                IntArrayRef stride, IntArrayRef padding,
                                                IntArrayRef dilation, bool ceil_mode,
                                                Pooled what) {
  const char* op = "max_pool2d";
  const Pool2dGeometry g =
      forward_geometry(input, {kernel_size, stride, padding, dilation, ceil_mode}, op);
  check_pool_dtype(input, "input", op, /*allow_integral=*/true);
  const at::MemoryFormat format = pool_memory_format(input);
  const Tensor in4 = as_batched(input, format);
  const at::TensorOptions opts = layout_of(in4, format);
  const Tensor values = empty_pooled(in4, g, opts);
  Tensor argmax, indices;
  if (what != Pooled::kValues) argmax = empty_pooled(in4, g, opts.dtype(argmax_dtype(g)));
  if (what == Pooled::kArgmaxAndIndices) indices = empty_pooled(in4, g, opts.dtype(at::kLong));
  if (values.numel() > 0) K().forward(in4, values, argmax, indices, g);
  return {unbatch_like(values, input), unbatch_like(argmax, input), unbatch_like(indices, input)};
}

template <KernelsFn K>
std::tuple<Tensor, Tensor> max_pool2d_argmax(const Tensor& input, IntArrayRef kernel_size,
                                             IntArrayRef stride, IntArrayRef padding,
                                             IntArrayRef dilation, bool ceil_mode) {
  const auto out = pool_forward<K>(input, kernel_size, stride, padding, dilation, ceil_mode,
                                   Pooled::kArgmax);
  return {std::get<0>(out), std::get<1>(out)};
}

template <KernelsFn K>
std::tuple<Tensor, Tensor, Tensor> max_pool2d_indices(const Tensor& input,
                                                      IntArrayRef kernel_size, IntArrayRef stride,
                                                      IntArrayRef padding, IntArrayRef dilation,
                                                      bool ceil_mode) {
  return pool_forward<K>(input, kernel_size, stride, padding, dilation, ceil_mode,
                         Pooled::kArgmaxAndIndices);
}

template <KernelsFn K>
Tensor max_pool2d_values(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(pool_forward<K>(input, kernel_size, stride, padding, dilation, ceil_mode,
                                     Pooled::kValues));
}


template <KernelsFn K>
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& argmax, IntArrayRef input_hw,
                           IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                           IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_pool2d_backward";
  check_pool_dtype(grad_output, "grad_output", op, /*allow_integral=*/false);
  const ArgmaxProblem p = argmax_problem(argmax, grad_output, input_hw, kernel_size, stride,
                                         padding, dilation, ceil_mode, op);
  const Tensor grad_input = empty_unpooled(p.companion, p.g, layout_of(p.companion, p.format));
  if (grad_input.numel() > 0 && !K().backward(p.companion, p.argmax, grad_input, p.g)) {
    invalid_argmax<K>(argmax, p.argmax, p.g, op);
  }
  return unbatch_like(grad_input, grad_output);
}

template <KernelsFn K>
Tensor max_unpool2d_argmax(const Tensor& values, const Tensor& argmax, IntArrayRef input_hw,
                           IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                           IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_unpool2d_argmax";
  check_pool_dtype(values, "input", op, /*allow_integral=*/true);
  const ArgmaxProblem p = argmax_problem(argmax, values, input_hw, kernel_size, stride, padding,
                                         dilation, ceil_mode, op);
  const Tensor out = empty_unpooled(p.companion, p.g, layout_of(p.companion, p.format));
  if (out.numel() > 0 && !K().max_unpool2d_argmax(p.companion, p.argmax, out, p.g)) {
    invalid_argmax<K>(argmax, p.argmax, p.g, op);
  }
  return unbatch_like(out, values);
}

template <KernelsFn K>
Tensor gather_by_argmax(const Tensor& src, const Tensor& argmax, IntArrayRef kernel_size,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                        bool ceil_mode) {
  const char* op = "gather_by_argmax";
  TORCH_CHECK(src.dim() == argmax.dim(), op, ": src must have argmax's number of dims (",
              argmax.dim(), "), but got src.shape=", src.sizes());
  const ArgmaxProblem p = argmax_problem(argmax, Tensor(), {src.size(-2), src.size(-1)},
                                         kernel_size, stride, padding, dilation, ceil_mode, op);
  TORCH_CHECK(src.sizes().slice(0, src.dim() - 2) == argmax.sizes().slice(0, argmax.dim() - 2) &&
                  src.device() == argmax.device(),
              op, ": src and argmax must share batch, channels and device, but got src.shape=",
              src.sizes(), " on ", src.device(), " and argmax.shape=", argmax.sizes(), " on ",
              argmax.device());
  const Tensor src4 = as_batched(src, p.format);
  const Tensor out = empty_pooled(src4, p.g, layout_of(src4, p.format));
  if (out.numel() > 0 && !K().gather_by_argmax(src4, p.argmax, out, p.g)) {
    invalid_argmax<K>(argmax, p.argmax, p.g, op);
  }
  return unbatch_like(out, argmax);
}

template <KernelsFn K>
Tensor argmax_to_indices(const Tensor& argmax, IntArrayRef input_hw, IntArrayRef kernel_size,
                         IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         bool ceil_mode) {
  const ArgmaxProblem p = argmax_problem(argmax, Tensor(), input_hw, kernel_size, stride,
                                         padding, dilation, ceil_mode, "argmax_to_indices");
  const Tensor indices =
      at::empty(p.argmax.sizes(), layout_of(p.argmax, p.format).dtype(at::kLong));
  if (indices.numel() > 0 && !K().argmax_to_indices(p.argmax, indices, p.g)) {
    invalid_argmax<K>(argmax, p.argmax, p.g, "argmax_to_indices");
  }
  return unbatch_like(indices, argmax);
}

template <KernelsFn K>
Tensor argmax_to_mask(const Tensor& argmax, IntArrayRef input_hw, IntArrayRef kernel_size,
                      IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                      bool ceil_mode) {
  const ArgmaxProblem p = argmax_problem(argmax, Tensor(), input_hw, kernel_size, stride,
                                         padding, dilation, ceil_mode, "argmax_to_mask");
  const Tensor mask = empty_unpooled(p.argmax, p.g, layout_of(p.argmax, p.format).dtype(at::kBool));
  if (mask.numel() > 0 && !K().argmax_to_mask(p.argmax, mask, p.g)) {
    invalid_argmax<K>(argmax, p.argmax, p.g, "argmax_to_mask");
  }
  return unbatch_like(mask, argmax);
}

template <KernelsFn K>
Tensor max_unpool2d(const Tensor& input, const Tensor& indices, IntArrayRef output_size) {
  const char* op = "max_unpool2d";
  // torch's checks in torch's order, so that a call torch rejects fails with the same type.
  TORCH_CHECK(indices.scalar_type() == at::kLong, op,
              ": elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(output_size.size() == 2, op,
              ": output_size must have exactly two elements (H, W), but got output_size=",
              output_size);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, op,
              ": Expected 3d or 4d tensor for input, but got input of shape ", input.sizes());
  TORCH_CHECK(input.sizes() == indices.sizes(), op,
              ": Expected shape of indices to be same as that of the input tensor (",
              input.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t d = 1; d < input.dim(); ++d) {
    TORCH_CHECK(input.size(d) > 0, op,
                ": Expected input to have non-zero size for non-batch dimensions, but got ",
                input.sizes());
  }
  // An empty output plane is allowed, as in torch; the index check below then
  // rejects any index (torch skips that check and drops the values).
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0, op,
              ": output_size must be non-negative, but got output_size=", output_size);
  check_pool_dtype(input, "input", op, /*allow_integral=*/true);
  TORCH_CHECK(input.device() == indices.device(), op,
              ": indices must be on the device of input (", input.device(),
              "), but got indices.device=", indices.device());
  check_numel_fits(input.sizes().slice(0, input.dim() - 2), output_size[0], output_size[1],
                   "output_size", op);
  // Each index is checked where it is placed: the CPU kernel raises torch's
  // error, the CUDA kernel asserts on the device (as torch's does).
  const at::MemoryFormat format = pool_memory_format(input);
  const Tensor in4 = as_batched(input, format);
  const Tensor idx4 = as_batched(indices, format);
  const Tensor out = at::empty({in4.size(0), in4.size(1), output_size[0], output_size[1]},
                                  layout_of(in4, format));
  // also into an empty plane, where every index is out of range
  if (in4.numel() > 0) K().max_unpool2d_indices(in4, idx4, out);
  return unbatch_like(out, input);
}

template <KernelsFn K>
void register_backend(torch::Library& m) {
  m.impl("max_pool2d_argmax", &max_pool2d_argmax<K>);
  m.impl("max_pool2d_indices", &max_pool2d_indices<K>);
  m.impl("max_pool2d_values", &max_pool2d_values<K>);
  m.impl("max_pool2d_backward", &max_pool2d_backward<K>);
  m.impl("gather_by_argmax", &gather_by_argmax<K>);
  m.impl("argmax_to_indices", &argmax_to_indices<K>);
  m.impl("argmax_to_mask", &argmax_to_mask<K>);
  m.impl("max_unpool2d_argmax", &max_unpool2d_argmax<K>);
  m.impl("max_unpool2d", &max_unpool2d<K>);
}

}  // namespace
}  // namespace poolx

#define POOL_ARGS "int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode"

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
