"""Property tests: random max_pool2d and max_unpool2d calls, valid or not, give
torch's results or torch's exception type.

HYPOTHESIS_PROFILE=ci (default: derandomized, 300 examples per property, ~10 s) or
HYPOTHESIS_PROFILE=fuzz (random, 5000 examples per property, ~4 min).
"""

import os
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import poolx
from reference import torch_grad

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("ci", derandomize=True, max_examples=300, **_common)
settings.register_profile("fuzz", max_examples=5000, **_common)
fuzz_settings = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

exact = dict(rtol=0, atol=0, equal_nan=True)
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64]
LAYOUTS = ["contiguous", "channels_last", "sliced", "transposed"]


def max_unpool2d(input, indices, output_size):
    """The unpool op itself, fuzzed against aten's op (the Python API adds only
    torch's output-size rule, tested in test_unpool.py)."""
    return torch.ops.poolx.max_unpool2d(input, indices, output_size)


def torch_unpool(input, indices, output_size):
    """torch's CPU unpool on one thread, where the last input of a plane in row-major order
    wins a repeated index; with more threads torch's writes race (parallel over elements)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return torch.ops.aten.max_unpool2d(input, indices, output_size)
    finally:
        torch.set_num_threads(threads)


def raises_like(expected, call):
    """call() raises an exception of exactly type(expected)."""
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is type(expected), (info.value, expected)


# ---- tensors ------------------------------------------------------------------------------


def random_values(shape, dtype, seed, specials):
    """Values from a small range (many ties), with NaN/-inf/inf planted in floats."""
    g = torch.Generator().manual_seed(seed)
    low = 0 if dtype == torch.uint8 else -4
    x = torch.randint(low, 5, shape, generator=g).to(torch.float64)
    if dtype.is_floating_point and specials and x.numel():
        flat = x.view(-1)
        for value in specials:
            flat[torch.randint(0, flat.numel(), (max(1, flat.numel() // 8),), generator=g)] = value
    return x.to(dtype)


def laid_out(values, layout):
    """values in a tensor with the given memory layout; padding elements hold 100."""
    if layout == "channels_last":
        return values.contiguous(memory_format=torch.channels_last)
    if layout == "sliced":
        wide = torch.full((*values.shape[:-1], 2 * values.shape[-1]), 100, dtype=values.dtype)
        wide[..., ::2] = values
        return wide[..., ::2]
    if layout == "transposed":
        return values.transpose(-1, -2).contiguous().transpose(-1, -2)
    return values


@st.composite
def tensors(draw, shape, dtypes):
    dtype = draw(st.sampled_from(dtypes))
    layouts = LAYOUTS if len(shape) == 4 else [l for l in LAYOUTS if l != "channels_last"]
    specials = draw(st.sampled_from([(), (float("nan"),), (float("-inf"),),
                                     (float("nan"), float("nan"), float("inf"))]))
    values = random_values(shape, dtype, draw(st.integers(0, 2**31)), specials)
    return laid_out(values, draw(st.sampled_from(layouts)))


# ---- pooling configurations ---------------------------------------------------------------


@dataclass
class Pool:
    kernel_size: object
    stride: object
    padding: object
    dilation: object
    ceil_mode: bool

    def kwargs(self):
        return vars(self)


def leading_dims(draw, batch_sizes):
    batch = draw(st.sampled_from(batch_sizes))
    channels = draw(st.integers(1, 3))
    return (channels,) if batch is None else (batch, channels)


@st.composite
def valid_pools(draw):
    kernel = [draw(st.integers(1, 4) | st.integers(15, 17)) for _ in range(2)]
    dilation = [draw(st.integers(1, 3)) for _ in range(2)]
    padding = [draw(st.integers(0, k // 2)) for k in kernel]
    stride = draw(st.none() | st.tuples(st.integers(1, 4), st.integers(1, 4)))
    # Smallest input with at least one output: dilated window minus both paddings.
    hw = [
        draw(st.integers(max(1, d * (k - 1) + 1 - 2 * p), max(1, d * (k - 1) + 1 - 2 * p) + 9))
        for k, d, p in zip(kernel, dilation, padding)
    ]
    shape = (*leading_dims(draw, [None, 0, 1, 2, 3]), *hw)
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES))
    return x, Pool(tuple(kernel), stride, tuple(padding), tuple(dilation), draw(st.booleans()))


def int_args(low, high):
    """Pooling argument forms torch accepts or rejects: int, (), (a,), (a, b), (a, b, c)."""
    return st.integers(low, high) | st.lists(st.integers(low, high), max_size=3).map(tuple)


@st.composite
def any_pools(draw):
    ndim = draw(st.sampled_from([2, 3, 4, 4, 5]))
    shape = tuple(draw(st.integers(0, 6)) for _ in range(ndim))
    x = draw(tensors(shape, FLOAT_DTYPES + INT_DTYPES + [torch.bool, torch.complex64]))
    pool = Pool(draw(int_args(-1, 7)), draw(st.none() | int_args(-1, 4)), draw(int_args(-1, 3)),
                draw(int_args(-1, 3)), draw(st.booleans()))
    return x, pool


def window_has_input(size, out, kernel, stride, pad, dilation):
    """Per output position along one axis: does any tap of its window land in [0, size)?"""
    return torch.tensor([
        any(0 <= o * stride - pad + k * dilation < size for k in range(kernel)) for o in range(out)
    ], dtype=torch.bool)


def nonempty_windows(values, x, pool):
    """Mask over values: True where the window holds at least one input element."""
    k, s, p, d = map(_pair, (pool.kernel_size, pool.stride or pool.kernel_size, pool.padding,
                             pool.dilation))
    rows = window_has_input(x.shape[-2], values.shape[-2], k[0], s[0], p[0], d[0])
    cols = window_has_input(x.shape[-1], values.shape[-1], k[1], s[1], p[1], d[1])
    return (rows[:, None] & cols[None, :]).expand(values.shape)


def _pair(v):
    v = (v,) if isinstance(v, int) else tuple(v)
    return v * 2 if len(v) == 1 else v


# ---- checks -------------------------------------------------------------------------------


def torch_max_pool2d(x, pool):
    """torch's values and indices. torch's channels_last kernel for integer dtypes refuses
    planes of more elements than the dtype can count (int8: 127); its NCHW kernel agrees
    with it everywhere else, so it stands in there."""
    if not x.dtype.is_floating_point and x.dim() == 4 and x.is_contiguous(
        memory_format=torch.channels_last
    ):
        x = x.contiguous()
    return F.max_pool2d(x, **pool.kwargs(), return_indices=True)


def check_forward(x, pool):
    expected, expected_indices = torch_max_pool2d(x, pool)
    values, indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
    torch.testing.assert_close(values, expected, **exact)
    torch.testing.assert_close(poolx.max_pool2d(x, **pool.kwargs()), expected, **exact)
    inside = nonempty_windows(values, x, pool)
    # torch's CPU kernel gives out-of-range indices for windows with no input element.
    torch.testing.assert_close(indices[inside], expected_indices[inside], **exact)
    plane = x.shape[-2] * x.shape[-1]
    assert bool(((indices >= 0) & (indices < plane)).all())
    return expected_indices, bool(inside.all())


def check_backward(x, pool, expected_indices, torch_is_safe):
    x = x.detach().requires_grad_()
    values = poolx.max_pool2d(x, **pool.kwargs())
    g = torch.Generator().manual_seed(x.numel())
    if torch_is_safe:
        grad_out = torch.randn(values.shape, generator=g).to(x.dtype)
        expected = torch_grad(x, pool, grad_out)
    else:
        # torch's backward would follow its out-of-range indices; integer gradients make
        # a scatter-add reference exact in any order.
        grad_out = torch.randint(-8, 9, values.shape, generator=g).to(x.dtype)
        kept = torch.where(nonempty_windows(values, x, pool), grad_out.double(), 0.0)
        index = expected_indices.clamp(0, x.shape[-2] * x.shape[-1] - 1).flatten(-2)
        expected = torch.zeros(*x.shape[:-2], x.shape[-2] * x.shape[-1], dtype=torch.float64)
        expected = expected.scatter_add(-1, index, kept.flatten(-2)).view(x.shape).to(x.dtype)
    values.backward(grad_out)
    torch.testing.assert_close(x.grad, expected, **exact)


@fuzz_settings
@given(valid_pools())
def test_valid_pool_matches_torch(case):
    x, pool = case
    expected_indices, torch_is_safe = check_forward(x, pool)
    if x.dtype.is_floating_point:
        check_backward(x, pool, expected_indices, torch_is_safe)


@fuzz_settings
@given(any_pools())
def test_any_pool_call_raises_where_torch_raises(case):
    x, pool = case
    try:
        torch_max_pool2d(x, pool)
    except Exception as error:  # noqa: BLE001  (any exception torch raises, poolx must too)
        raises_like(error, lambda: poolx.max_pool2d(x, **pool.kwargs(), return_indices=True))
        raises_like(error, lambda: poolx.max_pool2d(x, **pool.kwargs()))
        return
    check_forward(x, pool)


# ---- unpool -------------------------------------------------------------------------------


@st.composite
def unpool_cases(draw, index_low=0, index_extra=0):
    """(input, indices, output_size); indices drawn from a few plane positions (repeats)."""
    shape = (*leading_dims(draw, [None, 0, 1, 2]), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    x = draw(tensors(shape, FLOAT_DTYPES))
    out_hw = [draw(st.integers(1, 7)), draw(st.integers(1, 7))]
    plane = out_hw[0] * out_hw[1]
    targets = draw(st.integers(1, plane))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    offset = torch.randint(0, plane - targets + 1, (), generator=g)
    indices = torch.randint(index_low, targets + index_extra, shape, generator=g) + offset
    return x, laid_out(indices, draw(st.sampled_from(["contiguous", "sliced"]))), out_hw


@fuzz_settings
@given(unpool_cases())
def test_valid_unpool_matches_torch(case):
    x, indices, out_hw = case
    expected = torch_unpool(x, indices, out_hw)
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **exact)


@fuzz_settings
@given(unpool_cases(index_low=-3, index_extra=60), st.booleans())
def test_unpool_with_out_of_range_index_raises(case, negative):
    x, indices, out_hw = case
    plane = out_hw[0] * out_hw[1]
    if indices.numel():
        indices.view(-1)[indices.numel() // 2] = -1 if negative else plane
    try:
        expected = torch_unpool(x, indices, out_hw)
    except RuntimeError as error:
        assert "invalid max index" in str(error)
        raises_like(error, lambda: max_unpool2d(x, indices, out_hw))
        return
    assert x.numel() == 0
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **exact)


@st.composite
def any_unpools(draw):
    shapes = [tuple(draw(st.integers(0, 3)) for _ in range(draw(st.sampled_from([2, 3, 4, 5]))))]
    shapes.append(draw(st.sampled_from(shapes) | st.just((1, 2, 2, 2))))
    x = draw(tensors(shapes[0], FLOAT_DTYPES + [torch.bool]))
    index_dtype = draw(st.sampled_from([torch.int64, torch.int64, torch.int32]))
    indices = torch.randint(-1, 10, shapes[1]).to(index_dtype)
    out_hw = draw(st.lists(st.integers(-1, 5), min_size=1, max_size=3))
    return x, indices, out_hw


@fuzz_settings
@given(any_unpools())
def test_any_unpool_call_raises_where_torch_raises(case):
    x, indices, out_hw = case
    try:
        expected = torch_unpool(x, indices, out_hw)
    except Exception as error:  # noqa: BLE001  (any exception torch raises, poolx must too)
        raises_like(error, lambda: max_unpool2d(x, indices, out_hw))
        return
    if x.dtype == torch.bool:
        # torch checks the dtype only when the output has elements; poolx always does.
        with pytest.raises(NotImplementedError):
            max_unpool2d(x, indices, out_hw)
        return
    if 0 in out_hw and indices.numel():
        # torch skips its index check when the output is empty; every index is out of range.
        with pytest.raises(RuntimeError, match="invalid max index"):
            max_unpool2d(x, indices, out_hw)
        return
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **exact)
