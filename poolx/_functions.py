"""The pooling ops as torch.autograd.Functions, for the eager calls that
forward-mode AD or a torch.func transform sees: beyond the reverse-mode
formulas that the ops carry in C++ (csrc/autograd.cpp, the same formulas),
these have a forward-mode rule (jvp: the tangent gathered at each window's
argmax) and a vmap rule, so torch.func.grad/vjp/jvp/vmap and forward-mode AD
work as with torch's max_pool2d. Every other call goes to the ops directly
(_call below)."""

import torch

from poolx._library import _C, ops

_NO_GRADS = (None,) * 5  # kernel_size, stride, padding, dilation, ceil_mode

# kind -> its 2-D and 3-D op (overloads: see _call), picked by the length of
# the kernel size
_OPS = {
    "argmax": (ops.max_pool2d_argmax.default, ops.max_pool3d_argmax.default),
    "indices": (ops.max_pool2d_indices.default, ops.max_pool3d_indices.default),
    "values": (ops.max_pool2d_values.default, ops.max_pool3d_values.default),
    "backward": (ops.max_pool2d_backward.default, ops.max_pool3d_backward.default),
    "gather": (ops.gather_by_argmax.default, ops.gather_by_argmax3d.default),
    "unpool_argmax": (ops.max_unpool2d_argmax.default, ops.max_unpool3d_argmax.default),
}


def _op(kind, kernel):
    return _OPS[kind][len(kernel) - 2]


def _spatial(t, kernel):
    """t's (H, W), or (D, H, W) for a 3-D kernel."""
    return tuple(t.shape[-len(kernel):])


def _kernel(op, *args):
    """op's kernel, below autograd: what a Function's forward computes. (The
    ops' C++ autograd refuses to run under torch.func transforms.)"""
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


class MaxPool2dArgmax(torch.autograd.Function):
    """(values, argmax); saves only the argmax."""

    generate_vmap_rule = True

    @staticmethod
    def forward(input, kernel, stride, padding, dilation, ceil_mode):
        return _kernel(_op("argmax", kernel), input, kernel, stride, padding, dilation, ceil_mode)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, *ctx.pool_args = inputs
        ctx.input_hw = _spatial(input, ctx.pool_args[0])
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.save_for_forward(output[1])
        # else autograd fills a zero "gradient" for the argmax on every backward
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, grad_values, _grad_argmax):
        if grad_values is None:
            return (None, *_NO_GRADS)
        (argmax,) = ctx.saved_tensors
        grad = route_to_input(grad_values, argmax, ctx.input_hw, *ctx.pool_args)
        return (grad, *_NO_GRADS)

    @staticmethod
    def jvp(ctx, input_tangent, *_):
        (argmax,) = ctx.saved_tensors
        return gather_at_argmax(input_tangent, argmax, *ctx.pool_args), None


class MaxPool2dIndices(MaxPool2dArgmax):
    """(values, argmax, indices) in one pass (return_indices); saves only the argmax."""

    @staticmethod
    def forward(input, kernel, stride, padding, dilation, ceil_mode):
        return _kernel(_op("indices", kernel), input, kernel, stride, padding, dilation, ceil_mode)

    @staticmethod
    def setup_context(ctx, inputs, output):
        MaxPool2dArgmax.setup_context(ctx, inputs, output)
        ctx.mark_non_differentiable(output[1], output[2])  # replaces the first mark

    @staticmethod
    def backward(ctx, grad_values, _grad_argmax, _grad_indices):
        return MaxPool2dArgmax.backward(ctx, grad_values, _grad_argmax)

    @staticmethod
    def jvp(ctx, input_tangent, *_):
        return (*MaxPool2dArgmax.jvp(ctx, input_tangent), None)


class MaxPool2dValues(torch.autograd.Function):
    """values only; saves the input and recomputes the argmax when needed."""

    generate_vmap_rule = True

    @staticmethod
    def forward(input, kernel, stride, padding, dilation, ceil_mode):
        return _kernel(_op("values", kernel), input, kernel, stride, padding, dilation, ceil_mode)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, *ctx.pool_args = inputs
        ctx.save_for_backward(input)
        ctx.save_for_forward(input)

    @staticmethod
    def _argmax(ctx):
        (input,) = ctx.saved_tensors
        argmax_op = _op("argmax", ctx.pool_args[0])
        return input, _kernel(argmax_op, input.detach(), *ctx.pool_args)[1]

    @staticmethod
    def backward(ctx, grad_values):
        input, argmax = MaxPool2dValues._argmax(ctx)
        grad = route_to_input(grad_values, argmax, _spatial(input, ctx.pool_args[0]),
                              *ctx.pool_args)
        return (grad, *_NO_GRADS)

    @staticmethod
    def jvp(ctx, input_tangent, *_):
        _, argmax = MaxPool2dValues._argmax(ctx)
        return gather_at_argmax(input_tangent, argmax, *ctx.pool_args)


# The two linear maps between pooled and input shapes; each is the other's
# adjoint, and its own tangent map.


def _placing_function(name, kind, doc):
    """An autograd.Function for the ops of `kind`, which place pooled-shape
    values at each window's selected tap of an input: max_pool{2,3}d_backward
    (values reaching one tap add up) and max_unpool{2,3}d_argmax (the last one
    stays). Both are linear with the gather at the argmax as adjoint, and each
    is its own tangent map."""

    def forward(values, argmax, hw, kernel, stride, padding, dilation, ceil_mode):
        return _kernel(_op(kind, kernel), values, argmax, hw, kernel, stride, padding, dilation,
                       ceil_mode)

    def setup_context(ctx, inputs, output):
        _, argmax, ctx.hw, *ctx.pool_args = inputs
        ctx.save_for_backward(argmax)
        ctx.save_for_forward(argmax)

    def backward(ctx, grad):
        (argmax,) = ctx.saved_tensors
        return (gather_at_argmax(grad, argmax, *ctx.pool_args), None, None, *_NO_GRADS)

    def jvp(ctx, values_tangent, *_):
        (argmax,) = ctx.saved_tensors
        op = _op(kind, ctx.pool_args[0])
        return _call(op, function, values_tangent, argmax, ctx.hw, *ctx.pool_args)

    methods = dict(forward=forward, setup_context=setup_context, backward=backward, jvp=jvp)
    function = type(name, (torch.autograd.Function,), {
        "__doc__": doc,
        "generate_vmap_rule": True,
        **{key: staticmethod(method) for key, method in methods.items()},
    })
    return function


RouteToInput = _placing_function(
    "RouteToInput", "backward",
    "max_pool{2,3}d_backward: pooled-shape values routed to the selected taps.",
)
UnpoolByArgmax = _placing_function(
    "UnpoolByArgmax", "unpool_argmax",
    "max_unpool{2,3}d_argmax: values placed at their window's selected tap.",
)


class GatherAtArgmax(torch.autograd.Function):
    """gather_by_argmax: each window's selected input element."""

    generate_vmap_rule = True

    @staticmethod
    def forward(src, argmax, kernel, stride, padding, dilation, ceil_mode):
        return _kernel(
            _op("gather", kernel), src, argmax, kernel, stride, padding, dilation, ceil_mode
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        src, argmax, *ctx.pool_args = inputs
        ctx.src_hw = _spatial(src, ctx.pool_args[0])
        ctx.save_for_backward(argmax)
        ctx.save_for_forward(argmax)

    @staticmethod
    def backward(ctx, grad):
        (argmax,) = ctx.saved_tensors
        return (route_to_input(grad, argmax, ctx.src_hw, *ctx.pool_args), None, *_NO_GRADS)

    @staticmethod
    def jvp(ctx, src_tangent, *_):
        (argmax,) = ctx.saved_tensors
        return gather_at_argmax(src_tangent, argmax, *ctx.pool_args)


class UnpoolByIndices(torch.autograd.Function):
    """max_unpool2d: values placed at their int64 indices. Its gradient is the
    output gradient at each value's index (also for a value that a later one
    overwrote), as torch defines it; its tangent is the unpooled tangent."""

    generate_vmap_rule = True

    @staticmethod
    def forward(input, indices, output_hw):
        return _kernel(ops.max_unpool2d, input, indices, output_hw)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, indices, ctx.output_hw = inputs
        ctx.save_for_backward(indices)
        ctx.save_for_forward(indices)

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        return ops.max_unpool2d_backward(grad, indices), None, None

    @staticmethod
    def jvp(ctx, input_tangent, *_):
        (indices,) = ctx.saved_tensors
        return unpool_by_indices(input_tangent, indices, ctx.output_hw)


def _transformed():
    """True when forward-mode AD or a torch.func transform can see a call."""
    return (
        torch.autograd.forward_ad._current_level >= 0
        or torch._C._are_functorch_transforms_active()
    )


_fast_ops = {}  # op overload -> its number for _C.call


def _call(op, function, tensor, *args):
    """op(tensor, *args), through the autograd.Function where its forward-mode
    or vmap rule may be needed. Everything else goes to the op, whose C++
    autograd serves reverse mode without Python and passes an untracked call
    straight to the kernel: through _C.call (csrc/module.cpp), the same
    dispatcher without torch.ops' argument parsing, unless a torch function
    mode is on or an argument is of a type it does not take (a tensor
    subclass). Dynamo cannot trace a Function with a jvp, nor _C.call, so
    compiled code always calls the op. op is an overload (.default): the
    packet would resolve the overload again on every call."""
    if not torch.compiler.is_compiling():
        if _transformed():
            return function.apply(tensor, *args)
        if not torch._C._is_torch_function_mode_enabled():
            number = _fast_ops.get(op)
            if number is None:
                number = _fast_ops[op] = _C.find_op(op.name())
            result = _C.call(number, tensor, *args)
            if result is not NotImplemented:
                return result
    return op(tensor, *args)


# The calls below take the pooling arguments (kernel, stride, padding,
# dilation, ceil_mode) with a kernel of 2 or 3 ints, which picks the op.


def pool_argmax(input, kernel, *pool_args):
    return _call(_op("argmax", kernel), MaxPool2dArgmax, input, kernel, *pool_args)


def pool_indices(input, kernel, *pool_args):
    return _call(_op("indices", kernel), MaxPool2dIndices, input, kernel, *pool_args)


def pool_values(input, kernel, *pool_args):
    return _call(_op("values", kernel), MaxPool2dValues, input, kernel, *pool_args)


def route_to_input(pooled, argmax, input_hw, kernel, *pool_args):
    return _call(_op("backward", kernel), RouteToInput, pooled, argmax, input_hw,
                 kernel, *pool_args)


def gather_at_argmax(src, argmax, kernel, *pool_args):
    return _call(_op("gather", kernel), GatherAtArgmax, src, argmax, kernel, *pool_args)


def unpool_by_indices(input, indices, output_hw):
    return _call(ops.max_unpool2d.default, UnpoolByIndices, input, indices, output_hw)


def unpool_by_argmax(values, argmax, output_hw, kernel, *pool_args):
    return _call(_op("unpool_argmax", kernel), UnpoolByArgmax, values, argmax, output_hw,
                 kernel, *pool_args)
