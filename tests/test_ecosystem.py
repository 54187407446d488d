"""poolx inside the rest of PyTorch: torch.compile, compiled autograd,
torch.export, autocast, activation checkpointing, deterministic mode and
Python threads."""

import contextlib
import io
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch.utils.checkpoint import checkpoint

import poolx

exact = dict(rtol=0, atol=0, equal_nan=True)


def with_ties(*shape, device="cpu", dtype=torch.float32):
    """Random values from a small set, so that many windows hold tied maxima."""
    return torch.randint(-4, 5, shape, device=device).to(dtype)


def small_cnn(pool):
    """A small CNN whose two pooling layers are built by `pool(kernel, stride, padding)`."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        pool(3, 2, 1),
        nn.ReLU(),
        nn.Conv2d(4, 4, 3, padding=1),
        pool(2, 2, 0),
    )


def poolx_and_torch_cnns():
    return small_cnn(poolx.MaxPool2d), small_cnn(nn.MaxPool2d)


def test_compile_dynamic_fullgraph_compiles_once(device):
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    def step(x):
        values, indices = poolx.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
        return poolx.max_pool2d(values.relu(), 2, ceil_mode=True), indices

    compiled = torch.compile(step, backend=counter, dynamic=True, fullgraph=True)
    # Sizes >= 2: torch.compile specializes sizes 0 and 1 by design.
    for n, h, w in [(2, 9, 11), (3, 12, 10), (5, 17, 8), (2, 30, 31)]:
        x = with_ties(n, 3, h, w, device=device).requires_grad_()
        x_ref = x.detach().clone().requires_grad_()
        out, indices = compiled(x)
        values_ref, indices_ref = F.max_pool2d(x_ref, 3, 2, 1, return_indices=True)
        out_ref = F.max_pool2d(values_ref.relu(), 2, ceil_mode=True)
        torch.testing.assert_close(out, out_ref, **exact)
        torch.testing.assert_close(indices, indices_ref, **exact)
        grad = torch.randn_like(out)
        out.backward(grad)
        out_ref.backward(grad)
        torch.testing.assert_close(x.grad, x_ref.grad, **exact)
    assert counter.frame_count == 1


def test_export_round_trip_runs_and_matches():
    model, reference = poolx_and_torch_cnns()
    x = torch.randn(2, 3, 13, 11)
    # Heights and widths from 8 up keep every pooled size above 1, which export would specialize.
    dims = {0: torch.export.Dim("n"), 2: torch.export.Dim("h", min=8),
            3: torch.export.Dim("w", min=8)}
    program = torch.export.export(model, (x,), dynamic_shapes=(dims,))
    targets = {str(node.target) for node in program.graph.nodes}
    assert any(t.startswith("poolx.") for t in targets), targets
    assert not any("max_pool2d_with_indices" in t for t in targets), targets

    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    for shape in [(2, 3, 13, 11), (5, 3, 20, 17)]:
        x = torch.randn(shape)
        expected = reference(x)
        torch.testing.assert_close(program.module()(x), expected, **exact)
        torch.testing.assert_close(loaded.module()(x), expected, **exact)


@pytest.mark.parametrize("source", ["float32 input", "bfloat16 conv output"])
def test_autocast_cpu_bfloat16_behaves_like_nn(source):
    model, reference = poolx_and_torch_cnns()
    x = with_ties(2, 3, 12, 10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if source == "bfloat16 conv output":
            x = model[0](x)
            assert x.dtype == torch.bfloat16
        out = model[1](x)
        out_ref = reference[1](x)
    assert out.dtype == out_ref.dtype == x.dtype
    torch.testing.assert_close(out, out_ref, **exact)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_autocast_cuda_float16_behaves_like_nn():
    x = with_ties(2, 4, 12, 10, device="cuda")
    conv = nn.Conv2d(4, 4, 3).cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        for t in (x, conv(x)):
            out, out_ref = poolx.max_pool2d(t, 3, 2, 1), F.max_pool2d(t, 3, 2, 1)
            assert out.dtype == out_ref.dtype == t.dtype
            torch.testing.assert_close(out, out_ref, **exact)


@pytest.mark.parametrize("save", ["argmax", "recompute"])
def test_compiled_autograd_gives_equal_gradients(save):
    """Eager forward, backward traced by compiled autograd: poolx's C++
    autograd nodes must be traceable there, with the gradients of eager."""
    from torch._dynamo import compiled_autograd

    torch._dynamo.reset()
    model, reference = poolx_and_torch_cnns()
    for m in model:
        if isinstance(m, poolx.MaxPool2d):
            m.save = save
    x = with_ties(2, 3, 15, 13).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    out, out_ref = model(x), reference(x_ref)
    grad = torch.randn_like(out)
    with compiled_autograd._enable(torch.compile(backend="aot_eager", fullgraph=True)):
        out.backward(grad)
    out_ref.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, **exact)
    for p, p_ref in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, **exact)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_gives_equal_gradients(use_reentrant):
    model, reference = poolx_and_torch_cnns()
    blocks = (model[:3], model[3:])
    x = with_ties(2, 3, 15, 13).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()

    h = checkpoint(blocks[0], x, use_reentrant=use_reentrant)
    out = checkpoint(blocks[1], h, use_reentrant=use_reentrant)
    out_ref = reference(x_ref)
    torch.testing.assert_close(out, out_ref, **exact)
    grad = torch.randn_like(out)
    out.backward(grad)
    out_ref.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, **exact)
    for p, p_ref in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, **exact)


@contextlib.contextmanager
def deterministic_algorithms():
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def every_pool_op(x, lib):
    """Forward, indices, argmax, backward, double backward and unpool of `lib`."""
    x = x.detach().clone().requires_grad_()
    values, indices = lib.max_pool2d(x, 3, 2, 1, return_indices=True)
    grad_out = torch.linspace(-1, 1, values.numel(), device=x.device)
    grad_out = grad_out.reshape(values.shape).to(x.dtype).requires_grad_()
    (grad_in,) = torch.autograd.grad(values, x, grad_out, create_graph=True)
    (grad_grad_out,) = torch.autograd.grad(grad_in, grad_out, torch.ones_like(grad_in))
    unpooled = lib.max_unpool2d(values.detach(), indices, 3, 2, 1, output_size=x.shape[-2:])
    return [values, indices, grad_in, grad_grad_out, unpooled]


@pytest.mark.parametrize("channels_last", [False, True])
def test_deterministic_mode_runs_every_op_bit_for_bit(device, channels_last):
    x = with_ties(2, 3, 11, 9, device=device)
    x[0, 1, 2, 3] = float("nan")
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    # torch's own unpool refuses deterministic mode, so the reference runs outside it.
    reference = every_pool_op(x, F)
    with deterministic_algorithms():
        first, second = every_pool_op(x, poolx), every_pool_op(x, poolx)
        check_argmax_ops_repeat(x)
    for a, b, ref in zip(first, second, reference):
        torch.testing.assert_close(a, b, **exact)
        torch.testing.assert_close(a, ref, **exact)


def check_argmax_ops_repeat(x):
    """The ops every_pool_op does not reach each give the same bits twice."""
    with torch.no_grad():
        torch.testing.assert_close(poolx.max_pool2d(x, 3, 2, 1), poolx.max_pool2d(x, 3, 2, 1),
                                   **exact)
    values, argmax = poolx.max_pool2d_with_argmax(x, 3, 2, 1)
    args = (x.shape[-2:], 3, 2, 1)
    for op in (poolx.argmax_to_mask, poolx.argmax_to_indices):
        torch.testing.assert_close(op(argmax, *args), op(argmax, *args), **exact)
    grads = [poolx.max_pool2d_backward(values, argmax, *args) for _ in range(2)]
    torch.testing.assert_close(grads[0], grads[1], **exact)
    unpooled = [
        torch.ops.poolx.max_unpool2d_argmax(values, argmax, list(x.shape[-2:]), [3, 3], [2, 2],
                                            [1, 1], [1, 1], False)
        for _ in range(2)
    ]
    torch.testing.assert_close(unpooled[0], unpooled[1], **exact)


THREAD_CASES = [
    ((2, 3, 17, 13), dict(kernel_size=2)),
    ((1, 8, 32, 32), dict(kernel_size=3, stride=2, padding=1)),
    ((3, 2, 9, 40), dict(kernel_size=(2, 3), stride=1, dilation=(2, 1), ceil_mode=True)),
    ((4, 5, 6, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
]


def test_ops_from_concurrent_threads_are_correct():
    cases = []
    for shape, kwargs in THREAD_CASES:
        x = with_ties(*shape).requires_grad_()
        values, indices = F.max_pool2d(x, return_indices=True, **kwargs)
        grad_out = torch.randn_like(values)
        (grad,) = torch.autograd.grad(values, x, grad_out)
        unpooled = torch.ops.aten.max_unpool2d(values.detach(), indices, shape[-2:])
        cases.append((x.detach(), kwargs, grad_out, (values.detach(), indices, grad, unpooled)))

    def worker(thread):
        for call in range(20):
            x, kwargs, grad_out, expected = cases[(thread + call) % len(cases)]
            x = x.clone().requires_grad_()
            values, indices = poolx.max_pool2d(x, return_indices=True, **kwargs)
            (grad,) = torch.autograd.grad(values, x, grad_out)
            unpooled = torch.ops.poolx.max_unpool2d(values.detach(), indices, x.shape[-2:])
            for got, want in zip((values, indices, grad, unpooled), expected):
                torch.testing.assert_close(got, want, **exact)
        return thread

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sorted(pool.map(worker, range(4))) == [0, 1, 2, 3]
