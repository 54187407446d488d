"""The pooling ops as torch.autograd.Functions, for the eager calls that
forward-mode AD or a torch.func transform sees: beyond the reverse-mode
formulas that the ops carry in C++ (csrc/autograd.cpp, the same formulas),
these have a forward-mode rule (jvp: the tangent gathered at each window's
argmax) and a vmap rule, so torch.func.grad/vjp/jvp/vmap and forward-mode AD
work as with torch's max_pool2d. Every other call goes to the ops directly (_call below)."""

import torch

from poolx._geometry import _int64
from poolx._library import _C, ops

# The pooling arguments ("pool_args" below): windowed pooling's (kernel, stride, padding,
# dilation, ceil_mode) or adaptive pooling's (output_size,); the first's length picks 2-D or 3-D.

# kind -> its windowed 2-D and 3-D op, then the adaptive ones (overloads: see _call)
_OPS = {kind: tuple(getattr(ops, name).default for name in names) for kind, names in {
    **{kind: [f"{prefix}max_pool{dims}d_{kind}" for prefix in ("", "adaptive_") for dims in (2, 3)]
       for kind in ("argmax", "indices", "values", "backward")},
    "gather": ["gather_by_argmax", "gather_by_argmax3d", "adaptive_gather_by_argmax",
               "adaptive_gather_by_argmax3d"],
    "unpool_argmax": ["max_unpool2d_argmax", "max_unpool3d_argmax"],
}.items()}


def _op(kind, pool_args):
    return _OPS[kind][len(pool_args[0]) - 2 + (2 if len(pool_args) == 1 else 0)]


def _no_grads(pool_args):
    return (None,) * len(pool_args)  # no gradient for any pooling argument


def _spatial(t, pool_args):
    """t's (H, W), or (D, H, W) for 3-D pooling."""
    return tuple(t.shape[-len(pool_args[0]):])


def _kernel(op, *args):
    """op's kernel, below autograd: what a Function's forward computes. (The
    ops' C++ autograd refuses to run under torch.func transforms.)"""
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


class MaxPool2dArgmax(torch.autograd.Function):
    """(values, argmax); saves only the argmax."""

    generate_vmap_rule = True

    @staticmethod
    def forward(input, *pool_args):
        return _kernel(_op("argmax", pool_args), input, *pool_args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, *ctx.pool_args = inputs
        ctx.input_hw = _spatial(input, ctx.pool_args)
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.save_for_forward(output[1])
        # else autograd fills a zero "gradient" for the argmax on every backward
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, grad_values, _grad_argmax):
        if grad_values is None:
            return (None, *_no_grads(ctx.pool_args))
        (argmax,) = ctx.saved_tensors
        grad = route_to_input(grad_values, argmax, ctx.input_hw, *ctx.pool_args)
        return (grad, *_no_grads(ctx.pool_args))

    @staticmethod
    def jvp(ctx, input_tangent, *_):
        (argmax,) = ctx.saved_tensors
        return gather_at_argmax(input_tangent, argmax, *ctx.pool_args), None


class MaxPool2dIndices(MaxPool2dArgmax):
    """(values, argmax, indices) in one pass (return_indices); saves only the argmax."""

    @staticmethod
    def forward(input, *pool_args):
        return _kernel(_op("indices", pool_args), input, *pool_args)

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
    def forward(input, *pool_args):
        return _kernel(_op("values", pool_args), input, *pool_args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, *ctx.pool_args = inputs
        ctx.save_for_backward(input)
        ctx.save_for_forward(input)

    @staticmethod
    def _argmax(ctx):
        (input,) = ctx.saved_tensors
        argmax_op = _op("argmax", ctx.pool_args)
        return input, _kernel(argmax_op, input.detach(), *ctx.pool_args)[1]

    @staticmethod
    def backward(ctx, grad_values):
        input, argmax = MaxPool2dValues._argmax(ctx)
        grad = route_to_input(grad_values, argmax, _spatial(input, ctx.pool_args),
                              *ctx.pool_args)
        return (grad, *_no_grads(ctx.pool_args))

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

    def forward(values, argmax, hw, *pool_args):
        return _kernel(_op(kind, pool_args), values, argmax, hw, *pool_args)

    def setup_context(ctx, inputs, output):
        _, argmax, ctx.hw, *ctx.pool_args = inputs
        ctx.save_for_backward(argmax)
        ctx.save_for_forward(argmax)

    def backward(ctx, grad):
        (argmax,) = ctx.saved_tensors
        return (gather_at_argmax(grad, argmax, *ctx.pool_args), None, None,
                *_no_grads(ctx.pool_args))

    def jvp(ctx, values_tangent, *_):
        (argmax,) = ctx.saved_tensors
        op = _op(kind, ctx.pool_args)
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
    def forward(src, argmax, *pool_args):
        return _kernel(_op("gather", pool_args), src, argmax, *pool_args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        src, argmax, *ctx.pool_args = inputs
        ctx.src_hw = _spatial(src, ctx.pool_args)
        ctx.save_for_backward(argmax)
        ctx.save_for_forward(argmax)

    @staticmethod
    def backward(ctx, grad):
        (argmax,) = ctx.saved_tensors
        return (route_to_input(grad, argmax, ctx.src_hw, *ctx.pool_args), None,
                *_no_grads(ctx.pool_args))

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
    return (torch.autograd.forward_ad._current_level >= 0
            or torch._C._are_functorch_transforms_active())


_fast_ops = {}  # op overload -> its number for _C.call


def _call(op, function, tensor, *args):
    """op(tensor, *args), through the autograd.Function where its forward-mode
    or vmap rule may be needed. Everything else goes to the op, whose autograd
    serves reverse mode and passes an untracked call straight to the kernel:
    through _C.call (csrc/module.cpp), the same dispatcher without torch.ops'
    argument parsing, unless a torch function mode is on or an argument is of
    a type it does not take (a tensor subclass). Dynamo cannot trace a Function
    with a jvp, nor _C.call, so compiled code always calls the op. op is an
    overload (.default): the packet would resolve it again on every call."""
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


# The calls below take the pooling arguments (see _op).


def pool_argmax(input, *pool_args):
    return _call(_op("argmax", pool_args), MaxPool2dArgmax, input, *pool_args)


def pool_indices(input, *pool_args):
    return _call(_op("indices", pool_args), MaxPool2dIndices, input, *pool_args)


def pool_values(input, *pool_args):
    return _call(_op("values", pool_args), MaxPool2dValues, input, *pool_args)


def route_to_input(pooled, argmax, input_hw, *pool_args):
    return _call(_op("backward", pool_args), RouteToInput, pooled, argmax, input_hw, *pool_args)


def gather_at_argmax(src, argmax, *pool_args):
    return _call(_op("gather", pool_args), GatherAtArgmax, src, argmax, *pool_args)


def unpool_by_indices(input, indices, output_hw):
    for n in output_hw:  # an unpooled size beyond int64: torch's TypeError
        _int64(n, "output_size", "max_unpool", output_hw)
    return _call(ops.max_unpool2d.default, UnpoolByIndices, input, indices, output_hw)


def unpool_by_argmax(values, argmax, output_hw, *pool_args):
    return _call(_op("unpool_argmax", pool_args), UnpoolByArgmax, values, argmax, output_hw,
                 *pool_args)
