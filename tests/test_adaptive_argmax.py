"""Any argmax handed to the adaptive ops, not only the forward's: every value
that names a tap of its window inside the input is accepted and routes there
(backward) or reads there (the gather of double backward and forward AD);
every other value raises, naming its position and value. Geometries are
drawn at random: 2-D and 3-D, shrinking and growing axes, divisible or not,
both layouts, uint8 and int32 argmax."""

import itertools
import math
import random

import pytest
import torch

from reference import assert_identical, raises_bad_argmax, routed_grad

ops = torch.ops.poolx


def windows(size_in, size_out):
    """Each window's [start, end) along an axis, by torch's formula."""
    return [(o * size_in // size_out, -(-(o + 1) * size_in // size_out)) for o in range(size_out)]


def draw(rng, dims):
    size_in = [rng.randint(1, 9) for _ in range(dims)]
    size_out = [rng.choice([1, max(1, s // 2), s, s + 2, rng.randint(1, 9)]) for s in size_in]
    if rng.random() < 0.25:  # windows of 18 x 15 taps and more: an int32 argmax
        size_in[-1], size_out[-1] = 40, 3
        size_in[-2], size_out[-2] = 50, 3
    shape = [rng.choice([1, 2]), rng.choice([1, 3, 17])] + size_in
    return shape, size_out


def ops_for(dims):
    if dims == 2:
        return ops.adaptive_max_pool2d_argmax, ops.adaptive_max_pool2d_backward, \
            ops.adaptive_gather_by_argmax
    return ops.adaptive_max_pool3d_argmax, ops.adaptive_max_pool3d_backward, \
        ops.adaptive_gather_by_argmax3d


def random_argmax(rng, argmax, size_in, size_out):
    """A valid argmax of argmax's shape, dtype and layout: a random tap inside
    each window (per plane), and the flat input index of each."""
    axes = [windows(i, o) for i, o in zip(size_in, size_out)]
    # the taps are numbered within the widest window of each axis as poolx
    # numbers them: in / out where that divides, else ceil(in / out) + 1
    kernel = [i // o if i % o == 0 else -(-i // o) + 1 for i, o in zip(size_in, size_out)]
    values = torch.empty(argmax.shape, dtype=torch.int64)
    flat = torch.empty(argmax.shape, dtype=torch.int64)
    planes = argmax.shape[0] * argmax.shape[1]
    v, f = values.view(planes, -1), flat.view(planes, -1)
    for p in range(planes):
        for o, window in enumerate(itertools.product(*axes)):
            taps = [rng.randrange(end - start) for start, end in window]
            tap, index = 0, 0
            for t, k, (start, _), size in zip(taps, kernel, window, size_in):
                tap, index = tap * k + t, index * size + start + t
            v[p, o], f[p, o] = tap, index
    out = torch.empty_like(argmax)
    out.copy_(values.to(argmax.dtype))
    return out, flat, kernel


def invalid_values(argmax, size_in, size_out, kernel, position):
    """Values that name no tap of the window at position (its output coordinates)."""
    window = [windows(i, o)[c] for i, o, c in zip(size_in, size_out, position)]
    bad = [math.prod(kernel), 255 if argmax.dtype == torch.uint8 else 2**31 - 1]
    if argmax.dtype == torch.int32:
        bad.append(-1)
    for axis, (start, end) in enumerate(window):
        if end - start < kernel[axis]:  # a tap past this window's extent along axis
            tap = 0
            for a, k in enumerate(kernel):
                tap = tap * k + (end - start if a == axis else 0)
            bad.append(tap)
    return [b for b in bad if argmax.dtype == torch.int32 or 0 <= b <= 255]


@pytest.mark.parametrize("seed", range(24))
def test_any_valid_argmax_routes_and_reads_where_it_names(seed):
    rng = random.Random(seed)
    dims = 2 if seed % 2 else 3
    shape, size_out = draw(rng, dims)
    size_in = shape[2:]
    pool, backward, gather = ops_for(dims)
    for layout in (torch.contiguous_format,
                   torch.channels_last if dims == 2 else torch.channels_last_3d):
        x = torch.randn(shape).contiguous(memory_format=layout)
        values, forward_argmax = pool(x, size_out)
        argmax, flat, kernel = random_argmax(rng, forward_argmax, size_in, size_out)
        want = x.flatten(2).gather(2, flat.flatten(2)).view(values.shape)
        assert_identical(gather(x, argmax, size_out), want.contiguous(memory_format=layout),
                         f"gather {shape} -> {size_out} {layout}", check_stride=False)
        grad = torch.randn_like(values)
        n, c = shape[:2]
        routed = routed_grad(grad.reshape(n, c, 1, -1), flat.reshape(n, c, 1, -1),
                             (1, x[0, 0].numel())).view(shape)
        assert_identical(backward(grad, argmax, size_in, size_out), routed,
                         f"backward {shape} -> {size_out} {layout}", check_stride=False)

        position = [rng.randrange(s) for s in values.shape]
        for bad in invalid_values(argmax, size_in, size_out, kernel, position[2:]):
            hostile = argmax.clone()
            hostile[tuple(position)] = bad
            where = ", ".join(map(str, position))
            message = rf"argmax\[{where}\] = {bad} names no tap of its window"
            with raises_bad_argmax(message):
                backward(grad, hostile, size_in, size_out)
            with raises_bad_argmax(message):
                gather(x, hostile, size_out)
