"""Sizes given as torch's argument parser reads them: NumPy integers and
integer tensors of one element pool as the ints they hold, as in torch; sizes
of the wrong kind or length raise torch's error types, never an IndexError."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import poolx
from reference import assert_identical, raises_like

INTS = {"np.int64": np.int64(2), "np.int32": np.int32(2), "np.uint8": np.uint8(2),
        "0-dim tensor": torch.tensor(2), "1-element tensor": torch.tensor([2])}


def signal(dims):
    return torch.randn(2, 3, *(6, 8, 10)[:dims])


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("kind", INTS)
@pytest.mark.parametrize("argument", ["kernel_size", "stride", "dilation"])
def test_numpy_and_tensor_ints_pool_as_torch(dims, kind, argument):
    x = signal(dims)
    args = dict(kernel_size=3, stride=1, dilation=1)
    args[argument] = INTS[kind]
    ours, theirs = getattr(poolx, f"max_pool{dims}d"), getattr(F, f"max_pool{dims}d")
    values, indices = ours(x, **args, return_indices=True)
    expected_values, expected_indices = theirs(x, **args, return_indices=True)
    assert_identical(values, expected_values, "values")
    assert_identical(indices, expected_indices, "indices")
    assert_identical(ours(x, **args), expected_values, "values without indices")
    if argument == "dilation":  # unpool has none
        return
    unpool_args = dict(kernel_size=args["kernel_size"], stride=args["stride"],
                       output_size=x.shape[-dims:])
    plain = {k: v if k == "output_size" else int(v)  # torch's unpool fails on NumPy ints
             for k, v in unpool_args.items()}
    assert_identical(getattr(poolx, f"max_unpool{dims}d")(values, indices, **unpool_args),
                     getattr(F, f"max_unpool{dims}d")(values, indices, **plain), "unpool")


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("kind", ["np.int64", "0-dim tensor"])
def test_numpy_and_tensor_ints_in_adaptive_sizes(dims, kind):
    x = signal(dims)
    size = (INTS[kind],) * dims  # torch reads a bare one only in 1-D
    expected = getattr(F, f"adaptive_max_pool{dims}d")(x, size, True)
    actual = getattr(poolx, f"adaptive_max_pool{dims}d")(x, size, True)
    for a, e, what in zip(actual, expected, ("values", "indices")):
        assert_identical(a, e, what)


@pytest.mark.parametrize("size", [(2,), [2], (2, 2), (2, 2, 2, 2)])
@pytest.mark.parametrize("argument", ["kernel_size", "stride", "padding"])
def test_unpool3d_sizes_of_a_wrong_length_raise(size, argument):
    values, indices = F.max_pool3d(signal(3), 2, return_indices=True)
    args = dict(kernel_size=2, stride=2, padding=0)
    args[argument] = size
    with pytest.raises(RuntimeError, match=f"max_unpool3d.*{argument}"):
        poolx.max_unpool3d(values, indices, **args)


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("size", [2.0, "2", None])
def test_unpool_sizes_of_a_wrong_type_raise_as_torch(dims, size):
    values, indices = getattr(F, f"max_pool{dims}d")(signal(dims), 2, return_indices=True)
    with pytest.raises(Exception) as expected:
        getattr(F, f"max_unpool{dims}d")(values, indices, size)
    raises_like(expected.value,
                lambda: getattr(poolx, f"max_unpool{dims}d")(values, indices, size))
