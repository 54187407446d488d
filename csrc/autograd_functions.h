// Reverse-mode autograd of the operators, in C++: an eager training
// step then runs no Python between the ops (a Python autograd.Function's
// call and backward cost more than pooling a small input).
// Each backward calls the ops through the dispatcher, so it is differentiable
// again, to any order, and compiled autograd can trace it (is_traceable: it
// reads nothing but its saved tensors and saved_data). The same formulas exist once more in
// poolx/_functions.py as autograd.Functions that add the forward-mode (jvp)
// and vmap rules; Python uses those only where forward AD or a torch.func
// transform is active, and the tests check that both agree.
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

// kernel_size, stride, padding, dilation, ceil_mode as the ops take them
// (one int or one per spatial dim each; stride may be empty), and the number
// of spatial dims (2 or 3), held without a heap allocation: every
// Autograd-key call builds one.
struct PoolArgs {
  using Ints = c10::SmallVector<int64_t, 3>;
  Ints kernel, stride, padding, dilation;
  bool ceil_mode;
  int dims;

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
    return args;
  }

  std::tuple<Tensor, Tensor> pool_argmax(const Tensor& input) const {
    static const OpByDims<std::tuple<Tensor, Tensor>(const Tensor&, IntArrayRef, IntArrayRef,
                                                     IntArrayRef, IntArrayRef, bool)>
        op("poolx::max_pool2d_argmax", "poolx::max_pool3d_argmax");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  std::tuple<Tensor, Tensor, Tensor> pool_indices(const Tensor& input) const {
    static const OpByDims<std::tuple<Tensor, Tensor, Tensor>(
        const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool)>
        op("poolx::max_pool2d_indices", "poolx::max_pool3d_indices");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  Tensor pool_values(const Tensor& input) const {
    static const OpByDims<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                                 IntArrayRef, bool)>
        op("poolx::max_pool2d_values", "poolx::max_pool3d_values");
    return op(dims).call(input, kernel, stride, padding, dilation, ceil_mode);
  }

  // pooled-shape values routed to the selected taps of an input of size
  // input_hw, meeting values added up
  Tensor route_to_input(const Tensor& pooled, const Tensor& argmax,
                        SymIntArrayRef input_hw) const {
    static const OpByDims<PlaceSignature> op("poolx::max_pool2d_backward",
                                             "poolx::max_pool3d_backward");
    return place(op(dims), pooled, argmax, input_hw);
  }

  // the same with the last of meeting values staying
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
          ceil_mode,                            dims};
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

// Directly in namespace poolx: autograd names a node after its type, and
// "CppNode<poolx::MaxPool2dArgmax>" reads well in a graph.
using namespace autograd_detail;

// Each forward takes the pooling arguments as one PoolArgs (the Autograd-key
// kernels below build it once); backward reads them back from saved_data.

// (values, argmax), or with_indices (values, argmax, indices); saves only the
// argmax.
struct MaxPool2dArgmax : torch::autograd::Function<MaxPool2dArgmax> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static variable_list forward(AutogradContext* ctx, const Tensor& input, const PoolArgs& args,
                               bool with_indices) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    variable_list out = pool(input, args, with_indices);
    args.save(ctx);
    ctx->saved_data["input_hw"] = c10::IValue(spatial_sizes(input, args.dims));
    ctx->save_for_backward({out[1]});
    // The argmax and indices are integral, so never differentiable: no mark
    // (marking would break compiled autograd, which refuses nodes with marked
    // outputs). No zero gradient materialized for unused values either.
    ctx->set_materialize_grads(false);
    return out;
  }

  static variable_list pool(const Tensor& input, const PoolArgs& args, bool with_indices) {
    if (with_indices) {
      auto [values, argmax, indices] = args.pool_indices(input);
      return {values, argmax, indices};
    }
    auto [values, argmax] = args.pool_argmax(input);
    return {values, argmax};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return variable_list(3);
    const Tensor argmax = ctx->get_saved_variables()[0];
    const auto hw = ctx->saved_data["input_hw"].toSymIntVector();
    return with_no_grads(PoolArgs::saved(ctx).route_to_input(grads[0], argmax, hw), 3);
  }
};

// values only; saves the input and recomputes the argmax in backward.
struct MaxPool2dValues : torch::autograd::Function<MaxPool2dValues> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const PoolArgs& args) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    args.save(ctx);
    ctx->save_for_backward({input});
    return args.pool_values(input);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor input = ctx->get_saved_variables()[0];
    const PoolArgs args = PoolArgs::saved(ctx);
    const Tensor argmax = std::get<1>(args.pool_argmax(input.detach()));
    const auto hw = spatial_sizes(input, args.dims);
    return with_no_grads(args.route_to_input(grads[0], argmax, hw), 2);
  }
};

// Pooled-shape values placed at the selected taps: max_pool2d_backward
// (values meeting at a tap add up) and max_unpool2d_argmax (the last one
// stays). Both are linear with the gather at the argmax as adjoint.
// Self::place(args, pooled, argmax, input_hw) is the op.
template <class Self>
struct PlaceAtArgmax : torch::autograd::Function<Self> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static Tensor forward(AutogradContext* ctx, const Tensor& pooled, const Tensor& argmax,
                        SymIntArrayRef input_hw, const PoolArgs& args) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    args.save(ctx);
    ctx->save_for_backward({argmax});
    return Self::place(args, pooled, argmax, input_hw);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor argmax = ctx->get_saved_variables()[0];
    return with_no_grads(PoolArgs::saved(ctx).gather_at_argmax(grads[0], argmax), 4);
  }
};
struct RouteToInput : PlaceAtArgmax<RouteToInput> {
  static Tensor place(const PoolArgs& args, const Tensor& pooled, const Tensor& argmax,
                      SymIntArrayRef input_hw) {
    return args.route_to_input(pooled, argmax, input_hw);
  }
};

struct UnpoolByArgmax : PlaceAtArgmax<UnpoolByArgmax> {
  static Tensor place(const PoolArgs& args, const Tensor& pooled, const Tensor& argmax,
                      SymIntArrayRef input_hw) {
    return args.unpool_by_argmax(pooled, argmax, input_hw);
  }
};

// max_unpool2d: values placed at their int64 indices; saves the indices. Its
// gradient is max_unpool2d_backward (the output gradient at each index).
struct UnpoolByIndices : torch::autograd::Function<UnpoolByIndices> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const Tensor& indices,
                        SymIntArrayRef output_hw) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({indices});
    return unpool(input, indices, output_hw);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op =
        find_op<Tensor(const Tensor&, const Tensor&)>("poolx::max_unpool2d_backward");
    return with_no_grads(op.call(grads[0], ctx->get_saved_variables()[0]), 3);
  }

  static Tensor unpool(const Tensor& input, const Tensor& indices, SymIntArrayRef output_hw) {
    static const auto op = find_op<Tensor(const Tensor&, const Tensor&, SymIntArrayRef)>(
        "poolx::max_unpool2d");
    return op.call(input, indices, output_hw);
  }
};

// gather_by_argmax: each window's selected element; its adjoint is the routing.
struct GatherAtArgmax : torch::autograd::Function<GatherAtArgmax> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static Tensor forward(AutogradContext* ctx, const Tensor& src, const Tensor& argmax,
                        const PoolArgs& args) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    args.save(ctx);
    ctx->saved_data["src_hw"] = c10::IValue(spatial_sizes(src, args.dims));
    ctx->save_for_backward({argmax});
    return args.gather_at_argmax(src, argmax);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor argmax = ctx->get_saved_variables()[0];
    const auto hw = ctx->saved_data["src_hw"].toSymIntVector();
    return with_no_grads(PoolArgs::saved(ctx).route_to_input(grads[0], argmax, hw), 3);
  }
};

}  // namespace poolx
