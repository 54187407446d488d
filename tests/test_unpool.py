"""poolx.max_unpool2d (torch's int64 indices) and poolx.max_unpool2d_argmax
(the compact argmax) against torch.nn.functional.max_unpool2d on CPU."""

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from unpool_cases import CASES, assert_same_bits, layout, planted, torch_indices, values_like

import poolx

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def pooled_input(case, device, channels_last, batch=(2, 3)):
    pool, hw = CASES[case]
    x = planted((*batch, *hw), device=device, channels_last=channels_last)
    return pool, x, torch_indices(x, pool)


def unpool_args(pool):
    """kernel_size, stride, padding for unpooling after `pool`: unpool has no
    dilation, so a dilated window counts with its span (for the size check)."""
    kernel, stride, padding, dilation = (nn.modules.utils._pair(a) for a in pool[:4])
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    return span, stride, padding


def torch_unpool(values, indices, pool, output_size):
    """The reference: torch's CPU result on one thread. With more threads its
    kernel splits a plane between them and a repeated index may keep either
    write; on one thread the last write in row-major input order wins."""
    contiguous = [t.cpu().contiguous() for t in (values, indices)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return F.max_unpool2d(*contiguous, *unpool_args(pool), output_size=output_size)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(device, case, dtype, channels_last):
    pool, x, indices = pooled_input(case, device, channels_last)
    values = values_like(indices, dtype)
    expected = torch_unpool(values, indices, pool, x.shape)

    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    assert_same_bits(out, expected)
    assert out.is_contiguous(memory_format=torch.channels_last) == channels_last

    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)


@pytest.mark.parametrize("channels", [1, 2, 3, 20])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_tiled_argmax_unpool_copies_bits(device, channels, channels_last):
    """Tiled float32 unpool by argmax runs the tiled backward's kernels with the
    value copied: wide rows (several vectors, a partial one), floor-mode
    leftovers, NaN payloads and -0.0 kept, every channel-count path."""
    pool = (2, 2, 0, 1, False)
    x = planted((2, channels, 9, 45), device=device, channels_last=channels_last)
    indices = torch_indices(x, pool)
    values = values_like(indices, torch.float32)
    values.view(torch.int32)[..., 0, 0] = 0x7FC00001  # a NaN with a payload
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    expected = torch_unpool(values, indices, pool, x.shape)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool), expected)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8], ids=str)
def test_integer_values(dtype):
    """torch has no integer unpool on CPU; poolx places integers exactly."""
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", "cpu", False)
    values = torch.randint(0, 100, indices.shape, dtype=dtype)
    expected = torch_unpool(values.double(), indices, pool, x.shape).to(dtype)
    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), x.shape[-2:])
    assert torch.equal(out, expected)


def test_unbatched(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False, batch=(3,))
    values = values_like(indices, torch.float32)
    expected = torch_unpool(values, indices, pool, x.shape[-2:])
    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), x.shape[-2:])
    assert_same_bits(out, expected)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    assert_same_bits(poolx.max_unpool2d_argmax(values, argmax, x.shape[-2:], *pool), expected)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("case", CASES)
def test_gradients_match_torch(device, case, channels_last):
    """Gradient = grad_output at each value's index, even for a value a later
    one overwrote (torch's definition), and so for both forms."""
    pool, x, indices = pooled_input(case, device, channels_last=channels_last)
    values = values_like(indices, torch.float64).nan_to_num().requires_grad_()
    grad_out = torch.randn(x.shape, dtype=torch.float64, device=device)
    if channels_last:
        grad_out = grad_out.contiguous(memory_format=torch.channels_last)
    ref_values = values.detach().cpu().requires_grad_()
    torch_unpool(ref_values, indices, pool, x.shape).backward(grad_out.cpu())

    out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    (grad,) = torch.autograd.grad(out, values, grad_out)
    assert_same_bits(grad, ref_values.grad)

    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    out = poolx.max_unpool2d_argmax(values, argmax, x.shape, *pool)
    (grad,) = torch.autograd.grad(out, values, grad_out)
    assert_same_bits(grad, ref_values.grad)


@pytest.mark.parametrize("case", CASES)
def test_forward_ad_and_torch_func_match_torch(device, case):
    """The tangent of an unpool is the unpooled tangent (torch's rule), through
    forward-mode AD and torch.func, for both forms; grad and vmap likewise."""
    from torch.autograd import forward_ad

    pool, x, indices = pooled_input(case, device, channels_last=False)
    values = values_like(indices, torch.float64).nan_to_num()
    tangent = torch.randn_like(values)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    ours = {
        "indices": lambda v: poolx.max_unpool2d(v, indices, *unpool_args(pool), x.shape),
        "argmax": lambda v: poolx.max_unpool2d_argmax(v, argmax, x.shape, *pool),
    }

    def ref(v):
        return torch_unpool(v, indices, pool, x.shape).to(device)

    expected_tangent = ref(tangent)
    expected_grad = torch.func.grad(lambda v: ref(v).square().sum())(values)
    for form, unpool in ours.items():
        with forward_ad.dual_level():
            out = forward_ad.unpack_dual(unpool(forward_ad.make_dual(values, tangent)))
        assert_same_bits(out.tangent, expected_tangent)
        assert_same_bits(torch.func.jvp(unpool, (values,), (tangent,))[1], expected_tangent)
        assert_same_bits(torch.func.grad(lambda v: unpool(v).square().sum())(values),
                         expected_grad)
        batch = torch.stack([values, tangent])
        assert_same_bits(torch.func.vmap(unpool)(batch), torch.stack([ref(values), ref(tangent)]))


@pytest.mark.parametrize("shape", [(0, 3, 4, 5), (0, 4, 5)], ids=["batch 0", "3-D, 0 planes"])
def test_empty_backward_matches_torch(shape):
    values = torch.randn(shape, requires_grad=True)
    indices = torch.zeros(shape, dtype=torch.long)
    out = poolx.max_unpool2d(values, indices, 2)
    out.sum().backward()
    expected = F.max_unpool2d(values.detach(), indices, 2)
    assert out.shape == expected.shape and values.grad.shape == values.shape


def test_gradcheck(device):
    """Tiled windows (no repeated index), so the gradient is the true derivative."""
    pool, x, indices = pooled_input("tiled 2x2, odd size", device, False, batch=(1, 2))
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = torch.randn(indices.shape, dtype=torch.float64, device=device, requires_grad=True)
    for fn in (
        lambda v: poolx.max_unpool2d(v, indices, 2, output_size=x.shape),
        lambda v: poolx.max_unpool2d_argmax(v, argmax, x.shape, *pool),
    ):
        assert torch.autograd.gradcheck(fn, values)
        assert torch.autograd.gradgradcheck(fn, values)


OUTPUT_SIZES = {
    "default": None,
    "(H, W)": (7, 9),
    "full shape": (2, 3, 7, 9),
    "torch.Size": torch.Size([2, 3, 6, 8]),
    "list": [6, 9],
}


def even_pooled():
    x = planted((2, 3, 6, 8))
    return x, torch_indices(x, (2,))


@pytest.mark.parametrize("output_size", OUTPUT_SIZES.values(), ids=OUTPUT_SIZES)
def test_output_size(output_size):
    x, indices = even_pooled()
    values = values_like(indices, torch.float32)
    expected = F.max_unpool2d(values, indices, 2, output_size=output_size)
    assert_same_bits(poolx.max_unpool2d(values, indices, 2, output_size=output_size), expected)
    module = poolx.MaxUnpool2d(2)
    assert_same_bits(module(values, indices, output_size), expected)


@pytest.mark.parametrize("output_size", [(9, 9), (4, 8), (2, 3, 7), (7,)], ids=str)
def test_output_size_errors_are_torchs(output_size):
    x, indices = even_pooled()
    values = values_like(indices, torch.float32)
    with pytest.raises(ValueError) as expected:
        F.max_unpool2d(values, indices, 2, output_size=output_size)
    with pytest.raises(ValueError, match=re.escape(str(expected.value))):
        poolx.max_unpool2d(values, indices, 2, output_size=output_size)


def test_module_is_torchs():
    ours, theirs = poolx.MaxUnpool2d((3, 2), 1, (1, 0)), nn.MaxUnpool2d((3, 2), 1, (1, 0))
    assert isinstance(ours, nn.MaxUnpool2d)
    assert repr(ours) == "poolx." + repr(theirs)  # torch's arguments, poolx's name
    assert (ours.kernel_size, ours.stride, ours.padding) == ((3, 2), (1, 1), (1, 0))


def bad_indices(indices):
    """(name, indices, message) for every way indices can be wrong."""
    high = indices.clone()
    high.view(-1)[5] = 6 * 7
    negative = indices.clone()
    negative.view(-1)[-1] = -1
    return [
        ("one past the plane", high, "invalid max index: 42 (output volumes are of size 6x7)"),
        ("negative", negative, "Found an invalid max index: -1"),
        ("int32", indices.int(), "indices should be type int64 but got: Int"),
        ("wrong shape", indices[..., :-1], "Expected shape of indices to be same as that of"),
        ("other device", indices.to("meta"), "device"),
    ]


def test_bad_indices_raise(device):
    _, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False)
    values = values_like(indices, torch.float32)
    for name, bad, message in bad_indices(indices):
        with pytest.raises(RuntimeError, match=re.escape(message)):
            poolx.max_unpool2d(values, bad, 3, 1, 1, output_size=x.shape)


def test_bad_input_raises():
    with pytest.raises(RuntimeError, match="Expected 3d or 4d tensor for input"):
        poolx.max_unpool2d(torch.ones(2, 2), torch.zeros(2, 2, dtype=torch.long), 2)
    with pytest.raises(RuntimeError, match="non-zero size for non-batch dimensions"):
        poolx.max_unpool2d(torch.ones(1, 0, 2, 2), torch.zeros(1, 0, 2, 2, dtype=torch.long), 2)


def test_bad_argmax_raises(device):
    pool, x, _ = pooled_input("overlap 3/1 (indices repeat)", device, False)
    values, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    cases = [
        (argmax.long(), "argmax must have dtype Byte"),
        (argmax[..., :-1], "argmax must have the shape"),
        (argmax.to("meta"), "device"),
    ]
    for bad, message in cases:
        with pytest.raises(RuntimeError, match=message):
            poolx.max_unpool2d_argmax(values, bad, x.shape, *pool)
    with pytest.raises(RuntimeError, match="gives an output of size"):
        poolx.max_unpool2d_argmax(values, argmax, (9, 9), *pool)
    with pytest.raises(RuntimeError, match=r"output_size must be the input's full shape"):
        poolx.max_unpool2d_argmax(values, argmax, (1, 1, 6, 7), *pool)


def test_opcheck(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False, batch=(1, 2))
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = values_like(indices, torch.float32).nan_to_num().requires_grad_()
    torch.library.opcheck(torch.ops.poolx.max_unpool2d.default, (values, indices, (6, 7)))
    args = (values, argmax, (6, 7), [3, 3], [1, 1], [1, 1], [1, 1], False)
    torch.library.opcheck(torch.ops.poolx.max_unpool2d_argmax.default, args)


def test_compile_fullgraph(device):
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False)
    _, argmax = poolx.max_pool2d_with_argmax(x, *pool)
    values = values_like(indices, torch.float32).nan_to_num().requires_grad_()

    def both(v):
        return poolx.max_unpool2d(v, indices, 3, 1, 1, x.shape) + poolx.max_unpool2d_argmax(
            v, argmax, x.shape, *pool
        )

    compiled = torch.compile(both, fullgraph=True, backend="aot_eager")
    expected, got = both(values), compiled(values)
    assert_same_bits(got, expected)
    grad_out = torch.randn_like(expected)
    assert_same_bits(
        torch.autograd.grad(got, values, grad_out)[0],
        torch.autograd.grad(expected, values, grad_out)[0].cpu(),
    )


def test_allowed_under_deterministic_algorithms():
    """torch refuses its unpool here (its kernels race on repeated indices)."""
    pool, x, indices = pooled_input("overlap 3/1 (indices repeat)", "cpu", False)
    values = values_like(indices, torch.float32)
    expected = torch_unpool(values, indices, pool, x.shape)
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
            F.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
        out = poolx.max_unpool2d(values, indices, *unpool_args(pool), output_size=x.shape)
    finally:
        torch.use_deterministic_algorithms(False)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("batch", [(1, 70), (1, 3), (3, 5), (5, 33)], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_scattered_indices_match_torch(batch, channels_last, dtype):
    """Indices anywhere in the plane, repeated, and jumping back behind the
    ones before: the CPU kernel zeroes its output only ahead of the furthest
    index so far, and splits channels_last images into channel blocks."""
    gen = torch.Generator().manual_seed(sum(batch))
    out_hw = (40, 41)
    indices = torch.randint(0, out_hw[0] * out_hw[1], (*batch, 20, 20), generator=gen)
    indices[..., 5, :] = indices[..., 4, :]  # repeats within each plane
    indices[..., -1, -1] = out_hw[0] * out_hw[1] - 1  # the plane's last pixel
    values = values_like(indices, dtype)
    if channels_last:
        indices = indices.contiguous(memory_format=torch.channels_last)
        values = values.contiguous(memory_format=torch.channels_last)
    expected = torch_unpool(values, indices, (2, 2, 0, 1, False), out_hw)
    actual = poolx.max_unpool2d(values, indices, 2, 2, output_size=out_hw)
    assert actual.is_contiguous(memory_format=layout(values))
    assert_same_bits(actual.contiguous(), expected)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("bad", [-5, 40 * 40], ids=["negative", "one past the plane"])
def test_an_invalid_index_in_any_plane_raises(channels_last, bad):
    indices = torch.randint(0, 40 * 40, (2, 37, 20, 20))
    indices[1, 36, 19, 7] = bad  # the last plane's last row
    values = torch.randn(indices.shape)
    if channels_last:
        indices = indices.contiguous(memory_format=torch.channels_last)
        values = values.contiguous(memory_format=torch.channels_last)
    message = f"Found an invalid max index: {bad} (output volumes are of size 40x40)"
    with pytest.raises(RuntimeError, match=re.escape(message)):
        poolx.max_unpool2d(values, indices, 2)




def test_output_size_rule_is_torchs_on_every_call():
    """poolx works out an output size once per distinct call and keeps it:
    repeated and interleaved calls, valid and invalid, still give torch's
    sizes and torch's errors every time."""
    values, indices = F.max_pool2d(torch.randn(1, 2, 6, 10), 2, return_indices=True)
    sizes = [None, (6, 10), [7, 11], torch.Size([1, 2, 6, 11]), (9, 10), [6], [6.0, 10.0], 7]
    for _ in range(2):
        for kernel in (2, (2, 2)):
            for output_size in sizes:
                try:
                    expected = F.max_unpool2d(values, indices, kernel, output_size=output_size)
                except Exception as error:
                    with pytest.raises(type(error), match=re.escape(str(error))):
                        poolx.max_unpool2d(values, indices, kernel, output_size=output_size)
                else:
                    got = poolx.max_unpool2d(values, indices, kernel, output_size=output_size)
                    assert torch.equal(got, expected), output_size
