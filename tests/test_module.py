"""poolx.MaxPool2d is a drop-in for nn.MaxPool2d: constructor, attributes,
repr, Sequential, state_dict, pickling, deepcopy, return_indices."""

import copy
import io
import pickle

import pytest
import torch
from torch import nn

import poolx
from inputs import random_values
from reference import assert_identical

ARGUMENTS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    dict(kernel_size=(3, 3), stride=None, padding=0, dilation=2, return_indices=True),
    dict(kernel_size=[3, 2], stride=[2, 1], padding=[1, 0]),
]
ATTRIBUTES = ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")


def positional(kwargs):
    names = ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")
    defaults = dict(stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False)
    return tuple(kwargs.get(n, defaults.get(n)) for n in names)


@pytest.mark.parametrize("kwargs", ARGUMENTS, ids=str)
def test_module_matches_nn_maxpool2d(kwargs, device):
    x = random_values((2, 3, 9, 10), torch.float32, device)
    for build in (lambda cls: cls(**kwargs), lambda cls: cls(*positional(kwargs))):
        ours, theirs = build(poolx.MaxPool2d), build(nn.MaxPool2d)
        assert isinstance(ours, nn.MaxPool2d)
        for name in ATTRIBUTES:
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.extra_repr() == theirs.extra_repr()
        assert repr(ours) == "poolx." + repr(theirs)  # torch's arguments, poolx's name
        expected = theirs(x.cpu())
        got = ours(x)
        if kwargs.get("return_indices"):
            assert_identical(got[0], expected[0], f"values of {kwargs}")
            assert_identical(got[1], expected[1], f"indices of {kwargs}")
        else:
            assert_identical(got, expected, f"{kwargs}")


def test_in_sequential_with_state_dict_pickle_and_deepcopy(device):
    def build(pool_cls):
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), pool_cls(2), nn.ReLU(), pool_cls(3, 2, 1, ceil_mode=True)
        ).to(device)

    model, reference = build(poolx.MaxPool2d), build(nn.MaxPool2d)
    x = random_values((2, 3, 11, 12), torch.float32, device, special=False)
    expected = reference(x)

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    restored = build(poolx.MaxPool2d)
    restored.load_state_dict(torch.load(buffer))
    assert model.state_dict().keys() == reference.state_dict().keys()

    for name, copy_of in (
        ("model", model),
        ("state_dict round trip", restored),
        ("pickle", pickle.loads(pickle.dumps(model))),
        ("deepcopy", copy.deepcopy(model)),
    ):
        assert type(copy_of[1]) is poolx.MaxPool2d, name
        assert_identical(copy_of(x), expected.cpu(), name)
