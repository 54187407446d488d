"""The cases the CPU fast-path tests share: geometries and shapes that end
vectors early, and planted inputs and gradients."""

import torch

# (kernel, stride, padding, dilation): the tiled kernels both fast paths
# specialize, the one-tap and one-row tilings (a single tap leaves no
# argmax value to spare in the lanes past a vector's end), overlapping
# windows (stride 1 and 2), dilation along H only and along both, stride 3
# and 4 (NCHW by pixels where stride_w is over 2 or dilation_w over 1: the
# stride 1 dilated windows of a 70-wide row pass one block of 64 lanes; the
# 7 inside windows of a 37-wide row pooled with stride 5 are copied into a
# vector, too few for the compiler's vector loop; windows 4 wide tiling NCHW
# rows, split into taps by two even/odd splits: 37- and 70-wide rows fill
# a vector's second half and run past a whole vector).
GEOMETRIES = [
    ((2, 2), (2, 2), (0, 0), (1, 1)),
    ((3, 2), (3, 2), (0, 0), (1, 1)),
    ((3, 3), (3, 3), (0, 0), (1, 1)),
    ((1, 1), (1, 1), (0, 0), (1, 1)),
    ((1, 2), (1, 2), (0, 0), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 2), (1, 1), (0, 0), (1, 1)),
    ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((4, 4), (2, 2), (2, 1), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (2, 1)),
    ((3, 2), (2, 2), (1, 1), (2, 2)),
    ((2, 3), (1, 1), (1, 1), (1, 2)),
    ((2, 4), (1, 4), (1, 2), (1, 1)),
    ((3, 3), (2, 5), (0, 1), (1, 1)),
    ((1, 4), (1, 4), (0, 0), (1, 1)),
    ((2, 4), (2, 4), (0, 0), (1, 1)),
]
# (1, 16, 6, 32): rows of whole 16-element groups, which return_indices
# writes by streaming stores (with the `stores` fixture); (1, 72, 7, 9):
# channels_last pixels of whole groups of vectors (four, or a cache line's)
# and a partial one;
# (1, 136, 4, 7): float32 pixels that 2x2 windows sweep tap by tap, ending
# with a partial vector; (1, 64, 5, 6): float32 pixels of 256 bytes, which
# general windows pool in one pass of eight AVX2 vectors; (1, 128, 5, 7):
# bfloat16 pixels of 256 bytes, which general windows pool in one pass of
# four AVX-512 loads split into even and odd channels
SHAPES = [(2, 3, 9, 37), (1, 1, 33, 70), (1, 19, 6, 7), (2, 40, 5, 34), (1, 16, 6, 32),
          (1, 72, 7, 9), (1, 136, 4, 7), (1, 64, 5, 6), (1, 128, 5, 7)]
# float64 has no vector paths, but its backward takes the scatter of the others
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def planted_input(shape, dtype, channels_last):
    """Few distinct values (ties), NaN and -inf sprinkled, one all -inf block."""
    x = torch.randint(-3, 4, shape).float()
    u = torch.rand(shape)
    x[u < 0.06] = float("nan")
    x[(u >= 0.06) & (u < 0.12)] = float("-inf")
    x[..., :3, -3:] = float("-inf")
    x = x.to(dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def planted_grad(shape, dtype, like):
    g = torch.randn(shape).to(dtype)
    g.view(-1)[::3] = -0.0
    return g.contiguous(memory_format=torch.channels_last) if not like.is_contiguous() else g
