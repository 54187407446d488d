"""PyTorch's own test inputs for max pooling and unpooling (the OpInfo and
ModuleInfo entries its test suite runs: torch.testing._internal), run through
poolx and compared with torch bit for bit: values, indices, gradients, and
the error type and message of every invalid input it lists."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import SampleInput, op_db
from torch.testing._internal.common_modules import module_db

import poolx

from reference import sums_like_cuda

OPINFOS = {
    (op.name, op.variant_test_name): op
    for op in op_db
    if op.name in ("nn.functional.max_pool1d", "nn.functional.max_pool2d",
                   "nn.functional.max_pool3d", "nn.functional.max_unpool1d",
                   "nn.functional.max_unpool2d", "nn.functional.max_unpool3d",
                   "nn.functional.adaptive_max_pool1d", "nn.functional.adaptive_max_pool2d",
                   "nn.functional.adaptive_max_pool3d")
}
POOLX_FUNCTIONS = {"nn.functional.max_pool1d": poolx.max_pool1d,
                   "nn.functional.max_pool2d": poolx.max_pool2d,
                   "nn.functional.max_pool3d": poolx.max_pool3d,
                   "nn.functional.max_unpool1d": poolx.max_unpool1d,
                   "nn.functional.max_unpool2d": poolx.max_unpool2d,
                   "nn.functional.max_unpool3d": poolx.max_unpool3d,
                   "nn.functional.adaptive_max_pool1d": poolx.adaptive_max_pool1d,
                   "nn.functional.adaptive_max_pool2d": poolx.adaptive_max_pool2d,
                   "nn.functional.adaptive_max_pool3d": poolx.adaptive_max_pool3d}
POOLX_MODULES = {torch.nn.MaxPool1d: poolx.MaxPool1d, torch.nn.MaxPool2d: poolx.MaxPool2d,
                 torch.nn.MaxPool3d: poolx.MaxPool3d, torch.nn.MaxUnpool1d: poolx.MaxUnpool1d,
                 torch.nn.MaxUnpool2d: poolx.MaxUnpool2d, torch.nn.MaxUnpool3d: poolx.MaxUnpool3d,
                 torch.nn.AdaptiveMaxPool1d: poolx.AdaptiveMaxPool1d,
                 torch.nn.AdaptiveMaxPool2d: poolx.AdaptiveMaxPool2d,
                 torch.nn.AdaptiveMaxPool3d: poolx.AdaptiveMaxPool3d}
MODULE_INFOS = [m for m in module_db if m.module_cls in POOLX_MODULES]


def exact(actual, expected, what):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=what)


def outputs_and_grads(fn, sample, upstream_dtype=None):
    """fn's outputs on sample, and the input's gradient from a fixed upstream
    gradient (rounded to upstream_dtype) when the input requires one."""
    out = fn(sample.input, *sample.args, **sample.kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    if not sample.input.requires_grad:
        return outs, None
    gen = torch.Generator().manual_seed(0)
    upstream = torch.randn(outs[0].shape, generator=gen).to(upstream_dtype or outs[0].dtype)
    (grad,) = torch.autograd.grad(outs[0], sample.input, upstream.to(outs[0].dtype))
    return outs, grad


def torch_grad_summed_in_float32(torch_fn, sample):
    """torch's gradient of a float16/bfloat16 sample as its CUDA kernel sums it:
    in float32 from the same upstream gradient, rounded once."""
    x = sample.input.detach().float().requires_grad_()
    wide = sample.transform(lambda t: x if t is sample.input else t)
    return outputs_and_grads(torch_fn, wide, sample.input.dtype)[1].to(sample.input.dtype)


def fresh(sample):
    """The sample's input as a new leaf, so each side gets its own gradient."""
    x = sample.input.detach().clone().requires_grad_(sample.input.requires_grad)
    return sample.transform(lambda t: x if t is sample.input else t)


@pytest.mark.parametrize("key", OPINFOS, ids=lambda k: ".".join(filter(None, k)))
def test_opinfo_samples_match_torch(key):
    op = OPINFOS[key]
    torch_fn, poolx_fn = op.op, POOLX_FUNCTIONS[op.name]
    checked = 0
    for dtype in sorted(op.supported_dtypes("cpu"), key=str):
        grad = dtype.is_floating_point and op.supports_autograd
        for sample in op.sample_inputs("cpu", dtype, requires_grad=grad):
            what = f"{key} | {dtype} | {tuple(sample.input.shape)} | {sample.args} {sample.kwargs}"
            got, got_grad = outputs_and_grads(poolx_fn, fresh(sample))
            expected, expected_grad = outputs_and_grads(torch_fn, fresh(sample))
            assert len(got) == len(expected), what
            for g, e in zip(got, expected):
                exact(g, e, what)
                assert g.stride() == e.stride() or g.numel() <= 1, f"strides of {what}"
            if expected_grad is not None:
                if sums_like_cuda(sample.input) and dtype in (torch.float16, torch.bfloat16):
                    expected_grad = torch_grad_summed_in_float32(torch_fn, sample)
                exact(got_grad, expected_grad, f"input gradient of {what}")
            checked += 1
    assert checked > 30  # the smallest entry (max_unpool3d.grad) has 42 samples


@pytest.mark.parametrize("key", [k for k, op in OPINFOS.items() if op.error_inputs_func],
                         ids=lambda k: ".".join(filter(None, k)))
def test_opinfo_error_inputs_raise_as_torch(key):
    op = OPINFOS[key]
    for error in op.error_inputs("cpu"):
        s = error.sample_input
        with pytest.raises(error.error_type, match=error.error_regex):
            POOLX_FUNCTIONS[op.name](s.input, *s.args, **s.kwargs)


@pytest.mark.parametrize("info", MODULE_INFOS, ids=lambda m: m.module_cls.__name__)
def test_moduleinfo_inputs_match_torch(info):
    checked = 0
    for dtype in (torch.float32, torch.float64):
        for module_input in info.module_inputs_func(info, device="cpu", dtype=dtype,
                                                    requires_grad=True, training=True):
            ctor, fwd = module_input.constructor_input, module_input.forward_input
            if fwd is None:
                continue
            what = f"{info.module_cls.__name__}{ctor.args}{ctor.kwargs} | {dtype}"
            results = []
            for cls in (POOLX_MODULES[info.module_cls], info.module_cls):
                module = cls(*ctor.args, **ctor.kwargs)
                sample = SampleInput(fwd.args[0], args=fwd.args[1:], kwargs=fwd.kwargs)
                results.append(outputs_and_grads(module, fresh(sample)))
            (got, got_grad), (expected, expected_grad) = results
            for g, e in zip(got, expected):
                exact(g, e, what)
            if expected_grad is not None:
                exact(got_grad, expected_grad, f"input gradient of {what}")
            checked += 1
    assert checked > 0
