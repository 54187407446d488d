// The adaptive max pooling operators: schemas and glue. Their geometry
// (adaptive_args.cpp) feeds the kernels of windowed pooling, whose element
// functions place adaptive windows (geometry.h's AxisT). Their autograd is
// the windowed ops' C++ Functions (autograd.cpp).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "kernels.h"
#include "pool_args.h"
#include "pool_glue.h"

namespace poolx {
namespace {

using at::IntArrayRef;
using at::Tensor;
using namespace op_common;

template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor, Tensor> adaptive_forward(const Tensor& input, IntArrayRef output_size,
                                                    Pooled what) {
  const char* op = Names<Dims>::adaptive_pool;
  const Pool2dGeometry g = adaptive_forward_geometry(input, output_size, op, Dims);
  // torch's adaptive pooling takes floating point inputs only
  check_pool_dtype(input, "input", op, /*allow_integral=*/false);
  return pool_forward<K, Dims>(input, g, op, what);
}

template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor> adaptive_argmax(const Tensor& input, IntArrayRef output_size) {
  const auto out = adaptive_forward<K, Dims>(input, output_size, Pooled::kArgmax);
  return {std::get<0>(out), std::get<1>(out)};
}

template <KernelsFn K, int Dims>
std::tuple<Tensor, Tensor, Tensor> adaptive_indices(const Tensor& input,
                                                    IntArrayRef output_size) {
  return adaptive_forward<K, Dims>(input, output_size, Pooled::kArgmaxAndIndices);
}

template <KernelsFn K, int Dims>
Tensor adaptive_values(const Tensor& input, IntArrayRef output_size) {
  return std::get<0>(adaptive_forward<K, Dims>(input, output_size, Pooled::kValues));
}

template <KernelsFn K, int Dims>
Tensor adaptive_backward(const Tensor& grad_output, const Tensor& argmax,
                         IntArrayRef input_size, IntArrayRef output_size) {
  const char* op = Names<Dims>::adaptive_backward;
  check_pool_dtype(grad_output, "grad_output", op, /*allow_integral=*/false);
  check_nonempty(grad_output, "grad_output", op);
  const Pool2dGeometry g =
      adaptive_output_geometry(grad_output, input_size, output_size, op, Dims);
  return place_at_argmax<K, Dims>(K().backward, grad_output, argmax,
                                  argmax_problem(argmax, grad_output, g, op, Dims), op);
}

template <KernelsFn K, int Dims>
Tensor adaptive_gather(const Tensor& src, const Tensor& argmax, IntArrayRef output_size) {
  const char* op = Names<Dims>::adaptive_gather;
  const IntArrayRef src_size = gather_source_size<Dims>(src, argmax, op);
  const Pool2dGeometry g = adaptive_output_geometry(argmax, src_size, output_size, op, Dims);
  return gather_at_argmax<K, Dims>(src, argmax, argmax_problem(argmax, Tensor(), g, op, Dims),
                                   op);
}

template <KernelsFn K, int Dims>
void register_adaptive(torch::Library& m) {
  const std::string pool = Names<Dims>::adaptive_pool;
  m.impl((pool + "_argmax").c_str(), &adaptive_argmax<K, Dims>);
  m.impl((pool + "_indices").c_str(), &adaptive_indices<K, Dims>);
  m.impl((pool + "_values").c_str(), &adaptive_values<K, Dims>);
  m.impl(Names<Dims>::adaptive_backward, &adaptive_backward<K, Dims>);
  m.impl(Names<Dims>::adaptive_gather, &adaptive_gather<K, Dims>);
}

template <KernelsFn K>
void register_backend(torch::Library& m) {
  register_adaptive<K, 2>(m);
  register_adaptive<K, 3>(m);
}

}  // namespace
}  // namespace poolx

TORCH_LIBRARY_FRAGMENT(poolx, m) {
  for (const char* n : {"2", "3"}) {
    const std::string pool = std::string("adaptive_max_pool") + n + "d";
    const std::string sizes = std::string("SymInt[") + n + "]";
    m.def((pool + "_argmax(Tensor input, " + sizes +
           " output_size) -> (Tensor values, Tensor argmax)").c_str());
    // return_indices: the argmax and torch's int64 indices, in one pass
    m.def((pool + "_indices(Tensor input, " + sizes +
           " output_size) -> (Tensor values, Tensor argmax, Tensor indices)").c_str());
    m.def((pool + "_values(Tensor input, " + sizes + " output_size) -> Tensor").c_str());
    // output_size, the pooled tensor's, as the windowed ops take the pooling's arguments
    m.def((pool + "_backward(Tensor grad_output, Tensor argmax, " + sizes + " input_size, " +
           sizes + " output_size) -> Tensor").c_str());
    // each window's selected element of src (input-shaped): the double backward
    m.def((std::string("adaptive_gather_by_argmax") + (n[0] == '3' ? "3d" : "") +
           "(Tensor src, Tensor argmax, " + sizes + " output_size) -> Tensor").c_str());
  }
}

#ifdef POOLX_CUDA_EMULATION
TORCH_LIBRARY_IMPL(poolx, CPU, m) { poolx::register_backend<poolx::cuda_kernels>(m); }
#else
TORCH_LIBRARY_IMPL(poolx, CPU, m) { poolx::register_backend<poolx::cpu_kernels>(m); }
TORCH_LIBRARY_IMPL(poolx, CUDA, m) { poolx::register_backend<poolx::cuda_kernels>(m); }
#endif
