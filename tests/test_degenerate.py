"""Degenerate windows. With dilation and padding a window can hold no input
element at all (input 1x18, kernel 2, padding (1, 0), dilation (2, 1)): torch
gives -inf there, but out-of-range indices, and its backward then writes past
the gradient's end. poolx must give -inf, keep argmax and indices inside the
plane, and route nothing from such windows; checked against a reference and
with guard memory around the tensors. Also planes that are all -inf or NaN."""

import itertools
import subprocess
import sys
import textwrap

import pytest
import torch

import poolx
from poolx import _geometry as geo
from inputs import GRID, Pool, random_values, upstream_grad
from reference import (assert_identical, assert_pool_matches_torch, empty_windows, routed_grad,
                       torch_pool)


def brute_force_pools():
    """Every small configuration torch accepts that has an empty window along
    H, and the same along W."""
    found = []
    for size, k, s, d, ceil in itertools.product((1, 2, 3), (2, 3), (1, 2, 3), (2, 3), (0, 1)):
        pool = Pool("empty along H", (size, 7), (k, 2), (s, 1), (1, 0), (d, 1), bool(ceil))
        if k // 2 >= 1 and geo.output_size(size, k, s, 1, d, ceil) >= 1:
            if empty_windows(pool, pool.hw).any():
                found.append(pool)
                found.append(Pool("empty along W", (7, size), (2, k), (1, s), (0, 1), (1, d),
                                  bool(ceil)))
    return found


POOLS = [Pool("issue example", (1, 18), 2, padding=(1, 0), dilation=(2, 1))] + brute_force_pools()


def test_brute_force_finds_the_known_cases():
    assert len(POOLS) > 20
    for pool in POOLS:
        assert empty_windows(pool, pool.hw).any(), pool


def guarded(x, fill):
    """x as the middle batch entries of a contiguous buffer whose other
    entries hold `fill`, so a kernel that reads past the plane reads `fill`."""
    buf = torch.full((x.shape[0] + 2, *x.shape[1:]), fill, dtype=x.dtype, device=x.device)
    buf[1:-1] = x
    return buf[1:-1]


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int8, torch.int64), ids=str)
def test_empty_windows_forward(dtype, device):
    """Values as torch's, argmax a tap of the window, indices inside the plane."""
    fill = float("nan") if dtype.is_floating_point else 7
    for pool in POOLS:
        x = guarded(random_values((3, 1, *pool.hw), dtype, device, special=False), fill)
        what = f"{pool} | {dtype}"
        empty = empty_windows(pool, pool.hw)
        values, indices = torch_pool(x, pool, return_indices=True)
        got_values, got_indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
        assert_identical(got_values, values, f"values of {what}")
        plane = pool.hw[0] * pool.hw[1]
        assert ((got_indices >= 0) & (got_indices < plane)).all(), f"indices of {what}"
        assert torch.equal(got_indices.cpu()[..., ~empty], indices[..., ~empty]), what
        _, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
        kernel = geo.pair(pool.kernel_size, "kernel_size")
        assert (argmax.long() < kernel[0] * kernel[1]).all(), f"argmax of {what}"


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
def test_empty_windows_route_nothing(dtype, device):
    """Gradient, mask and unpool equal a reference that skips empty windows;
    several planes, so a write past one plane lands in the next and shows."""
    for pool in POOLS:
        what = f"{pool} | {dtype}"
        x = random_values((3, 2, *pool.hw), dtype, device, special=False).requires_grad_()
        y = poolx.max_pool2d(x, **pool.kwargs())
        grad_out = guarded(upstream_grad(y), float("nan"))
        (grad,) = torch.autograd.grad(y, x, grad_out)

        _, indices = torch_pool(x, pool, return_indices=True)
        routed = indices.masked_fill(empty_windows(pool, pool.hw), -1)
        expected = routed_grad(grad_out, routed, pool.hw, torch.float32).to(dtype)
        assert_identical(grad, expected, f"gradient of {what}")

        values, argmax = poolx.max_pool2d_with_argmax(x.detach(), **pool.kwargs())
        argmax = guarded(argmax, 0)
        manual = poolx.max_pool2d_backward(grad_out, argmax, x.shape, **pool.kwargs())
        assert_identical(manual, expected, f"max_pool2d_backward of {what}")
        mask = poolx.argmax_to_mask(argmax, x.shape, **pool.kwargs())
        assert torch.equal(mask.cpu(), routed_grad(torch.ones_like(y), routed, pool.hw) != 0), what
        args = geo.pool_params(pool.kernel_size, pool.stride, pool.padding, pool.dilation)
        unpooled = torch.ops.poolx.max_unpool2d_argmax(values, argmax, pool.hw, *args,
                                                       pool.ceil_mode)
        assert torch.equal(unpooled.cpu() != 0, mask.cpu() & (x.detach().cpu() != 0)), what
        gathered = torch.ops.poolx.gather_by_argmax(torch.ones_like(x), argmax, *args,
                                                    pool.ceil_mode)
        empty = empty_windows(pool, pool.hw)
        assert torch.equal(gathered.cpu() == 0, empty.expand_as(gathered)), what


HEAP_CHECK = """
import torch, poolx
for hw, kwargs in {cases!r}:
    for _ in range(20):
        x = torch.randn(1, 1, *hw, device={device!r}, requires_grad=True)
        values, argmax = poolx.max_pool2d_with_argmax(x.detach(), **kwargs)
        y = poolx.max_pool2d(x, **kwargs)
        y.backward(torch.ones_like(y))
        poolx.argmax_to_mask(argmax, hw, **kwargs)
        poolx.max_pool2d_backward(torch.ones_like(values), argmax, hw, **kwargs)
        del x, y, values, argmax
torch.cuda.synchronize() if {device!r} == "cuda" else None
print("heap intact")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="relies on glibc heap checks")
def test_empty_windows_never_write_outside_the_gradient(device):
    """One plane per tensor, so any write outside the plane leaves the
    allocation; glibc aborts on the corrupted heap (torch's own backward does
    here: "free(): invalid next size"). Run in a child to survive that."""
    cases = [(p.hw, p.kwargs()) for p in POOLS[:9]]
    script = textwrap.dedent(HEAP_CHECK.format(cases=cases, device=device))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and "heap intact" in run.stdout, run.stderr[-2000:]


@pytest.mark.parametrize("fill", (float("-inf"), float("nan")), ids=("all -inf", "all NaN"))
def test_constant_planes_match_torch(fill, device):
    """All -inf: the first in-bounds tap wins; all NaN: the last one does."""
    for pool in GRID:
        x = torch.full((2, 3, *pool.hw), fill, device=device).requires_grad_()
        values, indices = torch_pool(x, pool, return_indices=True)
        got_values, got_indices = poolx.max_pool2d(x, **pool.kwargs(), return_indices=True)
        assert_identical(got_values, values, f"values of {pool} | {fill}")
        assert_identical(got_indices, indices, f"indices of {pool} | {fill}")
        y = poolx.max_pool2d(x, **pool.kwargs())
        grad_out = upstream_grad(y)
        (grad,) = torch.autograd.grad(y, x, grad_out)
        expected = routed_grad(grad_out, indices, pool.hw)
        assert_identical(grad, expected, f"gradient of {pool} | {fill}")


# Strides far beyond the plane: every window quantity must stay exact, and on
# CUDA (and its emulation) a stride of 2^28 or more sends the generic kernels
# to their 64-bit index form (cuda_common.cuh's index_width).
FAR_STRIDES = (
    Pool("strides past the plane", (5, 7), 3, (2**28, 2**31 - 1)),
    Pool("a stride past the plane, padded, ceil_mode", (6, 5), (3, 2), (2**29, 3), padding=1,
         ceil_mode=True),
    Pool("a stride past the plane, dilated", (7, 7), 2, (2**30, 2), dilation=(3, 2)),
    Pool("strides below the 64-bit bound", (9, 9), 3, (2**28 - 1, 2)),
)


@pytest.mark.parametrize("pool", FAR_STRIDES, ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_far_strides_match_torch(pool, dtype, device):
    """Values, indices and gradient as torch's; the mask, unpool by argmax and
    the manual backward route to torch's indices."""
    x = random_values((2, 3, *pool.hw), dtype, device)
    values, indices, grad_out, grad = assert_pool_matches_torch(x, pool, str(pool))
    _, argmax = poolx.max_pool2d_with_argmax(x, **pool.kwargs())
    manual = poolx.max_pool2d_backward(grad_out, argmax, x.shape, **pool.kwargs())
    assert_identical(manual, grad, f"max_pool2d_backward of {pool}")
    routed = routed_grad(torch.ones_like(values), indices, pool.hw) != 0
    mask = poolx.argmax_to_mask(argmax, x.shape, **pool.kwargs())
    assert torch.equal(mask.cpu(), routed), f"mask of {pool}"
    unpooled = poolx.max_unpool2d_argmax(values, argmax, x.shape, **pool.kwargs())
    expected = torch.zeros_like(x.cpu()).flatten(2)
    # windows that share a selected input write the same value there
    expected.scatter_(2, indices.flatten(2), values.cpu().flatten(2))
    assert_identical(unpooled, expected.view_as(x), f"unpool by argmax of {pool}")
