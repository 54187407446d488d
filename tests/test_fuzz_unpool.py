"""Property tests of max_unpool2d: calls drawn by hypothesis, valid or not,
give torch's results bit for bit or torch's exception type. (test_fuzz.py does
the same for max_pool2d; the profiles are in fuzz_strategies.py.)"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fuzz_strategies import fuzz_settings, laid_out, leading_dims, tensors
from inputs import FLOAT_DTYPES
from reference import EXACT, raises_like, single_threaded


def max_unpool2d(input, indices, output_size):
    """The unpool op itself, fuzzed against aten's op (the Python API adds only
    torch's output-size rule, tested in test_unpool_arguments.py)."""
    return torch.ops.poolx.max_unpool2d(input, indices, output_size)


def aten_max_unpool2d(input, indices, output_size):
    """torch's CPU unpool on one thread, where the last input of a plane in row-major order
    wins a repeated index; with more threads torch's writes race (parallel over elements)."""
    with single_threaded():
        return torch.ops.aten.max_unpool2d(input, indices, output_size)


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


@st.composite
def any_unpools(draw):
    """Any call: inputs and indices of 2 to 5 dims, shapes that may disagree,
    int32 indices, bool inputs, output sizes of any length, negative sizes."""
    shapes = [tuple(draw(st.integers(0, 3)) for _ in range(draw(st.sampled_from([2, 3, 4, 5]))))]
    shapes.append(draw(st.sampled_from(shapes) | st.just((1, 2, 2, 2))))
    x = draw(tensors(shapes[0], FLOAT_DTYPES + (torch.bool,)))
    index_dtype = draw(st.sampled_from([torch.int64, torch.int64, torch.int32]))
    indices = torch.randint(-1, 10, shapes[1]).to(index_dtype)
    out_hw = draw(st.lists(st.integers(-1, 5), min_size=1, max_size=3))
    return x, indices, out_hw


@fuzz_settings
@given(unpool_cases())
def test_valid_unpool_matches_torch(case):
    x, indices, out_hw = case
    expected = aten_max_unpool2d(x, indices, out_hw)
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **EXACT)


@fuzz_settings
@given(unpool_cases(index_low=-3, index_extra=60), st.booleans())
def test_unpool_with_out_of_range_index_raises(case, negative):
    x, indices, out_hw = case
    plane = out_hw[0] * out_hw[1]
    if indices.numel():
        indices.view(-1)[indices.numel() // 2] = -1 if negative else plane
    try:
        expected = aten_max_unpool2d(x, indices, out_hw)
    except RuntimeError as error:
        assert "invalid max index" in str(error)
        raises_like(error, lambda: max_unpool2d(x, indices, out_hw))
        return
    assert x.numel() == 0
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **EXACT)


@fuzz_settings
@given(any_unpools())
def test_any_unpool_call_raises_where_torch_raises(case):
    x, indices, out_hw = case
    try:
        expected = aten_max_unpool2d(x, indices, out_hw)
    except Exception as error:  # noqa: BLE001  (any exception torch raises, poolx must too)
        raises_like(error, lambda: max_unpool2d(x, indices, out_hw))
        return
    if x.dtype == torch.bool:
        # torch checks the dtype only when the output has elements; poolx always does.
        with pytest.raises(NotImplementedError):
            max_unpool2d(x, indices, out_hw)
        return
    # an empty output: torch places nothing and checks no index, and so does poolx
    torch.testing.assert_close(max_unpool2d(x, indices, out_hw), expected, **EXACT)
