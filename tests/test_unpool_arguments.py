"""The arguments of poolx.max_unpool2d, poolx.max_unpool2d_argmax and
poolx.MaxUnpool2d: torch's output-size rule and module, and torch's errors for
bad sizes, inputs, indices and argmax."""

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from reference import raises_bad_indices
from unpool_cases import assert_same_bits, planted, pooled_input, torch_indices, values_like

import poolx

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
    """(name, indices, message, raises) for every way indices can be wrong."""
    high = indices.clone()
    high.view(-1)[5] = 6 * 7
    negative = indices.clone()
    negative.view(-1)[-1] = -1
    value_cases = [
        ("one past the plane", high, "Found an invalid max index: 42 (output volumes are of size 6x7)"),
        ("negative", negative, "Found an invalid max index: -1"),
    ]
    if indices.is_cuda:  # a device-side assert ends the process's CUDA context: tested apart
        value_cases = []
    argument_cases = [
        ("int32", indices.int(), "indices should be type int64 but got: Int"),
        ("wrong shape", indices[..., :-1], "Expected shape of indices to be same as that of"),
        ("other device", indices.to("meta"), "device"),
    ]
    return [(*case, raises_bad_indices) for case in value_cases] + [
        (*case, lambda m: pytest.raises(RuntimeError, match=re.escape(m))) for case in argument_cases
    ]


def test_bad_indices_raise(device):
    _, x, indices = pooled_input("overlap 3/1 (indices repeat)", device, False)
    values = values_like(indices, torch.float32)
    for name, bad, message, raises in bad_indices(indices):
        with raises(message):
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
    with pytest.raises(RuntimeError,
                       match=r"max_unpool2d_argmax: output_size must be the input.s full shape"):
        poolx.max_unpool2d_argmax(values, argmax, (1, 1, 6, 7), *pool)


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
    with raises_bad_indices(message):
        poolx.max_unpool2d(values, indices, 2)


def test_output_size_rule_is_torchs_for_every_argument_form():
    """poolx works out plain-int sizes itself and hands anything else to
    torch's rule: every form of the arguments, valid or not, gives torch's
    output or torch's error."""
    # every value 1 at index 0: valid in every output plane, whoever wins
    values, indices = torch.ones(1, 2, 3, 5), torch.zeros(1, 2, 3, 5, dtype=torch.long)
    sizes = [None, (6, 10), [7, 11], (5, 9), (13, 21), torch.Size([1, 2, 6, 11]), (1, 2, 7),
             (9, 10), (6, 12), (4, 10), [6], [6.0, 10.0], (True, 10), 7]
    forms = [(2, None, 0), ((2, 2), None, (0, 0)), (2, 2, 0), (2, [1, 2], 0), ([2, 2], (2, 2), 0),
             (3, 2, 1), ((3, 2), (2, 1), (1, 0)), (2.0, None, 0), (2, (), 0), (True, 2, 0)]
    for kernel, stride, padding in forms:
        for output_size in sizes:
            call = dict(kernel_size=kernel, stride=stride, padding=padding, output_size=output_size)
            try:
                expected = F.max_unpool2d(values, indices, **call)
            except Exception as error:
                with pytest.raises(type(error), match=re.escape(str(error))):
                    poolx.max_unpool2d(values, indices, **call)
            else:
                got = poolx.max_unpool2d(values, indices, **call)
                assert got.shape == expected.shape and torch.equal(got, expected), call


@pytest.mark.parametrize("dims, args", [
    (1, dict(kernel_size=2**64)), (1, dict(kernel_size=2, stride=(2**63,))),
    (2, dict(kernel_size=(2, 2**64))), (2, dict(kernel_size=2, padding=(0, -(2**64)))),
    (3, dict(kernel_size=(2, 2, 2**63))), (3, dict(kernel_size=2, stride=(1, 2**65, 1))),
])
def test_sizes_beyond_int64_raise_as_torch(dims, args):
    """An unpooled size past int64 raises torch's error type, never wraps."""
    x = torch.randn(1, 2, *(4,) * dims)
    values, indices = getattr(F, f"max_pool{dims}d")(x, 2, return_indices=True)
    with pytest.raises(Exception) as expected:
        getattr(F, f"max_unpool{dims}d")(values, indices, **args)
    with pytest.raises(type(expected.value)):
        getattr(poolx, f"max_unpool{dims}d")(values, indices, **args)


# dims: (input shape, kernel_size, padding): each pools nothing back (an
# output axis of 0), with indices that would be out of range anywhere
EMPTY_OUTPUTS = {
    1: ((2, 3, 2), 1, 1),
    2: ((2, 3, 2, 4), (1, 2), (1, 0)),
    3: ((2, 2, 5, 2, 8), 1, 1),
}


@pytest.mark.parametrize("dims", EMPTY_OUTPUTS)
def test_an_empty_output_places_nothing_as_torch(dims):
    """torch places nothing into an output of no elements and checks no
    index; poolx gives the same empty tensor (it once raised)."""
    shape, kernel, padding = EMPTY_OUTPUTS[dims]
    values = torch.randn(shape)
    indices = torch.full(shape, 7)
    unpool = f"max_unpool{dims}d"
    expected = getattr(F, unpool)(values, indices, kernel, padding=padding)
    assert expected.numel() == 0
    got = getattr(poolx, unpool)(values, indices, kernel, padding=padding)
    assert got.shape == expected.shape and got.dtype == expected.dtype


def test_unbatched_3d_unpool_of_no_channels_is_torchs():
    """torch checks the non-batch dimensions from the second on, an unbatched
    input's channels not among them."""
    values = torch.randn(0, 3, 2, 13)
    indices = torch.zeros(values.shape, dtype=torch.int64)
    for padding in (0, 1):
        expected = F.max_unpool3d(values, indices, 1, padding=padding)
        got = poolx.max_unpool3d(values, indices, 1, padding=padding)
        assert got.shape == expected.shape == (0, 3 - 2 * padding, 2 - 2 * padding,
                                               13 - 2 * padding)
    with pytest.raises(RuntimeError, match="dimension 1 being empty"):
        poolx.max_unpool3d(torch.randn(3, 0, 2, 2), torch.zeros(3, 0, 2, 2).long(), 1)
