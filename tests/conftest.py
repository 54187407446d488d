"""Shared fixtures: every test that takes `device` runs on CPU, and on CUDA
where a GPU and a CUDA build of poolx exist (reported as skipped otherwise)."""

import zlib

import pytest
import torch

import poolx  # noqa: F401  (loads the operators once for every test module)

HAS_CUDA = torch.cuda.is_available()

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU here")),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    """A different but reproducible random stream for every test."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def streaming():
    """Streaming stores at every size (by default only ops that move more
    than the caches hold take them; unpool by indices routes rows only above
    8 times that size), the default restored afterwards."""
    previous = torch.ops.poolx.set_cpu_stream_min_bytes(0)
    yield
    torch.ops.poolx.set_cpu_stream_min_bytes(previous)


@pytest.fixture(params=["default stores", "streaming stores"])
def stores(request):
    if request.param == "streaming stores":
        yield request.getfixturevalue("streaming")
    else:
        yield


@pytest.fixture(scope="module")
def with_cuda_kernels():
    """Skips a CUDA test where poolx was built without its CUDA kernels."""
    from cuda_cases import cuda_build

    if not cuda_build():
        pytest.skip("poolx was built without CUDA kernels")
