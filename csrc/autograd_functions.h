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

#include "autograd_args.h"

namespace poolx {


// Directly in namespace poolx: autograd names a node after its type, and
// "CppNode<poolx::MaxPool2dArgmax>" reads well in a graph.
using namespace autograd_detail;

// Each forward takes the pooling arguments as one PoolArgs (the Autograd-key
// kernels below build it once); backward reads them back from saved_data.

// A tensor without elements that shares t's version counter: saved for
// backward, it makes backward refuse t modified in place, as torch's backward
// refuses the tensors it saves, while keeping none of t's memory. Undefined
// for a tensor that counts no versions (an inference tensor).
inline Tensor version_tag(const Tensor& t) {
  if (!t.defined() || t.is_inference()) return Tensor();
  Tensor tag = at::empty({0}, t.options());
  torch::autograd::impl::set_version_counter(tag, torch::autograd::impl::version_counter(t));
  return tag;
}

// (values, argmax), or with_indices (values, argmax, indices); saves only the
// argmax, and the version tags of the input and the indices, which torch's
// backward reads.
struct MaxPool2dArgmax : torch::autograd::Function<MaxPool2dArgmax> {
  static constexpr bool is_traceable = true;  // see the top of the file
  static variable_list forward(AutogradContext* ctx, const Tensor& input, const PoolArgs& args,
                               bool with_indices) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    variable_list out = pool(input, args, with_indices);
    args.save(ctx);
    ctx->saved_data["input_hw"] = c10::IValue(spatial_sizes(input, args.dims));
    ctx->save_for_backward(
        {out[1], version_tag(input), with_indices ? version_tag(out[2]) : Tensor()});
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
