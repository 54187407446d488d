// The Autograd-key kernels of the operators: reverse mode through the C++
// autograd Functions of autograd_functions.h.
#include <torch/library.h>

#include "autograd_functions.h"

namespace poolx {
namespace {

// The Autograd-key kernels. A call that nothing differentiates goes straight
// to the backend kernel: that is also what lets these ops run inside the Python
// Functions under torch.func transforms, where a C++ Function may not. A
// forward-mode tangent counts as tracked, so that it meets the Function's
// clear "no forward AD" error instead of being dropped.
bool tracked(const Tensor& t) {
  return (at::GradMode::is_enabled() && t.requires_grad()) || t._fw_grad(/*level=*/0).defined();
}

// (values, argmax), or with_indices (values, argmax, indices).
variable_list pool_with_argmax(const Tensor& input, const PoolArgs& args, bool with_indices) {
  if (!tracked(input)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return MaxPool2dArgmax::pool(input, args, with_indices);
  }
  return MaxPool2dArgmax::apply(input, args, with_indices);
}

template <int Dims>
std::tuple<Tensor, Tensor> max_pool_argmax(const Tensor& input, IntArrayRef kernel,
                                           IntArrayRef stride, IntArrayRef padding,
                                           IntArrayRef dilation, bool ceil_mode) {
  const auto out = pool_with_argmax(
      input, pool_args(kernel, stride, padding, dilation, ceil_mode, Dims), /*with_indices=*/false);
  return {out[0], out[1]};
}

template <int Dims>
std::tuple<Tensor, Tensor, Tensor> max_pool_indices(const Tensor& input, IntArrayRef kernel,
                                                    IntArrayRef stride, IntArrayRef padding,
                                                    IntArrayRef dilation, bool ceil_mode) {
  const auto out = pool_with_argmax(
      input, pool_args(kernel, stride, padding, dilation, ceil_mode, Dims), /*with_indices=*/true);
  return {out[0], out[1], out[2]};
}

Tensor pool_values(const Tensor& input, const PoolArgs& args) {
  if (!tracked(input)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return args.pool_values(input);
  }
  return MaxPool2dValues::apply(input, args);
}

template <int Dims>
Tensor max_pool_values(const Tensor& input, IntArrayRef kernel, IntArrayRef stride,
                       IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return pool_values(input, pool_args(kernel, stride, padding, dilation, ceil_mode, Dims));
}

Tensor route_to_input(const Tensor& grad_output, const Tensor& argmax, SymIntArrayRef input_hw,
                      const PoolArgs& args) {
  if (!tracked(grad_output)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return args.route_to_input(grad_output, argmax, input_hw);
  }
  return RouteToInput::apply(grad_output, argmax, input_hw, args);
}

template <int Dims>
Tensor max_pool_backward(const Tensor& grad_output, const Tensor& argmax,
                         SymIntArrayRef input_hw, IntArrayRef kernel, IntArrayRef stride,
                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return route_to_input(grad_output, argmax, input_hw,
                        pool_args(kernel, stride, padding, dilation, ceil_mode, Dims));
}

template <int Dims>
Tensor max_unpool_argmax(const Tensor& values, const Tensor& argmax, SymIntArrayRef input_hw,
                         IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                         IntArrayRef dilation, bool ceil_mode) {
  const PoolArgs args = pool_args(kernel, stride, padding, dilation, ceil_mode, Dims);
  if (!tracked(values)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return args.unpool_by_argmax(values, argmax, input_hw);
  }
  return UnpoolByArgmax::apply(values, argmax, input_hw, args);
}

Tensor max_unpool2d(const Tensor& input, const Tensor& indices, SymIntArrayRef output_hw) {
  if (!tracked(input)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return UnpoolByIndices::unpool(input, indices, output_hw);
  }
  return UnpoolByIndices::apply(input, indices, output_hw);
}

// The gradient of max_unpool2d with respect to its input: grad_output at each
// index (also for a value a later one overwrote), as torch defines it. Made of
// ATen ops, so autograd, vmap and torch.compile see through it.
Tensor max_unpool2d_backward(const Tensor& grad_output, const Tensor& indices) {
  const auto is_channels_last = [](const Tensor& t) {
    return t.dim() == 4 && !t.is_contiguous() &&
           t.is_contiguous(at::MemoryFormat::ChannelsLast);
  };
  if (is_channels_last(indices) && is_channels_last(grad_output)) {
    // gather along (H*W) of N(HW)C views: torch's gather then walks the
    // channels contiguously, instead of a strided plane
    const auto s = indices.sym_sizes();
    const Tensor picked = grad_output.permute({0, 2, 3, 1}).flatten(1, 2).gather(
        1, indices.permute({0, 2, 3, 1}).flatten(1, 2));
    return picked.view_symint({s[0], s[2], s[3], s[1]}).permute({0, 3, 1, 2});
  }
  // the flattened planes, as torch's max_pool_double_backward
  return grad_output.flatten(-2).gather(-1, indices.flatten(-2)).view_symint(indices.sym_sizes());
}

Tensor gather_at_argmax(const Tensor& src, const Tensor& argmax, const PoolArgs& args) {
  if (!tracked(src)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return args.gather_at_argmax(src, argmax);
  }
  return GatherAtArgmax::apply(src, argmax, args);
}

template <int Dims>
Tensor gather_by_argmax(const Tensor& src, const Tensor& argmax, IntArrayRef kernel,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                        bool ceil_mode) {
  return gather_at_argmax(src, argmax,
                          pool_args(kernel, stride, padding, dilation, ceil_mode, Dims));
}

// The adaptive ops: the same Functions, with the output size for arguments.
template <int Dims>
std::tuple<Tensor, Tensor> adaptive_argmax(const Tensor& input, SymIntArrayRef output_size) {
  const auto out = pool_with_argmax(input, adaptive_args(output_size, Dims), false);
  return {out[0], out[1]};
}

template <int Dims>
std::tuple<Tensor, Tensor, Tensor> adaptive_indices(const Tensor& input,
                                                    SymIntArrayRef output_size) {
  const auto out = pool_with_argmax(input, adaptive_args(output_size, Dims), true);
  return {out[0], out[1], out[2]};
}

template <int Dims>
Tensor adaptive_values(const Tensor& input, SymIntArrayRef output_size) {
  return pool_values(input, adaptive_args(output_size, Dims));
}

template <int Dims>
Tensor adaptive_backward(const Tensor& grad_output, const Tensor& argmax,
                         SymIntArrayRef input_size, SymIntArrayRef output_size) {
  return route_to_input(grad_output, argmax, input_size, adaptive_args(output_size, Dims));
}

template <int Dims>
Tensor adaptive_gather(const Tensor& src, const Tensor& argmax, SymIntArrayRef output_size) {
  return gather_at_argmax(src, argmax, adaptive_args(output_size, Dims));
}

}  // namespace
}  // namespace poolx

TORCH_LIBRARY_IMPL(poolx, Autograd, m) {
  m.impl("max_pool2d_argmax", &poolx::max_pool_argmax<2>);
  m.impl("max_pool2d_indices", &poolx::max_pool_indices<2>);
  m.impl("max_pool2d_values", &poolx::max_pool_values<2>);
  m.impl("max_pool2d_backward", &poolx::max_pool_backward<2>);
  m.impl("gather_by_argmax", &poolx::gather_by_argmax<2>);
  m.impl("max_unpool2d_argmax", &poolx::max_unpool_argmax<2>);
  m.impl("max_pool3d_argmax", &poolx::max_pool_argmax<3>);
  m.impl("max_pool3d_indices", &poolx::max_pool_indices<3>);
  m.impl("max_pool3d_values", &poolx::max_pool_values<3>);
  m.impl("max_pool3d_backward", &poolx::max_pool_backward<3>);
  m.impl("gather_by_argmax3d", &poolx::gather_by_argmax<3>);
  m.impl("max_unpool3d_argmax", &poolx::max_unpool_argmax<3>);
  m.impl("max_unpool2d", &poolx::max_unpool2d);
  m.impl("adaptive_max_pool2d_argmax", &poolx::adaptive_argmax<2>);
  m.impl("adaptive_max_pool2d_indices", &poolx::adaptive_indices<2>);
  m.impl("adaptive_max_pool2d_values", &poolx::adaptive_values<2>);
  m.impl("adaptive_max_pool2d_backward", &poolx::adaptive_backward<2>);
  m.impl("adaptive_gather_by_argmax", &poolx::adaptive_gather<2>);
  m.impl("adaptive_max_pool3d_argmax", &poolx::adaptive_argmax<3>);
  m.impl("adaptive_max_pool3d_indices", &poolx::adaptive_indices<3>);
  m.impl("adaptive_max_pool3d_values", &poolx::adaptive_values<3>);
  m.impl("adaptive_max_pool3d_backward", &poolx::adaptive_backward<3>);
  m.impl("adaptive_gather_by_argmax3d", &poolx::adaptive_gather<3>);
}

TORCH_LIBRARY_IMPL(poolx, CompositeImplicitAutograd, m) {
  m.impl("max_unpool2d_backward", &poolx::max_unpool2d_backward);
}
