"""What the property tests (test_fuzz*.py) share: their hypothesis profile,
the drawn input tensors and the pooling arguments of any form.

HYPOTHESIS_PROFILE=ci (default: derandomized, 300 examples per property, ~10 s) or
HYPOTHESIS_PROFILE=fuzz (random, 5000 examples per property, ~4 min).
"""

import os

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("ci", derandomize=True, max_examples=300, **_common)
settings.register_profile("fuzz", max_examples=5000, **_common)
fuzz_settings = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

LAYOUTS = ["contiguous", "channels_last", "sliced", "transposed"]


def seeded_values(shape, dtype, seed, specials):
    """Values from a small range (many ties), with NaN/-inf/inf planted in floats;
    the same for the same seed, so hypothesis replays and shrinks them."""
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
        cl = torch.channels_last if values.dim() == 4 else torch.channels_last_3d
        return values.contiguous(memory_format=cl)
    if layout == "sliced":
        wide = torch.full((*values.shape[:-1], 2 * values.shape[-1]), 100, dtype=values.dtype)
        wide[..., ::2] = values
        return wide[..., ::2]
    if layout == "transposed":
        return values.transpose(-1, -2).contiguous().transpose(-1, -2)
    return values


@st.composite
def tensors(draw, shape, dtypes):
    """A tensor of `shape`: one of `dtypes`, planted specials, any layout it can have."""
    dtype = draw(st.sampled_from(dtypes))
    layouts = [layout for layout in LAYOUTS
               if (layout != "channels_last" or len(shape) in (4, 5))
               and (layout != "transposed" or len(shape) >= 2)]
    specials = draw(st.sampled_from([(), (float("nan"),), (float("-inf"),),
                                     (float("nan"), float("nan"), float("inf"))]))
    values = seeded_values(shape, dtype, draw(st.integers(0, 2**31)), specials)
    return laid_out(values, draw(st.sampled_from(layouts)))


def leading_dims(draw, batch_sizes):
    """(C,) for a batch size of None (unbatched), else (N, C)."""
    batch = draw(st.sampled_from(batch_sizes))
    channels = draw(st.integers(1, 3))
    return (channels,) if batch is None else (batch, channels)


@st.composite
def any_pool_args(draw, kernel_high, max_len):
    """(kernel_size, stride, padding, dilation, ceil_mode) in the forms torch
    accepts or rejects, valid or not: each an int, () or a tuple of up to
    max_len ints (stride None too)."""

    def ints(high):
        return st.integers(-1, high) | st.lists(st.integers(-1, high), max_size=max_len).map(tuple)

    return (draw(ints(kernel_high)), draw(st.none() | ints(4)), draw(ints(3)), draw(ints(3)),
            draw(st.booleans()))
