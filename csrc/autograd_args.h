// The arguments of a pooling op as its C++ autograd Functions hold them
// (autograd_functions.h): a windowed op's kernel, stride, padding, dilation
// and ceil_mode, or an adaptive op's output size, and the ops of either kind
// that the Functions' forwards and backwards call through the dispatcher.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

namespace poolx {
namespace autograd_detail {

using at::IntArrayRef;
using at::Tensor;
using c10::SymIntArrayRef;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// The 2-D and the 3-D op of a kind, picked by the number of spatial dims.
template <class Signature>
struct OpByDims {
  c10::TypedOperatorHandle<Signature> op2, op3;
  OpByDims(const char* name2, const char* name3)
      : op2(find_op<Signature>(name2)), op3(find_op<Signature>(name3)) {}
  const c10::TypedOperatorHandle<Signature>& operator()(int dims) const {
    return dims == 3 ? op3 : op2;
  }
};

// kernel_size, stride, padding, dilation, ceil_mode as the windowed ops take
// them (one int or one per spatial dim each; stride may be empty), or the
// adaptive ops' output_size, and the number of spatial dims (2 or 3), held
// without a heap allocation: every Autograd-key call builds one.
struct PoolArgs {
  using Ints = c10::SmallVector<int64_t, 3>;
  Ints kernel, stride, padding, dilation;
  bool ceil_mode = false;
  int dims = 2;
  c10::SmallVector<c10::SymInt, 3> output_size;  // empty for windowed pooling

  bool adaptive() const { return !output_size.empty(); }

  // One saved_data entry, each list behind its length: a map entry and an
  // IValue list per argument made up much of a tracked call's host time.
  void save(AutogradContext* ctx) const {
    std::vector<int64_t> packed;
    packed.reserve(18);
    for (const Ints* ints : {&kernel, &stride, &padding, &dilation}) {
      packed.push_back(static_cast<int64_t>(ints->size()));
      packed.insert(packed.end(), ints->begin(), ints->end());
    }
    packed.push_back(ceil_mode);
    packed.push_back(dims);
    ctx->saved_data["pool_args"] = std::move(packed);
    if (adaptive()) ctx->saved_data["output_size"] = c10::IValue(SymIntArrayRef(output_size));
  }

  static PoolArgs saved(AutogradContext* ctx) {
    const c10::List<int64_t> packed = ctx->saved_data["pool_args"].toIntList();
    PoolArgs args;
    size_t at = 0;
    for (Ints* ints : {&args.kernel, &args.stride, &args.padding, &args.dilation}) {
      const auto count = static_cast<size_t>(packed[at++]);
      for (size_t i = 0; i < count; ++i) ints->push_back(packed[at++]);
    }
    args.ceil_mode = packed[at] != 0;
    args.dims = static_cast<int>(packed[at + 1]);
    const auto output_size = ctx->saved_data.find("output_size");
    if (output_size != ctx->saved_data.end()) {
      for (const c10::SymInt& size : output_size->second.toSymIntVector()) {
        args.output_size.push_back(size);
      }
    }
    return args;
  }

  std::tuple<Tensor, Tensor> pool_argmax(const Tensor& input) const {
    if (adaptive()) {
      static const OpByDims<std::tuple<Tensor, Tensor>(const Tensor&, SymIntArrayRef)> op(
          "poolx::adaptive_max_pool2d_argmax", "poolx::adaptive_max_pool3d_argmax");
      return op(dims).call(input, output_size);
    }
    static const OpByDims<std::tuple<Tensor, Tensor>(const Tensor&, IntArrayRef, IntArrayRef,
                                                     IntArrayRef, IntArrayRef, bool)>
        op("poolx::max_pool2d_argmax", "poolx::max_pool3d_argmax");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  std::tuple<Tensor, Tensor, Tensor> pool_indices(const Tensor& input) const {
    if (adaptive()) {
      static const OpByDims<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, SymIntArrayRef)>
          op("poolx::adaptive_max_pool2d_indices", "poolx::adaptive_max_pool3d_indices");
      return op(dims).call(input, output_size);
    }
    static const OpByDims<std::tuple<Tensor, Tensor, Tensor>(
        const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool)>
        op("poolx::max_pool2d_indices", "poolx::max_pool3d_indices");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  Tensor pool_values(const Tensor& input) const {
    if (adaptive()) {
      static const OpByDims<Tensor(const Tensor&, SymIntArrayRef)> op(
          "poolx::adaptive_max_pool2d_values", "poolx::adaptive_max_pool3d_values");
      return op(dims).call(input, output_size);
    }
    static const OpByDims<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                                 IntArrayRef, bool)>
        op("poolx::max_pool2d_values", "poolx::max_pool3d_values");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  // pooled-shape values routed to the selected taps of an input of size
  // input_hw, meeting values added up
  Tensor route_to_input(const Tensor& pooled, const Tensor& argmax,
                        SymIntArrayRef input_hw) const {
    if (adaptive()) {
      static const OpByDims<Tensor(const Tensor&, const Tensor&, SymIntArrayRef, SymIntArrayRef)>
          op("poolx::adaptive_max_pool2d_backward", "poolx::adaptive_max_pool3d_backward");
      return op(dims).call(pooled, argmax, input_hw, output_size);
    }
    static const OpByDims<PlaceSignature> op("poolx::max_pool2d_backward",
                                             "poolx::max_pool3d_backward");
    return place(op(dims), pooled, argmax, input_hw);
  }

  // the same with the last of meeting values staying (windowed pooling's)
  Tensor unpool_by_argmax(const Tensor& pooled, const Tensor& argmax,
                          SymIntArrayRef input_hw) const {
    static const OpByDims<PlaceSignature> op("poolx::max_unpool2d_argmax",
                                             "poolx::max_unpool3d_argmax");
    return place(op(dims), pooled, argmax, input_hw);
  }

  using PlaceSignature = Tensor(const Tensor&, const Tensor&, SymIntArrayRef, IntArrayRef,
                                IntArrayRef, IntArrayRef, IntArrayRef, bool);
  Tensor place(const c10::TypedOperatorHandle<PlaceSignature>& op, const Tensor& pooled,
               const Tensor& argmax, SymIntArrayRef input_hw) const {
    return op.call(pooled, argmax, input_hw, kernel, stride, padding, dilation, ceil_mode);
  }

  // each window's selected element of src
  Tensor gather_at_argmax(const Tensor& src, const Tensor& argmax) const {
    if (adaptive()) {
      static const OpByDims<Tensor(const Tensor&, const Tensor&, SymIntArrayRef)> op(
          "poolx::adaptive_gather_by_argmax", "poolx::adaptive_gather_by_argmax3d");
      return op(dims).call(src, argmax, output_size);
    }
    static const OpByDims<Tensor(const Tensor&, const Tensor&, IntArrayRef, IntArrayRef,
                                 IntArrayRef, IntArrayRef, bool)>
        op("poolx::gather_by_argmax", "poolx::gather_by_argmax3d");
    return op(dims).call(src, argmax, kernel, stride, padding, dilation, ceil_mode);
  }
};

inline PoolArgs pool_args(IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                          IntArrayRef dilation, bool ceil_mode, int dims) {
  using Ints = PoolArgs::Ints;
  return {Ints(kernel.begin(), kernel.end()),   Ints(stride.begin(), stride.end()),
          Ints(padding.begin(), padding.end()), Ints(dilation.begin(), dilation.end()),
          ceil_mode,                            dims,
          {}};
}

inline PoolArgs adaptive_args(SymIntArrayRef output_size, int dims) {
  PoolArgs args;
  args.dims = dims;
  args.output_size.assign(output_size.begin(), output_size.end());
  return args;
}

// The (H, W) or (D, H, W) of t, symbolic under torch.compile's dynamic shapes.
inline SymIntArrayRef spatial_sizes(const Tensor& t, int dims) {
  return t.sym_sizes().slice(t.dim() - dims);
}

// Gradients of the non-tensor arguments, and of argmax inputs: none.
inline variable_list with_no_grads(Tensor grad, size_t num_inputs) {
  variable_list grads(num_inputs);
  grads[0] = std::move(grad);
  return grads;
}

}  // namespace autograd_detail
}  // namespace poolx
