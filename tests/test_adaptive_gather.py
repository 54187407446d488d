"""channels_last adaptive backward of wide pixels (256 channels and more) and
dense windows, which the vector builds gather pixel by pixel (each input sums
the windows covering it, their selections counted to check the argmax)
instead of scattering per image: results as torch's bit for bit, in every
layout and dtype, with ties, NaN and -inf; any valid argmax routed where it
names; any invalid one an error naming its position and value."""

import random

import pytest
import torch
import torch.nn.functional as F

import poolx
from inputs import FLOAT_DTYPES, random_values
from reference import assert_identical, raises_bad_argmax, routed_grad
from test_adaptive import check_against_torch
from test_adaptive_argmax import invalid_values, random_argmax

ops = torch.ops.poolx

# (N, C, input size, output size): dense windows (at least one per 16
# pixels) over pixels of whole and partial vectors of channels, and a
# sparser 13x13 -> 3 and -> 2 (gathered in bfloat16 alone, and in none);
# float16 scatters, and is checked alike
CASES_2D = [
    (2, 256, (13, 13), (4, 4)),
    (1, 264, (7, 7), (3, 3)),
    (2, 520, (7, 7), (2, 2)),
    (1, 256, (9, 11), (5, 6)),
    (1, 300, (13, 13), (3, 3)),
    (1, 256, (13, 13), (2, 2)),
    (3, 256, (6, 13), (6, 4)),
]
CASES_3D = [(1, 256, (5, 7, 7), (3, 4, 4)), (2, 264, (4, 6, 5), (2, 3, 3))]
CASES_1D = [(2, 256, (60,), 7), (1, 272, (37,), 5)]

# per number of spatial dimensions: torch's op, poolx's, and the layout
# with channels innermost
OPS = {
    1: (F.adaptive_max_pool1d, poolx.adaptive_max_pool1d,
        lambda x: x.transpose(1, 2).contiguous().transpose(1, 2)),
    2: (F.adaptive_max_pool2d, poolx.adaptive_max_pool2d,
        lambda x: x.contiguous(memory_format=torch.channels_last)),
    3: (F.adaptive_max_pool3d, poolx.adaptive_max_pool3d,
        lambda x: x.contiguous(memory_format=torch.channels_last_3d)),
}


def case_id(case):
    return "x".join(map(str, case[:2])) + f" {case[2]} -> {case[3]}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES_2D + CASES_3D + CASES_1D, ids=case_id)
def test_matches_torch(case, dtype):
    n, c, size_in, size_out = case
    torch_pool, poolx_pool, channels_innermost = OPS[len(size_in)]
    x = channels_innermost(random_values((n, c, *size_in), dtype))
    check_against_torch(torch_pool, poolx_pool, x, size_out,
                        f"{case_id(case)}, channels innermost, {dtype}")


@pytest.mark.parametrize("seed", range(6))
def test_any_argmax_routes_where_it_names_or_raises(seed):
    rng = random.Random(seed)
    n, c, size_in, size_out = CASES_2D[seed % len(CASES_2D)]
    x = torch.randn(n, c, *size_in).contiguous(memory_format=torch.channels_last)
    values, forward_argmax = ops.adaptive_max_pool2d_argmax(x, size_out)
    argmax, flat, kernel = random_argmax(rng, forward_argmax, size_in, size_out)
    grad = torch.randn_like(values)
    routed = routed_grad(grad.reshape(n, c, 1, -1), flat.reshape(n, c, 1, -1),
                         (1, size_in[0] * size_in[1])).view(x.shape)
    assert_identical(ops.adaptive_max_pool2d_backward(grad, argmax, size_in, size_out), routed,
                     f"backward of a random argmax, {size_in} -> {size_out}",
                     check_stride=False)

    position = [rng.randrange(s) for s in values.shape]
    for bad in invalid_values(argmax, size_in, size_out, kernel, position[2:]):
        hostile = argmax.clone()
        hostile[tuple(position)] = bad
        where = ", ".join(map(str, position))
        with raises_bad_argmax(rf"argmax\[{where}\] = {bad} names no tap of its window"):
            ops.adaptive_max_pool2d_backward(grad, hostile, size_in, size_out)
